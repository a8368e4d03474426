//! What the codec makes of a type object's attributes: Avro logical types, and the Kafka
//! Connect names that say what a plain Debezium `int`/`long` holds. The compiler
//! (`crate::avro`) asks once per type; the answer is kept on the node, so decoding and
//! encoding never look at attributes again. An invalid logical type leaves the base type.

use serde_json::{Map, Value};

use super::Node;
use crate::avro::Annotation;
use crate::codec::coerce::{Semantic, semantic_of};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TsUnit {
    Millis,
    Micros,
    Nanos,
}

/// The meaning of an annotated node; its encoding is the node it annotates.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Logical {
    /// On an `int`.
    Date,
    /// On an `int`.
    TimeMillis,
    /// On a `long`.
    TimeMicros,
    /// On a `long`; `local-timestamp-*` too (the JSON form has no zone).
    Timestamp(TsUnit),
    /// On `bytes` or a `fixed`.
    Decimal { precision: usize, scale: usize },
    /// On a `string` or a `fixed` of 16.
    Uuid,
    /// On a `fixed` of 12.
    Duration,
    /// A plain `int`/`long` with a Kafka Connect name (`io.debezium.time.MicroTimestamp`):
    /// decoded as the number, its meaning handed to the row builder as a hint.
    Connect(Semantic),
}

impl Logical {
    fn name(&self) -> Option<&'static str> {
        Some(match self {
            Logical::Date => "date",
            Logical::TimeMillis => "time-millis",
            Logical::TimeMicros => "time-micros",
            Logical::Timestamp(TsUnit::Millis) => "timestamp-millis",
            Logical::Timestamp(TsUnit::Micros) => "timestamp-micros",
            Logical::Timestamp(TsUnit::Nanos) => "timestamp-nanos",
            Logical::Decimal { .. } => "decimal",
            Logical::Uuid => "uuid",
            Logical::Duration => "duration",
            Logical::Connect(_) => return None,
        })
    }
}

/// The type a value must have at `node`, for messages: the logical type when it has one.
pub(super) fn type_name(node: &Node) -> &'static str {
    match node {
        Node::Annotated(logical, inner) => logical.name().unwrap_or_else(|| inner.name()),
        other => other.name(),
    }
}

/// The Connect meaning of a plain `int`/`long` (the node or one of its union branches).
pub(super) fn connect_hint(node: &Node) -> Option<Semantic> {
    let of = |n: &Node| match n {
        Node::Annotated(Logical::Connect(s), _) => Some(*s),
        _ => None,
    };
    match node {
        Node::Union(branches) => branches.iter().find_map(of),
        other => of(other),
    }
}

impl Annotation for Logical {
    fn annotate(obj: &Map<String, Value>, node: &Node) -> Option<Self> {
        let logical = obj.get("logicalType").and_then(Value::as_str);
        let meaning = match (logical, node) {
            (Some("date"), Node::Int) => Some(Logical::Date),
            (Some("time-millis"), Node::Int) => Some(Logical::TimeMillis),
            (Some("time-micros"), Node::Long) => Some(Logical::TimeMicros),
            (Some("timestamp-millis" | "local-timestamp-millis"), Node::Long) => {
                Some(Logical::Timestamp(TsUnit::Millis))
            }
            (Some("timestamp-micros" | "local-timestamp-micros"), Node::Long) => {
                Some(Logical::Timestamp(TsUnit::Micros))
            }
            (Some("timestamp-nanos" | "local-timestamp-nanos"), Node::Long) => {
                Some(Logical::Timestamp(TsUnit::Nanos))
            }
            (Some("decimal"), Node::Bytes | Node::Fixed(_)) => decimal(obj),
            (Some("uuid"), Node::String | Node::Fixed(16)) => Some(Logical::Uuid),
            (Some("duration"), Node::Fixed(12)) => Some(Logical::Duration),
            (None, Node::Bytes)
                if obj.get("connect.name").and_then(Value::as_str)
                    == Some("org.apache.kafka.connect.data.Decimal") =>
            {
                connect_decimal(obj)
            }
            _ => None,
        };
        meaning.or_else(|| match node {
            Node::Int | Node::Long => connect_semantic(obj).map(Logical::Connect),
            _ => None,
        })
    }
}

fn decimal(obj: &Map<String, Value>) -> Option<Logical> {
    let precision = usize::try_from(obj.get("precision")?.as_u64()?).ok()?;
    let scale = match obj.get("scale") {
        None => 0,
        Some(s) => usize::try_from(s.as_u64()?).ok()?,
    };
    (precision >= 1 && scale <= precision).then_some(Logical::Decimal { precision, scale })
}

/// A Connect `Decimal` written as plain bytes with `connect.parameters.scale`.
fn connect_decimal(obj: &Map<String, Value>) -> Option<Logical> {
    let params = obj.get("connect.parameters")?;
    let scale = params
        .get("scale")?
        .as_str()?
        .trim()
        .parse::<usize>()
        .ok()?;
    let precision = params
        .get("connect.decimal.precision")
        .and_then(Value::as_str)
        .and_then(|p| p.trim().parse::<usize>().ok())
        .unwrap_or(38)
        .max(scale);
    Some(Logical::Decimal { precision, scale })
}

/// The Connect semantic a type object's `connect.name` gives.
fn connect_semantic(obj: &Map<String, Value>) -> Option<Semantic> {
    let name = obj.get("connect.name")?.as_str()?;
    let scale = obj
        .get("connect.parameters")
        .and_then(|p| p.get("scale"))
        .and_then(Value::as_str);
    semantic_of(name, scale)
}
