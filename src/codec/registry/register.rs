//! Registering Avro schemas under a subject (`POST {url}/subjects/{subject}/versions`),
//! for the Confluent-framed records lakejoin writes (`[[changelog]]` with
//! `format = "avro"` and a `schema_registry`).
//!
//! Registering is idempotent in the registry (the same schema under the same subject
//! answers the same id), so a restart registers again instead of remembering ids. A
//! registry that cannot be reached, or answers anything but its own refusal, is a
//! transient fault the caller waits out ([`Error::SchemaRegistry`]); the registry's
//! refusal of the schema (409: incompatible with the subject's earlier versions under
//! its compatibility rule; 422: invalid) is a configuration problem that stops the
//! pipeline with the registry's reason ([`Error::Config`]): retrying would only be
//! refused again.
//!
//! Why beside the lookups: it is the same registry, URL and credentials
//! ([`Endpoint`]); lookups read ids, this writes them.

use serde::{Deserialize, Serialize};

use super::{Endpoint, ErrorResponse, MAX_ERROR_BYTES, read_at_most};
use crate::codec::error::shorten;
use crate::error::{Error, Result};

/// Registers schemas with one registry.
#[derive(Debug)]
pub(crate) struct SchemaRegistrar {
    endpoint: Endpoint,
}

#[derive(Serialize)]
struct RegisterRequest<'a> {
    schema: &'a str,
}

#[derive(Deserialize)]
struct RegisterResponse {
    id: u32,
}

impl SchemaRegistrar {
    /// A registrar for the registry at `url` (`http(s)://[user:pass@]host[:port][/prefix]`).
    pub(crate) fn new(url: &str) -> Result<Self> {
        Ok(SchemaRegistrar {
            endpoint: Endpoint::parse(url)?,
        })
    }

    /// Registers the Avro schema `schema` (its JSON text) under `subject` and returns
    /// its id (the existing one when the subject already has it).
    pub(crate) async fn register(&self, subject: &str, schema: &str) -> Result<u32> {
        // The subject is one path segment: `/` and the like are escaped.
        let mut url = self
            .endpoint
            .url("subjects/")
            .map_err(|e| Error::Config(format!("schema registry URL: {e}")))?;
        url.path_segments_mut()
            .map_err(|()| Error::Config("schema registry URL cannot take a path".into()))?
            .pop_if_empty()
            .extend([subject, "versions"]);
        let transient = |what: String| {
            Error::SchemaRegistry(format!("registering a schema under {subject}: {what}"))
        };
        let request = serde_json::to_vec(&RegisterRequest { schema })
            .map_err(|e| Error::Config(format!("schema for {subject}: {e}")))?;
        let mut response = self
            .endpoint
            .request(reqwest::Method::POST, url.clone())
            .header("Content-Type", "application/vnd.schemaregistry.v1+json")
            .body(request)
            .send()
            .await
            .map_err(|e| transient(format!("request to {url} failed: {e}")))?;
        let status = response.status();
        let (body, _) = read_at_most(&mut response, MAX_ERROR_BYTES)
            .await
            .map_err(|e| transient(format!("reading the answer failed: {e}")))?;
        if status.is_success() {
            return serde_json::from_slice::<RegisterResponse>(&body)
                .map(|r| r.id)
                .map_err(|e| {
                    transient(format!(
                        "the answer is not the registry's ({e}): {}",
                        shorten(&String::from_utf8_lossy(&body), 200)
                    ))
                });
        }
        let text = shorten(&String::from_utf8_lossy(&body), 300);
        let code = serde_json::from_slice::<ErrorResponse>(&body)
            .ok()
            .map(|e| e.error_code);
        let status_code = i64::from(status.as_u16());
        let registry_refuses = matches!(status_code, 409 | 422)
            && code.is_some_and(|c| c == status_code || c / 100 == status_code);
        if registry_refuses {
            Err(Error::Config(format!(
                "schema registry refused the schema for subject {subject} ({status}): {text}"
            )))
        } else {
            Err(transient(format!("answered {status}: {text}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;
    use std::sync::mpsc;

    /// A one-shot HTTP server answering `status` with `body`; sends the request's line
    /// and body back.
    fn serve_once(status: &'static str, body: &'static str) -> (String, mpsc::Receiver<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/api", listener.local_addr().unwrap());
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            reader.read_line(&mut request_line).unwrap();
            let mut length = 0;
            loop {
                let mut header = String::new();
                reader.read_line(&mut header).unwrap();
                if header.trim().is_empty() {
                    break;
                }
                if let Some((name, value)) = header.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().unwrap();
                }
            }
            let mut request_body = vec![0; length];
            reader.read_exact(&mut request_body).unwrap();
            tx.send(format!(
                "{} {}",
                request_line.trim(),
                String::from_utf8(request_body).unwrap()
            ))
            .unwrap();
            let mut stream = stream;
            write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
        });
        (url, rx)
    }

    #[tokio::test]
    async fn a_schema_is_posted_under_its_subject_and_its_id_returned() {
        let (url, request) = serve_once("200 OK", r#"{"id":42}"#);
        let registrar = SchemaRegistrar::new(&url).unwrap();
        let id = registrar
            .register("orders changes-value", r#"{"type":"string"}"#)
            .await
            .unwrap();
        assert_eq!(id, 42);
        assert_eq!(
            request.recv().unwrap(),
            r#"POST /api/subjects/orders%20changes-value/versions HTTP/1.1 {"schema":"{\"type\":\"string\"}"}"#
        );
    }

    #[tokio::test]
    async fn an_incompatible_schema_stops_and_an_outage_is_waited_out() {
        let (url, _request) = serve_once(
            "409 Conflict",
            r#"{"error_code":409,"message":"Schema being registered is incompatible"}"#,
        );
        let err = SchemaRegistrar::new(&url)
            .unwrap()
            .register("t-value", "\"long\"")
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Config, "{err}");
        assert!(err.to_string().contains("incompatible"), "{err}");
        // A 409 from something that is not the registry, a 5xx, and no answer at all
        // are transient.
        let (url, _request) = serve_once("409 Conflict", "<html>proxy</html>");
        let err = SchemaRegistrar::new(&url)
            .unwrap()
            .register("t-value", "\"long\"")
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Transient, "{err}");
        let (url, _request) = serve_once("503 Service Unavailable", "{}");
        let err = SchemaRegistrar::new(&url)
            .unwrap()
            .register("t-value", "\"long\"")
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Transient, "{err}");
        let err = SchemaRegistrar::new("http://127.0.0.1:9/")
            .unwrap()
            .register("t-value", "\"long\"")
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Transient, "{err}");
    }

    #[test]
    fn the_password_of_a_bad_url_is_not_shown() {
        let err = SchemaRegistrar::new("ftp://u:hunter2pw@registry").unwrap_err();
        assert!(!err.to_string().contains("hunter2pw"), "{err}");
    }
}
