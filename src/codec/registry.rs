//! Resolving Confluent schema ids to Avro schemas: local schema files and/or a schema
//! registry (`GET {url}/schemas/ids/{id}`), cached for the life of the resolver.
//!
//! Schema ids are immutable in a registry, so a fetched schema is cached forever; an id
//! the registry does not know is remembered for [`NOT_FOUND_TTL`] so a burst of bad
//! records does not hammer it. Lookups of cached ids are synchronous
//! ([`SchemaResolver::cached`]); only a miss awaits the network
//! ([`SchemaResolver::resolve`]), one fetch at a time.
//!
//! HTTP goes through `reqwest` (rustls), which object_store already builds, so HTTPS
//! registries (Confluent Cloud, …) and basic auth in the URL (`https://key:secret@host`)
//! work without adding a crate.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use serde::Deserialize;
use url::Url;

use super::avro::AvroSchema;
use super::error::{DecodeError, shorten};
use crate::config::secret::redact_uri;
use crate::error::{Error, Result};

/// How long an id the registry answered 404 for is not asked again.
pub const NOT_FOUND_TTL: Duration = Duration::from_secs(60);
/// Timeout of one registry request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Resolves Confluent schema ids; share one (in an `Arc`) between the pipelines that read
/// the same registry.
#[derive(Debug, Default)]
pub struct SchemaResolver {
    local: HashMap<u32, Arc<AvroSchema>>,
    registry: Option<Registry>,
    cache: RwLock<HashMap<u32, Arc<AvroSchema>>>,
    not_found: RwLock<HashMap<u32, (Instant, String)>>,
    fetching: tokio::sync::Mutex<()>,
}

#[derive(Debug)]
struct Registry {
    http: reqwest::Client,
    /// Base URL ending in `/`, without credentials.
    base: Url,
    auth: Option<(String, Option<String>)>,
}

/// The registry's answer to `GET /schemas/ids/{id}`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SchemaResponse {
    schema: String,
    #[serde(default)]
    schema_type: Option<String>,
    #[serde(default)]
    references: Vec<serde_json::Value>,
}

impl SchemaResolver {
    /// A resolver that knows no schema yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a schema for an id (a local schema file).
    pub fn with_schema(mut self, id: u32, schema: AvroSchema) -> Self {
        self.local.insert(id, Arc::new(schema));
        self
    }

    /// Adds every `<id>.avsc` file of a directory.
    pub fn with_schema_dir(mut self, dir: &Path) -> Result<Self> {
        let io = |e| Error::Io {
            context: format!("reading schema directory {}", dir.display()),
            source: e,
        };
        for entry in std::fs::read_dir(dir).map_err(io)? {
            let path = entry.map_err(io)?.path();
            if path.extension().and_then(|e| e.to_str()) != Some("avsc") {
                continue;
            }
            let Some(id) = path
                .file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let text = std::fs::read_to_string(&path).map_err(|e| Error::Io {
                context: format!("reading {}", path.display()),
                source: e,
            })?;
            let schema = AvroSchema::parse(&text)
                .map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
            self.local.insert(id, Arc::new(schema));
        }
        Ok(self)
    }

    /// Fetches ids missing locally from the registry at `url` (`http(s)://[user:pass@]host[:port][/prefix]`).
    pub fn with_registry(mut self, url: &str) -> Result<Self> {
        let bad = |why: String| {
            Error::Config(format!("schema registry URL `{}`: {why}", redact_uri(url)))
        };
        let mut base = Url::parse(url).map_err(|e| bad(e.to_string()))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(bad("must be http or https".into()));
        }
        let auth = if base.username().is_empty() {
            None
        } else {
            Some((
                percent_decode(base.username()),
                base.password().map(percent_decode),
            ))
        };
        let _ = base.set_username("");
        let _ = base.set_password(None);
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| bad(format!("cannot build an HTTP client: {e}")))?;
        self.registry = Some(Registry { http, base, auth });
        Ok(self)
    }

    /// The schema of `id` if it is local or was fetched; never blocks on I/O.
    pub fn cached(&self, id: u32) -> Option<Arc<AvroSchema>> {
        if let Some(s) = self.local.get(&id) {
            return Some(s.clone());
        }
        let cache = self.cache.read().unwrap_or_else(|e| e.into_inner());
        cache.get(&id).cloned()
    }

    /// The schema of `id`, fetching it from the registry on a miss.
    pub async fn resolve(&self, id: u32) -> Result<Arc<AvroSchema>, DecodeError> {
        if let Some(s) = self.cached(id) {
            return Ok(s);
        }
        let Some(registry) = &self.registry else {
            return Err(DecodeError::Schema {
                id,
                reason: "unknown schema id (no local schema file for it and no registry)".into(),
                transient: false,
            });
        };
        if let Some(reason) = self.recently_not_found(id) {
            return Err(DecodeError::Schema {
                id,
                reason,
                transient: false,
            });
        }
        // One fetch at a time; whoever waited may find the schema cached.
        let _guard = self.fetching.lock().await;
        if let Some(s) = self.cached(id) {
            return Ok(s);
        }
        match registry.fetch(id).await {
            Ok(schema) => {
                let schema = Arc::new(schema);
                let mut cache = self.cache.write().unwrap_or_else(|e| e.into_inner());
                cache.insert(id, schema.clone());
                Ok(schema)
            }
            Err(e) => {
                if let DecodeError::Schema {
                    transient: false,
                    reason,
                    ..
                } = &e
                {
                    let mut nf = self.not_found.write().unwrap_or_else(|e| e.into_inner());
                    nf.insert(id, (Instant::now(), reason.clone()));
                }
                Err(e)
            }
        }
    }

    fn recently_not_found(&self, id: u32) -> Option<String> {
        let nf = self.not_found.read().unwrap_or_else(|e| e.into_inner());
        nf.get(&id)
            .filter(|(at, _)| at.elapsed() < NOT_FOUND_TTL)
            .map(|(_, reason)| reason.clone())
    }
}

impl Registry {
    async fn fetch(&self, id: u32) -> Result<AvroSchema, DecodeError> {
        let fail = |reason: String, transient: bool| DecodeError::Schema {
            id,
            reason,
            transient,
        };
        let url = self
            .base
            .join(&format!("schemas/ids/{id}"))
            .map_err(|e| fail(format!("bad registry URL: {e}"), false))?;
        let mut request = self.http.get(url.clone()).header(
            "Accept",
            "application/vnd.schemaregistry.v1+json, application/json",
        );
        if let Some((user, password)) = &self.auth {
            request = request.basic_auth(user, password.as_deref());
        }
        let response = request.send().await.map_err(|e| {
            fail(
                format!("schema registry request to {url} failed: {e}"),
                true,
            )
        })?;
        let status = response.status();
        let body = response.bytes().await.map_err(|e| {
            fail(
                format!("reading the schema registry's answer failed: {e}"),
                true,
            )
        })?;
        if !status.is_success() {
            let text = shorten(&String::from_utf8_lossy(&body), 200);
            // Unknown ids are the record's fault; anything else (auth, overload, outage)
            // is worth a retry rather than the dead-letter topic.
            let transient = !(status.as_u16() == 404 || status.as_u16() == 422);
            return Err(fail(
                format!("schema registry answered {status}: {text}"),
                transient,
            ));
        }
        let answer: SchemaResponse = serde_json::from_slice(&body).map_err(|e| {
            fail(
                format!("schema registry answer is not a schema: {e}"),
                false,
            )
        })?;
        if let Some(t) = answer.schema_type.as_deref()
            && t != "AVRO"
        {
            return Err(fail(format!("schema type {t} is not Avro"), false));
        }
        if !answer.references.is_empty() {
            return Err(fail(
                "schemas with references are not supported".into(),
                false,
            ));
        }
        AvroSchema::parse(&answer.schema).map_err(|e| fail(e.to_string(), false))
    }
}

/// Decodes `%XX` escapes (URL user info).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;
    use crate::codec::testkit::{
        Change, debezium_avro, debezium_avro_schema_text, products, record, sample_row,
    };
    use crate::codec::{AvroSchemas, CdcDecoder, CdcOptions, Decoded, Format};

    /// A one-request-per-connection HTTP server on loopback answering
    /// `/schemas/ids/{id}`: 7 → the Debezium envelope schema, 9 → a JSON schema, 500 → a
    /// server error, anything else 404. Counts requests; records the last
    /// `authorization` header.
    struct Server {
        url: String,
        hits: Arc<AtomicUsize>,
        auth: Arc<std::sync::Mutex<Option<String>>>,
    }

    async fn serve() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/prefix", listener.local_addr().unwrap());
        let hits = Arc::new(AtomicUsize::new(0));
        let auth = Arc::new(std::sync::Mutex::new(None));
        let (h, a) = (hits.clone(), auth.clone());
        let schema = serde_json::json!({"schema": debezium_avro_schema_text()}).to_string();
        tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                h.fetch_add(1, Ordering::SeqCst);
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let request = String::from_utf8_lossy(&buf).to_string();
                *a.lock().unwrap() = request
                    .lines()
                    .find(|l| l.to_ascii_lowercase().starts_with("authorization:"))
                    .map(|l| l["authorization:".len()..].trim().to_string());
                let path = request.split_whitespace().nth(1).unwrap_or("").to_string();
                let (status, body) = match path.as_str() {
                    "/prefix/schemas/ids/7" => ("200 OK", schema.clone()),
                    "/prefix/schemas/ids/9" => (
                        "200 OK",
                        r#"{"schema": "{}", "schemaType": "JSON"}"#.to_string(),
                    ),
                    "/prefix/schemas/ids/500" => ("500 Internal Server Error", "boom".into()),
                    _ => (
                        "404 Not Found",
                        r#"{"error_code": 40403, "message": "Schema not found"}"#.into(),
                    ),
                };
                let response = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/vnd.schemaregistry.v1+json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(response.as_bytes()).await;
                let _ = sock.shutdown().await;
            }
        });
        Server { url, hits, auth }
    }

    #[test]
    fn registry_url_errors_mask_credentials() {
        let err = SchemaResolver::new()
            .with_registry("ftp://reader:regpass99@registry:8081")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("regpass99"), "{err}");
        assert!(err.contains("ftp://reader:***@registry:8081"), "{err}");
    }

    #[tokio::test]
    async fn fetches_once_and_caches() {
        let server = serve().await;
        let resolver = Arc::new(SchemaResolver::new().with_registry(&server.url).unwrap());
        assert!(resolver.cached(7).is_none());
        resolver.resolve(7).await.unwrap();
        resolver.resolve(7).await.unwrap();
        assert!(resolver.cached(7).is_some());
        assert_eq!(server.hits.load(Ordering::SeqCst), 1);
        // The decoder's prepare() + decode() path.
        let options = CdcOptions {
            avro: Some(AvroSchemas::Confluent(resolver.clone())),
            ..CdcOptions::default()
        };
        let dec = CdcDecoder::new(Format::DebeziumAvro, products(), options).unwrap();
        let bytes = debezium_avro(&Change::Insert(sample_row(4)));
        dec.prepare(&record(&bytes)).await.unwrap();
        let Ok(Decoded::Changes(got)) = dec.decode(&record(&bytes)) else {
            panic!("changes expected")
        };
        assert_eq!(got[0].row, sample_row(4));
        assert_eq!(server.hits.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn failures_are_classified_and_not_found_is_remembered() {
        let server = serve().await;
        let resolver = SchemaResolver::new().with_registry(&server.url).unwrap();
        let err = resolver.resolve(3).await.unwrap_err();
        assert!(!err.is_transient());
        assert!(err.to_string().contains("404"), "{err}");
        let err = resolver.resolve(3).await.unwrap_err();
        assert!(err.to_string().contains("404"), "{err}");
        assert_eq!(server.hits.load(Ordering::SeqCst), 1, "404 is remembered");
        let err = resolver.resolve(500).await.unwrap_err();
        assert!(err.is_transient(), "{err}");
        let err = resolver.resolve(9).await.unwrap_err();
        assert!(err.to_string().contains("not Avro"), "{err}");
        // Nothing listens here: transient.
        let down = SchemaResolver::new()
            .with_registry("http://127.0.0.1:9/")
            .unwrap();
        assert!(down.resolve(1).await.unwrap_err().is_transient());
        // No registry and no local schema: a permanent miss.
        let err = SchemaResolver::new().resolve(1).await.unwrap_err();
        assert!(!err.is_transient());
        assert_eq!(err.code(), "schema");
    }

    #[tokio::test]
    async fn basic_auth_from_the_url() {
        let server = serve().await;
        let with_auth = server.url.replace("http://", "http://key:s%40cret@");
        let resolver = SchemaResolver::new().with_registry(&with_auth).unwrap();
        resolver.resolve(7).await.unwrap();
        let header = server.auth.lock().unwrap().clone().unwrap();
        // base64("key:s@cret")
        assert_eq!(header, "Basic a2V5OnNAY3JldA==");
    }

    #[test]
    fn bad_urls_and_local_directories() {
        for url in ["not a url", "ftp://host/"] {
            let err = SchemaResolver::new().with_registry(url).unwrap_err();
            assert!(err.to_string().contains("schema registry URL"), "{err}");
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("12.avsc"), r#""long""#).unwrap();
        std::fs::write(dir.path().join("readme.txt"), "x").unwrap();
        std::fs::write(dir.path().join("name.avsc"), "x").unwrap();
        let resolver = SchemaResolver::new().with_schema_dir(dir.path()).unwrap();
        assert!(resolver.cached(12).is_some());
        std::fs::write(dir.path().join("13.avsc"), "{").unwrap();
        let err = SchemaResolver::new()
            .with_schema_dir(dir.path())
            .unwrap_err()
            .to_string();
        assert!(err.contains("13.avsc"), "{err}");
        assert_eq!(percent_decode("a%2Fb%zz%4"), "a/b%zz%4");
    }
}
