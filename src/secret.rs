//! Keeping secrets out of logs, `lakejoin validate` output and error messages.
//!
//! Secrets live in three places of a configuration: `[kafka.properties]` (SASL and SSL
//! passwords, JAAS configs, private keys), `[warehouse.options]` (S3 secret keys, session
//! tokens) and credentials embedded in URIs (`s3://key:secret@…`, a schema registry at
//! `https://user:password@…`). Debug output prints option names only, and a URI field
//! that may carry credentials is a [`SecretUri`], whose Debug output masks them; messages
//! that may quote a value (config parse errors, librdkafka errors and log lines, URI
//! errors) go through [`Redactor::redact`] or [`redact_uri`].
//!
//! A leaf module: config, codec, kafka and table all mask secrets, and the lower layers
//! must not import `config` to do it.

use std::fmt;

use serde::Deserialize;
use serde_json::Value;

/// What a masked secret is replaced with.
pub(crate) const MASK: &str = "***";

/// Secrets shorter than this are not searched for in messages: masking every `1` or `ok`
/// would garble the message and protect nothing.
const MIN_SECRET_LEN: usize = 4;

/// Whether a property or option name holds a secret: librdkafka's `sasl.password`,
/// `sasl.jaas.config`, `ssl.key.password`, `ssl.key.pem`, `ssl.keystore.password`,
/// `sasl.oauthbearer.client.secret`, …; object_store's `aws_secret_access_key`,
/// `aws_session_token`, `google_service_account_key`, `azure_storage_access_key`, ….
pub(crate) fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    [
        "password",
        "passwd",
        "secret",
        "sasl.jaas",
        "ssl.key",
        "ssl_key",
        "private",
        "token",
        "credential",
        "access_key",
        "account_key",
        "service_account",
        "bearer",
    ]
    .iter()
    .any(|needle| key.contains(needle))
}

/// `text` with the user information of every URI in it masked: `s3://key:secret@bucket`
/// becomes `s3://key:***@bucket`, `https://token@host` becomes `https://***@host`.
pub(crate) fn redact_uri(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        // The URI runs to the next whitespace or quote. Its user information is what
        // precedes the first `@`: when that holds a `:` (`user:password`, and a password
        // may hold a `/`), or no `/` (`token@host`); `bucket/a@b` is a path, not a user.
        let end = tail
            .find(|c: char| matches!(c, '`' | '"' | '\'') || c.is_whitespace())
            .unwrap_or(tail.len());
        let uri = &tail[..end];
        let user_info = uri
            .find('@')
            .map(|at| &uri[..at])
            .filter(|info| info.contains(':') || !info.contains('/'));
        match user_info {
            Some(info) => {
                match info.split_once(':') {
                    Some((user, _)) => {
                        out.push_str(user);
                        out.push(':');
                        out.push_str(MASK);
                    }
                    None => out.push_str(MASK),
                }
                out.push_str(&uri[info.len()..]);
            }
            None => out.push_str(uri),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// A URI that may carry credentials (a schema registry at `https://user:password@host`).
/// Debug and Display mask its user information; only [`SecretUri::expose`] gives the
/// whole URI, to the code that connects.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub(crate) struct SecretUri(String);

impl SecretUri {
    #[cfg(test)]
    pub(crate) fn new(uri: impl Into<String>) -> Self {
        SecretUri(uri.into())
    }

    /// The URI with its credentials.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&redact_uri(&self.0), f)
    }
}

impl fmt::Display for SecretUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&redact_uri(&self.0))
    }
}

/// The `password="…"` values inside a secret such as a JAAS config, which a message may
/// quote without the rest of it.
fn embedded_passwords(text: &str) -> impl Iterator<Item = String> + '_ {
    text.match_indices("password=").filter_map(move |(i, m)| {
        let rest = text[i + m.len()..].trim_start_matches(['"', '\'']);
        let end = rest
            .find(|c: char| matches!(c, '"' | '\'' | ';') || c.is_whitespace())
            .unwrap_or(rest.len());
        (end > 0).then(|| rest[..end].to_string())
    })
}

/// The secret values of one configuration, to mask wherever a message might quote them.
#[derive(Clone, Default)]
pub(crate) struct Redactor {
    values: Vec<String>,
}

impl fmt::Debug for Redactor {
    /// How many values it masks, never the values.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field("secrets", &self.values.len())
            .finish()
    }
}

impl Redactor {
    /// The values of every secret-named key anywhere in a parsed configuration (strings,
    /// and numbers as written, since a numeric password is quoted as a number).
    pub(crate) fn from_config(value: &Value) -> Self {
        let mut redactor = Redactor::default();
        redactor.collect(value, false);
        redactor.finish()
    }

    /// The values of the secret-named keys of one option map.
    pub(crate) fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a String, &'a String)>,
    ) -> Self {
        let values = pairs
            .into_iter()
            .filter(|(k, _)| is_secret_key(k))
            .flat_map(|(_, v)| embedded_passwords(v).chain([v.clone()]))
            .collect();
        Redactor { values }.finish()
    }

    fn collect(&mut self, value: &Value, secret: bool) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    self.collect(v, secret || is_secret_key(k));
                }
            }
            Value::Array(items) => items.iter().for_each(|v| self.collect(v, secret)),
            Value::String(s) if secret => {
                self.values.extend(embedded_passwords(s));
                self.values.push(s.clone());
            }
            Value::Number(n) if secret => self.values.push(n.to_string()),
            Value::Bool(_) | Value::Null | Value::String(_) | Value::Number(_) => {}
        }
    }

    /// Longest first, so a secret containing another is masked whole.
    fn finish(mut self) -> Self {
        self.values.retain(|v| v.len() >= MIN_SECRET_LEN);
        self.values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        self.values.dedup();
        self
    }

    /// `text` with every known secret value, every URI's user information, every PEM
    /// private key and the value of every secret-named `name=value` masked (the last two
    /// catch secrets this configuration does not hold, as librdkafka may log them).
    pub(crate) fn redact(&self, text: &str) -> String {
        let mut out = redact_uri(text);
        for secret in &self.values {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), MASK);
            }
        }
        mask_assignments(&mask_private_keys(&out))
    }
}

/// `text` with each PEM private-key block (`-----BEGIN … PRIVATE KEY-----` through its
/// `-----END …-----` line, or the end of the text) replaced by the mask.
fn mask_private_keys(text: &str) -> String {
    const BEGIN: &str = "-----BEGIN ";
    const END: &str = "-----END ";
    const DASHES: &str = "-----";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(begin) = rest.find(BEGIN) {
        let label_start = begin + BEGIN.len();
        let Some(label_len) = rest[label_start..].find(DASHES) else {
            break;
        };
        let header_end = label_start + label_len + DASHES.len();
        if !rest[label_start..label_start + label_len].contains("PRIVATE KEY") {
            out.push_str(&rest[..header_end]);
            rest = &rest[header_end..];
            continue;
        }
        let block_end = rest[header_end..]
            .find(END)
            .map(|at| header_end + at + END.len())
            .and_then(|label| {
                rest[label..]
                    .find(DASHES)
                    .map(|at| label + at + DASHES.len())
            })
            .unwrap_or(rest.len());
        out.push_str(&rest[..begin]);
        out.push_str(MASK);
        rest = &rest[block_end..];
    }
    out.push_str(rest);
    out
}

/// `text` with the value of every `name=value` or `name = value` whose name holds a
/// secret ([`is_secret_key`]) masked. A spaced `name = value` (a configuration dump, a
/// line per property) runs to the end of its line, an unspaced one to the next space,
/// `,`, `;`, `&` or `)`, a quoted one to its closing quote.
fn mask_assignments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut search = 0;
    while let Some(found) = text[search..].find('=') {
        let eq = search + found;
        search = eq + 1;
        let before = &text[copied..eq];
        let name_end = before.trim_end_matches([' ', '\t']);
        let spaced_before = name_end.len() < before.len();
        let name_end = name_end.trim_end_matches(['"', '\'']);
        let name_start = name_end
            .char_indices()
            .rev()
            .find(|(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
            .map_or(0, |(i, c)| i + c.len_utf8());
        if !is_secret_key(&name_end[name_start..]) || name_start == name_end.len() {
            continue;
        }
        let after = &text[eq + 1..];
        let value = after.trim_start_matches([' ', '\t']);
        let spaced = spaced_before || value.len() < after.len();
        let value_start = text.len() - value.len();
        let value_len = match value.chars().next() {
            Some(quote @ ('"' | '\'')) => value[1..].find(quote).map_or(value.len(), |i| i + 2),
            _ if spaced => value.find(['\n', '\r']).unwrap_or(value.len()),
            _ => value
                .find(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '&' | ')'))
                .unwrap_or(value.len()),
        };
        if value_len == 0 {
            continue;
        }
        out.push_str(&text[copied..value_start]);
        out.push_str(MASK);
        copied = value_start + value_len;
        search = copied;
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use serde_json::json;

    #[test]
    fn secret_keys_are_recognised() {
        for key in [
            "sasl.password",
            "sasl.jaas.config",
            "ssl.key.password",
            "ssl.key.pem",
            "ssl.keystore.password",
            "sasl.oauthbearer.client.secret",
            "aws_secret_access_key",
            "AWS_SESSION_TOKEN",
            "aws_access_key_id",
            "azure_storage_account_key",
            "google_service_account_key",
        ] {
            assert!(is_secret_key(key), "{key}");
        }
        for key in [
            "security.protocol",
            "sasl.mechanism",
            "sasl.username",
            "ssl.ca.location",
            "aws_endpoint",
            "aws_region",
            "bootstrap.servers",
        ] {
            assert!(!is_secret_key(key), "{key}");
        }
    }

    #[test]
    fn uri_credentials_are_masked() {
        assert_eq!(
            redact_uri("warehouse URI `s3://AKIA1:wJalr/x@bucket/wh`: bad"),
            "warehouse URI `s3://AKIA1:***@bucket/wh`: bad"
        );
        assert_eq!(
            redact_uri("GET https://tok3n@registry:8081/subjects failed"),
            "GET https://***@registry:8081/subjects failed"
        );
        assert_eq!(
            redact_uri("a http://u:p@h b s3://k:s@c"),
            "a http://u:***@h b s3://k:***@c"
        );
        let plain = "file:///var/lib/wh and s3://bucket/a@b and mailto:x@y";
        assert_eq!(redact_uri(plain), plain);
    }

    #[test]
    fn a_secret_uri_shows_its_credentials_only_when_exposed() {
        let uri = SecretUri::new("https://reader:regS3cretPw@registry:8081/api");
        assert_eq!(
            format!("{uri:?}"),
            "\"https://reader:***@registry:8081/api\""
        );
        assert_eq!(uri.to_string(), "https://reader:***@registry:8081/api");
        assert_eq!(uri.expose(), "https://reader:regS3cretPw@registry:8081/api");
    }

    #[test]
    fn config_secret_values_are_masked_in_messages() {
        let config = json!({
            "kafka": {"properties": {
                "sasl.password": "hunter2-pass",
                "ssl.key.password": 98765,
                "security.protocol": "SASL_SSL",
                "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"jaas-secret\";",
            }},
            "warehouse": {"uri": "s3://b/w", "options": {
                "aws_secret_access_key": "wJalrXUtnFEMI",
                "aws_session_token": "FQoGZXIvYXdzE",
                "aws_region": "eu-west-1",
            }},
        });
        let r = Redactor::from_config(&config);
        let message = "invalid type: integer `98765`, expected a string; hunter2-pass; \
                       wJalrXUtnFEMI FQoGZXIvYXdzE; password=\"jaas-secret\"; SASL_SSL eu-west-1";
        let masked = r.redact(message);
        for secret in [
            "98765",
            "hunter2-pass",
            "wJalrXUtnFEMI",
            "FQoGZXIvYXdzE",
            "jaas-secret",
        ] {
            assert!(!masked.contains(secret), "{secret} in {masked}");
        }
        assert!(
            masked.contains("SASL_SSL") && masked.contains("eu-west-1"),
            "{masked}"
        );
    }

    #[test]
    fn secret_assignments_and_private_keys_are_masked_without_knowing_the_values() {
        let r = Redactor::default();
        assert_eq!(
            r.redact("  sasl.password = two words\n  sasl.username = lakejoin"),
            "  sasl.password = ***\n  sasl.username = lakejoin"
        );
        assert_eq!(
            r.redact("ssl.keystore.password=abc, X-Amz-Security-Token=tok&X-Amz-Date=1 a=b"),
            "ssl.keystore.password=***, X-Amz-Security-Token=***&X-Amz-Date=1 a=b"
        );
        assert_eq!(
            r.redact(r#"required username="u" password="p w"; "sasl.password" = 'x'"#),
            r#"required username="u" password=***; "sasl.password" = ***"#
        );
        assert_eq!(
            r.redact("k: -----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\nok"),
            "k: ***\nok"
        );
        assert_eq!(
            r.redact(
                "-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE----- and \
                      -----BEGIN PRIVATE KEY-----\nMIIE cut"
            ),
            "-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE----- and ***"
        );
        for plain in ["a = b", "password=", "x == y", "é=1 ü password", "=secret"] {
            assert_eq!(r.redact(plain), plain);
        }
        assert_eq!(
            format!(
                "{:?}",
                Redactor::from_pairs(&BTreeMap::from([(
                    "sasl.password".to_string(),
                    "hunter2-pass".to_string()
                )]))
            ),
            "Redactor { secrets: 1 }"
        );
    }

    #[test]
    fn option_maps_are_masked() {
        let options = BTreeMap::from([
            ("sasl.password".to_string(), "s3cr3t-value".to_string()),
            ("sasl.username".to_string(), "lakejoin".to_string()),
        ]);
        let r = Redactor::from_pairs(&options);
        assert_eq!(
            r.redact("user lakejoin, password s3cr3t-value"),
            "user lakejoin, password ***"
        );
    }
}
