//! Builds table rows from JSON objects: column sources (name, dotted path, metadata),
//! values coerced to the columns' types (`super::coerce`), NOT NULL checks, and the
//! report of a row that does not fit the table's schema (fields that are not columns,
//! columns the record's own schema gives a wider type), which the CDC pipeline answers
//! by evolving the table.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Map, Value};

use super::coerce::{Hints, coerce, coerce_hinted};
use super::error::{CoerceError, ColumnError, ColumnProblem, DecodeError, SourceColumn, snippet};
use super::flat_object::{FieldSlots, FieldValue, ParsedFields};
use super::json_value::lookup_path;
use super::{
    CdcOptions, Ctx, EpochUnit, KafkaRecord, Metadata, RowChange, SnapshotMode, UpdateMode,
};
use crate::table::datum::{Datum, Timestamp, datum_from_json, fits_chars};
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
                    .map(Given::Owned)
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
            |_, source| {
                match source {
                    Source::Field(name) => object.get(name),
                    Source::Path(path) => lookup_path(object, path),
                    Source::Meta(_) => None,
                }
                .map(Given::Borrowed)
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
        mut value_of: impl FnMut(usize, &Source) -> Option<Given<'v>>,
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
                (Source::Meta(m), value) => (
                    meta_datum(*m, meta, record, &field.data_type),
                    value.map(Given::into_json),
                ),
                (_, None) => (Ok(Datum::Null), None),
                (_, Some(Given::Owned(FieldValue::Text(s))))
                    if hint.is_none() && string_fits(&s, &field.data_type) =>
                {
                    (Ok(Datum::String(s)), None)
                }
                (_, Some(Given::Owned(FieldValue::Json(Value::String(s)))))
                    if hint.is_none() && string_fits(&s, &field.data_type) =>
                {
                    (Ok(Datum::String(s.into())), None)
                }
                (_, Some(given)) => {
                    let v = given.into_json();
                    (
                        match hint {
                            Some(h) => coerce_hinted(&v, &field.data_type, h, self.epoch_unit),
                            None => coerce(&v, &field.data_type, self.epoch_unit),
                        },
                        Some(v),
                    )
                }
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
/// A column's value as its source gives it: the row's own to keep (read into field
/// slots), or borrowed from a parsed object.
enum Given<'v> {
    Owned(FieldValue),
    Borrowed(&'v Value),
}

impl<'v> Given<'v> {
    fn into_json(self) -> Cow<'v, Value> {
        match self {
            Given::Owned(v) => Cow::Owned(v.into_json()),
            Given::Borrowed(v) => Cow::Borrowed(v),
        }
    }
}

fn string_fits(s: &str, ty: &DataType) -> bool {
    matches!(ty, DataType::Char(n) | DataType::Varchar(n) if fits_chars(s, *n))
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
