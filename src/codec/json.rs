//! JSON: flat objects ⇄ table rows in the JSON form of [`crate::table::datum`] (the
//! `table` commands' JSON lines), and the `json` CDC format.
//!
//! Parsing payloads and dotted paths are in `json_value`, which `row`
//! uses too: this module builds on `row` (the `json` format's changes), never the reverse.

use std::fmt;

use serde_json::{Map, Value};

use super::envelope;
use super::error::{DecodeError, write_joined};
use super::json_value::type_name;
use super::row::MessageMeta;
use super::{Ctx, Decoded, SkipReason};
use crate::table::datum::{Row, ValueError, datum_from_json, datum_to_json};
use crate::table::row_kind::RowKind;
use crate::table::schema::TableSchema;

/// The `json` CDC format: one object per record, a tombstone is skipped.
pub(crate) fn decode_cdc(ctx: &Ctx<'_, '_>) -> Result<Decoded, DecodeError> {
    let Some(object) = envelope::root(ctx)? else {
        return Ok(Decoded::Skipped(SkipReason::Tombstone));
    };
    flat_change(ctx, &object)
}

/// One flat row object (`json`, `avro`) → one change, of the kind in `row_kind_field`.
pub(crate) fn flat_change(
    ctx: &Ctx<'_, '_>,
    object: &Map<String, Value>,
) -> Result<Decoded, DecodeError> {
    let mut kind = RowKind::Insert;
    if let Some(field) = &ctx.options.row_kind_field {
        match object.get(field) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => {
                kind = RowKind::parse(s).ok_or_else(|| {
                    DecodeError::envelope(
                        field.as_str(),
                        format!("expected a row kind +I, -U, +U or -D, got {s:?}"),
                    )
                })?;
            }
            Some(other) => {
                return Err(DecodeError::envelope(
                    field.as_str(),
                    format!(
                        "expected a row kind string (+I, -U, +U, -D), got {}",
                        type_name(other)
                    ),
                ));
            }
        }
    }
    let change = ctx
        .builder
        .build(kind, object, &MessageMeta::default(), ctx.record)?;
    Ok(Decoded::Changes(vec![change]))
}

/// Why a JSON value is not a row of the table: every problem found in it, so that one
/// pass over a file of lines shows all that is wrong with each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RowJsonError {
    pub(crate) problems: Vec<RowJsonProblem>,
}

impl fmt::Display for RowJsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_joined(f, &self.problems)
    }
}

impl std::error::Error for RowJsonError {}

/// One thing wrong with a JSON value given as a row.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RowJsonProblem {
    /// The value is not an object (its type in words).
    #[error("expected a JSON object, got {0}")]
    NotAnObject(&'static str),
    /// A member that is no column (nor the row-kind member).
    #[error("unknown column `{0}`")]
    UnknownColumn(String),
    /// The row-kind member holds text that is no row kind.
    #[error("row kind `{field}` must be one of +I, -U, +U, -D, got {got:?}")]
    UnknownRowKind { field: String, got: String },
    /// The row-kind member is not text.
    #[error("row kind `{field}` must be a string (+I, -U, +U, -D), got {got}")]
    RowKindNotText { field: String, got: Value },
    /// A primary-key column is missing or null.
    #[error("primary-key column `{0}` is missing or null")]
    MissingKey(String),
    /// A NOT NULL column (not of the key) is missing or null.
    #[error("NOT NULL column `{0}` is missing or null")]
    MissingNotNull(String),
    /// A value that does not convert to its column's type; `reason` is
    /// [`datum_from_json`]'s.
    #[error("column `{column}`: {reason}")]
    Value {
        column: String,
        #[source]
        reason: ValueError,
    },
}

/// Converts one JSON object to a row of `schema`. `row_kind_field`, when given, names a
/// member holding `+I`/`-U`/`+U`/`-D` that is not stored. Columns absent from the object
/// are null. Every problem of the object is reported.
pub(crate) fn row_from_json(
    schema: &TableSchema,
    value: &Value,
    row_kind_field: Option<&str>,
) -> Result<(RowKind, Row), RowJsonError> {
    let Value::Object(object) = value else {
        return Err(RowJsonError {
            problems: vec![RowJsonProblem::NotAnObject(type_name(value))],
        });
    };
    let mut problems = Vec::new();
    let mut kind = RowKind::Insert;
    for key in object.keys() {
        if Some(key.as_str()) == row_kind_field {
            continue;
        }
        if schema.field(key).is_none() {
            problems.push(RowJsonProblem::UnknownColumn(key.clone()));
        }
    }
    if let Some(field) = row_kind_field {
        match object.get(field) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => match RowKind::parse(s) {
                Some(k) => kind = k,
                None => problems.push(RowJsonProblem::UnknownRowKind {
                    field: field.to_string(),
                    got: s.clone(),
                }),
            },
            Some(other) => problems.push(RowJsonProblem::RowKindNotText {
                field: field.to_string(),
                got: other.clone(),
            }),
        }
    }
    let mut row = Vec::with_capacity(schema.fields.len());
    for field in &schema.fields {
        let value = object.get(&field.name).unwrap_or(&Value::Null);
        match datum_from_json(value, &field.data_type) {
            Ok(d) => {
                if d.is_null() && !field.nullable {
                    let name = field.name.clone();
                    problems.push(if schema.primary_keys.contains(&field.name) {
                        RowJsonProblem::MissingKey(name)
                    } else {
                        RowJsonProblem::MissingNotNull(name)
                    });
                }
                row.push(d);
            }
            Err(reason) => {
                problems.push(RowJsonProblem::Value {
                    column: field.name.clone(),
                    reason,
                });
                row.push(crate::table::datum::Datum::Null);
            }
        }
    }
    if problems.is_empty() {
        Ok((kind, row))
    } else {
        Err(RowJsonError { problems })
    }
}

/// A row as a JSON object with the columns in schema order.
pub(crate) fn row_to_json(schema: &TableSchema, row: &Row) -> Value {
    let mut object = Map::with_capacity(schema.fields.len());
    for (field, datum) in schema.fields.iter().zip(row) {
        object.insert(field.name.clone(), datum_to_json(datum, &field.data_type));
    }
    Value::Object(object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::datum::Datum;
    use crate::table::testkit::keyed_schema;
    use crate::table::types::DataType;
    use serde_json::json;

    fn schema() -> TableSchema {
        keyed_schema(
            &[("id", DataType::Int), ("name", DataType::Varchar(10))],
            &["id"],
            &[],
        )
    }

    #[test]
    fn converts_objects_and_reports_every_problem() {
        let s = schema();
        let (kind, row) =
            row_from_json(&s, &json!({"id": 1, "name": "a", "op": "-D"}), Some("op")).unwrap();
        assert_eq!(kind, RowKind::Delete);
        assert_eq!(row, vec![Datum::Int(1), Datum::String("a".into())]);
        let err =
            row_from_json(&s, &json!({"name": [5], "x": 1, "op": "?"}), Some("op")).unwrap_err();
        assert_eq!(
            err.problems,
            vec![
                RowJsonProblem::UnknownColumn("x".into()),
                RowJsonProblem::UnknownRowKind {
                    field: "op".into(),
                    got: "?".into()
                },
                RowJsonProblem::MissingKey("id".into()),
                RowJsonProblem::Value {
                    column: "name".into(),
                    reason: ValueError::WrongType {
                        expected: DataType::Varchar(10),
                        got: json!([5])
                    }
                },
            ]
        );
        let text = err.to_string();
        assert!(text.contains("unknown column `x`; "), "{text}");
        assert!(text.contains("primary-key column `id`"), "{text}");
        assert!(text.contains("+I, -U, +U, -D"), "{text}");
        assert_eq!(
            row_from_json(&s, &json!([1]), None)
                .unwrap_err()
                .to_string(),
            "expected a JSON object, got an array"
        );
        assert_eq!(row_to_json(&s, &row), json!({"id": 1, "name": "a"}));
    }

    #[test]
    fn json_format_reads_paths_and_row_kinds() {
        use crate::codec::testkit::{decoder, record};
        use crate::codec::{CdcOptions, Decoded, Format};
        let options = CdcOptions {
            field_paths: [
                ("id".to_string(), "order.product_id".to_string()),
                ("name".to_string(), "title".to_string()),
            ]
            .into_iter()
            .collect(),
            row_kind_field: Some("op".into()),
            strict: true,
            ..CdcOptions::default()
        };
        let dec = decoder(Format::Json, options);
        let msg = json!({"order": {"product_id": "12"}, "title": "pen", "op": "-D"});
        let Ok(Decoded::Changes(got)) = dec.decode(&record(msg.to_string().as_bytes())) else {
            panic!("changes expected")
        };
        assert_eq!(got[0].kind, RowKind::Delete);
        assert_eq!(got[0].row[0], Datum::Int(12));
        assert_eq!(got[0].row[1], Datum::String("pen".into()));
        let bad_kind = json!({"order": {"product_id": 1}, "op": "upsert"}).to_string();
        let err = dec.decode(&record(bad_kind.as_bytes())).unwrap_err();
        assert!(err.to_string().contains("field `op`"), "{err}");
        let unknown = json!({"order": {"product_id": 1}, "colour": "red"}).to_string();
        let err = dec.decode(&record(unknown.as_bytes())).unwrap_err();
        assert!(err.to_string().contains("colour"), "{err}");
        let mut tombstone = record(b"");
        tombstone.payload = None;
        assert!(matches!(dec.decode(&tombstone), Ok(Decoded::Skipped(_))));
    }
}
