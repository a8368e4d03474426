//! Tests of the schema compiler: name resolution, annotations, and the schemas it must
//! refuse (recursive, too deep, exponentially large, malformed).

use serde_json::json;

use super::*;

fn plain(text: &[u8]) -> Result<Node> {
    parse(text)
}

#[test]
fn schema_names_resolve_with_namespaces() {
    let schema = br#"["null", {"type": "record", "name": "r", "namespace": "a.b", "fields": [
        {"name": "x", "type": {"type": "record", "name": "inner", "fields": [
            {"name": "v", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}},
        {"name": "y", "type": "inner"},
        {"name": "z", "type": "a.b.inner"},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
        {"name": "f", "type": {"type": "fixed", "name": "F", "size": 3}},
        {"name": "m", "type": {"type": "map", "values": ["null", "string"]}}
    ]}]"#;
    let node = plain(schema).unwrap();
    let record = node.as_record().unwrap();
    assert_eq!(record.name, "a.b.r");
    assert_eq!(record.field_index("z"), Some(2));
    assert_eq!(record.fields[1].node, record.fields[0].node);
    assert_eq!(record.fields[2].node, record.fields[0].node);
    assert_eq!(
        record.fields[3].node,
        Node::Enum(vec!["A".into(), "B".into()])
    );
    assert_eq!(record.fields[4].node, Node::Fixed(3));
    // One nullable-string value of at least one byte, plus its key.
    assert_eq!(record.fields[5].node.min_size(), 1);
    // inner (1 long) twice more, enum 1, fixed 3, map 1.
    assert_eq!(record.min_size, 3 + 1 + 3 + 1);
}

/// Marks every `long` whose type object says `"logicalType": "x"`.
#[derive(Debug, Clone, PartialEq)]
struct X;

impl Annotation for X {
    fn annotate(attributes: &Map<String, Value>, node: &Node<X>) -> Option<X> {
        (matches!(node, Node::Long) && attributes.get("logicalType") == Some(&json!("x")))
            .then_some(X)
    }
}

#[test]
fn annotations_are_the_layers_and_references_keep_them() {
    let schema = json!({"type": "record", "name": "r", "fields": [
        {"name": "a", "type": {"type": "long", "logicalType": "x"}},
        {"name": "b", "type": {"type": "int", "logicalType": "x"}},
        {"name": "c", "type": {"type": "fixed", "name": "F", "size": 2, "logicalType": "x"}},
        {"name": "d", "type": {"type": "F", "logicalType": "x"}},
        {"name": "e", "type": ["null", {"type": "long", "logicalType": "x"}]}
    ]});
    let node: Node<X> = compile(&schema).unwrap();
    let r = node.as_record().unwrap();
    assert_eq!(r.fields[0].node, Node::Annotated(X, Box::new(Node::Long)));
    assert_eq!(r.fields[0].node.name(), "long");
    assert_eq!(r.fields[1].node, Node::Int);
    assert_eq!(r.fields[2].node, Node::Fixed(2));
    assert_eq!(r.fields[3].node, Node::Fixed(2));
    assert!(r.fields[4].node.accepts_null());
    // The layer that reads encodings only sees none of it.
    let node: Node = compile(&schema).unwrap();
    assert_eq!(node.as_record().unwrap().fields[0].node, Node::Long);
    // Defaults are kept for writers.
    let d = compile::<()>(&json!({"type": "record", "name": "d", "fields": [
        {"name": "a", "type": "string", "default": "x"}]}))
    .unwrap();
    assert_eq!(d.as_record().unwrap().fields[0].default, Some(json!("x")));
}

#[test]
fn bad_schemas_are_errors() {
    for (bad, needle) in [
        (
            &br#"{"type": "record", "name": "r", "fields": [{"name": "a", "type": "r"}]}"#[..],
            "recursive",
        ),
        (
            br#"{"type": "record", "name": "r", "fields": [{"name": "a", "type": "nope"}]}"#,
            "field `r.a`: unknown type `nope`",
        ),
        (br#"{"type": "record", "name": "r"}"#, "needs `fields`"),
        (br#"[["null"], "int"]"#, "union"),
        (br#"{"type": "fixed", "name": "f", "size": -1}"#, "size"),
        (br#"{"type": "enum", "name": "E"}"#, "symbols"),
        (
            br#"{"type": "record", "name": "R", "fields": [
                {"name": "x", "type": "int"}, {"name": "x", "type": "int"}]}"#,
            "twice",
        ),
        (
            br#"[{"type": "fixed", "name": "f", "size": 1}, {"type": "fixed", "name": "f", "size": 2}]"#,
            "defined twice",
        ),
        (br#"42"#, "expected a type, got 42"),
        (b"not json", "not valid JSON"),
    ] {
        let err = plain(bad).unwrap_err().to_string();
        assert!(err.contains(needle), "{}: {err}", String::from_utf8_lossy(bad));
    }
    let deep = format!(
        "{}\"int\"{}",
        r#"{"type": "array", "items": "#.repeat(100),
        "}".repeat(100)
    );
    let err = plain(deep.as_bytes()).unwrap_err().to_string();
    assert!(err.contains("deeper"), "{err}");

    // Each record references the previous one twice: 2^40 nodes if copied naively.
    let mut types = vec![r#"{"type": "record", "name": "r0", "fields": []}"#.to_string()];
    for i in 1..40 {
        types.push(format!(
            r#"{{"type": "record", "name": "r{i}", "fields": [
                {{"name": "a", "type": "r{p}"}}, {{"name": "b", "type": "r{p}"}}]}}"#,
            p = i - 1
        ));
    }
    let fields: Vec<String> = types
        .iter()
        .enumerate()
        .map(|(i, t)| format!(r#"{{"name": "f{i}", "type": {t}}}"#))
        .collect();
    let bomb = format!(
        r#"{{"type": "record", "name": "top", "fields": [{}]}}"#,
        fields.join(",")
    );
    let err = plain(bomb.as_bytes()).unwrap_err().to_string();
    assert!(err.contains("too large"), "{err}");
    assert!(err.contains("schema nodes"), "{err}");
}

/// References copy named types, so a chain of them nests deeper than its JSON: the
/// compiled depth is what decoding recurses along, and it is bounded too.
#[test]
fn references_cannot_nest_deeper_than_the_limit() {
    let arrays = |levels: usize, item: Value| {
        (0..levels).fold(item, |inner, _| json!({"type": "array", "items": inner}))
    };
    // `A` nests 42 levels, and is referred to 25 levels down: 67 once copied.
    let schema = json!({"type": "record", "name": "top", "fields": [
        {"name": "a", "type": {"type": "record", "name": "A", "fields": [
            {"name": "x", "type": arrays(40, json!("long"))}]}},
        {"name": "b", "type": {"type": "record", "name": "B", "fields": [
            {"name": "y", "type": arrays(23, json!("A"))}]}}
    ]});
    let err = compile::<()>(&schema).unwrap_err().to_string();
    assert!(err.contains("deeper than 64"), "{err}");
    // The same reference 20 levels down fits.
    let schema = json!({"type": "record", "name": "top", "fields": [
        {"name": "a", "type": {"type": "record", "name": "A", "fields": [
            {"name": "x", "type": arrays(40, json!("long"))}]}},
        {"name": "b", "type": arrays(20, json!("A"))}
    ]});
    compile::<()>(&schema).unwrap();
}
