//! Duration literals such as `100ms`, `30s`, `2m`, `1h30m`: parsing and printing.

use std::fmt;

/// A span of time in whole milliseconds, written in protocols as a literal like `1m30s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration {
    pub milliseconds: u64,
}

/// Units accepted in a duration literal, longest suffix first so `ms` wins over `m`.
const UNITS: [(&str, u64); 5] = [
    ("ms", 1),
    ("s", 1_000),
    ("m", 60_000),
    ("h", 3_600_000),
    ("d", 86_400_000),
];

/// The JSON Schema pattern of a duration literal.
pub const DURATION_PATTERN: &str = r"^([0-9]+(ms|s|m|h|d))+$";

impl Duration {
    pub const fn from_milliseconds(milliseconds: u64) -> Self {
        Duration { milliseconds }
    }

    /// Parses `30s`, `100ms`, `1h30m`; None when the text is not a duration literal.
    pub fn parse(text: &str) -> Option<Duration> {
        let mut rest = text.trim();
        if rest.is_empty() {
            return None;
        }
        let mut total: u64 = 0;
        while !rest.is_empty() {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return None;
            }
            let amount: u64 = rest[..digits].parse().ok()?;
            rest = &rest[digits..];
            let (suffix, scale) = UNITS.iter().find(|(suffix, _)| rest.starts_with(suffix))?;
            rest = &rest[suffix.len()..];
            total = total.checked_add(amount.checked_mul(*scale)?)?;
        }
        Some(Duration::from_milliseconds(total))
    }

    pub fn as_std(self) -> std::time::Duration {
        std::time::Duration::from_millis(self.milliseconds)
    }
}

impl fmt::Display for Duration {
    /// Prints the shortest exact literal: `90000` ms is `1m30s`, `1500` ms is `1500ms`.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let milliseconds = self.milliseconds;
        if milliseconds == 0 {
            return formatter.write_str("0s");
        }
        if !milliseconds.is_multiple_of(1_000) {
            return write!(formatter, "{milliseconds}ms");
        }
        let mut rest = milliseconds;
        for (suffix, scale) in UNITS.iter().rev().filter(|(_, scale)| *scale >= 1_000) {
            if rest >= *scale {
                write!(formatter, "{}{suffix}", rest / scale)?;
                rest %= scale;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_combinations() {
        assert_eq!(Duration::parse("100ms").unwrap().milliseconds, 100);
        assert_eq!(Duration::parse("30s").unwrap().milliseconds, 30_000);
        assert_eq!(Duration::parse("2m").unwrap().milliseconds, 120_000);
        assert_eq!(Duration::parse("1h30m").unwrap().milliseconds, 5_400_000);
        assert_eq!(Duration::parse("1d").unwrap().milliseconds, 86_400_000);
        assert_eq!(Duration::parse("0s").unwrap().milliseconds, 0);
    }

    #[test]
    fn rejects_what_is_not_a_literal() {
        for text in [
            "",
            "30",
            "s",
            "3x",
            "1.5s",
            "timeout * 2",
            "99999999999999999999d",
        ] {
            assert_eq!(Duration::parse(text), None, "{text}");
        }
    }

    #[test]
    fn prints_the_shortest_exact_literal() {
        assert_eq!(Duration::from_milliseconds(90_000).to_string(), "1m30s");
        assert_eq!(Duration::from_milliseconds(1_500).to_string(), "1500ms");
        assert_eq!(Duration::from_milliseconds(0).to_string(), "0s");
        assert_eq!(Duration::from_milliseconds(7_200_000).to_string(), "2h");
    }
}
