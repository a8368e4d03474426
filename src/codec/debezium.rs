//! Debezium change events: `debezium-json` (with or without the `schema`/`payload`
//! wrapper of `value.converter.schemas.enable=true`) and the envelope of `debezium-avro`.
//!
//! `op`: `c` insert, `r` snapshot read, `u` update, `d` delete, `t` truncate (skipped),
//! `m` logical-decoding message (skipped). With the schema wrapper, the Connect schema
//! names of the `after` (or `before`) fields fix what ambiguous values mean:
//! `io.debezium.time.MicroTimestamp` numbers are microseconds, Connect `Decimal` strings
//! are base64 unscaled bytes, and so on (see [`super::row::Semantic`]).

use serde_json::{Map, Value};

use super::error::{DecodeError, Part};
use super::json::{parse_object, parse_value, type_name};
use super::row::{Emitter, Hints, MessageMeta, semantic_of};
use super::{Ctx, Decoded, Format, SkipReason};

/// `debezium-json`: parses the payload, unwraps `schema`/`payload`, decodes the envelope.
pub(crate) fn decode_json(ctx: &Ctx<'_, '_>) -> Result<Decoded, DecodeError> {
    let Some(payload) = ctx.record.payload else {
        return Ok(Decoded::Skipped(SkipReason::Tombstone));
    };
    let root = parse_object(payload, Part::Payload)?;
    match unwrap_schema(root)? {
        None => Ok(Decoded::Skipped(SkipReason::Tombstone)),
        Some((envelope, hints)) => decode_envelope(ctx, &envelope, hints.as_ref()),
    }
}

/// Splits a Connect JSON message with schema into its payload and the hints of its row
/// schema; a message without the wrapper is returned as is. `None` for a null payload.
fn unwrap_schema(
    mut root: Map<String, Value>,
) -> Result<Option<(Map<String, Value>, Option<Hints>)>, DecodeError> {
    if !(root.contains_key("schema") && root.contains_key("payload")) {
        return Ok(Some((root, None)));
    }
    let hints = root.get("schema").map(connect_hints);
    match root.remove("payload") {
        Some(Value::Object(payload)) => Ok(Some((payload, hints))),
        Some(Value::Null) | None => Ok(None),
        Some(other) => Err(DecodeError::envelope(
            "payload",
            format!("expected an object, got {}", type_name(&other)),
        )),
    }
}

/// Hints from a Connect schema: the fields of an envelope's `after` struct (or `before`
/// when `after` is not described), or of the struct itself (a key schema).
fn connect_hints(schema: &Value) -> Hints {
    let mut hints = Hints::new();
    let Some(fields) = schema.get("fields").and_then(Value::as_array) else {
        return hints;
    };
    let row_struct = ["after", "before"].into_iter().find_map(|name| {
        fields
            .iter()
            .find(|f| f.get("field").and_then(Value::as_str) == Some(name))
    });
    let row_fields = match row_struct {
        Some(s) => match s.get("fields").and_then(Value::as_array) {
            Some(f) => f,
            None => return hints,
        },
        None => fields,
    };
    for f in row_fields {
        let (Some(field), Some(name)) = (
            f.get("field").and_then(Value::as_str),
            f.get("name").and_then(Value::as_str),
        ) else {
            continue;
        };
        let scale = f
            .get("parameters")
            .and_then(|p| p.get("scale"))
            .and_then(Value::as_str);
        if let Some(semantic) = semantic_of(name, scale) {
            hints.insert(field.to_string(), semantic);
        }
    }
    hints
}

/// Decodes one Debezium envelope (`op`, `before`, `after`, `source`, `ts_ms`).
pub(crate) fn decode_envelope(
    ctx: &Ctx<'_, '_>,
    envelope: &Map<String, Value>,
    hints: Option<&Hints>,
) -> Result<Decoded, DecodeError> {
    let op = match envelope.get("op") {
        Some(Value::String(op)) => op.as_str(),
        None | Some(Value::Null) => {
            return Err(DecodeError::envelope(
                "op",
                "missing; not a Debezium change event",
            ));
        }
        Some(other) => {
            return Err(DecodeError::envelope(
                "op",
                format!("expected a string, got {}", type_name(other)),
            ));
        }
    };
    let source = envelope.get("source").and_then(Value::as_object);
    let source_str = |k: &str| source.and_then(|s| s.get(k)).and_then(Value::as_str);
    let meta = MessageMeta {
        ingestion_ms: envelope.get("ts_ms").and_then(Value::as_i64),
        source_ms: source.and_then(|s| s.get("ts_ms")).and_then(Value::as_i64),
        database: source_str("db"),
        table: source_str("table"),
    };
    let emit = Emitter { ctx, hints, meta };
    let before = row_image(envelope, "before")?;
    let after = row_image(envelope, "after")?;
    let require_after = || {
        after
            .ok_or_else(|| DecodeError::envelope("after", format!("missing or null for op {op:?}")))
    };
    let mut out = Vec::with_capacity(2);
    match op {
        "c" => emit.insert(require_after()?, &mut out)?,
        "r" => {
            if !emit.snapshot(require_after()?, &mut out)? {
                return Ok(Decoded::Skipped(SkipReason::SnapshotRead));
            }
        }
        "u" => emit.update(before, require_after()?, &mut out)?,
        "d" => match before {
            Some(before) => emit.delete(before, &mut out)?,
            None => {
                let (key, key_hints) = key_image(ctx)?;
                let emit = Emitter {
                    ctx,
                    hints: key_hints.as_ref(),
                    meta,
                };
                emit.delete(&key, &mut out)?;
            }
        },
        "t" => return Ok(Decoded::Skipped(SkipReason::Truncate)),
        "m" => {
            return Ok(Decoded::Skipped(SkipReason::Other(
                "logical decoding message (op m)".into(),
            )));
        }
        other => {
            return Err(DecodeError::envelope(
                "op",
                format!("unknown operation {other:?}; expected c, r, u, d, t or m"),
            ));
        }
    }
    Ok(Decoded::Changes(out))
}

/// The `before`/`after` object of an envelope; `None` when missing or null.
fn row_image<'a>(
    envelope: &'a Map<String, Value>,
    name: &str,
) -> Result<Option<&'a Map<String, Value>>, DecodeError> {
    match envelope.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(o)) => Ok(Some(o)),
        Some(other) => Err(DecodeError::envelope(
            name,
            format!("expected an object or null, got {}", type_name(other)),
        )),
    }
}

/// The primary key of a delete without `before`, from the record key (a JSON struct,
/// possibly with its own `schema`/`payload` wrapper). Only `debezium-json` keys are read.
fn key_image(ctx: &Ctx<'_, '_>) -> Result<(Map<String, Value>, Option<Hints>), DecodeError> {
    let missing = || {
        DecodeError::envelope(
            "before",
            "missing or null for op \"d\", and the record key gives no primary key",
        )
    };
    let (Format::DebeziumJson, Some(key)) = (ctx.format, ctx.record.key) else {
        return Err(missing());
    };
    let root = match parse_value(key, Part::Key)? {
        Value::Object(o) => o,
        _ => return Err(missing()),
    };
    unwrap_schema(root)?.ok_or_else(missing)
}
