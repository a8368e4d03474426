//! Compiling an Avro schema's JSON into a [`Node`] tree: names and namespaces, logical
//! types, Kafka Connect attributes; recursive, too deep or too large schemas are refused.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::{Field, MAX_DEPTH, MAX_NODES, Node, TsUnit};
use crate::codec::error::snippet;
use crate::codec::row::{Semantic, semantic_of};

#[derive(Default)]
pub(super) struct Compiler {
    named: HashMap<String, Node>,
    in_progress: HashSet<String>,
    nodes: usize,
}

impl Compiler {
    fn count(&mut self, n: usize) -> std::result::Result<(), String> {
        self.nodes += n;
        if self.nodes > MAX_NODES {
            return Err(format!("more than {MAX_NODES} schema nodes"));
        }
        Ok(())
    }

    pub(super) fn compile(
        &mut self,
        json: &Value,
        ns: &str,
        depth: usize,
    ) -> std::result::Result<Node, String> {
        if depth > MAX_DEPTH {
            return Err(format!("nests deeper than {MAX_DEPTH} levels"));
        }
        self.count(1)?;
        match json {
            Value::String(name) => self.named_or_primitive(name, ns),
            Value::Array(branches) => {
                let mut nodes = Vec::with_capacity(branches.len());
                for b in branches {
                    let node = self.compile(b, ns, depth + 1)?;
                    if matches!(node, Node::Union(_)) {
                        return Err("a union may not directly contain a union".into());
                    }
                    nodes.push(node);
                }
                Ok(Node::Union(nodes))
            }
            Value::Object(obj) => self.complex(obj, ns, depth),
            other => Err(format!("expected a type, got {}", snippet(other))),
        }
    }

    fn named_or_primitive(&mut self, name: &str, ns: &str) -> std::result::Result<Node, String> {
        Ok(match name {
            "null" => Node::Null,
            "boolean" => Node::Boolean,
            "int" => Node::Int,
            "long" => Node::Long,
            "float" => Node::Float,
            "double" => Node::Double,
            "bytes" => Node::Bytes,
            "string" => Node::String,
            _ => {
                let candidates = if name.contains('.') || ns.is_empty() {
                    vec![name.to_string()]
                } else {
                    vec![format!("{ns}.{name}"), name.to_string()]
                };
                for full in &candidates {
                    if self.in_progress.contains(full) {
                        return Err(format!(
                            "type `{full}` refers to itself; recursive schemas are not supported"
                        ));
                    }
                    if let Some(node) = self.named.get(full) {
                        let node = node.clone();
                        self.count(count_nodes(&node))?;
                        return Ok(node);
                    }
                }
                return Err(format!("unknown type `{name}`"));
            }
        })
    }

    fn complex(
        &mut self,
        obj: &Map<String, Value>,
        ns: &str,
        depth: usize,
    ) -> std::result::Result<Node, String> {
        let ty = obj
            .get("type")
            .ok_or_else(|| "a type object without `type`".to_string())?;
        let logical = obj.get("logicalType").and_then(Value::as_str);
        let ty_name = match ty {
            Value::String(s) => s.as_str(),
            // {"type": {...}} or {"type": [...]}: a wrapped type.
            other => return self.compile(other, ns, depth + 1),
        };
        let base = match ty_name {
            "record" | "error" => return self.record(obj, ns, depth),
            "enum" => {
                let (full, _) = full_name(obj, ns)?;
                let symbols = obj
                    .get("symbols")
                    .and_then(Value::as_array)
                    .ok_or_else(|| format!("enum `{full}` needs `symbols`"))?
                    .iter()
                    .map(|s| {
                        s.as_str()
                            .map(str::to_string)
                            .ok_or_else(|| format!("enum `{full}` has a non-string symbol"))
                    })
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                let node = Node::Enum(symbols);
                self.define(full, &node)?;
                return Ok(node);
            }
            "fixed" => {
                let (full, _) = full_name(obj, ns)?;
                let size = obj
                    .get("size")
                    .and_then(Value::as_u64)
                    .and_then(|s| usize::try_from(s).ok())
                    .ok_or_else(|| format!("fixed `{full}` needs a non-negative `size`"))?;
                let node = match logical {
                    Some("decimal") => decimal(obj, Some(size)).unwrap_or(Node::Fixed(size)),
                    Some("uuid") if size == 16 => Node::Uuid { fixed: true },
                    Some("duration") if size == 12 => Node::Duration,
                    _ => Node::Fixed(size),
                };
                self.define(full, &node)?;
                return Ok(node);
            }
            "array" => {
                let items = obj
                    .get("items")
                    .ok_or_else(|| "array needs `items`".to_string())?;
                return Ok(Node::Array(Box::new(self.compile(items, ns, depth + 1)?)));
            }
            "map" => {
                let values = obj
                    .get("values")
                    .ok_or_else(|| "map needs `values`".to_string())?;
                return Ok(Node::Map(Box::new(self.compile(values, ns, depth + 1)?)));
            }
            other => self.named_or_primitive(other, ns)?,
        };
        // Logical types on primitives; an invalid one falls back to the base type.
        Ok(match (logical, &base) {
            (Some("date"), Node::Int) => Node::Date,
            (Some("time-millis"), Node::Int) => Node::TimeMillis,
            (Some("time-micros"), Node::Long) => Node::TimeMicros,
            (Some("timestamp-millis" | "local-timestamp-millis"), Node::Long) => {
                Node::Timestamp(TsUnit::Millis)
            }
            (Some("timestamp-micros" | "local-timestamp-micros"), Node::Long) => {
                Node::Timestamp(TsUnit::Micros)
            }
            (Some("timestamp-nanos" | "local-timestamp-nanos"), Node::Long) => {
                Node::Timestamp(TsUnit::Nanos)
            }
            (Some("decimal"), Node::Bytes) => decimal(obj, None).unwrap_or(base),
            (Some("uuid"), Node::String) => Node::Uuid { fixed: false },
            (None, Node::Bytes)
                if obj.get("connect.name").and_then(Value::as_str)
                    == Some("org.apache.kafka.connect.data.Decimal") =>
            {
                connect_decimal(obj).unwrap_or(base)
            }
            _ => base,
        })
    }

    fn record(
        &mut self,
        obj: &Map<String, Value>,
        ns: &str,
        depth: usize,
    ) -> std::result::Result<Node, String> {
        let (full, own_ns) = full_name(obj, ns)?;
        let fields_json = obj
            .get("fields")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("record `{full}` needs `fields`"))?;
        self.in_progress.insert(full.clone());
        let mut fields = Vec::with_capacity(fields_json.len());
        let mut seen = HashSet::new();
        for f in fields_json {
            let name = f
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("a field of record `{full}` has no name"))?;
            if !seen.insert(name) {
                return Err(format!("record `{full}` has field `{name}` twice"));
            }
            let ty = f
                .get("type")
                .ok_or_else(|| format!("field `{full}.{name}` has no type"))?;
            let node = self
                .compile(ty, &own_ns, depth + 1)
                .map_err(|e| format!("field `{full}.{name}`: {e}"))?;
            let semantic = connect_semantic(ty).filter(|_| {
                matches!(&node, Node::Int | Node::Long)
                    || matches!(&node, Node::Union(v) if v.iter().any(|n| matches!(n, Node::Int | Node::Long)))
            });
            fields.push(Field {
                name: name.to_string(),
                node,
                default: f.get("default").cloned(),
                semantic,
            });
        }
        self.in_progress.remove(&full);
        let node = Node::Record(fields);
        self.define(full, &node)?;
        Ok(node)
    }

    fn define(&mut self, full: String, node: &Node) -> std::result::Result<(), String> {
        if self.named.contains_key(&full) {
            return Err(format!("type `{full}` is defined twice"));
        }
        self.named.insert(full, node.clone());
        Ok(())
    }
}

fn count_nodes(node: &Node) -> usize {
    1 + match node {
        Node::Array(n) | Node::Map(n) => count_nodes(n),
        Node::Union(v) => v.iter().map(count_nodes).sum(),
        Node::Record(f) => f.iter().map(|f| count_nodes(&f.node)).sum(),
        _ => 0,
    }
}

/// Full name and namespace of a named type (`name` may be dotted).
fn full_name(
    obj: &Map<String, Value>,
    enclosing: &str,
) -> std::result::Result<(String, String), String> {
    let name = obj
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| "a named type without `name`".to_string())?;
    if let Some((ns, _)) = name.rsplit_once('.') {
        return Ok((name.to_string(), ns.to_string()));
    }
    let ns = match obj.get("namespace").and_then(Value::as_str) {
        Some(ns) => ns.to_string(),
        None => enclosing.to_string(),
    };
    let full = if ns.is_empty() {
        name.to_string()
    } else {
        format!("{ns}.{name}")
    };
    Ok((full, ns))
}

fn decimal(obj: &Map<String, Value>, fixed: Option<usize>) -> Option<Node> {
    let precision = usize::try_from(obj.get("precision")?.as_u64()?).ok()?;
    let scale = match obj.get("scale") {
        None => 0,
        Some(s) => usize::try_from(s.as_u64()?).ok()?,
    };
    (precision >= 1 && scale <= precision).then_some(Node::Decimal {
        precision,
        scale,
        fixed,
    })
}

/// A Connect `Decimal` written as plain bytes with `connect.parameters.scale`.
fn connect_decimal(obj: &Map<String, Value>) -> Option<Node> {
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
    Some(Node::Decimal {
        precision,
        scale,
        fixed: None,
    })
}

/// The Connect semantic of a field type (its own or its non-null branch's `connect.name`).
fn connect_semantic(ty: &Value) -> Option<Semantic> {
    match ty {
        Value::Object(o) => {
            let name = o.get("connect.name")?.as_str()?;
            let scale = o
                .get("connect.parameters")
                .and_then(|p| p.get("scale"))
                .and_then(Value::as_str);
            semantic_of(name, scale)
        }
        Value::Array(branches) => branches.iter().find_map(connect_semantic),
        _ => None,
    }
}
