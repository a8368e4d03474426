//! Durations written like `"500ms"`, `"5s"`, `"30m"`, `"1h"`, `"2d"` (also `"5 min"`).

use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// Parses a duration: a number followed by ms, s, m/min, h or d.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim().to_ascii_lowercase();
    let split = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration like 500ms, 5s, 30m, 1h or 2d"))?;
    let seconds = match unit.trim() {
        "ms" | "millis" => value / 1000.0,
        "s" | "sec" | "secs" | "second" | "seconds" => value,
        "m" | "min" | "mins" | "minute" | "minutes" => value * 60.0,
        "h" | "hour" | "hours" => value * 3600.0,
        "d" | "day" | "days" => value * 86_400.0,
        "" => return Err(format!("`{text}` needs a unit (ms, s, m, h, d)")),
        other => return Err(format!("`{text}` has an unknown unit `{other}` (ms, s, m, h, d)")),
    };
    if !seconds.is_finite() || seconds < 0.0 || seconds > 1e12 {
        return Err(format!("`{text}` is out of range"));
    }
    Ok(Duration::from_secs_f64(seconds))
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
        Some(text) => parse_duration(&text).map(Some).map_err(serde::de::Error::custom),
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
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("five s").is_err());
        assert!(parse_duration("5 fortnights").is_err());
    }
}
