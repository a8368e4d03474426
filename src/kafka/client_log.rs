//! Where librdkafka's own log lines and errors go, and what a client's faults make of the
//! process's readiness.
//!
//! While a broker is away librdkafka reports every failed reconnect (several per second,
//! per client) as an error. The broker watch ([`super::watch`]) reports an outage once per
//! pipeline and again when it ends, so these repeats go to debug.
//!
//! A broker that refuses the client (a wrong password, an untrusted certificate, TLS
//! spoken to a plaintext listener) or a partition whose records cannot be decoded (an
//! unknown compression codec) is not an outage that ends by itself: it is a fault. The
//! first report of a fault is one ERROR line that names the listener (librdkafka's reason
//! starts with it, `sasl_ssl://host:port/…`) and the client's security settings; repeats
//! go to debug while it lasts. The fault is kept for [`FAULT_WINDOW`] after its last
//! report, and the watch turns it into a readiness reason of the pipeline. librdkafka
//! keeps retrying all along, so the process recovers by itself once the cause is fixed.
//!
//! librdkafka's lines and reasons can quote configuration values (its configuration dump
//! with `debug=conf`, a rejected property, an OAUTHBEARER endpoint with credentials), so
//! each goes through the client's [`Redactor`] before it is logged or kept as a fault:
//! the values of the client's secret properties, URI credentials, PEM private keys and
//! any secret-named `name = value` are masked.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::ConsumerContext;
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;

use crate::config::KafkaConfig;
use crate::secret::Redactor;

/// How long a fault counts after its last report. librdkafka retries a refused connection
/// at least every `reconnect.backoff.max.ms` (10 s) and a failing fetch sooner, so a fault
/// that lasts is reported again well within it.
pub(crate) const FAULT_WINDOW: Duration = Duration::from_secs(30);

/// The rdkafka client context of every lakejoin consumer and producer. Clones share the
/// fault, so a clone kept outside the client reads it.
#[derive(Clone, Debug)]
pub(crate) struct ClientLog {
    /// Which client: the consuming pipeline's name, or `producer` for the shared producer.
    client: String,
    /// The client's security settings in a few words (never a secret).
    security: String,
    /// Masks the client's secrets in what librdkafka reports.
    redactor: Arc<Redactor>,
    /// The last fault and when it was last reported.
    fault: Arc<Mutex<Option<(String, Instant)>>>,
    /// Whether the consumer's group has handed it an assignment (possibly of no
    /// partition: more members than partitions) since its last revocation.
    joined: Arc<std::sync::atomic::AtomicBool>,
}

impl ClientLog {
    pub(crate) fn new(client: &str, kafka: &KafkaConfig) -> Self {
        ClientLog {
            client: client.to_string(),
            security: security_summary(kafka),
            redactor: Arc::new(Redactor::from_pairs(&kafka.properties)),
            fault: Arc::new(Mutex::new(None)),
            joined: Arc::default(),
        }
    }

    /// The client's current fault (reported within `FAULT_WINDOW`), if any.
    pub(crate) fn fault(&self) -> Option<String> {
        let fault = self.fault.lock().unwrap_or_else(|e| e.into_inner());
        fault
            .as_ref()
            .filter(|(_, at)| at.elapsed() < FAULT_WINDOW)
            .map(|(text, _)| text.clone())
    }

    /// Records a fault; whether it is news (not the fault already in force), which is
    /// logged at ERROR, repeats at debug.
    fn record_fault(&self, text: String) -> bool {
        let mut fault = self.fault.lock().unwrap_or_else(|e| e.into_inner());
        let news = !fault
            .as_ref()
            .is_some_and(|(known, at)| *known == text && at.elapsed() < FAULT_WINDOW);
        *fault = Some((text, Instant::now()));
        news
    }

    /// A record the consumer could not take (from its `recv`): an undecodable partition is
    /// a fault; anything else is a warning, and outages and refusals go to debug (the
    /// client's error callback reports a refusal once, and `recv` repeats it on every poll,
    /// several times a second).
    pub(crate) fn consumer_error(&self, error: &KafkaError) {
        let client = self.client.as_str();
        let code = error.rdkafka_error_code();
        let error = self.redactor.redact(&error.to_string());
        if is_refusal(code, &error) {
            tracing::debug!(client, %error, "Kafka consumer error (a refusal)");
            return;
        }
        if is_undecodable(code) {
            let text = format!("records cannot be decoded: {error}");
            if self.record_fault(text.clone()) {
                tracing::error!(
                    client,
                    %error,
                    "Kafka records cannot be decoded (compression codec or record format); \
                     the partition does not advance until they can"
                );
            } else {
                tracing::debug!(client, %error, "Kafka consumer error (again): {text}");
            }
        } else if is_broker_outage(code) {
            tracing::debug!(client, %error, "Kafka consumer error");
        } else {
            tracing::warn!(client, %error, "Kafka consumer error");
        }
    }
}

/// `security.protocol …, sasl.mechanism …, sasl.username …` from the client's properties:
/// what an operator compares with the listener. Only names and non-secret values.
fn security_summary(kafka: &KafkaConfig) -> String {
    let get = |key: &str| kafka.properties.get(key).map(String::as_str);
    let protocol = get("security.protocol").unwrap_or("plaintext");
    let mut summary = format!("security.protocol {protocol}");
    if protocol.to_ascii_lowercase().starts_with("sasl") {
        summary.push_str(&format!(
            ", sasl.mechanism {}",
            get("sasl.mechanism")
                .or(get("sasl.mechanisms"))
                .unwrap_or("GSSAPI")
        ));
        if let Some(user) = get("sasl.username") {
            summary.push_str(&format!(", sasl.username {user}"));
        }
    }
    if protocol.to_ascii_lowercase().ends_with("ssl") {
        let client_certificate = get("ssl.certificate.location").is_some()
            || get("ssl.certificate.pem").is_some()
            || get("ssl.keystore.location").is_some();
        summary.push_str(if client_certificate {
            ", TLS with a client certificate"
        } else {
            ", TLS without a client certificate"
        });
    }
    summary
}

/// Errors that repeat for as long as a broker is unreachable.
pub(crate) fn is_broker_outage(code: Option<RDKafkaErrorCode>) -> bool {
    matches!(
        code,
        Some(RDKafkaErrorCode::AllBrokersDown | RDKafkaErrorCode::BrokerTransportFailure)
    )
}

/// A broker that refuses this client: credentials, certificates, or the wrong protocol.
/// TLS spoken to a plaintext listener (or the reverse) is a transport failure to
/// librdkafka; its reason says what happened.
fn is_refusal(code: Option<RDKafkaErrorCode>, reason: &str) -> bool {
    match code {
        Some(
            RDKafkaErrorCode::Authentication
            | RDKafkaErrorCode::SSL
            | RDKafkaErrorCode::SaslAuthenticationFailed,
        ) => true,
        Some(RDKafkaErrorCode::BrokerTransportFailure) => {
            reason.contains("SSL handshake failed")
                || reason.contains("incorrect security.protocol")
        }
        _ => false,
    }
}

/// librdkafka's reason without its varying tail (`(after 3ms in state AUTH_REQ, 1
/// identical error(s) suppressed)`), so repeats of one fault compare equal.
fn stable_reason(reason: &str) -> &str {
    reason
        .rfind(" (after ")
        .map_or(reason, |at| &reason[..at])
        .trim()
}

/// Records this client cannot decode: an unknown or unbuilt compression codec, a corrupt
/// or unsupported record batch.
fn is_undecodable(code: Option<RDKafkaErrorCode>) -> bool {
    matches!(
        code,
        Some(
            RDKafkaErrorCode::NotImplemented
                | RDKafkaErrorCode::BadCompression
                | RDKafkaErrorCode::BadMessage
                | RDKafkaErrorCode::UnsupportedCompressionType
                | RDKafkaErrorCode::InvalidRecord
        )
    )
}

/// librdkafka's facility for a failed connection ("FAIL") is its per-attempt outage line.
fn is_connection_failure(facility: &str) -> bool {
    facility == "FAIL"
}

/// Broker answers that mean a coordinator is still starting (a fresh cluster, a broker
/// that just took over), not that anything failed: librdkafka retries them.
const COORDINATOR_STARTING: [&str; 3] = [
    "Coordinator load in progress",
    "Coordinator not available",
    "Not coordinator",
];

/// librdkafka's warning that an idempotent producer's id request is being retried
/// because the coordinator is still starting: normal for a few seconds after a broker
/// starts, so it is logged at INFO, not WARN. Other reasons stay warnings.
fn is_coordinator_starting(facility: &str, message: &str) -> bool {
    facility == "GETPID"
        && message.contains("retrying")
        && COORDINATOR_STARTING.iter().any(|m| message.contains(m))
}

impl ClientContext for ClientLog {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        let client = self.client.as_str();
        let message = self.redactor.redact(message);
        match level {
            _ if is_connection_failure(facility) => {
                tracing::debug!(client, facility, "librdkafka: {message}")
            }
            RDKafkaLogLevel::Warning if is_coordinator_starting(facility, &message) => {
                tracing::info!(client, facility, "librdkafka: {message}")
            }
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error => tracing::error!(client, facility, "librdkafka: {message}"),
            RDKafkaLogLevel::Warning => tracing::warn!(client, facility, "librdkafka: {message}"),
            RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
                tracing::info!(client, facility, "librdkafka: {message}")
            }
            RDKafkaLogLevel::Debug => tracing::debug!(client, facility, "librdkafka: {message}"),
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        let client = self.client.as_str();
        let code = error.rdkafka_error_code();
        let reason = self.redactor.redact(reason);
        let reason = reason.as_str();
        let error = self.redactor.redact(&error.to_string());
        if is_refusal(code, reason) {
            let text = format!("{} ({})", stable_reason(reason), self.security);
            if self.record_fault(text) {
                tracing::error!(
                    client,
                    security = %self.security,
                    "Kafka refused the connection: {reason}; check the listener's address and \
                     the client's security settings ({}); retrying",
                    self.security
                );
            } else {
                tracing::debug!(client, %error, "librdkafka (again): {reason}");
            }
        } else if is_broker_outage(code) {
            tracing::debug!(client, %error, "librdkafka: {reason}");
        } else {
            // librdkafka retries on its own; a global error is worth a look, not fatal.
            tracing::warn!(client, %error, "librdkafka: {reason}");
        }
    }
}

/// Tracks group membership for readiness: a member that was given no partition is a
/// working member (Kafka Streams and Connect report it as running), not a waiting one.
impl ConsumerContext for ClientLog {
    fn post_rebalance(
        &self,
        _consumer: &rdkafka::consumer::BaseConsumer<Self>,
        rebalance: &rdkafka::consumer::Rebalance<'_>,
    ) {
        let joined = matches!(rebalance, rdkafka::consumer::Rebalance::Assign(_));
        self.joined
            .store(joined, std::sync::atomic::Ordering::Relaxed);
    }
}

impl ClientLog {
    /// Whether the consumer is a member of its group with an assignment (of any size).
    pub(crate) fn joined(&self) -> bool {
        self.joined.load(std::sync::atomic::Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log sink for [`logged`].
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    /// Every line logged (at any level) while `f` runs on this thread.
    fn logged(f: impl FnOnce()) -> String {
        let captured = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(captured.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::TRACE)
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        let bytes = captured.0.lock().unwrap().clone();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    fn kafka(properties: &[(&str, &str)]) -> KafkaConfig {
        KafkaConfig {
            bootstrap_servers: "localhost:9092".into(),
            group_id: "g".into(),
            group_instance_id: None,
            properties: properties
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn outages_are_recognised_by_their_codes() {
        assert!(is_broker_outage(Some(RDKafkaErrorCode::AllBrokersDown)));
        assert!(is_broker_outage(Some(
            RDKafkaErrorCode::BrokerTransportFailure
        )));
        assert!(!is_broker_outage(Some(
            RDKafkaErrorCode::UnknownTopicOrPartition
        )));
        assert!(!is_broker_outage(None));
        assert!(is_refusal(Some(RDKafkaErrorCode::Authentication), ""));
        assert!(is_refusal(Some(RDKafkaErrorCode::SSL), ""));
        assert!(is_refusal(
            Some(RDKafkaErrorCode::BrokerTransportFailure),
            "ssl://127.0.0.1:9092/bootstrap: SSL handshake failed: Disconnected: SSL connection \
             closed by peer: connecting to a PLAINTEXT broker listener? (after 1ms in state \
             SSL_HANDSHAKE)"
        ));
        assert!(!is_refusal(
            Some(RDKafkaErrorCode::BrokerTransportFailure),
            "127.0.0.1:9092/bootstrap: Connect to ipv4#127.0.0.1:9092 failed: Connection refused"
        ));
        assert!(!is_refusal(Some(RDKafkaErrorCode::AllBrokersDown), ""));
        assert!(is_undecodable(Some(RDKafkaErrorCode::NotImplemented)));
        assert!(!is_undecodable(Some(RDKafkaErrorCode::QueueFull)));
    }

    #[test]
    fn the_security_summary_names_the_mechanism_and_never_a_secret() {
        let summary = security_summary(&kafka(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.username", "lakejoin"),
            ("sasl.password", "hunter2"),
        ]));
        assert_eq!(
            summary,
            "security.protocol SASL_SSL, sasl.mechanism SCRAM-SHA-512, sasl.username lakejoin, \
             TLS without a client certificate"
        );
        let summary = security_summary(&kafka(&[
            ("security.protocol", "ssl"),
            ("ssl.certificate.location", "/c.pem"),
            ("ssl.key.password", "hunter2"),
        ]));
        assert_eq!(
            summary,
            "security.protocol ssl, TLS with a client certificate"
        );
        assert_eq!(security_summary(&kafka(&[])), "security.protocol plaintext");
    }

    #[test]
    fn a_coordinator_still_starting_is_not_a_warning() {
        let log = ClientLog::new("p", &kafka(&[]));
        let text = logged(|| {
            log.log(
                RDKafkaLogLevel::Warning,
                "GETPID",
                "Failed to acquire idempotence PID from broker 127.0.0.1:9092/1: \
                 Broker: Coordinator load in progress: retrying",
            );
            log.log(
                RDKafkaLogLevel::Warning,
                "GETPID",
                "Failed to acquire idempotence PID from broker 127.0.0.1:9092/1: \
                 Broker: Cluster authorization failed: retrying",
            );
        });
        let levels: Vec<&str> = text
            .lines()
            .map(|l| {
                if l.contains(" INFO ") {
                    "INFO"
                } else if l.contains(" WARN ") {
                    "WARN"
                } else {
                    l
                }
            })
            .collect();
        assert_eq!(levels, ["INFO", "WARN"], "{text}");
    }

    #[test]
    fn librdkafka_log_lines_never_carry_secret_values() {
        let log = ClientLog::new(
            "p",
            &kafka(&[
                ("security.protocol", "SASL_SSL"),
                ("sasl.username", "lakejoin"),
                ("sasl.password", "hunter2-pw"),
                ("ssl.key.password", "k3y-pass"),
                ("sasl.oauthbearer.client.secret", "oauth-s3cret"),
            ]),
        );
        let text = logged(|| {
            // librdkafka's configuration dump (`debug=conf`), a property a line, with a
            // secret lakejoin did not configure.
            log.log(
                RDKafkaLogLevel::Debug,
                "CONF",
                "Client configuration:\n  sasl.username = lakejoin\n  sasl.password = hunter2-pw\n  \
                 ssl.key.password = k3y-pass\n  ssl.keystore.password = not-in-config-1\n  \
                 sasl.oauthbearer.client.secret = oauth-s3cret\n  security.protocol = SASL_SSL",
            );
            // Inline, in a URL, a PEM key, a configured value quoted anywhere.
            log.log(
                RDKafkaLogLevel::Warning,
                "CONFWARN",
                "Configuration property sasl.oauthbearer.client.secret=other-s3cret is ignored",
            );
            log.log(
                RDKafkaLogLevel::Info,
                "OIDC",
                "token endpoint https://client:url-s3cret@idp.example/token",
            );
            log.log(
                RDKafkaLogLevel::Error,
                "SSL",
                "ssl.key.pem = -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0B\n\
                 -----END PRIVATE KEY-----\nnext line stays",
            );
            log.error(
                KafkaError::Global(RDKafkaErrorCode::Authentication),
                "sasl_ssl://h:9094/bootstrap: SASL authentication error (password hunter2-pw)",
            );
            log.consumer_error(&KafkaError::Global(RDKafkaErrorCode::BadMessage));
        });
        for secret in [
            "hunter2-pw",
            "k3y-pass",
            "not-in-config-1",
            "oauth-s3cret",
            "other-s3cret",
            "url-s3cret",
            "MIIEvQIBADANBgkqhkiG9w0B",
        ] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        for kept in [
            "sasl.username = lakejoin",
            "sasl.password = ***",
            "security.protocol = SASL_SSL",
            "https://client:***@idp.example/token",
            "next line stays",
            "SASL authentication error",
        ] {
            assert!(text.contains(kept), "{kept} not in {text}");
        }
        // What readiness reports, and the context's Debug output, are masked too.
        let fault = log.fault().unwrap_or_default();
        assert!(!fault.contains("hunter2-pw"), "{fault}");
        assert!(!format!("{log:?}").contains("hunter2-pw"));
    }

    #[test]
    fn a_refusal_seen_by_a_poll_is_not_a_warning_but_a_bad_record_is() {
        let log = ClientLog::new("p", &kafka(&[]));
        let text = logged(|| {
            for _ in 0..3 {
                log.consumer_error(&KafkaError::MessageConsumption(RDKafkaErrorCode::SSL));
            }
        });
        assert!(!text.contains("WARN"), "{text}");
        assert_eq!(text.matches("DEBUG").count(), 3, "{text}");
        let text = logged(|| {
            log.consumer_error(&KafkaError::MessageConsumption(
                RDKafkaErrorCode::UnknownTopicOrPartition,
            ))
        });
        assert!(text.contains("WARN"), "{text}");
    }

    #[test]
    fn repeats_of_one_refusal_compare_equal() {
        assert_eq!(
            stable_reason(
                "sasl_ssl://h:1/bootstrap: SASL authentication error: invalid credentials \
                 (after 331ms in state AUTH_REQ, 1 identical error(s) suppressed)"
            ),
            "sasl_ssl://h:1/bootstrap: SASL authentication error: invalid credentials"
        );
        assert_eq!(stable_reason("no tail"), "no tail");
    }

    #[test]
    fn a_fault_is_news_once_and_clears() {
        let log = ClientLog::new("p", &kafka(&[]));
        assert_eq!(log.fault(), None);
        assert!(log.record_fault("refused".into()));
        assert!(!log.record_fault("refused".into()), "a repeat is not news");
        assert!(log.record_fault("other".into()), "a different fault is");
        assert_eq!(log.fault().as_deref(), Some("other"));
        // Expired faults are gone, and news again.
        *log.fault.lock().unwrap() = Some(("other".into(), Instant::now() - FAULT_WINDOW));
        assert_eq!(log.fault(), None);
        assert!(log.record_fault("other".into()));
    }
}
