//! `canal-json`: Canal's flat messages.
//!
//! One message carries the changes of one statement: `type` (`INSERT`, `UPDATE`,
//! `DELETE`), `data` (the rows after the change, or the deleted rows) and, for updates,
//! `old`: per row of `data`, at the same index, the previous values of only the columns
//! that changed. The before image of `data[i]` is therefore `data[i]` overlaid with
//! `old[i]`. An update whose `old` (or `old[i]`) is missing becomes an upsert of the after
//! image. Messages with `isDdl: true` and DDL types (`CREATE`, `ALTER`, `ERASE`, `RENAME`,
//! `CINDEX`, `DINDEX`, `QUERY`, `TRUNCATE`) are skipped. Canal writes every value as a
//! string; they are coerced to the column types (`"1"` → `true` for BOOLEAN).

use serde_json::{Map, Value};

use super::envelope;
use super::error::DecodeError;
use super::json_value::type_name;
use super::row::Emitter;
use super::{Ctx, Decoded, SkipReason};

/// Decodes one Canal message.
pub(crate) fn decode(ctx: &Ctx<'_, '_>) -> Result<Decoded, DecodeError> {
    let Some(root) = envelope::root(ctx)? else {
        return Ok(Decoded::Skipped(SkipReason::Tombstone));
    };
    let kind = envelope::event_kind(&root, "type", "a Canal message")?;
    if root.get("isDdl").and_then(Value::as_bool) == Some(true) {
        return Ok(Decoded::Skipped(if kind == "TRUNCATE" {
            SkipReason::Truncate
        } else {
            SkipReason::Ddl(ddl_text(&root, kind))
        }));
    }
    match kind {
        "INSERT" | "UPDATE" | "DELETE" => {}
        "TRUNCATE" => return Ok(Decoded::Skipped(SkipReason::Truncate)),
        "CREATE" | "ALTER" | "ERASE" | "RENAME" | "CINDEX" | "DINDEX" | "QUERY" => {
            return Ok(Decoded::Skipped(SkipReason::Ddl(ddl_text(&root, kind))));
        }
        other => {
            return Err(envelope::unknown_kind(
                "type",
                "type",
                other,
                "INSERT, UPDATE or DELETE",
            ));
        }
    }
    let rows = objects(&root, "data")?.unwrap_or_default();
    let old = if kind == "UPDATE" {
        objects(&root, "old")?
    } else {
        None
    };
    let meta = envelope::flat_meta(
        &root,
        envelope::int(&root, "ts"),
        envelope::int(&root, "es"),
    );
    let emit = Emitter {
        ctx,
        hints: None,
        types: None,
        meta,
    };
    let mut out = Vec::with_capacity(rows.len() * if kind == "UPDATE" { 2 } else { 1 });
    for (i, row) in rows.iter().enumerate() {
        let result = match kind {
            "INSERT" => emit.insert(row, &mut out),
            "UPDATE" => {
                let before = old.as_ref().and_then(|o| o.get(i)).copied();
                emit.update(before, row, &mut out)
            }
            _ => emit.delete(row, &mut out),
        };
        result.map_err(|e| e.in_row(i))?;
    }
    Ok(Decoded::Changes(out))
}

/// The array of objects in `field`; `None` when missing or null.
fn objects<'a>(
    root: &'a Map<String, Value>,
    field: &str,
) -> Result<Option<Vec<&'a Map<String, Value>>>, DecodeError> {
    let items = match root.get(field) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(DecodeError::envelope(
                field,
                format!("expected an array of objects, got {}", type_name(other)),
            ));
        }
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            item.as_object().ok_or_else(|| {
                DecodeError::envelope(
                    format!("{field}[{i}]"),
                    format!("expected an object, got {}", type_name(item)),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// `ALTER: ALTER TABLE …` for skip reasons, the statement shortened.
fn ddl_text(root: &Map<String, Value>, kind: &str) -> String {
    match root.get("sql").and_then(Value::as_str) {
        Some(sql) if !sql.is_empty() => format!("{kind}: {}", super::error::shorten(sql, 120)),
        _ => kind.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testkit::{
        Change, canal_json, decoder, metadata_decoder, record, sample_row,
    };
    use super::super::*;
    use crate::table::datum::Datum;
    use crate::table::types::DataType;

    fn decode(payload: &[u8]) -> Result<Decoded, DecodeError> {
        decoder(Format::CanalJson, CdcOptions::default()).decode(&record(payload))
    }

    #[test]
    fn one_message_carries_several_rows() {
        let msg = canal_json(&[Change::Insert(sample_row(1)), Change::Insert(sample_row(2))]);
        let Ok(Decoded::Changes(got)) = decode(&msg) else {
            panic!("changes expected")
        };
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].row, sample_row(1));
        assert_eq!(got[1].row, sample_row(2));
        assert!(got.iter().all(|c| c.kind == RowKind::Insert));
    }

    #[test]
    fn old_holds_only_changed_columns() {
        // As Canal writes an UPDATE of two rows: `old[i]` belongs to `data[i]`.
        let msg = json!({
            "data": [{"id": "1", "name": "bike", "weight": "5.18", "in_stock": "1",
                      "updated_at": "2020-05-13 12:00:00", "born": null, "score": "1.5"},
                     {"id": "2", "name": "car", "weight": "7.00", "in_stock": "0",
                      "updated_at": null, "born": null, "score": null}],
            "database": "inventory", "es": 1589373560000i64, "id": 9, "isDdl": false,
            "mysqlType": {"id": "int(11)"}, "old": [{"weight": "5.15"}, {"name": "van"}],
            "pkNames": ["id"], "sql": "", "table": "products", "ts": 1589373560798i64,
            "type": "UPDATE"
        });
        let Ok(Decoded::Changes(got)) = decode(msg.to_string().as_bytes()) else {
            panic!("changes expected")
        };
        let kinds: Vec<RowKind> = got.iter().map(|c| c.kind).collect();
        assert_eq!(
            kinds,
            vec![
                RowKind::Delete,
                RowKind::Insert,
                RowKind::Delete,
                RowKind::Insert
            ]
        );
        assert_eq!(got[0].row[2], Datum::Decimal(515));
        assert_eq!(got[0].row[1], Datum::String("bike".into()));
        assert_eq!(got[1].row[2], Datum::Decimal(518));
        assert_eq!(got[1].row[3], Datum::Boolean(true));
        assert_eq!(got[2].row[1], Datum::String("van".into()));
        assert_eq!(got[3].row[1], Datum::String("car".into()));
        // Without `old`, an update is an upsert of each row.
        let mut no_old = msg.clone();
        no_old["old"] = json!(null);
        let Ok(Decoded::Changes(got)) = decode(no_old.to_string().as_bytes()) else {
            panic!("changes expected")
        };
        assert_eq!(got.len(), 2);
    }

    #[test]
    fn deletes_ddl_and_errors() {
        let msg = canal_json(&[Change::Delete(sample_row(4))]);
        let Ok(Decoded::Changes(got)) = decode(&msg) else {
            panic!("changes expected")
        };
        assert_eq!(got[0].kind, RowKind::Delete);
        assert_eq!(got[0].row, sample_row(4));
        // A DDL message as Canal writes it.
        let ddl = json!({"data": null, "database": "inventory", "es": 1589373515000i64,
                         "id": 3, "isDdl": true, "mysqlType": null, "old": null,
                         "pkNames": null, "sql": "ALTER TABLE products ADD COLUMN x INT",
                         "sqlType": null, "table": "products", "ts": 1589373515477i64,
                         "type": "ALTER"});
        let Ok(Decoded::Skipped(SkipReason::Ddl(what))) = decode(ddl.to_string().as_bytes()) else {
            panic!("DDL is skipped")
        };
        assert!(what.contains("ADD COLUMN"), "{what}");
        let truncate = json!({"isDdl": true, "type": "TRUNCATE", "sql": "TRUNCATE products"});
        assert_eq!(
            decode(truncate.to_string().as_bytes()),
            Ok(Decoded::Skipped(SkipReason::Truncate))
        );
        let query = json!({"isDdl": false, "type": "QUERY", "data": null});
        assert!(matches!(
            decode(query.to_string().as_bytes()),
            Ok(Decoded::Skipped(SkipReason::Ddl(_)))
        ));
        let empty = json!({"type": "INSERT", "data": []});
        assert_eq!(
            decode(empty.to_string().as_bytes()),
            Ok(Decoded::Changes(vec![]))
        );
        let bad_row = json!({"type": "INSERT", "data": [{"id": "1"}, {"id": "x"}]});
        let err = decode(bad_row.to_string().as_bytes()).unwrap_err();
        assert!(err.to_string().starts_with("row 1: column `id`"), "{err}");
        for (payload, needle) in [
            (json!({"data": []}), "`type`"),
            (json!({"type": "UPSERT", "data": []}), "unknown type"),
            (
                json!({"type": "INSERT", "data": {"id": "1"}}),
                "array of objects",
            ),
            (json!({"type": "INSERT", "data": [1]}), "data[0]"),
            (json!({"type": "UPDATE", "data": [], "old": "x"}), "`old`"),
        ] {
            let err = decode(payload.to_string().as_bytes()).unwrap_err();
            assert!(err.to_string().contains(needle), "{payload}: {err}");
        }
    }

    #[test]
    fn metadata_from_canal_fields() {
        let dec = metadata_decoder(
            Format::CanalJson,
            &[
                ("es", DataType::BigInt, Metadata::SourceTimestamp),
                ("ts", DataType::BigInt, Metadata::IngestionTimestamp),
                ("tbl", DataType::Varchar(9), Metadata::Table),
            ],
            CdcOptions::default(),
        );
        let msg = json!({"type": "INSERT", "data": [{"id": "1", "ts": "ignored"}],
                         "es": 10, "ts": 20, "table": "products"});
        let Ok(Decoded::Changes(got)) = dec.decode(&record(msg.to_string().as_bytes())) else {
            panic!("changes expected")
        };
        assert_eq!(
            got[0].row,
            vec![
                Datum::Int(1),
                Datum::BigInt(10),
                Datum::BigInt(20),
                Datum::String("products".into())
            ]
        );
    }
}
