//! The top-level fields of a JSON object, found by one validating pass over its text.
//!
//! Why: an enrich pipeline reads a JSON fact only to find a field or two and to splice
//! the joined columns in before its closing brace (`codec::fact`). Finding the fields
//! through `serde_json`'s `RawValue` (a visitor per entry, each value ignored through the
//! generic deserializer) was a tenth of a `full` join's CPU. This scanner validates the
//! same grammar in one loop and records where each top-level key and value lie.
//!
//! It is a fast path, not a second parser: it answers only when the text is valid JSON
//! (RFC 8259) of the usual shape, and `None` otherwise. `None` covers invalid text, a key
//! with an escape (it cannot be borrowed as written), and nesting deeper than
//! [`MAX_DEPTH`]; the caller then parses with `serde_json`, which gives the error or
//! handles the rare shape. Where it answers, it answers as `serde_json` does: the
//! property tests check that every text it accepts `serde_json` accepts too, with the
//! same fields, and that it accepts every object `serde_json` writes.

use serde_json::value::RawValue;

/// Deepest nesting the fast path follows (the object itself is level 1): it bounds the
/// scanner's own recursion. Deeper text goes to `serde_json`, whose skipping of raw
/// values keeps its own stack and takes any depth.
const MAX_DEPTH: u32 = 32;

/// The top-level `(key, value)` pairs of the JSON object `text`, in order, repeated keys
/// included; each value is its JSON text without surrounding whitespace. `None`: `text`
/// is not a JSON object this fast path takes (see the module doc).
pub(crate) fn object_fields(text: &str) -> Option<Vec<(&str, &str)>> {
    let mut scan = Scanner {
        bytes: text.as_bytes(),
        at: 0,
    };
    scan.whitespace();
    scan.expect(b'{')?;
    // A fact has a handful of fields; a guess saves the first few reallocations.
    let mut fields = Vec::with_capacity(16);
    scan.whitespace();
    if scan.peek() == Some(b'}') {
        scan.at += 1;
    } else {
        loop {
            let key_start = scan.at + 1;
            scan.expect_peek(b'"')?;
            if scan.string()? {
                // An escaped key would have to be unescaped to be compared.
                return None;
            }
            let key = text.get(key_start..scan.at - 1)?;
            scan.whitespace();
            scan.expect(b':')?;
            scan.whitespace();
            let value_start = scan.at;
            scan.value(2)?;
            fields.push((key, text.get(value_start..scan.at)?));
            scan.whitespace();
            match scan.next()? {
                b',' => scan.whitespace(),
                b'}' => break,
                _ => return None,
            }
        }
    }
    scan.whitespace();
    (scan.at == scan.bytes.len()).then_some(fields)
}

/// [`object_fields`] by `serde_json`, for what the scanner leaves to it: the same list,
/// keys borrowed (`None` for a key with an escape, which cannot be), values as their raw
/// JSON text. `None` too when `text` is not a JSON object.
pub(crate) fn serde_fields(text: &str) -> Option<Vec<(&str, &str)>> {
    serde_json::from_str::<SerdeFields<'_>>(text)
        .ok()
        .map(|f| f.0)
}

struct SerdeFields<'a>(Vec<(&'a str, &'a str)>);

impl<'de> serde::Deserialize<'de> for SerdeFields<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = SerdeFields<'de>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<M: serde::de::MapAccess<'de>>(
                self,
                mut map: M,
            ) -> Result<Self::Value, M::Error> {
                let mut fields = Vec::with_capacity(map.size_hint().unwrap_or(16).min(64));
                while let Some((key, value)) = map.next_entry::<&'de str, &'de RawValue>()? {
                    fields.push((key, value.get()));
                }
                Ok(SerdeFields(fields))
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

/// How many bytes at the start of `bytes` a JSON string takes as they are: up to the
/// first quote, backslash or control character (`bytes.len()` when there is none). Eight
/// bytes a step, as one word, with the classic tests for a zero byte and for a byte below
/// a bound: a test can also flag bytes above the first true match (its borrow carries
/// upwards), never below it, so the lowest flag is exact.
pub(crate) fn plain_run(bytes: &[u8]) -> usize {
    plain_run_where(bytes, false)
}

/// [`plain_run`] that also stops at the first byte that is not ASCII: a run that is both
/// UTF-8 and a JSON string's text as it is, found in the same pass.
pub(crate) fn plain_ascii_run(bytes: &[u8]) -> usize {
    plain_run_where(bytes, true)
}

#[inline(always)]
fn plain_run_where(bytes: &[u8], stop_at_non_ascii: bool) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_byte = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for word in &mut words {
        let mut lanes = [0u8; 8];
        lanes.copy_from_slice(word);
        let w = u64::from_le_bytes(lanes);
        // A byte's own high bit is exact: no borrow crosses into it.
        let non_ascii = if stop_at_non_ascii { w & HIGH } else { 0 };
        let special = (w.wrapping_sub(ONES * 0x20) & !w & HIGH)
            | zero_byte(w ^ (ONES * u64::from(b'"')))
            | zero_byte(w ^ (ONES * u64::from(b'\\')))
            | non_ascii;
        if special != 0 {
            return at + (special.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    let rest = words.remainder();
    at + rest
        .iter()
        .position(|&b| b < 0x20 || b == b'"' || b == b'\\' || (stop_at_non_ascii && !b.is_ascii()))
        .unwrap_or(rest.len())
}

struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.at += 1;
        Some(b)
    }

    fn expect(&mut self, wanted: u8) -> Option<()> {
        (self.next()? == wanted).then_some(())
    }

    /// Checks the next byte without taking it.
    fn expect_peek(&self, wanted: u8) -> Option<()> {
        (self.peek()? == wanted).then_some(())
    }

    /// JSON's four whitespace bytes.
    fn whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    /// A value, at nesting level `depth`.
    fn value(&mut self, depth: u32) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(|_| ()),
            b'{' | b'[' if depth > MAX_DEPTH => None,
            b'{' => self.container(depth, true, b'}'),
            b'[' => self.container(depth, false, b']'),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    /// An object (`keyed`, ending in `}`) or an array (ending in `]`) at nesting level
    /// `depth`, from its opening bracket.
    fn container(&mut self, depth: u32, keyed: bool, close: u8) -> Option<()> {
        self.at += 1;
        self.whitespace();
        if self.peek()? == close {
            self.at += 1;
            return Some(());
        }
        loop {
            if keyed {
                self.expect_peek(b'"')?;
                self.string()?;
                self.whitespace();
                self.expect(b':')?;
                self.whitespace();
            }
            self.value(depth + 1)?;
            self.whitespace();
            match self.next()? {
                b',' => self.whitespace(),
                b if b == close => return Some(()),
                _ => return None,
            }
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.at.checked_add(word.len())?;
        (self.bytes.get(self.at..end)? == word).then(|| self.at = end)
    }

    /// A string, from its opening quote to past its closing one. `Some(true)`: it has
    /// an escape. The text is valid UTF-8 already, so only ASCII needs checking: no
    /// control character, and only JSON's escapes (`\u` with any four hex digits, as
    /// `serde_json` takes them when it does not decode the string).
    fn string(&mut self) -> Option<bool> {
        self.at += 1;
        let mut escaped = false;
        loop {
            self.at += plain_run(self.bytes.get(self.at..)?);
            match self.next()? {
                b'"' => return Some(escaped),
                b'\\' => {
                    escaped = true;
                    match self.next()? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        b'u' => {
                            for _ in 0..4 {
                                if !self.next()?.is_ascii_hexdigit() {
                                    return None;
                                }
                            }
                        }
                        _ => return None,
                    }
                }
                // A control character.
                _ => return None,
            }
        }
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    fn number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        match self.next()? {
            b'0' => {}
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            self.some_digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.at += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            self.some_digits()?;
        }
        Some(())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
    }

    /// One digit or more.
    fn some_digits(&mut self) -> Option<()> {
        let start = self.at;
        self.digits();
        (self.at > start).then_some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    /// What `serde_json` makes of `text` (the fallback itself, so "agrees" means the
    /// fast path answers as the fallback would).
    fn by_serde(text: &str) -> Option<Vec<(String, String)>> {
        serde_fields(text).map(|fields| {
            fields
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect()
        })
    }

    fn ours(text: &str) -> Option<Vec<(String, String)>> {
        object_fields(text).map(|fields| {
            fields
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect()
        })
    }

    /// Where the scanner answers, `serde_json` answers the same.
    fn agrees(text: &str) {
        if let Some(fields) = ours(text) {
            assert_eq!(Some(fields), by_serde(text), "{text:?}");
        }
    }

    #[test]
    fn fields_and_values_as_written() {
        let text = " {\"a\" : 1 ,\"b\":\"x\\ny\", \"c\":[1, {\"d\":null}] ,\"a\":-2.5e+3}\n";
        assert_eq!(
            object_fields(text),
            Some(vec![
                ("a", "1"),
                ("b", "\"x\\ny\""),
                ("c", "[1, {\"d\":null}]"),
                ("a", "-2.5e+3")
            ])
        );
        let spellings =
            "{\t\"e\"\r\n:\t1E-2,\"u\":\"\\uABcd\\/\\b\\f\\r\\t\\\\\",\"z\":-0,\"x\":0.5e7}\r\n";
        assert_eq!(
            object_fields(spellings),
            Some(vec![
                ("e", "1E-2"),
                ("u", "\"\\uABcd\\/\\b\\f\\r\\t\\\\\""),
                ("z", "-0"),
                ("x", "0.5e7")
            ])
        );
        agrees(spellings);
        assert_eq!(object_fields("{}"), Some(vec![]));
        assert_eq!(object_fields("{ }"), Some(vec![]));
        agrees(text);
    }

    #[test]
    fn refuses_what_is_not_json() {
        for text in [
            "",
            "[]",
            "1",
            "{",
            "{\"a\"}",
            "{\"a\":}",
            "{\"a\":1,}",
            "{,}",
            "{\"a\":1 \"b\":2}",
            "{\"a\":1:\"b\":2}",
            "{\"a\" 1}",
            "{\"a\":1,\"b\"}",
            "{\"a\":[1:2]}",
            "{\"a\":[1,,2]}",
            "{\"a\":{\"b\":1:\"c\":2}}",
            "{\"a\":{\"b\",1}}",
            "{\"a\":{1:2}}",
            "{\"a\":1}x",
            "{\"a\":1}{}",
            "{'a':1}",
            "{a:1}",
            "{\"a\":01}",
            "{\"a\":-}",
            "{\"a\":1.}",
            "{\"a\":.5}",
            "{\"a\":1e}",
            "{\"a\":1e+}",
            "{\"a\":+1}",
            "{\"a\":tru}",
            "{\"a\":True}",
            "{\"a\":nul}",
            "{\"a\":\"tab\there\"}",
            "{\"a\":\"\\x\"}",
            "{\"a\":\"\\u12\"}",
            "{\"a\":\"\\u12g4\"}",
            "{\"a\":\"open}",
            "{\"a\":[1,]}",
            "{\"a\":[1 2]}",
            "{\"a\":{\"b\"}}",
            "{\"a\":{\"b\":1,}}",
            "\u{feff}{}",
            "{\"a\":1}\u{a0}",
        ] {
            assert_eq!(object_fields(text), None, "{text:?}");
            assert_eq!(by_serde(text), None, "serde_json takes {text:?}");
        }
    }

    #[test]
    fn leaves_escaped_keys_and_deep_nesting_to_serde_json() {
        assert_eq!(object_fields("{\"a\\u0062\":1}"), None);
        assert!(serde_json::from_str::<Value>("{\"a\\u0062\":1}").is_ok());
        let deep =
            |levels: usize| format!("{{\"a\":{}1{}}}", "[".repeat(levels), "]".repeat(levels));
        assert!(object_fields(&deep(MAX_DEPTH as usize - 1)).is_some());
        assert_eq!(object_fields(&deep(MAX_DEPTH as usize)), None);
        assert!(by_serde(&deep(MAX_DEPTH as usize)).is_some());
        // Objects count as arrays do.
        let objects =
            |levels: usize| format!("{}1{}", "{\"a\":".repeat(levels), "}".repeat(levels));
        assert!(object_fields(&objects(MAX_DEPTH as usize)).is_some());
        assert_eq!(object_fields(&objects(MAX_DEPTH as usize + 1)), None);
        assert!(by_serde(&objects(MAX_DEPTH as usize + 1)).is_some());
    }

    #[test]
    fn takes_any_hex_escape_as_serde_json_does() {
        // A lone surrogate: not a character, but serde_json's raw values take it.
        let text = "{\"a\":\"\\ud800\",\"b\":\"\\u00E9\\/\"}";
        assert!(object_fields(text).is_some());
        agrees(text);
    }

    #[test]
    fn plain_run_stops_at_the_first_special_byte_of_a_word() {
        // A borrow from a control byte can flag the lanes above it; the lowest one counts.
        assert_eq!(plain_run(b"abc\x1f \"\\x"), 3);
        assert_eq!(plain_run(b"abcdefg\x00\x01\""), 7);
        assert_eq!(plain_run(b"abcdefgh\\"), 8);
        assert_eq!(plain_run(b"plain text, no stop"), 19);
        assert_eq!(plain_run(b""), 0);
        assert_eq!(plain_run("caf\u{e9} au lait".as_bytes()), 13);
        assert_eq!(plain_ascii_run("caf\u{e9} au lait".as_bytes()), 3);
        assert_eq!(plain_ascii_run(b"plain ascii, no stop"), 20);
    }

    proptest! {
        /// The word-at-a-time scan finds what a byte-at-a-time one finds.
        #[test]
        fn plain_run_is_the_first_special_byte(bytes in prop::collection::vec(
            prop_oneof![4 => 0x20_u8..=0xff, 1 => prop::sample::select(b"\"\\\x00\x1f\x7f".to_vec())],
            0..40,
        )) {
            let want = bytes
                .iter()
                .position(|&b| b < 0x20 || b == b'"' || b == b'\\')
                .unwrap_or(bytes.len());
            prop_assert_eq!(plain_run(&bytes), want);
            let want_ascii = bytes
                .iter()
                .position(|&b| b < 0x20 || b == b'"' || b == b'\\' || !b.is_ascii())
                .unwrap_or(bytes.len());
            prop_assert_eq!(plain_ascii_run(&bytes), want_ascii);
        }
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((any::<String>(), inner), 0..6)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    /// A JSON object with unescaped keys, written compactly or with whitespace.
    fn object_text() -> impl Strategy<Value = String> {
        (
            prop::collection::vec(("[a-z_][a-z0-9_]{0,8}", json_value()), 0..8),
            any::<bool>(),
        )
            .prop_map(|(entries, pretty)| {
                let object: serde_json::Map<String, Value> = entries.into_iter().collect();
                if pretty {
                    serde_json::to_string_pretty(&object).unwrap()
                } else {
                    serde_json::to_string(&object).unwrap()
                }
            })
    }

    proptest! {
        /// Every object `serde_json` writes (keys without escapes) is taken, with the
        /// fields `serde_json` finds.
        #[test]
        fn takes_what_serde_json_writes(text in object_text()) {
            let fields = ours(&text);
            prop_assert!(fields.is_some(), "{:?}", text);
            prop_assert_eq!(fields, by_serde(&text));
        }

        /// A valid object with one byte changed, cut short or given a tail: whatever
        /// the scanner takes, `serde_json` takes the same way.
        #[test]
        fn never_takes_what_serde_json_refuses(
            text in object_text(),
            at in any::<prop::sample::Index>(),
            byte in prop::sample::select(b" \t\n\r\"\\{}[]:,.-+eE01tfnu/x\x01\x7f".to_vec()),
            how in 0..3_u8,
        ) {
            let mut bytes = text.into_bytes();
            let i = at.index(bytes.len().max(1)).min(bytes.len());
            match how {
                0 => if i < bytes.len() { bytes[i] = byte },
                1 => bytes.truncate(i),
                _ => bytes.insert(i, byte),
            }
            if let Ok(text) = String::from_utf8(bytes) {
                agrees(&text);
            }
        }

        /// Arbitrary text: never a panic, and never a field list `serde_json` disagrees
        /// with.
        #[test]
        fn arbitrary_text(text in "\\PC{0,40}|[{}\\[\\]\":,0-9a-z\\\\ -]{0,40}") {
            agrees(&text);
        }
    }
}
