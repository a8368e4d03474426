//! The HTTP endpoint of `lakejoin run`: `GET /metrics` (Prometheus text format),
//! `GET /health/live` (the process is up) and `GET /health/ready` (every pipeline's
//! consumer is assigned and its caches loaded; 503 with the reasons otherwise).
//!
//! Served by hyper's HTTP/1.1 server (already in the build through reqwest), which parses
//! requests and answers malformed ones (400, 431): GET and HEAD only, request heads up to
//! 8 KiB, one request per connection (`Connection: close`; a scrape every few seconds
//! gains nothing from keep-alive, and it keeps a connection's deadline per request).
//!
//! A stalled client must not make `/health/live` unanswerable: that fails a Kubernetes
//! liveness probe and restarts a healthy pod (issue 16). So every connection is bounded:
//! its request head must arrive within 5 s, it is closed 10 s after that at the latest
//! (a client that never reads its answer), and at most 128 are open. A new connection
//! beyond that closes the oldest, so a fresh request (a probe) is served rather than
//! queued behind stalled ones; an answer takes milliseconds, so the oldest is a stalled
//! one unless 128 connections arrived meanwhile.
//!
//! [`get`] is the client of `lakejoin health` and the tests (reqwest).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{self, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinSet};

use super::Registry;
use crate::error::{Error, Result};

/// Longest request head accepted (hyper's smallest buffer); longer ones get 431.
const MAX_HEAD: usize = 8 * 1024;

/// Content type of `/metrics`.
pub(crate) const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// How long a connection may take and how many may be open.
#[derive(Debug, Clone, Copy)]
struct Limits {
    /// The request head must arrive within this after the connection is accepted.
    header_read: Duration,
    /// The response must be written within this after the head's time is up.
    write: Duration,
    /// Open connections; a new one beyond this closes the oldest.
    max_connections: usize,
}

/// The limits of `lakejoin run`. 128 open connections of up to 8 KiB buffers each cost
/// little; a probe or scrape takes milliseconds, so only stalled clients stay that long.
const LIMITS: Limits = Limits {
    header_read: Duration::from_secs(5),
    write: Duration::from_secs(10),
    max_connections: 128,
};

/// An answer of the endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Response {
    pub(crate) status: StatusCode,
    pub(crate) content_type: &'static str,
    pub(crate) body: String,
}

impl Response {
    fn text(status: StatusCode, body: impl Into<String>) -> Self {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.into(),
        }
    }

    /// The hyper response: `Cache-Control: no-store` (health and metrics are live values)
    /// and `Allow` on 405. hyper adds `Content-Length`, leaves the body out for HEAD and
    /// adds `Connection: close` (keep-alive is off).
    fn into_http(self) -> hyper::Response<Full<Bytes>> {
        let mut response = hyper::Response::new(Full::new(Bytes::from(self.body)));
        *response.status_mut() = self.status;
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(self.content_type),
        );
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if self.status == StatusCode::METHOD_NOT_ALLOWED {
            headers.insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        }
        response
    }
}

/// Answers one request (`path` without the query string).
pub(crate) fn route(method: &Method, path: &str, registry: &Registry) -> Response {
    let known = matches!(path, "/metrics" | "/health/live" | "/health/ready" | "/");
    if !known {
        return Response::text(StatusCode::NOT_FOUND, format!("not found: {path}\n"));
    }
    if method != Method::GET && method != Method::HEAD {
        return Response::text(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("method {method} not allowed\n"),
        );
    }
    match path {
        "/metrics" => Response {
            status: StatusCode::OK,
            content_type: METRICS_CONTENT_TYPE,
            body: registry.render(),
        },
        "/health/live" => Response::text(StatusCode::OK, "live\n"),
        "/health/ready" => match registry.readiness() {
            Ok(()) => Response::text(StatusCode::OK, "ready\n"),
            Err(reasons) => Response::text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready:\n{}\n", reasons.join("\n")),
            ),
        },
        _ => Response::text(
            StatusCode::OK,
            "lakejoin: GET /metrics, /health/live, /health/ready\n",
        ),
    }
}

/// Binds the endpoint's address (before anything else starts, so a taken port fails
/// the start with a clear message).
pub(crate) async fn bind(address: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(address).await.map_err(|e| {
        Error::Config(format!(
            "observe.listen: cannot listen on {address}: {e} (is another process using the port?)"
        ))
    })
}

/// Serves requests until `stop` turns true (or its sender is dropped), then stops
/// accepting and returns once the open connections have finished their answers (each
/// within its deadline).
pub(crate) async fn serve(
    listener: TcpListener,
    registry: Arc<Registry>,
    stop: watch::Receiver<bool>,
) {
    serve_with(listener, registry, stop, LIMITS).await;
}

async fn serve_with(
    listener: TcpListener,
    registry: Arc<Registry>,
    mut stop: watch::Receiver<bool>,
    limits: Limits,
) {
    let mut connections = JoinSet::new();
    // The open connections by age (ids increase), to close the oldest when full.
    let mut open: BTreeMap<u64, AbortHandle> = BTreeMap::new();
    let mut next_id: u64 = 0;
    while !stopped(&stop) {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    open.retain(|_, connection| !connection.is_finished());
                    if open.len() >= limits.max_connections
                        && let Some((_, oldest)) = open.pop_first()
                    {
                        tracing::debug!("HTTP endpoint: too many connections, closing the oldest");
                        oldest.abort();
                    }
                    let connection = serve_connection(stream, registry.clone(), stop.clone(), limits);
                    open.insert(next_id, connections.spawn(connection));
                    next_id += 1;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "HTTP endpoint: accept failed");
                    // Out of file descriptors and the like: do not spin.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            changed = stop.changed() => {
                if changed.is_err() {
                    break;
                }
            }
        }
    }
    // Refuse new connections while the open ones finish.
    drop(listener);
    while connections.join_next().await.is_some() {}
}

fn stopped(stop: &watch::Receiver<bool>) -> bool {
    *stop.borrow()
}

/// Serves one connection: one request, then hyper closes it.
async fn serve_connection(
    stream: TcpStream,
    registry: Arc<Registry>,
    mut stop: watch::Receiver<bool>,
    limits: Limits,
) {
    let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
        let response = route(request.method(), request.uri().path(), &registry).into_http();
        async move { Ok::<_, Infallible>(response) }
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read)
        .keep_alive(false)
        .title_case_headers(true)
        .max_buf_size(MAX_HEAD)
        .serve_connection(TokioIo::new(stream), service);
    let mut connection = std::pin::pin!(connection);
    // The write timeout is one deadline for the whole connection rather than a timeout on
    // each socket write: with one request per connection its life is reading the head,
    // answering and writing, so bounding it bounds how long any client holds a slot,
    // including one that reads a byte now and then, and needs no wrapper around the IO.
    let deadline = tokio::time::sleep(limits.header_read + limits.write);
    let mut deadline = std::pin::pin!(deadline);
    let mut stopping = false;
    loop {
        if !stopping && stopped(&stop) {
            // Finishes the answer in progress, if any, then ends the connection.
            stopping = true;
            connection.as_mut().graceful_shutdown();
        }
        tokio::select! {
            served = connection.as_mut() => {
                if let Err(e) = served {
                    tracing::debug!(error = %e, "HTTP endpoint: connection failed");
                }
                return;
            }
            () = &mut deadline => {
                tracing::debug!("HTTP endpoint: connection closed at its deadline");
                return;
            }
            changed = stop.changed(), if !stopping => {
                if changed.is_err() {
                    stopping = true;
                    connection.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// `GET http://address/path`: the status code and body, within `timeout` (the client of
/// `lakejoin health` and tests).
pub(crate) async fn get(
    address: SocketAddr,
    path: &str,
    timeout: Duration,
) -> Result<(u16, String)> {
    let url = format!("http://{address}{path}");
    let failed = |e: reqwest::Error| Error::Io {
        context: format!("GET {url}"),
        source: if e.is_timeout() {
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no answer within {timeout:?}"),
            )
        } else {
            std::io::Error::other(causes(&e.without_url()))
        },
    };
    // Plain HTTP to this process: no proxy from the environment, and no system
    // certificates to load (an image without them can still check its health).
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .no_proxy()
        .tls_certs_only(std::iter::empty())
        .build()
        .map_err(failed)?;
    let response = client.get(&url).send().await.map_err(failed)?;
    let status = response.status().as_u16();
    let body = response.text().await.map_err(failed)?;
    Ok((status, body))
}

/// An error and its sources, `: `-separated (reqwest's own message names no cause).
fn causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::{PartitionLag, PipelineKind, PipelineMetrics};
    use std::sync::atomic::Ordering;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn routes_answer_with_status_and_content_type() {
        let registry = Registry::default();
        let r = route(&Method::GET, "/metrics", &registry);
        assert_eq!(
            (r.status, r.content_type),
            (StatusCode::OK, METRICS_CONTENT_TYPE)
        );
        assert!(r.body.contains("lakejoin_build_info"));
        let status = |method: Method, path: &str| route(&method, path, &registry).status;
        assert_eq!(status(Method::GET, "/health/live"), StatusCode::OK);
        assert_eq!(status(Method::HEAD, "/health/live"), StatusCode::OK);
        assert_eq!(status(Method::GET, "/health/ready"), 503);
        assert_eq!(status(Method::GET, "/nope"), 404);
        assert_eq!(status(Method::POST, "/metrics"), 405);
        let response = route(&Method::POST, "/metrics", &registry).into_http();
        assert_eq!(response.headers()[header::ALLOW], "GET, HEAD");
        assert_eq!(response.headers()[header::CACHE_CONTROL], "no-store");
    }

    /// A server on a free loopback port and the sender that stops it.
    struct Endpoint {
        address: SocketAddr,
        stop: watch::Sender<bool>,
        server: tokio::task::JoinHandle<()>,
    }

    async fn start(registry: Arc<Registry>, limits: Limits) -> Endpoint {
        let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let address = listener.local_addr().unwrap();
        let (stop, stopped) = watch::channel(false);
        let server = tokio::spawn(serve_with(listener, registry, stopped, limits));
        Endpoint {
            address,
            stop,
            server,
        }
    }

    /// Sends `request` as is and reads the answer until the server closes.
    async fn raw(address: SocketAddr, request: &[u8]) -> String {
        let mut stream = TcpStream::connect(address).await.unwrap();
        stream.write_all(request).await.unwrap();
        let mut response = Vec::new();
        // A server that closes with input unread resets the connection after its answer.
        let _ = stream.read_to_end(&mut response).await;
        String::from_utf8(response).unwrap()
    }

    /// A `/metrics` size that stalls the write to a client that does not read: more than
    /// the sender's socket buffer grows to on Linux (`tcp_wmem`'s maximum, 4 MiB by
    /// default) plus the small receive buffer of [`small_buffer_connection`].
    fn metrics_beyond_buffers() -> usize {
        let wmem_max = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem")
            .ok()
            .and_then(|text| text.split_whitespace().nth(2)?.parse::<usize>().ok());
        wmem_max.unwrap_or(8 << 20) + (1 << 20)
    }

    /// A registry whose `/metrics` is at least `bytes` long.
    fn registry_with_metrics_of(bytes: usize) -> Arc<Registry> {
        let registry = Arc::new(Registry::default());
        let metrics = Arc::new(PipelineMetrics::default());
        let topic = "t".repeat(200);
        let lag = (0..bytes / 260)
            .map(|partition| PartitionLag {
                topic: topic.clone(),
                partition: i32::try_from(partition).unwrap(),
                lag: 1,
            })
            .collect();
        metrics.set_lag(lag);
        registry.register("big", PipelineKind::Cdc, Some("db.t"), metrics);
        registry
    }

    const METRICS_REQUEST: &[u8] = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";

    /// A connection with a small receive buffer, for a client that will not read.
    async fn small_buffer_connection(address: SocketAddr) -> TcpStream {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        socket.connect(address).await.unwrap()
    }

    #[tokio::test]
    async fn the_server_answers_on_loopback_and_readiness_follows_the_pipelines() {
        let registry = Arc::new(Registry::default());
        let metrics = Arc::new(PipelineMetrics::default());
        registry.register("c", PipelineKind::Cdc, Some("db.t"), metrics.clone());
        let Endpoint {
            address,
            stop,
            server,
        } = start(registry.clone(), LIMITS).await;
        let timeout = Duration::from_secs(10);

        let (status, body) = get(address, "/health/live", timeout).await.unwrap();
        assert_eq!((status, body.as_str()), (200, "live\n"));
        let (status, body) = get(address, "/health/ready", timeout).await.unwrap();
        assert_eq!(status, 503);
        assert!(body.contains("starting"), "{body}");
        registry.set_started();
        let (status, body) = get(address, "/health/ready", timeout).await.unwrap();
        assert_eq!(status, 503);
        assert!(
            body.contains("pipeline c: no Kafka partitions assigned yet"),
            "{body}"
        );
        metrics.assigned.store(true, Ordering::Relaxed);
        let (status, body) = get(address, "/health/ready", timeout).await.unwrap();
        assert_eq!((status, body.as_str()), (200, "ready\n"));
        PipelineMetrics::add(&metrics.records_in, 3);
        let (status, body) = get(address, "/metrics", timeout).await.unwrap();
        assert_eq!(status, 200);
        assert!(
            body.contains("lakejoin_records_consumed_total{pipeline=\"c\",kind=\"cdc\"} 3"),
            "{body}"
        );
        registry.set_stopping();
        let (status, body) = get(address, "/health/ready", timeout).await.unwrap();
        assert_eq!(
            (status, body.as_str()),
            (503, "not ready:\nshutting down\n")
        );

        let response = raw(address, b"GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
        for line in [
            "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n",
            "Cache-Control: no-store\r\n",
            "Connection: close\r\n",
        ] {
            assert!(response.contains(line), "{line} in {response}");
        }
        let response = raw(address, b"GET /missing HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(
            response.starts_with("HTTP/1.1 404 Not Found\r\n"),
            "{response}"
        );
        let response = raw(address, b"DELETE /metrics HTTP/1.1\r\n\r\n").await;
        assert!(response.starts_with("HTTP/1.1 405 "), "{response}");
        assert!(response.contains("Allow: GET, HEAD\r\n"), "{response}");
        let response = raw(address, b"garbage\r\n\r\n").await;
        assert!(response.starts_with("HTTP/1.1 400 "), "{response}");
        let response = raw(address, b"HEAD /health/live HTTP/1.1\r\n\r\n").await;
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
        assert!(response.contains("Content-Length: 5\r\n"), "{response}");
        assert!(
            response.ends_with("\r\n\r\n"),
            "HEAD has no body: {response}"
        );
        let response = raw(address, b"HEAD /metrics HTTP/1.1\r\n\r\n").await;
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
        assert!(response.contains(METRICS_CONTENT_TYPE), "{response}");
        assert!(response.ends_with("\r\n\r\n"), "{response}");
        let mut huge = b"GET /metrics HTTP/1.1\r\n".to_vec();
        huge.extend(std::iter::repeat_n(b'x', 2 * MAX_HEAD));
        let response = raw(address, &huge).await;
        assert!(response.starts_with("HTTP/1.1 431 "), "{response}");

        stop.send_replace(true);
        tokio::time::timeout(timeout, server)
            .await
            .unwrap()
            .unwrap();
        assert!(get(address, "/health/live", timeout).await.is_err());
    }

    /// Issue 16: 64 sockets that never sent a byte made `/health/live` time out.
    #[tokio::test]
    async fn idle_connections_do_not_stall_liveness() {
        // With the default limits 64 fit; with 16 each new one closes the oldest.
        let few = Limits {
            header_read: Duration::from_millis(500),
            max_connections: 16,
            ..LIMITS
        };
        for limits in [LIMITS, few] {
            let endpoint = start(Arc::new(Registry::default()), limits).await;
            let mut idle = Vec::new();
            for _ in 0..64 {
                idle.push(TcpStream::connect(endpoint.address).await.unwrap());
            }
            let live = get(endpoint.address, "/health/live", Duration::from_secs(2)).await;
            let (status, body) = live.unwrap_or_else(|e| panic!("{limits:?}: {e}"));
            assert_eq!((status, body.as_str()), (200, "live\n"));
            if limits.header_read < LIMITS.header_read {
                // Each is let go by its header-read timeout (or the limit), unanswered.
                let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
                for mut stream in idle {
                    let mut buffer = [0u8; 64];
                    let read = tokio::time::timeout_at(deadline, stream.read(&mut buffer))
                        .await
                        .expect("an idle connection is closed before the deadline");
                    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
                }
            }
        }
    }

    /// Issue 16: a client that never read `/metrics` held one of 32 permits for good, and
    /// 32 of them blocked every request.
    #[tokio::test]
    async fn clients_that_never_read_metrics_do_not_block_other_requests() {
        let size = metrics_beyond_buffers();
        let limits = Limits {
            max_connections: 8,
            ..LIMITS
        };
        let endpoint = start(registry_with_metrics_of(size), limits).await;
        // One more than the old server's permits. All connect first, so the older ones
        // are closed unanswered and only the newest pay for rendering a large answer.
        let mut clients = Vec::new();
        for _ in 0..33 {
            clients.push(small_buffer_connection(endpoint.address).await);
        }
        for client in &mut clients {
            // A closed connection may refuse the request; it was let go, as it should be.
            let _ = client.write_all(METRICS_REQUEST).await;
        }
        // The newest fill every slot, each stalled in an answer it does not read.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        for client in &clients[clients.len() - limits.max_connections..] {
            let mut first = [0u8; 1];
            let peeked = tokio::time::timeout_at(deadline, client.peek(&mut first)).await;
            assert_eq!(peeked.expect("each newest client is answered").unwrap(), 1);
        }
        let live = get(endpoint.address, "/health/live", Duration::from_secs(2)).await;
        assert_eq!(live.unwrap(), (200, "live\n".to_string()));
        let metrics = get(endpoint.address, "/metrics", Duration::from_secs(10)).await;
        let (status, body) = metrics.unwrap();
        assert_eq!(status, 200);
        assert!(body.len() >= size, "{} of {size} bytes", body.len());
    }

    #[tokio::test]
    async fn an_unread_answer_is_cut_at_the_deadline_and_shutdown_waits_no_longer() {
        let limits = Limits {
            header_read: Duration::from_millis(500),
            write: Duration::from_millis(500),
            ..LIMITS
        };
        let Endpoint {
            address,
            stop,
            server,
        } = start(registry_with_metrics_of(metrics_beyond_buffers()), limits).await;
        let mut client = small_buffer_connection(address).await;
        client.write_all(METRICS_REQUEST).await.unwrap();
        // The answer has started (peeking leaves it unread).
        let mut first = [0u8; 1];
        let peeked = tokio::time::timeout(Duration::from_secs(5), client.peek(&mut first)).await;
        assert_eq!(peeked.expect("the answer starts").unwrap(), 1);
        // A graceful stop lets the answer go on, but not past the connection's deadline.
        stop.send_replace(true);
        tokio::time::timeout(Duration::from_secs(5), server)
            .await
            .expect("the server stops by the connection's deadline")
            .unwrap();
        let mut received = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(10), client.read_to_end(&mut received));
        let _ = read.await.expect("the server closed the connection");
        let text = String::from_utf8_lossy(&received);
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let length: usize = head
            .lines()
            .find_map(|line| line.strip_prefix("Content-Length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert!(body.len() < length, "{} of {length} bytes", body.len());
    }

    #[tokio::test]
    async fn a_taken_port_is_a_config_error_naming_the_key() {
        let first = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let err = bind(first.local_addr().unwrap()).await.unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::Config);
        assert!(
            err.to_string()
                .starts_with("observe.listen: cannot listen on 127.0.0.1:"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn get_names_the_url_and_the_cause_when_nobody_listens() {
        let free = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let err = get(free, "/health/live", Duration::from_secs(5))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(&format!("io: GET http://{free}/health/live: ")),
            "{err}"
        );
        assert!(err.contains("refused"), "{err}");
    }
}
