//! `maxwell-json`: Maxwell's messages.
//!
//! `type` is `insert`, `update` or `delete`; `data` is the row (after the change, or the
//! deleted row); for updates `old` holds the previous values of only the columns that
//! changed, so the before image is `data` overlaid with `old`. An update without `old`
//! becomes an upsert of `data`. `bootstrap-insert` rows are snapshot reads;
//! `bootstrap-start`/`bootstrap-complete` markers and DDL (`table-create`, `table-alter`,
//! `database-drop`, …, with `output_ddl`) are skipped. `ts` is in seconds; as metadata it
//! is scaled to milliseconds.

use super::envelope;
use super::error::DecodeError;
use super::row::Emitter;
use super::{Ctx, Decoded, SkipReason};

/// Decodes one Maxwell message.
pub(crate) fn decode(ctx: &Ctx<'_, '_>) -> Result<Decoded, DecodeError> {
    let Some(root) = envelope::root(ctx)? else {
        return Ok(Decoded::Skipped(SkipReason::Tombstone));
    };
    let kind = envelope::event_kind(&root, "type", "a Maxwell message")?;
    match kind {
        "insert" | "update" | "delete" | "bootstrap-insert" => {}
        "bootstrap-start" | "bootstrap-complete" => {
            return Ok(Decoded::Skipped(SkipReason::Other(format!(
                "Maxwell {kind} marker"
            ))));
        }
        ddl if ddl.starts_with("table-") || ddl.starts_with("database-") => {
            return Ok(Decoded::Skipped(SkipReason::Ddl(format!("Maxwell {ddl}"))));
        }
        other => {
            return Err(envelope::unknown_kind(
                "type",
                "type",
                other,
                "insert, update, delete or bootstrap-insert",
            ));
        }
    }
    let data = envelope::required(envelope::object(&root, "data")?, "data", "type", kind)?;
    // Maxwell's `ts` is in seconds; metadata timestamps are milliseconds.
    let ts_ms = envelope::int(&root, "ts").and_then(|s| s.checked_mul(1000));
    let meta = envelope::flat_meta(&root, ts_ms, ts_ms);
    let emit = Emitter {
        ctx,
        hints: None,
        types: None,
        meta,
    };
    let mut out = Vec::with_capacity(2);
    match kind {
        "insert" => emit.insert(data, &mut out)?,
        "bootstrap-insert" => {
            if !emit.snapshot(data, &mut out)? {
                return Ok(Decoded::Skipped(SkipReason::SnapshotRead));
            }
        }
        "update" => emit.update(envelope::object(&root, "old")?, data, &mut out)?,
        _ => emit.delete(data, &mut out)?,
    }
    Ok(Decoded::Changes(out))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testkit::{
        Change, decoder, maxwell_json, metadata_decoder, record, sample_row,
    };
    use super::super::*;
    use crate::table::datum::Datum;
    use crate::table::types::DataType;

    fn decode(options: CdcOptions, payload: &[u8]) -> Result<Decoded, DecodeError> {
        decoder(Format::MaxwellJson, options).decode(&record(payload))
    }

    #[test]
    fn insert_update_delete() {
        let ins = maxwell_json(&Change::Insert(sample_row(1)));
        assert_eq!(
            decode(CdcOptions::default(), &ins),
            Ok(Decoded::Changes(vec![RowChange {
                kind: RowKind::Insert,
                row: sample_row(1)
            }]))
        );
        // Maxwell's update: `old` has only the changed column.
        let upd = json!({"database": "test", "table": "products", "type": "update",
                         "ts": 1477053234, "xid": 23400, "commit": true,
                         "data": {"id": 1, "name": "bike", "in_stock": 1},
                         "old": {"name": "scooter"}});
        let options = CdcOptions {
            update_mode: UpdateMode::UpdateBeforeAfter,
            ..CdcOptions::default()
        };
        let Ok(Decoded::Changes(got)) = decode(options, upd.to_string().as_bytes()) else {
            panic!("changes expected")
        };
        assert_eq!(got[0].kind, RowKind::UpdateBefore);
        assert_eq!(got[0].row[1], Datum::String("scooter".into()));
        assert_eq!(got[0].row[3], Datum::Boolean(true));
        assert_eq!(got[1].kind, RowKind::UpdateAfter);
        assert_eq!(got[1].row[1], Datum::String("bike".into()));
        let del = maxwell_json(&Change::Delete(sample_row(2)));
        let Ok(Decoded::Changes(got)) = decode(CdcOptions::default(), &del) else {
            panic!("changes expected")
        };
        assert_eq!(got[0].kind, RowKind::Delete);
        assert_eq!(got[0].row, sample_row(2));
    }

    #[test]
    fn bootstrap_and_ddl() {
        let boot = json!({"database": "test", "table": "products", "type": "bootstrap-insert",
                          "ts": 1450557744, "data": {"id": 1}});
        let Ok(Decoded::Changes(got)) = decode(CdcOptions::default(), boot.to_string().as_bytes())
        else {
            panic!("changes expected")
        };
        assert_eq!(got[0].kind, RowKind::Insert);
        let skip = CdcOptions {
            snapshot_mode: SnapshotMode::Skip,
            ..CdcOptions::default()
        };
        assert_eq!(
            decode(skip, boot.to_string().as_bytes()),
            Ok(Decoded::Skipped(SkipReason::SnapshotRead))
        );
        let start = json!({"database": "test", "table": "products", "type": "bootstrap-start",
                           "ts": 1450557744, "data": {}});
        assert!(matches!(
            decode(CdcOptions::default(), start.to_string().as_bytes()),
            Ok(Decoded::Skipped(SkipReason::Other(_)))
        ));
        let alter = json!({"type": "table-alter", "database": "test", "table": "products",
                           "sql": "alter table products add column x int"});
        assert!(matches!(
            decode(CdcOptions::default(), alter.to_string().as_bytes()),
            Ok(Decoded::Skipped(SkipReason::Ddl(_)))
        ));
        for (payload, needle) in [
            (json!({"type": "insert"}), "`data`"),
            (json!({"type": "insert", "data": [1]}), "expected an object"),
            (json!({"type": "upsert", "data": {}}), "unknown type"),
            (json!({"data": {}}), "`type`"),
            (
                json!({"type": "update", "data": {"id": 1}, "old": 5}),
                "`old`",
            ),
        ] {
            let err = decode(CdcOptions::default(), payload.to_string().as_bytes()).unwrap_err();
            assert!(err.to_string().contains(needle), "{payload}: {err}");
        }
    }

    #[test]
    fn ts_seconds_become_millis() {
        let dec = metadata_decoder(
            Format::MaxwellJson,
            &[("at", DataType::Timestamp(3), Metadata::SourceTimestamp)],
            CdcOptions::default(),
        );
        let msg = json!({"type": "insert", "ts": 1477053217, "data": {"id": 1}});
        let Ok(Decoded::Changes(got)) = dec.decode(&record(msg.to_string().as_bytes())) else {
            panic!("changes expected")
        };
        assert_eq!(
            got[0].row[1],
            Datum::Timestamp(crate::table::datum::Timestamp {
                millis: 1_477_053_217_000,
                nanos_of_milli: 0
            })
        );
    }
}
