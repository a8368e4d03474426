//! Compiling an Avro schema's JSON into a [`Node`] tree, once, so that decoding walks
//! positions instead of names. Named types and namespaces resolve as the Avro spec says;
//! recursive, too deep or too large schemas are refused, since decoding recurses along the
//! tree. A type object's attributes (`logicalType`, `connect.name`, ...) are handed to the
//! layer above through [`Annotation`]: the encoding is Avro's, the meaning is the layer's.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::{Error, MAX_DEPTH, MAX_NODES, Result};

/// What a layer makes of the attributes of a type object (a logical type, a Kafka
/// Connect name). The compiler asks once per type object that defines a type; a
/// reference to a named type takes that type as it was defined.
pub(crate) trait Annotation: Clone + std::fmt::Debug {
    /// The meaning of `attributes` (the whole type object) on a type encoded as `node`;
    /// `None` leaves the node plain (how an invalid logical type falls back to its base).
    fn annotate(attributes: &Map<String, Value>, node: &Node<Self>) -> Option<Self>;
}

/// No meaning beyond the encoding: layers that read only the physical values.
impl Annotation for () {
    fn annotate(_: &Map<String, Value>, _: &Node<()>) -> Option<()> {
        None
    }
}

/// A compiled schema node.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node<A = ()> {
    Null,
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Bytes,
    String,
    Fixed(usize),
    Enum(Vec<String>),
    /// `item_min`: the fewest bytes an item takes (bounds counts read from the input).
    Array {
        items: Box<Node<A>>,
        item_min: usize,
    },
    Map {
        values: Box<Node<A>>,
        value_min: usize,
    },
    Union(Vec<Node<A>>),
    Record(Box<Record<A>>),
    /// A type the layer above gives a meaning, encoded as the inner node.
    Annotated(A, Box<Node<A>>),
}

/// A record of a compiled schema.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Record<A = ()> {
    /// Full name (namespace included).
    pub(crate) name: String,
    pub(crate) fields: Vec<Field<A>>,
    /// The fewest bytes a value takes, kept so that it is not recomputed per value.
    min_size: usize,
}

/// A field of a [`Record`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Field<A = ()> {
    pub name: String,
    pub(crate) node: Node<A>,
    /// The schema's `default`, for writers of values that lack the field.
    pub(crate) default: Option<Value>,
}

impl<A> Record<A> {
    /// Position of the field called `name` in this (the writer's) record, if it has one.
    pub(crate) fn field_index(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name)
    }
}

impl<A> Node<A> {
    /// The Avro type's name, for messages.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Node::Null => "null",
            Node::Boolean => "boolean",
            Node::Int => "int",
            Node::Long => "long",
            Node::Float => "float",
            Node::Double => "double",
            Node::Bytes => "bytes",
            Node::String => "string",
            Node::Fixed(_) => "fixed",
            Node::Enum(_) => "enum",
            Node::Array { .. } => "array",
            Node::Map { .. } => "map",
            Node::Union(_) => "union",
            Node::Record(_) => "record",
            Node::Annotated(_, inner) => inner.name(),
        }
    }

    /// The record this node holds: the node itself, or the one record branch of a union
    /// (how nullable records such as `["null", record]` are written).
    pub(crate) fn as_record(&self) -> Option<&Record<A>> {
        match self {
            Node::Record(r) => Some(r),
            Node::Union(branches) => {
                let mut records = branches.iter().filter_map(|b| match b {
                    Node::Record(r) => Some(r.as_ref()),
                    _ => None,
                });
                let first = records.next();
                if records.next().is_some() {
                    None
                } else {
                    first
                }
            }
            _ => None,
        }
    }

    /// Whether `null` is a value of this node (`null` or a union with a `null` branch).
    pub(crate) fn accepts_null(&self) -> bool {
        match self {
            Node::Null => true,
            Node::Union(v) => v.iter().any(|n| matches!(n, Node::Null)),
            _ => false,
        }
    }

    /// The fewest bytes one value of this node takes.
    pub(crate) fn min_size(&self) -> usize {
        match self {
            Node::Null => 0,
            Node::Boolean | Node::Int | Node::Long | Node::Bytes | Node::String => 1,
            Node::Enum(_) | Node::Array { .. } | Node::Map { .. } | Node::Union(_) => 1,
            Node::Float => 4,
            Node::Double => 8,
            Node::Fixed(n) => *n,
            Node::Record(r) => r.min_size,
            Node::Annotated(_, inner) => inner.min_size(),
        }
    }

    /// Whether the tree nests deeper than `levels`; stops looking below that, so it
    /// recurses at most `levels` deep whatever the tree.
    fn deeper_than(&self, levels: usize) -> bool {
        let Some(below) = levels.checked_sub(1) else {
            return true;
        };
        match self {
            Node::Array { items: n, .. } | Node::Map { values: n, .. } => n.deeper_than(below),
            Node::Union(v) => v.iter().any(|n| n.deeper_than(below)),
            Node::Record(r) => r.fields.iter().any(|f| f.node.deeper_than(below)),
            // The annotation is no level of its own.
            Node::Annotated(_, inner) => inner.deeper_than(levels),
            _ => false,
        }
    }
}

/// Compiles a schema given as JSON text.
pub(crate) fn parse<A: Annotation>(text: &[u8]) -> Result<Node<A>> {
    let json: Value =
        serde_json::from_slice(text).map_err(|e| Error::invalid(format!("not valid JSON: {e}")))?;
    compile(&json)
}

/// Compiles a schema's JSON.
pub(crate) fn compile<A: Annotation>(json: &Value) -> Result<Node<A>> {
    let mut compiler = Compiler {
        named: HashMap::new(),
        open: HashSet::new(),
        nodes: 0,
    };
    let node = compiler.compile(json, "", 0)?;
    // References copy named types, so the tree can nest deeper than the JSON does.
    if node.deeper_than(MAX_DEPTH) {
        return Err(too_deep());
    }
    Ok(node)
}

fn too_deep() -> Error {
    Error::invalid(format!("nests deeper than {MAX_DEPTH} levels"))
}

struct Compiler<A> {
    /// Named types (records, enums, fixed) defined so far, by full name, with their size
    /// in nodes.
    named: HashMap<String, (Node<A>, usize)>,
    /// Records whose definition is being compiled; a reference to one is recursion.
    open: HashSet<String>,
    /// Nodes compiled so far, references counted at their full size.
    nodes: usize,
}

impl<A: Annotation> Compiler<A> {
    fn compile(&mut self, json: &Value, ns: &str, depth: usize) -> Result<Node<A>> {
        if depth > MAX_DEPTH {
            return Err(too_deep());
        }
        self.count(1)?;
        match json {
            Value::String(name) => match primitive(name) {
                Some(node) => Ok(node),
                None => self.reference(name, ns),
            },
            Value::Array(branches) => {
                let mut nodes = Vec::with_capacity(branches.len());
                for b in branches {
                    let node = self.compile(b, ns, depth + 1)?;
                    if matches!(node, Node::Union(_)) {
                        return Err(Error::invalid("a union may not directly contain a union"));
                    }
                    nodes.push(node);
                }
                Ok(Node::Union(nodes))
            }
            Value::Object(obj) => self.object(obj, ns, depth),
            other => Err(Error::invalid(format!("expected a type, got {other}"))),
        }
    }

    fn object(&mut self, obj: &Map<String, Value>, ns: &str, depth: usize) -> Result<Node<A>> {
        let ty = obj
            .get("type")
            .ok_or_else(|| Error::invalid("a type object without `type`"))?;
        let Value::String(ty) = ty else {
            // `{"type": {...}}` or `{"type": [...]}` wraps another schema.
            return self.compile(ty, ns, depth + 1);
        };
        let node = match ty.as_str() {
            "record" | "error" => return self.record(obj, ns, depth),
            "enum" => {
                let (full, _) = full_name(obj, ns)?;
                let symbols = obj
                    .get("symbols")
                    .and_then(Value::as_array)
                    .ok_or_else(|| Error::invalid(format!("enum `{full}` needs `symbols`")))?
                    .iter()
                    .map(|s| {
                        s.as_str().map(str::to_string).ok_or_else(|| {
                            Error::invalid(format!("enum `{full}` has a non-string symbol"))
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                return self.define(full, annotated(obj, Node::Enum(symbols)), 1);
            }
            "fixed" => {
                let (full, _) = full_name(obj, ns)?;
                let size = obj
                    .get("size")
                    .and_then(Value::as_u64)
                    .and_then(|s| usize::try_from(s).ok())
                    .ok_or_else(|| {
                        Error::invalid(format!("fixed `{full}` needs a non-negative `size`"))
                    })?;
                return self.define(full, annotated(obj, Node::Fixed(size)), 1);
            }
            "array" => {
                let (items, item_min) = self.item(obj, "array", "items", ns, depth)?;
                Node::Array { items, item_min }
            }
            "map" => {
                let (values, value_min) = self.item(obj, "map", "values", ns, depth)?;
                Node::Map { values, value_min }
            }
            other => match primitive(other) {
                Some(node) => node,
                // A named type is taken as it was defined, attributes here or not.
                None => return self.reference(other, ns),
            },
        };
        Ok(annotated(obj, node))
    }

    fn record(&mut self, obj: &Map<String, Value>, ns: &str, depth: usize) -> Result<Node<A>> {
        let (full, own_ns) = full_name(obj, ns)?;
        let fields_json = obj
            .get("fields")
            .and_then(Value::as_array)
            .ok_or_else(|| Error::invalid(format!("record `{full}` needs `fields`")))?;
        let nodes_before = self.nodes;
        self.open.insert(full.clone());
        let mut fields = Vec::with_capacity(fields_json.len());
        let mut seen = HashSet::new();
        for f in fields_json {
            let name = f
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| Error::invalid(format!("a field of record `{full}` has no name")))?;
            if !seen.insert(name) {
                return Err(Error::invalid(format!(
                    "record `{full}` has field `{name}` twice"
                )));
            }
            let ty = f
                .get("type")
                .ok_or_else(|| Error::invalid(format!("field `{full}.{name}` has no type")))?;
            let node = self
                .compile(ty, &own_ns, depth + 1)
                .map_err(|e| e.within(format!("field `{full}.{name}`")))?;
            fields.push(Field {
                name: name.to_string(),
                node,
                default: f.get("default").cloned(),
            });
        }
        self.open.remove(&full);
        let min_size = fields
            .iter()
            .fold(0usize, |acc, f| acc.saturating_add(f.node.min_size()));
        let record = Record {
            name: full.clone(),
            fields,
            min_size,
        };
        let size = self.nodes - nodes_before + 1;
        self.define(full, annotated(obj, Node::Record(Box::new(record))), size)
    }

    /// The item type of an array or map (under `key`), with its minimum size.
    fn item(
        &mut self,
        obj: &Map<String, Value>,
        what: &str,
        key: &str,
        ns: &str,
        depth: usize,
    ) -> Result<(Box<Node<A>>, usize)> {
        let json = obj
            .get(key)
            .ok_or_else(|| Error::invalid(format!("{what} needs `{key}`")))?;
        let node = self.compile(json, ns, depth + 1)?;
        let min = node.min_size();
        Ok((Box::new(node), min))
    }

    /// A named type referred to by `name`, looked up in `ns` first unless qualified.
    fn reference(&mut self, name: &str, ns: &str) -> Result<Node<A>> {
        let qualified = if name.contains('.') || ns.is_empty() {
            name.to_string()
        } else {
            format!("{ns}.{name}")
        };
        for candidate in [qualified.as_str(), name] {
            if self.open.contains(candidate) {
                return Err(Error::invalid(format!(
                    "type `{candidate}` refers to itself; recursive schemas are not supported"
                )));
            }
            if let Some((node, size)) = self.named.get(candidate) {
                let (node, size) = (node.clone(), *size);
                self.count(size)?;
                return Ok(node);
            }
        }
        Err(Error::invalid(format!("unknown type `{name}`")))
    }

    fn count(&mut self, n: usize) -> Result<()> {
        self.nodes = self.nodes.saturating_add(n);
        if self.nodes > MAX_NODES {
            return Err(Error::invalid(format!(
                "too large: more than {MAX_NODES} schema nodes"
            )));
        }
        Ok(())
    }

    fn define(&mut self, full: String, node: Node<A>, size: usize) -> Result<Node<A>> {
        if self.named.contains_key(&full) {
            return Err(Error::invalid(format!("type `{full}` is defined twice")));
        }
        self.named.insert(full, (node.clone(), size));
        Ok(node)
    }
}

fn primitive<A>(name: &str) -> Option<Node<A>> {
    Some(match name {
        "null" => Node::Null,
        "boolean" => Node::Boolean,
        "int" => Node::Int,
        "long" => Node::Long,
        "float" => Node::Float,
        "double" => Node::Double,
        "bytes" => Node::Bytes,
        "string" => Node::String,
        _ => return None,
    })
}

/// `node`, annotated as the layer above reads the type object `obj`.
fn annotated<A: Annotation>(obj: &Map<String, Value>, node: Node<A>) -> Node<A> {
    match A::annotate(obj, &node) {
        Some(a) => Node::Annotated(a, Box::new(node)),
        None => node,
    }
}

/// The full name of a named type and the namespace its children inherit (`name` may be
/// dotted, which sets both).
fn full_name(obj: &Map<String, Value>, enclosing: &str) -> Result<(String, String)> {
    let name = obj
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::invalid("a named type without `name`"))?;
    if let Some((ns, _)) = name.rsplit_once('.') {
        return Ok((name.to_string(), ns.to_string()));
    }
    let ns = obj
        .get("namespace")
        .and_then(Value::as_str)
        .unwrap_or(enclosing);
    let full = if ns.is_empty() {
        name.to_string()
    } else {
        format!("{ns}.{name}")
    };
    Ok((full, ns.to_string()))
}

#[cfg(test)]
mod tests;
