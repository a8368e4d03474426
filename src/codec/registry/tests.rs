//! Tests of the schema resolver against a fake registry on loopback: caching, failure
//! classes, the negative cache's expiry, concurrent fetches, the body cap, and that
//! credentials stay out of errors and Debug output.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::*;
use crate::codec::testkit::{
    Change, debezium_avro, debezium_avro_schema_text, products, record, sample_row,
};
use crate::codec::{AvroSchemas, CdcDecoder, CdcOptions, Decoded, Format};

/// What the streamed answers (ids 88 and 89) would send in full: far past the cap.
const STREAMED_BYTES: usize = 64 << 20;

/// How long a test waits for a condition before failing.
const DEADLINE: Duration = Duration::from_secs(10);

/// A one-request-per-connection HTTP server on loopback answering `/prefix/schemas/ids/{id}`,
/// each connection on its own task:
///
/// - 7 → the Debezium envelope schema; 9 → a JSON schema; 500 → a server error;
/// - 5 → 404 until `registered` is set, then the schema (registered later);
/// - 6 → 503 on its first request, then the schema (a registry restarting);
/// - 10 → 200 with an HTML page (a proxy's login page);
/// - 11 → 404 with an HTML page (a URL that is not a registry's);
/// - 40 → the registry's 400 `{"error_code": 400, …}`; 41 → 400 with an HTML page;
/// - 71, 72 → the schema once `gate` is opened;
/// - 8 → 200 declaring a 1 TiB body, then silence;
/// - 88 → 200 and 89 → 503, each streaming [`STREAMED_BYTES`] without a length;
/// - anything else → the registry's 404 `{"error_code": 40403, …}`.
///
/// Records each request's path and the last `authorization` header, and how much of a
/// streamed answer was written before the client hung up.
struct Server {
    url: String,
    requests: Arc<Mutex<Vec<String>>>,
    auth: Arc<Mutex<Option<String>>>,
    registered: Arc<AtomicBool>,
    gate: watch::Sender<bool>,
    streamed: Arc<Mutex<HashMap<String, usize>>>,
}

impl Server {
    /// Requests for schema `id` so far.
    fn hits(&self, id: u32) -> usize {
        let path = format!("/prefix/schemas/ids/{id}");
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|p| **p == path)
            .count()
    }

    fn total_hits(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

#[derive(Clone)]
struct Shared {
    requests: Arc<Mutex<Vec<String>>>,
    auth: Arc<Mutex<Option<String>>>,
    registered: Arc<AtomicBool>,
    gate: watch::Receiver<bool>,
    streamed: Arc<Mutex<HashMap<String, usize>>>,
    schema: String,
}

async fn serve() -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/prefix", listener.local_addr().unwrap());
    let (gate, gate_rx) = watch::channel(false);
    let shared = Shared {
        requests: Arc::default(),
        auth: Arc::default(),
        registered: Arc::default(),
        gate: gate_rx,
        streamed: Arc::default(),
        schema: serde_json::json!({"schema": debezium_avro_schema_text()}).to_string(),
    };
    let server = Server {
        url,
        requests: shared.requests.clone(),
        auth: shared.auth.clone(),
        registered: shared.registered.clone(),
        gate,
        streamed: shared.streamed.clone(),
    };
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            tokio::spawn(answer(sock, shared.clone()));
        }
    });
    server
}

async fn answer(mut sock: TcpStream, shared: Shared) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match sock.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let request = String::from_utf8_lossy(&buf).to_string();
    *shared.auth.lock().unwrap() = request
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("authorization:"))
        .map(|l| l["authorization:".len()..].trim().to_string());
    let path = request.split_whitespace().nth(1).unwrap_or("").to_string();
    let earlier = {
        let mut requests = shared.requests.lock().unwrap();
        let earlier = requests.iter().filter(|p| **p == path).count();
        requests.push(path.clone());
        earlier
    };
    let id = path.strip_prefix("/prefix/schemas/ids/").unwrap_or("");
    let not_found = r#"{"error_code": 40403, "message": "Schema not found"}"#.to_string();
    let (status, body) = match id {
        "7" => ("200 OK", shared.schema.clone()),
        "9" => (
            "200 OK",
            r#"{"schema": "{}", "schemaType": "JSON"}"#.to_string(),
        ),
        "500" => ("500 Internal Server Error", "boom".into()),
        "5" if shared.registered.load(Ordering::SeqCst) => ("200 OK", shared.schema.clone()),
        "6" if earlier > 0 => ("200 OK", shared.schema.clone()),
        "6" => ("503 Service Unavailable", "starting".into()),
        "10" => ("200 OK", "<html>please log in</html>".into()),
        "11" => ("404 Not Found", "<html>no such page</html>".into()),
        "40" => (
            "400 Bad Request",
            r#"{"error_code": 400, "message": "Invalid schema"}"#.into(),
        ),
        "41" => ("400 Bad Request", "<html>bad request</html>".into()),
        "71" | "72" => {
            let mut gate = shared.gate.clone();
            let _ = gate.wait_for(|open| *open).await;
            ("200 OK", shared.schema.clone())
        }
        "8" => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                        content-length: 1099511627776\r\n\r\n{";
            let _ = sock.write_all(head.as_bytes()).await;
            // Hold the connection until the client gives up on it.
            while let Ok(n) = sock.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
            }
            return;
        }
        "88" | "89" => {
            let status = if id == "88" {
                "200 OK"
            } else {
                "503 Service Unavailable"
            };
            let head = format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n"
            );
            let mut written = 0;
            if sock.write_all(head.as_bytes()).await.is_ok() {
                let spaces = vec![b' '; 64 << 10];
                while written < STREAMED_BYTES {
                    if sock.write_all(&spaces).await.is_err() {
                        break;
                    }
                    written += spaces.len();
                }
            }
            shared.streamed.lock().unwrap().insert(path, written);
            return;
        }
        _ => ("404 Not Found", not_found),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/vnd.schemaregistry.v1+json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = sock.write_all(response.as_bytes()).await;
    let _ = sock.shutdown().await;
}

/// Waits until `done` holds, failing after [`DEADLINE`].
async fn wait_for(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
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

#[test]
fn debug_output_never_shows_the_registry_password() {
    let resolver = SchemaResolver::new()
        .with_registry("https://reader:regS3cret%40pw@registry:8081/api")
        .unwrap();
    let debug = format!("{resolver:?}");
    assert!(
        !debug.contains("regS3cret") && !debug.contains("%40pw"),
        "{debug}"
    );
    assert!(
        debug.contains("https://registry:8081/api/") && debug.contains("reader"),
        "{debug}"
    );
}

#[tokio::test]
async fn fetches_once_and_caches() {
    let server = serve().await;
    let resolver = Arc::new(SchemaResolver::new().with_registry(&server.url).unwrap());
    assert!(resolver.cached(7).is_none());
    resolver.resolve(7).await.unwrap();
    resolver.resolve(7).await.unwrap();
    assert!(resolver.cached(7).is_some());
    assert_eq!(server.total_hits(), 1);
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
    assert_eq!(server.total_hits(), 1);
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
    assert_eq!(server.hits(3), 1, "404 is remembered");
    let err = resolver.resolve(500).await.unwrap_err();
    assert!(err.is_transient(), "{err}");
    let err = resolver.resolve(9).await.unwrap_err();
    assert!(err.to_string().contains("not Avro"), "{err}");
    assert!(!err.is_transient(), "{err}");
    // The registry's own 400 refuses the id for good; a 400 page of something else
    // in between is retried.
    let err = resolver.resolve(40).await.unwrap_err();
    assert!(!err.is_transient(), "{err}");
    assert!(err.to_string().contains("Invalid schema"), "{err}");
    assert!(resolver.resolve(41).await.unwrap_err().is_transient());
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

/// Answers no registry gives (a proxy's page, a URL that is not the registry's) are the
/// deployment's fault, not the record's: they are retried, never dead-lettered.
#[tokio::test]
async fn answers_that_are_not_the_registrys_are_transient() {
    let server = serve().await;
    let resolver = SchemaResolver::new().with_registry(&server.url).unwrap();
    for id in [10, 11] {
        let err = resolver.resolve(id).await.unwrap_err();
        assert!(err.is_transient(), "{err}");
        resolver.resolve(id).await.unwrap_err();
        assert_eq!(
            server.hits(id),
            2,
            "id {id}: transient errors are not cached"
        );
    }
    let err = resolver.resolve(11).await.unwrap_err().to_string();
    assert!(err.contains("404") && err.contains("no such page"), "{err}");
}

#[tokio::test]
async fn a_schema_registered_after_a_miss_is_found_once_the_miss_expires() {
    let server = serve().await;
    let ttl = Duration::from_millis(200);
    let resolver = SchemaResolver::new()
        .with_registry_ttl(&server.url, ttl)
        .unwrap();
    assert!(!resolver.resolve(5).await.unwrap_err().is_transient());
    server.registered.store(true, Ordering::SeqCst);
    let deadline = Instant::now() + DEADLINE;
    loop {
        match resolver.resolve(5).await {
            Ok(_) => break,
            Err(e) => assert!(!e.is_transient(), "{e}"),
        }
        assert!(Instant::now() < deadline, "the miss never expired");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The miss was remembered until it expired, then asked once more.
    assert_eq!(server.hits(5), 2);
    // A transient failure is not remembered at all: the next call asks again.
    assert!(resolver.resolve(6).await.unwrap_err().is_transient());
    resolver.resolve(6).await.unwrap();
    assert_eq!(server.hits(6), 2);
}

#[tokio::test]
async fn different_ids_are_fetched_concurrently_and_one_id_once() {
    let server = serve().await;
    let resolver = Arc::new(SchemaResolver::new().with_registry(&server.url).unwrap());
    let waiters: Vec<_> = (0..5)
        .map(|_| {
            let resolver = resolver.clone();
            tokio::spawn(async move { resolver.resolve(72).await.map(|_| ()) })
        })
        .collect();
    wait_for("the request for id 72", || server.hits(72) == 1).await;
    // While 72's fetch waits on the registry, another id is fetched.
    tokio::time::timeout(DEADLINE, resolver.resolve(7))
        .await
        .expect("id 7 waited for id 72's fetch")
        .unwrap();
    server.gate.send(true).unwrap();
    for waiter in waiters {
        waiter.await.unwrap().unwrap();
    }
    assert_eq!(server.hits(72), 1, "callers of one id share its fetch");
}

#[tokio::test]
async fn a_huge_answer_is_an_error_naming_the_cap_and_the_path() {
    let server = serve().await;
    let resolver = SchemaResolver::new().with_registry(&server.url).unwrap();
    // A declared length past the cap is refused before reading.
    let err = tokio::time::timeout(Duration::from_secs(5), resolver.resolve(8))
        .await
        .expect("refused without waiting for the body")
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("8 MiB") && text.contains("/prefix/schemas/ids/8"),
        "{text}"
    );
    assert!(err.is_transient(), "the registry's fault, not the record's");
    // A body without a length: reading stops past the cap.
    let err = resolver.resolve(88).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("8 MiB") && text.contains("/prefix/schemas/ids/88"),
        "{text}"
    );
    assert!(err.is_transient());
    // An error status keeps its meaning however long its body.
    let err = resolver.resolve(89).await.unwrap_err();
    assert!(
        err.is_transient() && err.to_string().contains("503"),
        "{err}"
    );
    for id in [88, 89] {
        let path = format!("/prefix/schemas/ids/{id}");
        wait_for("the streamed answer to end", || {
            server.streamed.lock().unwrap().contains_key(&path)
        })
        .await;
        let written = server.streamed.lock().unwrap()[&path];
        assert!(
            written < STREAMED_BYTES / 2,
            "id {id}: the client read {written} bytes"
        );
    }
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
