//! Durations in `connectors.toml` and on the command line, written like `"500ms"`, `"5s"`,
//! `"5 min"`, `"1h"`, `"2d"`. The unit is required: a bare `10` would be 10 ms under
//! Paimon's rule for table options, where 10 s is what people mean.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

use crate::table::options::DurationError;

/// Parses a duration (`500ms`, `5s`, `30 min`, `1h`, `2d`), spelled as in table options,
/// except that the unit is required.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    crate::table::options::parse_duration_with_unit(text)
}

/// serde: a duration string.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(d)?;
    parse_duration(&text).map_err(serde::de::Error::custom)
}

/// serde: an optional duration string.
pub(crate) fn deserialize_option<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Duration>, D::Error> {
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

    #[test]
    fn a_number_without_a_unit_is_an_error_naming_the_units() {
        // Paimon reads a bare number as milliseconds; in lakejoin's config and on its
        // command line `10` meant 10 ms where 10 s was meant, so it is refused here.
        for text in ["10", " 10 ", "0", "250"] {
            let err = parse_duration(text).unwrap_err().to_string();
            assert!(
                err.contains("has no unit") && err.contains("ms, s, min, h, d"),
                "{text}: {err}"
            );
        }
        assert_eq!(parse_duration("10 ms"), Ok(Duration::from_millis(10)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
    }
}
