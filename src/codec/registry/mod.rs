//! Resolving Confluent schema ids to Avro schemas: local schema files and/or a schema
//! registry (`GET {url}/schemas/ids/{id}`).
//!
//! Schema ids are immutable in a registry, so a fetched schema is kept for the life of the
//! resolver. A permanent failure (the registry's "schema not found", a schema that is not
//! Avro) is remembered for [`NOT_FOUND_TTL`], so a burst of bad records does not hammer the
//! registry, and asked again after it, so a schema registered later is found. Transient
//! failures (unreachable, 5xx, auth, an answer that is not the registry's) are never
//! remembered: the pipelines hold the record and retry, and only permanent failures reach
//! the dead-letter topic. The two are told apart by type (`NoSchema`, `Unreachable`, with
//! the HTTP or JSON error as source) until they become a [`DecodeError::Schema`], whose
//! `transient` says which it was. Lookups of fetched ids are synchronous
//! ([`SchemaResolver::cached`]); only a miss awaits the network
//! ([`SchemaResolver::resolve`]). Different ids are fetched concurrently; the callers of one
//! id share its single request (moka's `try_get_with`), and no lock is held across one.
//!
//! A registry (or a proxy in front of it) answering with a huge body must not take
//! unbounded memory: bodies are read in chunks up to [`MAX_ANSWER_BYTES`], and a longer one
//! is an error naming the cap and the URL path.
//!
//! HTTP goes through `reqwest` (rustls), which object_store already builds, so HTTPS
//! registries (Confluent Cloud, …) and basic auth in the URL (`https://key:secret@host`)
//! work without adding a crate. The password never shows in errors or Debug output.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use reqwest::StatusCode;
use serde::Deserialize;
use url::Url;

use super::avro::AvroSchema;
use super::error::{DecodeError, shorten};
use crate::error::{Error, Result};
use crate::secret::{MASK, redact_uri};

/// How long a permanent failure of an id (the registry does not know it, its schema is not
/// Avro) is remembered before the registry is asked again.
pub(crate) const NOT_FOUND_TTL: Duration = Duration::from_secs(60);
/// The longest registry answer read (a schema's JSON); the largest real schemas are a few
/// hundred KiB.
pub(crate) const MAX_ANSWER_BYTES: usize = 8 << 20;
/// How much of an error answer is read: its start is all a message quotes.
const MAX_ERROR_BYTES: usize = 64 << 10;
/// Most ids remembered at once (failures, and schemas until they expire there): a flood
/// of distinct bad ids takes bounded memory, the oldest being asked again.
const MAX_REMEMBERED_IDS: u64 = 10_000;
/// Timeout of one registry request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Resolves Confluent schema ids; share one (in an `Arc`) between the pipelines that read
/// the same registry.
#[derive(Default)]
pub struct SchemaResolver {
    local: HashMap<u32, Arc<AvroSchema>>,
    registry: Option<Registry>,
    /// Schemas fetched from the registry, read without awaiting ([`Self::cached`]).
    fetched: RwLock<HashMap<u32, Arc<AvroSchema>>>,
}

struct Registry {
    endpoint: Endpoint,
    /// Recent lookups by id, each made once however many callers want it: a schema, or
    /// the reason of a permanent failure. Entries expire after the resolver's
    /// not-found TTL; transient failures are never inserted.
    lookups: moka::future::Cache<u32, Lookup>,
}

/// A registry lookup that the registry answered: the schema, or why the id has none.
type Lookup = std::result::Result<Arc<AvroSchema>, NoSchema>;

/// Why the registry gives no schema for an id, for good: the record's fault (it goes to
/// the dead-letter topic). Remembered for the not-found TTL and cloned to every caller of
/// the id meanwhile, hence `Clone` and the shared parse error.
#[derive(Debug, Clone, thiserror::Error)]
enum NoSchema {
    /// The registry's own "not found" (or "invalid") for the id; `body` is the start of
    /// its answer.
    #[error("schema registry answered {status}: {body}")]
    Refused { status: StatusCode, body: String },
    /// The id's schema is of another type (`PROTOBUF`, `JSON`).
    #[error("schema type {0} is not Avro")]
    NotAvro(String),
    /// The schema refers to others, which are not fetched.
    #[error("schemas with references are not supported")]
    References,
    /// The schema text is not a schema lakejoin can read.
    #[error(transparent)]
    Invalid(Arc<Error>),
    /// The id does not make a URL under the registry's (cannot happen for a URL that
    /// parsed, but is no reason to panic).
    #[error("bad registry URL: {0}")]
    Url(#[source] url::ParseError),
}

/// Why the registry could not be asked for now: not the record's fault, so the record is
/// held and tried again, and nothing is remembered.
#[derive(Debug, thiserror::Error)]
enum Unreachable {
    /// No answer: unreachable, refused, timed out.
    #[error("schema registry request to {url} failed: {source}")]
    Request {
        url: Url,
        #[source]
        source: reqwest::Error,
    },
    /// A 404 without the registry's error body: the URL points at something else.
    #[error(
        "schema registry answered {status} without a registry error (does the URL point at \
         the registry?): {body}"
    )]
    NotTheRegistry { status: StatusCode, body: String },
    /// Any other failure status (auth, overload, outage).
    #[error("schema registry answered {status}: {body}")]
    Status { status: StatusCode, body: String },
    /// An answer longer than [`MAX_ANSWER_BYTES`].
    #[error(
        "the schema registry's answer to {path} is longer than the {} MiB cap",
        MAX_ANSWER_BYTES >> 20
    )]
    TooLong { path: String },
    /// The answer broke off.
    #[error("reading the schema registry's answer failed: {source}")]
    Read {
        #[source]
        source: reqwest::Error,
    },
    /// A success whose body is not the registry's schema answer (a proxy's page).
    #[error("schema registry answer is not a schema: {source}")]
    NotASchema {
        #[source]
        source: serde_json::Error,
    },
}

/// How one request for an id failed.
#[derive(Debug, thiserror::Error)]
enum FetchError {
    #[error(transparent)]
    NoSchema(#[from] NoSchema),
    #[error(transparent)]
    Unreachable(#[from] Unreachable),
}

/// Basic-auth credentials from the registry URL's user information.
struct BasicAuth {
    user: String,
    password: Option<String>,
}

impl fmt::Debug for SchemaResolver {
    /// Ids, the registry's URL and user; never its password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut local: Vec<_> = self.local.keys().collect();
        local.sort();
        let fetched = self.fetched.read().unwrap_or_else(|e| e.into_inner()).len();
        f.debug_struct("SchemaResolver")
            .field("local_ids", &local)
            .field("fetched", &fetched)
            .field("registry", &self.registry)
            .finish()
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("endpoint", &self.endpoint)
            .field("remembered_ids", &self.lookups.entry_count())
            .finish()
    }
}

/// A registry's address: the HTTP client, the base URL and the credentials taken out of
/// it. Shared by the lookups here and the registrations of `register`.
pub(crate) struct Endpoint {
    http: reqwest::Client,
    /// Base URL ending in `/`, without credentials.
    base: Url,
    auth: Option<BasicAuth>,
}

impl fmt::Debug for Endpoint {
    /// The URL and user; never the password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (user, password) = match &self.auth {
            Some(auth) => (
                Some(auth.user.as_str()),
                auth.password.as_ref().map(|_| MASK),
            ),
            None => (None, None),
        };
        f.debug_struct("Endpoint")
            .field("url", &self.base.as_str())
            .field("user", &user)
            .field("password", &password)
            .finish()
    }
}

impl Endpoint {
    /// The registry at `url` (`http(s)://[user:pass@]host[:port][/prefix]`); a bad URL is
    /// a config error that never shows the password.
    pub(crate) fn parse(url: &str) -> Result<Self> {
        let bad = |why: String| {
            Error::Config(format!("schema registry URL `{}`: {why}", redact_uri(url)))
        };
        let mut base = Url::parse(url).map_err(|e| bad(e.to_string()))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(bad("must be http or https".into()));
        }
        let auth = (!base.username().is_empty()).then(|| BasicAuth {
            user: percent_decode(base.username()),
            password: base.password().map(percent_decode),
        });
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
        Ok(Endpoint { http, base, auth })
    }

    /// The URL of `path` under the base.
    fn url(&self, path: &str) -> std::result::Result<Url, url::ParseError> {
        self.base.join(path)
    }

    /// A request to `url` with the registry's media types and the credentials.
    fn request(&self, method: reqwest::Method, url: Url) -> reqwest::RequestBuilder {
        let request = self.http.request(method, url).header(
            "Accept",
            "application/vnd.schemaregistry.v1+json, application/json",
        );
        match &self.auth {
            Some(auth) => request.basic_auth(&auth.user, auth.password.as_deref()),
            None => request,
        }
    }
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

/// The registry's error answer (`{"error_code": 40403, "message": "Schema not found"}`):
/// a 404 with it is the registry's "no such schema", one without it is not the registry.
#[derive(Deserialize)]
struct ErrorResponse {
    error_code: i64,
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

    /// Fetches ids missing locally from the registry at `url`
    /// (`http(s)://[user:pass@]host[:port][/prefix]`).
    pub(crate) fn with_registry(self, url: &str) -> Result<Self> {
        self.with_registry_ttl(url, NOT_FOUND_TTL)
    }

    /// [`Self::with_registry`], remembering permanent failures for `not_found_ttl`.
    pub(crate) fn with_registry_ttl(mut self, url: &str, not_found_ttl: Duration) -> Result<Self> {
        let endpoint = Endpoint::parse(url)?;
        let lookups = moka::future::Cache::builder()
            .max_capacity(MAX_REMEMBERED_IDS)
            .time_to_live(not_found_ttl)
            .build();
        self.registry = Some(Registry { endpoint, lookups });
        Ok(self)
    }

    /// The schema of `id` if it is local or was fetched; never blocks on I/O.
    pub(crate) fn cached(&self, id: u32) -> Option<Arc<AvroSchema>> {
        if let Some(s) = self.local.get(&id) {
            return Some(s.clone());
        }
        let fetched = self.fetched.read().unwrap_or_else(|e| e.into_inner());
        fetched.get(&id).cloned()
    }

    /// The schema of `id`, fetching it from the registry on a miss.
    pub(crate) async fn resolve(&self, id: u32) -> Result<Arc<AvroSchema>, DecodeError> {
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
        // The first caller of an id runs the request; later ones wait for its outcome. A
        // transient failure reaches every waiter and is not kept.
        let lookup = registry
            .lookups
            .try_get_with(id, registry.lookup(id))
            .await
            .map_err(|e| DecodeError::Schema {
                id,
                reason: e.to_string(),
                transient: true,
            })?;
        match lookup {
            Ok(schema) => {
                let mut fetched = self.fetched.write().unwrap_or_else(|e| e.into_inner());
                fetched.insert(id, schema.clone());
                Ok(schema)
            }
            Err(no_schema) => Err(DecodeError::Schema {
                id,
                reason: no_schema.to_string(),
                transient: false,
            }),
        }
    }
}

impl Registry {
    /// One request for `id`: the registry's answer, or why it could not be had for now.
    async fn lookup(&self, id: u32) -> Result<Lookup, Unreachable> {
        match self.fetch(id).await {
            Ok(schema) => Ok(Ok(Arc::new(schema))),
            Err(FetchError::NoSchema(e)) => Ok(Err(e)),
            Err(FetchError::Unreachable(e)) => Err(e),
        }
    }

    async fn fetch(&self, id: u32) -> Result<AvroSchema, FetchError> {
        let url = self
            .endpoint
            .url(&format!("schemas/ids/{id}"))
            .map_err(NoSchema::Url)?;
        let mut response = self
            .endpoint
            .request(reqwest::Method::GET, url.clone())
            .send()
            .await
            .map_err(|source| Unreachable::Request {
                url: url.clone(),
                source,
            })?;
        let status = response.status();
        if !status.is_success() {
            // Only the start is quoted; a failure to read the rest changes nothing.
            let (body, _) = read_at_most(&mut response, MAX_ERROR_BYTES)
                .await
                .unwrap_or_default();
            let text = shorten(&String::from_utf8_lossy(&body), 200);
            // The registry's own "not found" is the record's fault (an id it does not
            // know); anything else (auth, overload, outage, a proxy's page) is worth a
            // retry rather than the dead-letter topic.
            let code = serde_json::from_slice::<ErrorResponse>(&body)
                .ok()
                .map(|e| e.error_code);
            let status_code = i64::from(status.as_u16());
            // The registry's own error code agrees: 40403 (schema not found), 422xx
            // (invalid), or the bare status some registries put there. A 400 of the
            // registry's own is its refusal to give the id's schema (Apicurio answers so
            // for a schema it cannot serve as Avro): asking again gets the same answer.
            let registry_agrees = code.is_some_and(|c| c == status_code || c / 100 == status_code);
            return Err(match status_code {
                400 | 404 | 422 if registry_agrees => {
                    NoSchema::Refused { status, body: text }.into()
                }
                404 => Unreachable::NotTheRegistry { status, body: text }.into(),
                _ => Unreachable::Status { status, body: text }.into(),
            });
        }
        let too_long = || Unreachable::TooLong {
            path: url.path().to_string(),
        };
        if response
            .content_length()
            .is_some_and(|n| n > MAX_ANSWER_BYTES as u64)
        {
            return Err(too_long().into());
        }
        let (body, complete) = read_at_most(&mut response, MAX_ANSWER_BYTES)
            .await
            .map_err(|source| Unreachable::Read { source })?;
        if !complete {
            return Err(too_long().into());
        }
        // A registry always answers this shape; anything else came from something in
        // between (a proxy's page) and is retried.
        let answer: SchemaResponse =
            serde_json::from_slice(&body).map_err(|source| Unreachable::NotASchema { source })?;
        if let Some(t) = answer.schema_type.as_deref()
            && t != "AVRO"
        {
            return Err(NoSchema::NotAvro(t.to_string()).into());
        }
        if !answer.references.is_empty() {
            return Err(NoSchema::References.into());
        }
        AvroSchema::parse(&answer.schema).map_err(|e| NoSchema::Invalid(Arc::new(e)).into())
    }
}

/// An answer's body, read in chunks up to `cap` bytes, and whether that was all of it.
async fn read_at_most(
    response: &mut reqwest::Response,
    cap: usize,
) -> reqwest::Result<(Vec<u8>, bool)> {
    let declared = response.content_length().unwrap_or(0);
    let mut body = Vec::with_capacity(usize::try_from(declared).unwrap_or(cap).min(cap));
    while let Some(chunk) = response.chunk().await? {
        let room = cap - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, false));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, true))
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

mod register;

pub(crate) use register::SchemaRegistrar;

#[cfg(test)]
mod tests;
