//! Where librdkafka's own log lines and global errors go.
//!
//! While a broker is away librdkafka reports every failed reconnect (several per second,
//! per client) as an error. The broker watch ([`super::watch`]) reports an outage once per
//! pipeline and again when it ends, so these repeats go to debug; everything else keeps a
//! level that says what it is, tagged with the client it came from.

use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::ConsumerContext;
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;

/// The rdkafka client context of every lakejoin consumer and producer.
#[derive(Clone, Debug)]
pub struct ClientLog {
    /// Which client: the consuming pipeline's name, or `producer` for the shared producer.
    client: String,
}

impl ClientLog {
    pub fn new(client: &str) -> Self {
        ClientLog {
            client: client.to_string(),
        }
    }
}

/// Errors that repeat for as long as a broker is unreachable.
pub fn is_broker_outage(code: Option<RDKafkaErrorCode>) -> bool {
    matches!(
        code,
        Some(RDKafkaErrorCode::AllBrokersDown | RDKafkaErrorCode::BrokerTransportFailure)
    )
}

/// librdkafka's facility for a failed connection ("FAIL") is its per-attempt outage line.
fn is_connection_failure(facility: &str) -> bool {
    facility == "FAIL"
}

impl ClientContext for ClientLog {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        let client = self.client.as_str();
        match level {
            _ if is_connection_failure(facility) => {
                tracing::debug!(client, facility, "librdkafka: {message}")
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
        if is_broker_outage(error.rdkafka_error_code()) {
            tracing::debug!(client, %error, "librdkafka: {reason}");
        } else {
            // librdkafka retries on its own; a global error is worth a look, not fatal.
            tracing::warn!(client, %error, "librdkafka: {reason}");
        }
    }
}

impl ConsumerContext for ClientLog {}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
