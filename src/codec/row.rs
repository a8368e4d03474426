//! Builds table rows from JSON objects: column sources (name, dotted path, metadata),
//! value coercion with precise errors, NOT NULL checks, and the report of a row that does
//! not fit the table's schema (fields that are not columns, columns the record's own
//! schema gives a wider type), which the CDC pipeline answers by evolving the table.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::DateTime;
use serde_json::{Map, Value};

use super::error::{CoerceError, ColumnError, ColumnProblem, DecodeError, SourceColumn, snippet};
use super::flat_object::{FieldSlots, ParsedFields};
use super::json_value::lookup_path;
use super::{
    CdcOptions, Ctx, EpochUnit, KafkaRecord, Metadata, RowChange, SnapshotMode, UpdateMode,
};
use crate::table::datum::{
    Datum, Timestamp, datum_from_json, fits_chars, format_decimal, parse_timestamp,
};
use crate::table::row_kind::RowKind;
use crate::table::schema::TableSchema;
use crate::table::schema_change::widens;
use crate::table::types::{DataType, MAX_LENGTH};

/// Where a column's value comes from.
#[derive(Debug)]
enum Source {
    /// A top-level field of this name.
    Field(String),
    /// A dotted path into the object.
    Path(String),
    /// A metadata value of the message or record.
    Meta(Metadata),
}

/// What a schema says about a field whose JSON value alone is ambiguous (Kafka Connect
/// and Debezium logical types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Semantic {
    /// Epoch milliseconds (`io.debezium.time.Timestamp`, Connect `Timestamp`).
    EpochMillis,
    /// Epoch microseconds (`io.debezium.time.MicroTimestamp`).
    EpochMicros,
    /// Epoch nanoseconds (`io.debezium.time.NanoTimestamp`).
    EpochNanos,
    /// Days since the epoch (`io.debezium.time.Date`, Connect `Date`).
    EpochDays,
    /// Connect `Decimal`: base64 of the big-endian two's-complement unscaled value.
    Decimal { scale: u32 },
    /// `io.debezium.data.VariableScaleDecimal`: `{"scale": s, "value": base64}`.
    VariableDecimal,
}

/// Semantics of the fields of a row object, by top-level field name.
pub(crate) type Hints = HashMap<String, Semantic>;

/// The type a record's own schema gives a field (the Kafka Connect schema of Debezium
/// JSON with `schemas.enable=true`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SourceType {
    /// `None` for a schema type lakejoin has no table type for.
    pub(crate) data_type: Option<DataType>,
    /// Whether the type is the source column's own: a Connect `string` carries no length
    /// (unless Debezium propagates it), so it says nothing about a VARCHAR(n) column's
    /// bound and is only used for a column that has to be added.
    pub(crate) exact: bool,
    /// How the schema spells the type, for messages.
    pub(crate) described: String,
}

/// Source types of the fields of a row object, by top-level field name.
pub(crate) type SourceTypes = HashMap<String, SourceType>;

/// The semantic of a Kafka Connect schema name (`io.debezium.time.MicroTimestamp`, …),
/// with the Connect parameters for decimals.
pub(crate) fn semantic_of(name: &str, scale: Option<&str>) -> Option<Semantic> {
    Some(match name {
        "io.debezium.time.Timestamp" | "org.apache.kafka.connect.data.Timestamp" => {
            Semantic::EpochMillis
        }
        "io.debezium.time.MicroTimestamp" => Semantic::EpochMicros,
        "io.debezium.time.NanoTimestamp" => Semantic::EpochNanos,
        "io.debezium.time.Date" | "org.apache.kafka.connect.data.Date" => Semantic::EpochDays,
        "org.apache.kafka.connect.data.Decimal" => Semantic::Decimal {
            scale: scale?.trim().parse().ok()?,
        },
        "io.debezium.data.VariableScaleDecimal" => Semantic::VariableDecimal,
        _ => return None,
    })
}

/// Metadata of one message, as far as its format has it.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct MessageMeta<'a> {
    pub(crate) ingestion_ms: Option<i64>,
    pub(crate) source_ms: Option<i64>,
    pub(crate) database: Option<&'a str>,
    pub(crate) table: Option<&'a str>,
}

/// Turns row objects into rows of one table; built once per decoder.
#[derive(Debug)]
pub(crate) struct RowBuilder {
    schema: Arc<TableSchema>,
    sources: Vec<Source>,
    /// Top-level field names some column reads (for strict mode).
    consumed: HashSet<String>,
    /// Report fields that are not columns ([`DecodeError::SchemaChanged`]) instead of
    /// ignoring them.
    strict: bool,
    epoch_unit: EpochUnit,
    key_indices: Vec<usize>,
    /// Reads objects straight into column slots when every column is a top-level field
    /// or metadata (see `flat_object`).
    field_slots: Option<FieldSlots>,
}

impl RowBuilder {
    /// Positions of the primary-key columns in a built row.
    pub(crate) fn key_indices(&self) -> &[usize] {
        &self.key_indices
    }

    /// Checks that `field_paths` and `metadata` name columns; returns every problem.
    pub(crate) fn new(schema: Arc<TableSchema>, options: &CdcOptions) -> Result<Self, Vec<String>> {
        let mut problems = Vec::new();
        for column in options.field_paths.keys().chain(options.metadata.keys()) {
            if schema.field(column).is_none() {
                problems.push(format!(
                    "`{column}` in field paths or metadata is not a column of the table"
                ));
            }
        }
        for (column, path) in &options.field_paths {
            if path.is_empty() || path.split('.').any(str::is_empty) {
                problems.push(format!(
                    "field path `{path}` of column `{column}` is not valid"
                ));
            }
        }
        let mut consumed = HashSet::new();
        let mut sources = Vec::with_capacity(schema.fields.len());
        for field in &schema.fields {
            let source = if let Some(m) = options.metadata.get(&field.name) {
                Source::Meta(*m)
            } else if let Some(path) = options.field_paths.get(&field.name) {
                consumed.insert(path.clone());
                if let Some((first, _)) = path.split_once('.') {
                    consumed.insert(first.to_string());
                    Source::Path(path.clone())
                } else {
                    Source::Field(path.clone())
                }
            } else {
                consumed.insert(field.name.clone());
                Source::Field(field.name.clone())
            };
            sources.push(source);
        }
        if let Some(k) = &options.row_kind_field {
            consumed.insert(k.clone());
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        let key_indices = schema.primary_key_indices();
        let field_slots = if sources.iter().any(|s| matches!(s, Source::Path(_))) {
            None
        } else {
            let fields = sources.iter().enumerate().filter_map(|(i, s)| match s {
                Source::Field(name) => Some((name.as_str(), i)),
                _ => None,
            });
            let others = options.row_kind_field.iter().cloned().collect();
            FieldSlots::new(fields, sources.len(), others, options.strict)
        };
        Ok(RowBuilder {
            field_slots,
            key_indices,
            schema,
            sources,
            consumed,
            strict: options.strict,
            epoch_unit: options.epoch_unit,
        })
    }

    pub(crate) fn schema(&self) -> &TableSchema {
        &self.schema
    }

    /// Builds one change from a row object. Every problem of the row is reported.
    pub(crate) fn build(
        &self,
        kind: RowKind,
        object: &Map<String, Value>,
        meta: &MessageMeta<'_>,
        record: &KafkaRecord<'_>,
    ) -> Result<RowChange, DecodeError> {
        self.build_hinted(kind, object, None, None, meta, record)
    }

    /// The column slots of objects read with [`FieldSlots::parse`], when every column is
    /// a top-level field or metadata.
    pub(crate) fn field_slots(&self) -> Option<&FieldSlots> {
        self.field_slots.as_ref()
    }

    /// [`RowBuilder::build`] of an object read into [`RowBuilder::field_slots`].
    pub(crate) fn build_fields(
        &self,
        kind: RowKind,
        mut fields: ParsedFields,
        meta: &MessageMeta<'_>,
        record: &KafkaRecord<'_>,
    ) -> Result<RowChange, DecodeError> {
        if !fields.unknown.is_empty() {
            let columns = fields
                .unknown
                .iter()
                .map(|name| untyped_column(name))
                .collect();
            return Err(DecodeError::SchemaChanged { row: None, columns });
        }
        // The values are the row's to keep: a string moves into its datum, uncopied.
        self.build_from(
            kind,
            |i, _| {
                fields
                    .values
                    .get_mut(i)
                    .and_then(Option::take)
                    .map(Cow::Owned)
            },
            None,
            meta,
            record,
        )
    }

    /// [`RowBuilder::build`] with schema hints and source types for the object's
    /// top-level fields.
    pub(crate) fn build_hinted(
        &self,
        kind: RowKind,
        object: &Map<String, Value>,
        hints: Option<&Hints>,
        types: Option<&SourceTypes>,
        meta: &MessageMeta<'_>,
        record: &KafkaRecord<'_>,
    ) -> Result<RowChange, DecodeError> {
        self.check_fit(object, types)?;
        self.build_from(
            kind,
            |_, source| match source {
                Source::Field(name) => object.get(name).map(Cow::Borrowed),
                Source::Path(path) => lookup_path(object, path).map(Cow::Borrowed),
                Source::Meta(_) => None,
            },
            hints,
            meta,
            record,
        )
    }

    /// Builds a row from each column's value (`value_of(column index, source)`).
    fn build_from<'v>(
        &self,
        kind: RowKind,
        mut value_of: impl FnMut(usize, &Source) -> Option<Cow<'v, Value>>,
        hints: Option<&Hints>,
        meta: &MessageMeta<'_>,
        record: &KafkaRecord<'_>,
    ) -> Result<RowChange, DecodeError> {
        let mut errors = Vec::new();
        let mut row = Vec::with_capacity(self.sources.len());
        for (i, (field, source)) in self.schema.fields.iter().zip(&self.sources).enumerate() {
            let value = value_of(i, source);
            let hint = match (source, hints) {
                (Source::Field(name), Some(h)) => h.get(name).copied(),
                _ => None,
            };
            // A string of a string column that fits is moved into the datum; anything
            // else is coerced from a reference, and kept to word an error.
            let (datum, value) = match (source, value) {
                (Source::Meta(m), value) => (meta_datum(*m, meta, record, &field.data_type), value),
                (_, None) => (Ok(Datum::Null), None),
                (_, Some(Cow::Owned(Value::String(s))))
                    if hint.is_none() && string_fits(&s, &field.data_type) =>
                {
                    (Ok(Datum::String(s)), None)
                }
                (_, Some(v)) => (
                    match hint {
                        Some(h) => coerce_hinted(&v, &field.data_type, h, self.epoch_unit),
                        None => coerce(&v, &field.data_type, self.epoch_unit),
                    },
                    Some(v),
                ),
            };
            let got = || match (source, &value) {
                (Source::Meta(m), _) => format!("metadata {m:?}"),
                (_, None) => "missing".to_string(),
                (_, Some(v)) => snippet(v),
            };
            match datum {
                Ok(d) => {
                    if d.is_null() && !field.nullable {
                        let problem = if self.schema.primary_keys.contains(&field.name) {
                            ColumnProblem::MissingKey
                        } else {
                            ColumnProblem::MissingNotNull
                        };
                        errors.push(ColumnError {
                            column: field.name.clone(),
                            expected: field.type_string(),
                            got: got(),
                            problem,
                        });
                    }
                    row.push(d);
                }
                Err(e) => {
                    errors.push(ColumnError {
                        column: field.name.clone(),
                        expected: field.type_string(),
                        got: got(),
                        problem: ColumnProblem::Value(e),
                    });
                    row.push(Datum::Null);
                }
            }
        }
        if errors.is_empty() {
            Ok(RowChange { kind, row })
        } else {
            Err(DecodeError::Columns { row: None, errors })
        }
    }
}

impl RowBuilder {
    /// `Err(SchemaChanged)` when the object has fields that are not columns (in strict
    /// mode; typed by `types`, else STRING, as Paimon's CDC types untyped fields), or its
    /// schema gives a column a wider type of the same family than the table has (INT in
    /// the table, `int64` in the record). A type of another family is the user's mapping
    /// (a DECIMAL read into a DOUBLE column) and is coerced value by value, as before.
    fn check_fit(
        &self,
        object: &Map<String, Value>,
        types: Option<&SourceTypes>,
    ) -> Result<(), DecodeError> {
        let mut columns = Vec::new();
        if self.strict {
            for name in object.keys() {
                if self.consumed.contains(name.as_str()) {
                    continue;
                }
                columns.push(match types.and_then(|t| t.get(name)) {
                    Some(source) => SourceColumn {
                        name: name.clone(),
                        source_type: source.data_type,
                        table_type: None,
                        described: source.described.clone(),
                    },
                    None => untyped_column(name),
                });
            }
        }
        if let Some(types) = types {
            for (field, source) in self.schema.fields.iter().zip(&self.sources) {
                let Source::Field(name) = source else {
                    continue;
                };
                // Primary-key and partition columns keep their types (their bytes decide
                // buckets and directories, so no schema change may widen them): their
                // values are converted one by one, as before, and one that does not fit
                // is that record's fault.
                if self.schema.primary_keys.contains(&field.name)
                    || self.schema.partition_keys.contains(&field.name)
                {
                    continue;
                }
                let Some(SourceType {
                    data_type: Some(wanted),
                    exact: true,
                    described,
                }) = types.get(name)
                else {
                    continue;
                };
                if *wanted != field.data_type && widens(field.data_type, *wanted) {
                    columns.push(SourceColumn {
                        name: field.name.clone(),
                        source_type: Some(*wanted),
                        table_type: Some(field.data_type),
                        described: described.clone(),
                    });
                }
            }
        }
        if columns.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::SchemaChanged { row: None, columns })
        }
    }
}

/// A field that is not a column and has no type of its own: a STRING column to add, as
/// Paimon's CDC types untyped fields.
fn untyped_column(name: &str) -> SourceColumn {
    SourceColumn {
        name: name.to_string(),
        source_type: Some(DataType::Varchar(MAX_LENGTH)),
        table_type: None,
        described: "untyped".into(),
    }
}

/// The datum of a metadata column. Timestamps are epoch milliseconds whatever
/// [`EpochUnit`] says.
fn meta_datum(
    m: Metadata,
    meta: &MessageMeta<'_>,
    record: &KafkaRecord<'_>,
    ty: &DataType,
) -> Result<Datum, CoerceError> {
    let from_json = |value: Value| datum_from_json(&value, ty).map_err(CoerceError::Datum);
    let millis = |ms: Option<i64>| -> Result<Datum, CoerceError> {
        match (ms, ty) {
            (None, _) => Ok(Datum::Null),
            (Some(ms), DataType::Timestamp(p) | DataType::TimestampLtz(p)) => {
                let ts = Timestamp::from_millis(ms);
                Ok(Datum::Timestamp(ts.truncate(*p)))
            }
            (Some(ms), _) => from_json(Value::from(ms)),
        }
    };
    let text = |s: Option<&str>| s.map_or(Ok(Datum::Null), |s| from_json(Value::from(s)));
    match m {
        Metadata::IngestionTimestamp => millis(meta.ingestion_ms),
        Metadata::SourceTimestamp => millis(meta.source_ms),
        Metadata::Timestamp => millis(record.timestamp_ms),
        Metadata::Database => text(meta.database),
        Metadata::Table => text(meta.table),
        Metadata::Topic => text(Some(record.topic)),
        Metadata::Partition => from_json(Value::from(record.partition)),
        Metadata::Offset => from_json(Value::from(record.offset)),
    }
}

/// Whether `s` is, as it is, a value of string column type `ty` (see [`coerce`]).
fn string_fits(s: &str, ty: &DataType) -> bool {
    matches!(ty, DataType::Char(n) | DataType::Varchar(n) if fits_chars(s, *n))
}

/// Converts a JSON value to a datum of `ty`: [`datum_from_json`] plus what CDC tools
/// emit — `0`/`1` booleans (MySQL `TINYINT(1)` via Canal), RFC 3339 timestamps with a zone
/// (Debezium `ZonedTimestamp`), epoch numbers in `unit`, timestamps truncated to the
/// column's precision.
pub(crate) fn coerce(value: &Value, ty: &DataType, unit: EpochUnit) -> Result<Datum, CoerceError> {
    match (ty, value) {
        (_, Value::Null) => Ok(Datum::Null),
        (DataType::Boolean, Value::Number(n)) => match n.as_i64() {
            Some(0) => Ok(Datum::Boolean(false)),
            Some(1) => Ok(Datum::Boolean(true)),
            _ => Err(CoerceError::NotBoolean {
                ty: *ty,
                got: value.clone(),
            }),
        },
        (DataType::Boolean, Value::String(s)) if s == "0" || s == "1" => {
            Ok(Datum::Boolean(s == "1"))
        }
        // A nested value in a string column is kept as its JSON text, as Paimon's CDC
        // stores it (a column added for an untyped nested field is a STRING).
        (DataType::Char(_) | DataType::Varchar(_), Value::Object(_) | Value::Array(_)) => {
            datum_from_json(&Value::String(value.to_string()), ty).map_err(CoerceError::Datum)
        }
        (DataType::Timestamp(p) | DataType::TimestampLtz(p), Value::Number(n)) => {
            let v = n.as_i64().ok_or_else(|| CoerceError::NotIntegerEpoch {
                ty: *ty,
                unit,
                got: value.clone(),
            })?;
            let ts = match unit {
                EpochUnit::Millis => Timestamp::from_millis(v),
                EpochUnit::Micros => Timestamp::from_micros(v),
                EpochUnit::Nanos => Timestamp::from_nanos(v),
            };
            Ok(Datum::Timestamp(ts.truncate(*p)))
        }
        (DataType::Timestamp(p) | DataType::TimestampLtz(p), Value::String(s)) => {
            let ts = parse_timestamp(s)
                .or_else(|| parse_zoned_timestamp(s))
                .ok_or_else(|| CoerceError::NotTimestamp { got: value.clone() })?;
            Ok(Datum::Timestamp(ts.truncate(*p)))
        }
        _ => datum_from_json(value, ty).map_err(CoerceError::Datum),
    }
}

/// [`coerce`] for a value whose schema gave a [`Semantic`].
pub(crate) fn coerce_hinted(
    value: &Value,
    ty: &DataType,
    hint: Semantic,
    unit: EpochUnit,
) -> Result<Datum, CoerceError> {
    let is_timestamp = matches!(ty, DataType::Timestamp(_) | DataType::TimestampLtz(_));
    match (hint, value) {
        (Semantic::EpochMillis, Value::Number(_)) if is_timestamp => {
            coerce(value, ty, EpochUnit::Millis)
        }
        (Semantic::EpochMicros, Value::Number(_)) if is_timestamp => {
            coerce(value, ty, EpochUnit::Micros)
        }
        (Semantic::EpochNanos, Value::Number(_)) if is_timestamp => {
            coerce(value, ty, EpochUnit::Nanos)
        }
        (Semantic::EpochDays, Value::Number(n)) if is_timestamp => {
            let days = n
                .as_i64()
                .ok_or_else(|| CoerceError::NotEpochDays { got: value.clone() })?;
            let millis =
                days.checked_mul(86_400_000)
                    .ok_or_else(|| CoerceError::DaysOutOfRange {
                        got: value.clone(),
                        ty: *ty,
                    })?;
            coerce(&Value::from(millis), ty, EpochUnit::Millis)
        }
        (Semantic::Decimal { scale }, Value::String(b64)) => {
            let text = connect_decimal(b64, scale)?;
            coerce(&Value::String(text), ty, unit)
        }
        (Semantic::VariableDecimal, Value::Object(o)) => {
            let not_decimal = || CoerceError::NotVariableDecimal { got: value.clone() };
            let scale = o
                .get("scale")
                .and_then(Value::as_u64)
                .and_then(|s| u32::try_from(s).ok())
                .ok_or_else(not_decimal)?;
            let Some(Value::String(b64)) = o.get("value") else {
                return Err(not_decimal());
            };
            let text = connect_decimal(b64, scale)?;
            coerce(&Value::String(text), ty, unit)
        }
        _ => coerce(value, ty, unit),
    }
}

/// Decimal text of a Kafka Connect decimal: base64 of the big-endian two's-complement
/// unscaled value.
fn connect_decimal(b64: &str, scale: u32) -> Result<String, CoerceError> {
    let bytes = BASE64
        .decode(b64.as_bytes())
        .map_err(|source| CoerceError::NotBase64 {
            text: b64.to_string(),
            source,
        })?;
    let unscaled =
        unscaled_from_be(&bytes).ok_or(CoerceError::DecimalTooWide { len: bytes.len() })?;
    let scale = u8::try_from(scale).map_err(|_| CoerceError::ScaleTooLarge { scale })?;
    Ok(format_decimal(unscaled, scale))
}

/// A big-endian two's-complement integer of any length as an i128, if it fits.
pub(crate) fn unscaled_from_be(bytes: &[u8]) -> Option<i128> {
    let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let sign_byte = if negative { 0xFF } else { 0x00 };
    // Drop redundant sign-extension bytes.
    let mut start = 0;
    while bytes.len() - start > 16 && bytes[start] == sign_byte {
        start += 1;
    }
    let significant = &bytes[start..];
    if significant.len() > 16 {
        return None;
    }
    let mut buf = [sign_byte; 16];
    buf[16 - significant.len()..].copy_from_slice(significant);
    let value = i128::from_be_bytes(buf);
    // A 17th byte that was dropped must agree with the sign of what is left.
    if start > 0 && (value < 0) != negative {
        return None;
    }
    Some(value)
}

/// Turns the before and after images of one change into row changes, following
/// [`UpdateMode`] and [`SnapshotMode`].
pub(crate) struct Emitter<'a, 'c, 'r> {
    pub(crate) ctx: &'a Ctx<'c, 'r>,
    pub(crate) hints: Option<&'a Hints>,
    pub(crate) types: Option<&'a SourceTypes>,
    pub(crate) meta: MessageMeta<'a>,
}

impl Emitter<'_, '_, '_> {
    fn build(&self, kind: RowKind, object: &Map<String, Value>) -> Result<RowChange, DecodeError> {
        self.ctx.builder.build_hinted(
            kind,
            object,
            self.hints,
            self.types,
            &self.meta,
            self.ctx.record,
        )
    }

    /// `+I(after)`.
    pub(crate) fn insert(
        &self,
        after: &Map<String, Value>,
        out: &mut Vec<RowChange>,
    ) -> Result<(), DecodeError> {
        out.push(self.build(RowKind::Insert, after)?);
        Ok(())
    }

    /// A snapshot read: `+I(after)`, or nothing with [`SnapshotMode::Skip`] (returns
    /// false then).
    pub(crate) fn snapshot(
        &self,
        after: &Map<String, Value>,
        out: &mut Vec<RowChange>,
    ) -> Result<bool, DecodeError> {
        match self.ctx.options.snapshot_mode {
            SnapshotMode::Insert => self.insert(after, out).map(|()| true),
            SnapshotMode::Skip => Ok(false),
        }
    }

    /// An update: the before image (after overlaid with the fields `before` gives) is
    /// retracted when there is one, then the after image is added.
    pub(crate) fn update(
        &self,
        before: Option<&Map<String, Value>>,
        after: &Map<String, Value>,
        out: &mut Vec<RowChange>,
    ) -> Result<(), DecodeError> {
        let (retract, add) = match self.ctx.options.update_mode {
            UpdateMode::DeleteInsert => (RowKind::Delete, RowKind::Insert),
            UpdateMode::UpdateBeforeAfter => (RowKind::UpdateBefore, RowKind::UpdateAfter),
            UpdateMode::Upsert => (RowKind::Delete, RowKind::UpdateAfter),
        };
        let added = self.build(add, after)?;
        if let Some(before) = before {
            let mut full = after.clone();
            for (k, v) in before {
                full.insert(k.clone(), v.clone());
            }
            let retracted = self.build(retract, &full)?;
            let key_changed = || {
                self.ctx
                    .builder
                    .key_indices()
                    .iter()
                    .any(|&i| retracted.row[i] != added.row[i])
            };
            if self.ctx.options.update_mode != UpdateMode::Upsert || key_changed() {
                out.push(retracted);
            }
        }
        out.push(added);
        Ok(())
    }

    /// `-D(before)`.
    pub(crate) fn delete(
        &self,
        before: &Map<String, Value>,
        out: &mut Vec<RowChange>,
    ) -> Result<(), DecodeError> {
        out.push(self.build(RowKind::Delete, before)?);
        Ok(())
    }
}

/// `2024-01-01T10:00:00.123Z` or with an offset, as UTC.
fn parse_zoned_timestamp(text: &str) -> Option<Timestamp> {
    let dt = DateTime::parse_from_rfc3339(text.trim()).ok()?;
    let nanos = dt.timestamp_subsec_nanos();
    Some(Timestamp {
        millis: dt
            .timestamp()
            .checked_mul(1000)?
            .checked_add((nanos / 1_000_000) as i64)?,
        nanos_of_milli: nanos % 1_000_000,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What a coercion to a TIMESTAMP column gives.
    fn ts(millis: i64, nanos_of_milli: u32) -> Result<Datum, CoerceError> {
        Ok(Datum::Timestamp(Timestamp {
            millis,
            nanos_of_milli,
        }))
    }

    #[test]
    fn coerces_what_cdc_tools_emit() {
        let u = EpochUnit::Millis;
        assert_eq!(
            coerce(&json!("1"), &DataType::Boolean, u),
            Ok(Datum::Boolean(true))
        );
        assert_eq!(
            coerce(&json!(0), &DataType::Boolean, u),
            Ok(Datum::Boolean(false))
        );
        assert!(coerce(&json!(2), &DataType::Boolean, u).is_err());
        assert_eq!(
            coerce(&json!({"a": [1, 2]}), &DataType::Varchar(MAX_LENGTH), u),
            Ok(Datum::String(r#"{"a":[1,2]}"#.into()))
        );
        assert!(coerce(&json!([1, 2, 3]), &DataType::Varchar(3), u).is_err());
        let zoned = coerce(
            &json!("2024-01-01T10:00:00.5+01:00"),
            &DataType::Timestamp(3),
            u,
        );
        assert_eq!(zoned, ts(1_704_099_600_500, 0));
        assert_eq!(
            coerce(
                &json!(1_500_123),
                &DataType::Timestamp(3),
                EpochUnit::Micros
            ),
            ts(1500, 0)
        );
        assert_eq!(
            coerce(
                &json!(1_500_123),
                &DataType::Timestamp(6),
                EpochUnit::Micros
            ),
            ts(1500, 123_000)
        );
        let err = coerce(&json!("noon"), &DataType::Timestamp(3), u).unwrap_err();
        assert!(matches!(err, CoerceError::NotTimestamp { .. }), "{err}");
        assert!(err.to_string().contains("RFC 3339"), "{err}");
        let err = coerce(&json!(1.5), &DataType::Timestamp(3), u).unwrap_err();
        assert!(err.to_string().contains("integer epoch"), "{err}");
    }

    #[test]
    fn schema_hints_fix_units_and_decode_connect_decimals() {
        let u = EpochUnit::Millis;
        let ts6 = DataType::Timestamp(6);
        assert_eq!(
            coerce_hinted(&json!(1_500_123), &ts6, Semantic::EpochMicros, u),
            Ok(Datum::Timestamp(Timestamp::from_micros(1_500_123)))
        );
        assert_eq!(
            coerce_hinted(
                &json!(1_500_123_456),
                &DataType::Timestamp(9),
                Semantic::EpochNanos,
                u
            ),
            Ok(Datum::Timestamp(Timestamp::from_nanos(1_500_123_456)))
        );
        // A hint does not turn a number into a timestamp for a BIGINT column.
        assert_eq!(
            coerce_hinted(&json!(5), &DataType::BigInt, Semantic::EpochMicros, u),
            Ok(Datum::BigInt(5))
        );
        assert_eq!(
            coerce_hinted(&json!(1), &DataType::Timestamp(3), Semantic::EpochDays, u),
            ts(86_400_000, 0)
        );
        let dec = DataType::Decimal {
            precision: 10,
            scale: 2,
        };
        // "BNI=" is 0x04D2 = 1234, "+y4=" is 0xFB2E = -1234.
        assert_eq!(
            coerce_hinted(&json!("BNI="), &dec, Semantic::Decimal { scale: 2 }, u),
            Ok(Datum::Decimal(1234))
        );
        assert_eq!(
            coerce_hinted(&json!("+y4="), &dec, Semantic::Decimal { scale: 2 }, u),
            Ok(Datum::Decimal(-1234))
        );
        assert_eq!(
            coerce_hinted(
                &json!({"scale": 1, "value": "BNI="}),
                &dec,
                Semantic::VariableDecimal,
                u
            ),
            Ok(Datum::Decimal(12340))
        );
        assert_eq!(
            coerce_hinted(
                &json!("BNI="),
                &DataType::Varchar(20),
                Semantic::Decimal { scale: 3 },
                u
            ),
            Ok(Datum::String("1.234".into()))
        );
        let err = coerce_hinted(&json!("!!"), &dec, Semantic::Decimal { scale: 2 }, u).unwrap_err();
        assert!(err.to_string().contains("base64"), "{err}");
        // The base64 error stays reachable as the source.
        assert!(std::error::Error::source(&err).is_some(), "{err:?}");
    }

    #[test]
    fn big_endian_unscaled_values() {
        assert_eq!(unscaled_from_be(&[]), Some(0));
        assert_eq!(unscaled_from_be(&[0xFF]), Some(-1));
        assert_eq!(unscaled_from_be(&[0x00, 0x80]), Some(128));
        let mut wide = vec![0xFF; 20];
        wide[19] = 0xFE;
        assert_eq!(unscaled_from_be(&wide), Some(-2));
        let mut too_wide = vec![0x00; 20];
        too_wide[2] = 1;
        assert_eq!(unscaled_from_be(&too_wide), None);
        // 17 bytes whose dropped sign byte disagrees with the rest.
        let mut flip = vec![0x00; 17];
        flip[1] = 0x80;
        assert_eq!(unscaled_from_be(&flip), None);
    }
}
