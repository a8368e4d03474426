//! Durations in `connectors.toml`, written like `"500ms"`, `"5s"`, `"5 min"`, `"1h"`, `"2d"`.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// Parses a duration (`500ms`, `5s`, `30 min`, `1h`, `2d`), with Paimon's rules for table
/// options so both spell durations alike.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    crate::table::options::parse_duration(text)
}

/// serde: a duration string.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(d)?;
    parse_duration(&text).map_err(serde::de::Error::custom)
}

/// serde: an optional duration string.
pub fn deserialize_option<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    match Option::<String>::deserialize(d)? {
        None => Ok(None),
        Some(text) => parse_duration(&text)
            .map(Some)
            .map_err(serde::de::Error::custom),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_common_spellings() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("5 min"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("2d"), Ok(Duration::from_secs(172_800)));
        assert!(parse_duration("five s").is_err());
        assert!(parse_duration("5 fortnights").is_err());
    }
}
