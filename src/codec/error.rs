//! Decode errors: precise enough to put in dead-letter headers (what failed, what was
//! expected, what was found).
//!
//! A value that does not fit its column is a [`ColumnError`] whose [`ColumnProblem`] says
//! why, down to the [`CoerceError`] of the conversion (with the base64 error of a Connect
//! decimal as its source), so the dead-letter reason is the error's text and callers can
//! still tell the cases apart.

use std::fmt;

use serde_json::Value;

use super::EpochUnit;
use crate::table::types::DataType;

/// Which part of a Kafka record an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Key,
    Payload,
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Part::Key => "key",
            Part::Payload => "payload",
        })
    }
}

/// A value that does not fit its column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnError {
    /// The column's name.
    pub(crate) column: String,
    /// The column's type as the schema file spells it, e.g. `INT NOT NULL`.
    pub(crate) expected: String,
    /// The offending value as JSON text (shortened), or `null`/`missing`.
    pub(crate) got: String,
    /// What is wrong.
    pub(crate) problem: ColumnProblem,
}

/// What is wrong with a column's value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ColumnProblem {
    /// A primary-key column has no value.
    #[error("primary-key column is missing or null")]
    MissingKey,
    /// A NOT NULL column (not of the key) has no value.
    #[error("NOT NULL column is missing or null")]
    MissingNotNull,
    /// The value does not convert to the column's type.
    #[error(transparent)]
    Value(#[from] CoerceError),
}

/// Why a JSON value does not convert to a column's type. The offending value is kept
/// whole (the [`ColumnError`] holds the shortened text that reports quote).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CoerceError {
    /// What the table's own JSON form ([`crate::table::datum::datum_from_json`]) says
    /// of the value.
    #[error(transparent)]
    Datum(crate::table::datum::ValueError),
    /// A number for a BOOLEAN that is neither 0 nor 1.
    #[error("expected {ty}, got {got}")]
    NotBoolean { ty: DataType, got: Value },
    /// A number for a TIMESTAMP that is not an integer.
    #[error("expected {ty} as integer epoch {unit:?}, got {got}")]
    NotIntegerEpoch {
        ty: DataType,
        unit: EpochUnit,
        got: Value,
    },
    /// Text for a TIMESTAMP in neither the table's form nor RFC 3339.
    #[error("expected a timestamp `YYYY-MM-DD HH:MM:SS[.fff]` or RFC 3339, got {got}")]
    NotTimestamp { got: Value },
    /// A number the schema calls epoch days that is not an integer.
    #[error("expected epoch days, got {got}")]
    NotEpochDays { got: Value },
    /// Epoch days whose milliseconds overflow.
    #[error("{got} days are out of range for {ty}")]
    DaysOutOfRange { got: Value, ty: DataType },
    /// A Debezium `VariableScaleDecimal` without an integer `scale` or a string `value`.
    #[error("expected a variable-scale decimal, got {got}")]
    NotVariableDecimal { got: Value },
    /// A Connect decimal whose text is not base64.
    #[error("expected a base64 Connect decimal, got {text:?}: {source}")]
    NotBase64 {
        text: String,
        #[source]
        source: base64::DecodeError,
    },
    /// A Connect decimal whose unscaled value has more than 38 digits.
    #[error("decimal of {len} bytes does not fit 38 digits")]
    DecimalTooWide { len: usize },
    /// A decimal scale beyond what a decimal can have.
    #[error("decimal scale {scale} is too large")]
    ScaleTooLarge { scale: u32 },
}

impl fmt::Display for ColumnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "column `{}` ({}): {} (got {})",
            self.column, self.expected, self.problem, self.got
        )
    }
}

/// Why a record could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The bytes are not in the format's syntax: not JSON, truncated Avro, a bad
    /// Confluent frame.
    Malformed { part: Part, reason: String },
    /// The envelope lacks a member or has one of the wrong shape (`op`, `after`, `data`).
    Envelope { field: String, problem: String },
    /// Values that do not fit their columns: every problem of one row. `row` is the index
    /// of the row within a multi-row message (Canal `data[i]`).
    Columns {
        row: Option<usize>,
        errors: Vec<ColumnError>,
    },
    /// The record's row does not fit the table's schema: fields that are not columns
    /// (reported unless unknown fields are ignored), or columns whose type the record's
    /// own schema gives wider than the table's. Not a bad record: the pipeline evolves
    /// the table or stops, as its `schema_evolution` says; it never drops the fields.
    SchemaChanged {
        row: Option<usize>,
        columns: Vec<SourceColumn>,
    },
    /// A Confluent schema id that could not be resolved. `transient` failures (registry
    /// unreachable, 5xx) deserve a retry rather than the dead-letter topic.
    Schema {
        id: u32,
        reason: String,
        transient: bool,
    },
}

impl DecodeError {
    /// A short stable code for dead-letter headers and metrics labels.
    pub fn code(&self) -> &'static str {
        match self {
            DecodeError::Malformed { .. } => "malformed",
            DecodeError::Envelope { .. } => "envelope",
            DecodeError::Columns { .. } => "column",
            DecodeError::SchemaChanged { .. } => "schema-changed",
            DecodeError::Schema { .. } => "schema",
        }
    }

    /// Whether retrying the same record later may succeed.
    pub(crate) fn is_transient(&self) -> bool {
        matches!(
            self,
            DecodeError::Schema {
                transient: true,
                ..
            }
        )
    }

    pub(crate) fn envelope(field: impl Into<String>, problem: impl Into<String>) -> Self {
        DecodeError::Envelope {
            field: field.into(),
            problem: problem.into(),
        }
    }

    pub(crate) fn malformed(part: Part, reason: impl Into<String>) -> Self {
        DecodeError::Malformed {
            part,
            reason: reason.into(),
        }
    }

    /// Tags column errors with the row's index within a multi-row message.
    pub(crate) fn in_row(self, index: usize) -> Self {
        match self {
            DecodeError::Columns { errors, .. } => DecodeError::Columns {
                row: Some(index),
                errors,
            },
            DecodeError::SchemaChanged { columns, .. } => DecodeError::SchemaChanged {
                row: Some(index),
                columns,
            },
            other => other,
        }
    }
}

fn row_prefix(f: &mut fmt::Formatter<'_>, row: &Option<usize>) -> fmt::Result {
    match row {
        Some(i) => write!(f, "row {i}: "),
        None => Ok(()),
    }
}

/// Every problem, `; ` between them: one line for a dead-letter header or a report.
pub(crate) fn write_joined<T: fmt::Display>(
    f: &mut fmt::Formatter<'_>,
    items: &[T],
) -> fmt::Result {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            f.write_str("; ")?;
        }
        write!(f, "{item}")?;
    }
    Ok(())
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Malformed { part, reason } => write!(f, "malformed {part}: {reason}"),
            DecodeError::Envelope { field, problem } => write!(f, "field `{field}`: {problem}"),
            DecodeError::Columns { row, errors } => {
                row_prefix(f, row)?;
                write_joined(f, errors)
            }
            DecodeError::SchemaChanged { row, columns } => {
                row_prefix(f, row)?;
                f.write_str("the record does not fit the table's schema: ")?;
                write_joined(f, columns)
            }
            DecodeError::Schema { id, reason, .. } => write!(f, "schema id {id}: {reason}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// A column as a record's source has it, where the table lacks it or has a narrower type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceColumn {
    pub name: String,
    /// Its type as the record's schema gives it (STRING for a format without types, as
    /// Paimon's CDC maps untyped fields); `None` for a schema type lakejoin cannot map.
    pub source_type: Option<DataType>,
    /// Its type in the table; `None` when the table has no such column.
    pub table_type: Option<DataType>,
    /// How the source describes its type, for messages (`int64`, `string`, …).
    pub described: String,
}

impl fmt::Display for SourceColumn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let source = match self.source_type {
            Some(t) => t.to_string(),
            None => format!("{} (a type lakejoin cannot map)", self.described),
        };
        match self.table_type {
            None => write!(f, "field `{}` ({source}) is not a column", self.name),
            Some(t) => write!(
                f,
                "column `{}` is {t} in the table, {source} in the record",
                self.name
            ),
        }
    }
}

impl From<DecodeError> for crate::Error {
    fn from(e: DecodeError) -> Self {
        crate::Error::Data(e.to_string())
    }
}

/// JSON text of a value for messages, cut to about 80 characters.
pub(crate) fn snippet(value: &serde_json::Value) -> String {
    let text = value.to_string();
    shorten(&text, 80)
}

/// `text` cut at a char boundary to at most `max` bytes, with `…` when cut.
pub(crate) fn shorten(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}
