//! The HTTP endpoint of `lakejoin run`: `GET /metrics` (Prometheus text format),
//! `GET /health/live` (the process is up) and `GET /health/ready` (every pipeline's
//! consumer is assigned and its caches loaded; 503 with the reasons otherwise).
//!
//! A deliberately small HTTP/1.1 server on tokio: one request per connection
//! (`Connection: close`), GET and HEAD only, request heads up to 8 KiB, read within 5 s.
//! That is all Prometheus, Docker and Kubernetes probes need, without an HTTP framework.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};

use super::Registry;
use crate::error::{Error, Result};

/// Longest request head accepted.
const MAX_HEAD: usize = 8 * 1024;
/// A client must send its request head within this.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections served at once; more wait to be accepted.
const MAX_CONNECTIONS: usize = 32;

/// Content type of `/metrics`.
pub const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// An HTTP response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl Response {
    fn text(status: u16, body: impl Into<String>) -> Self {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.into(),
        }
    }

    /// The response bytes; without the body for HEAD.
    pub fn to_bytes(&self, head_only: bool) -> Vec<u8> {
        let mut out = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n",
            self.status,
            reason_phrase(self.status),
            self.content_type,
            self.body.len()
        );
        if self.status == 405 {
            out.push_str("Allow: GET, HEAD\r\n");
        }
        out.push_str("\r\n");
        let mut bytes = out.into_bytes();
        if !head_only {
            bytes.extend_from_slice(self.body.as_bytes());
        }
        bytes
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

/// The method and path (without query string) of a request head's first line; `None`
/// when it is not an HTTP/1.x request line.
pub fn parse_request_line(head: &str) -> Option<(&str, &str)> {
    let line = head.lines().next()?;
    let mut parts = line.split(' ');
    let method = parts.next().filter(|m| !m.is_empty())?;
    let target = parts.next().filter(|t| t.starts_with('/'))?;
    let version = parts.next()?;
    if parts.next().is_some() || !version.starts_with("HTTP/1.") {
        return None;
    }
    let path = target.split(['?', '#']).next().unwrap_or(target);
    Some((method, path))
}

/// Answers one request.
pub fn route(method: &str, path: &str, registry: &Registry) -> Response {
    let known = matches!(path, "/metrics" | "/health/live" | "/health/ready" | "/");
    if !known {
        return Response::text(404, format!("not found: {path}\n"));
    }
    if method != "GET" && method != "HEAD" {
        return Response::text(405, format!("method {method} not allowed\n"));
    }
    match path {
        "/metrics" => Response {
            status: 200,
            content_type: METRICS_CONTENT_TYPE,
            body: registry.render(),
        },
        "/health/live" => Response::text(200, "live\n"),
        "/health/ready" => match registry.readiness() {
            Ok(()) => Response::text(200, "ready\n"),
            Err(reasons) => Response::text(503, format!("not ready:\n{}\n", reasons.join("\n"))),
        },
        _ => Response::text(200, "lakejoin: GET /metrics, /health/live, /health/ready\n"),
    }
}

/// Binds the endpoint's address (before anything else starts, so a taken port fails
/// the start with a clear message).
pub async fn bind(address: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(address).await.map_err(|e| {
        Error::Config(format!(
            "observe.listen: cannot listen on {address}: {e} (is another process using the port?)"
        ))
    })
}

/// Serves requests until `stop` turns true.
pub async fn serve(
    listener: TcpListener,
    registry: Arc<Registry>,
    mut stop: watch::Receiver<bool>,
) {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let registry = registry.clone();
                    tokio::spawn(async move {
                        handle(stream, &registry).await;
                        drop(permit);
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "HTTP endpoint: accept failed");
                    // Out of file descriptors and the like: do not spin.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    return;
                }
            }
        }
    }
}

/// Reads one request head, answers it and closes the connection.
async fn handle(mut stream: TcpStream, registry: &Registry) {
    let response = match tokio::time::timeout(READ_TIMEOUT, read_head(&mut stream)).await {
        Err(_) => Some((Response::text(408, "request timeout\n"), false)),
        Ok(Err(_)) => None,
        Ok(Ok(None)) => Some((Response::text(431, "request head too large\n"), false)),
        Ok(Ok(Some(head))) => Some(match parse_request_line(&head) {
            None => (Response::text(400, "bad request\n"), false),
            Some((method, path)) => (route(method, path, registry), method == "HEAD"),
        }),
    };
    if let Some((response, head_only)) = response {
        let _ = stream.write_all(&response.to_bytes(head_only)).await;
        let _ = stream.shutdown().await;
        // Read what the client still sends until it closes, so closing with unread input
        // does not reset the connection before the client has read the response.
        let mut sink = [0u8; 1024];
        let mut left: usize = 64 * 1024;
        let drain = async {
            while left > 0 {
                match stream.read(&mut sink).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => left = left.saturating_sub(n),
                }
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(1), drain).await;
    }
}

/// The request head (up to the blank line); `None` when longer than [`MAX_HEAD`].
async fn read_head(stream: &mut TcpStream) -> std::io::Result<Option<String>> {
    let mut buffer = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = find_head_end(&buffer) {
            return Ok(Some(String::from_utf8_lossy(&buffer[..end]).into_owned()));
        }
        if buffer.len() > MAX_HEAD {
            return Ok(None);
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            // The client closed early: answer what we have (a bare request line).
            return Ok(Some(String::from_utf8_lossy(&buffer).into_owned()));
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
}

fn find_head_end(buffer: &[u8]) -> Option<usize> {
    buffer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .or_else(|| buffer.windows(2).position(|w| w == b"\n\n"))
}

/// `GET http://address/path`: the status code and body (a tiny client for
/// `lakejoin health` and tests).
pub async fn get(address: SocketAddr, path: &str, timeout: Duration) -> Result<(u16, String)> {
    let exchange = async {
        let mut stream = TcpStream::connect(address).await?;
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok::<_, std::io::Error>(response)
    };
    let context = format!("GET http://{address}{path}");
    let response = tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| Error::Io {
            context: context.clone(),
            source: std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no answer within {timeout:?}"),
            ),
        })?
        .map_err(|source| Error::Io {
            context: context.clone(),
            source,
        })?;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Error::Io {
            context,
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("not an HTTP response: {head:?}"),
            ),
        })?;
    Ok((status, body.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::{PipelineKind, PipelineMetrics};
    use std::sync::atomic::Ordering;

    #[test]
    fn request_lines_are_parsed() {
        assert_eq!(
            parse_request_line("GET /metrics HTTP/1.1\r\nHost: x\r\n"),
            Some(("GET", "/metrics"))
        );
        assert_eq!(
            parse_request_line("HEAD /health/ready?verbose=1 HTTP/1.0"),
            Some(("HEAD", "/health/ready"))
        );
        assert_eq!(parse_request_line("GET /metrics"), None, "no version");
        assert_eq!(parse_request_line("GET metrics HTTP/1.1"), None);
        assert_eq!(parse_request_line("GET /a b HTTP/1.1"), None);
        assert_eq!(parse_request_line("\u{16}\u{3}\u{1} tls"), None);
        assert_eq!(parse_request_line(""), None);
    }

    #[test]
    fn routes_answer_with_status_and_content_type() {
        let registry = Registry::default();
        let r = route("GET", "/metrics", &registry);
        assert_eq!((r.status, r.content_type), (200, METRICS_CONTENT_TYPE));
        assert!(r.body.contains("lakejoin_build_info"));
        assert_eq!(route("GET", "/health/live", &registry).status, 200);
        assert_eq!(route("GET", "/health/ready", &registry).status, 503);
        assert_eq!(route("GET", "/nope", &registry).status, 404);
        assert_eq!(route("POST", "/metrics", &registry).status, 405);
        let bytes = route("POST", "/metrics", &registry).to_bytes(false);
        assert!(
            String::from_utf8(bytes)
                .unwrap()
                .contains("Allow: GET, HEAD\r\n")
        );
        let head = route("HEAD", "/health/live", &registry).to_bytes(true);
        let head = String::from_utf8(head).unwrap();
        assert!(
            head.ends_with(
                "Content-Length: 5\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
            ),
            "{head}"
        );
    }

    async fn raw(address: SocketAddr, request: &[u8]) -> String {
        let mut stream = TcpStream::connect(address).await.unwrap();
        stream.write_all(request).await.unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await.unwrap();
        String::from_utf8(response).unwrap()
    }

    #[tokio::test]
    async fn the_server_answers_on_loopback_and_readiness_follows_the_pipelines() {
        let registry = Arc::new(Registry::default());
        let metrics = Arc::new(PipelineMetrics::default());
        registry.register("c", PipelineKind::Cdc, Some("db.t"), metrics.clone());
        let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let address = listener.local_addr().unwrap();
        let (stop, stopped) = watch::channel(false);
        let server = tokio::spawn(serve(listener, registry.clone(), stopped));
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

        let response = raw(address, b"GET /missing HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(
            response.starts_with("HTTP/1.1 404 Not Found\r\n"),
            "{response}"
        );
        let response = raw(address, b"DELETE /metrics HTTP/1.1\r\n\r\n").await;
        assert!(response.starts_with("HTTP/1.1 405 "), "{response}");
        let response = raw(address, b"garbage\r\n\r\n").await;
        assert!(response.starts_with("HTTP/1.1 400 "), "{response}");
        let response = raw(address, b"HEAD /metrics HTTP/1.1\r\n\r\n").await;
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
        assert!(
            response.ends_with("\r\n\r\n"),
            "HEAD has no body: {response}"
        );
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
}
