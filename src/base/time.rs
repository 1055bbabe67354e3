//! Time values: timestamps and durations as expressions, context and events hold them, with their text forms and bounds.

use chrono::{DateTime, TimeDelta, Utc};

/// A point in time, UTC.
pub type Timestamp = DateTime<Utc>;

/// A signed span of time, at most what an `i64` of nanoseconds holds (about 292 years), as in CEL.
pub type Duration = TimeDelta;

/// The earliest timestamp: CEL's, the first instant of year 1.
pub const MIN_TIMESTAMP_TEXT: &str = "0001-01-01T00:00:00Z";
/// The latest timestamp: CEL's, the last nanosecond of year 9999.
pub const MAX_TIMESTAMP_TEXT: &str = "9999-12-31T23:59:59.999999999Z";

/// Seconds from the Unix epoch to `MIN_TIMESTAMP_TEXT` and to the last second of `MAX_TIMESTAMP_TEXT`.
const MIN_UNIX_SECONDS: i64 = -62_135_596_800;
const MAX_UNIX_SECONDS: i64 = 253_402_300_799;

/// Whether `timestamp` lies in CEL's range, years 1 to 9999.
pub fn in_range(timestamp: &Timestamp) -> bool {
    (MIN_UNIX_SECONDS..=MAX_UNIX_SECONDS).contains(&timestamp.timestamp())
}

/// Why a timestamp out of range is refused, naming the range.
pub fn out_of_range_message(what: &str) -> String {
    format!(
        "{what} is outside the timestamps there are, {MIN_TIMESTAMP_TEXT} to {MAX_TIMESTAMP_TEXT}"
    )
}

/// Why a duration out of range is refused, naming the range.
pub fn duration_out_of_range_message(what: &str) -> String {
    format!(
        "{what} is longer than a duration can be: about 292 years (2^63 - 1 nanoseconds), either way"
    )
}

/// The timestamp `unix_milliseconds` after the epoch (the engine's clock), if in range.
pub fn from_unix_milliseconds(unix_milliseconds: u64) -> Option<Timestamp> {
    let milliseconds = i64::try_from(unix_milliseconds).ok()?;
    DateTime::from_timestamp_millis(milliseconds).filter(in_range)
}

/// Unix milliseconds of `timestamp`, as the engine's clock counts: `None` before 1970.
pub fn unix_milliseconds(timestamp: &Timestamp) -> Option<u64> {
    u64::try_from(timestamp.timestamp_millis()).ok()
}

/// An RFC 3339 text (`2026-01-01T09:00:00Z`, `2026-01-01T10:00:00+01:00`) as a timestamp in range.
pub fn parse_timestamp(text: &str) -> Result<Timestamp, String> {
    let parsed = DateTime::parse_from_rfc3339(text.trim()).map_err(|_| {
        format!("`{text}` is not an RFC 3339 timestamp such as `2026-01-01T09:00:00Z`")
    })?;
    let timestamp = parsed.with_timezone(&Utc);
    if !in_range(&timestamp) {
        return Err(out_of_range_message(&format!("`{text}`")));
    }
    Ok(timestamp)
}

/// `2026-11-22T03:40:00.123Z`: UTC, milliseconds always (as the engine's logs write time),
/// nanoseconds when there are any below the millisecond.
pub fn format_timestamp(timestamp: &Timestamp) -> String {
    let nanoseconds = timestamp.timestamp_subsec_nanos();
    if nanoseconds.is_multiple_of(1_000_000) {
        timestamp.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
    } else {
        timestamp.format("%Y-%m-%dT%H:%M:%S%.9fZ").to_string()
    }
}

/// Units of a duration's text, longest suffix first so `ms` wins over `m`: the protocol's
/// literals (`ms`, `s`, `m`, `h`, `d`) and CEL's smaller ones (`us`, `µs`, `ns`).
const UNITS: [(&str, i128); 8] = [
    ("ms", 1_000_000),
    ("us", 1_000),
    ("µs", 1_000),
    ("ns", 1),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
    ("d", 86_400_000_000_000),
];

/// A duration's text: the protocol's literals (`90s`, `1h30m`, `1d`, `250ms`) and CEL's
/// spellings (`-1.5h`, `100us`, `0`), a sign first if any, then amounts with units.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let not_a_duration = || {
        format!(
            "`{text}` is not a duration such as `90s`, `1h30m`, `1.5s` or `250ms` (units: d, h, m, s, ms, us, ns)"
        )
    };
    let trimmed = text.trim();
    let (negative, mut rest) = match trimmed.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, trimmed.strip_prefix('+').unwrap_or(trimmed)),
    };
    if rest == "0" {
        return Ok(Duration::zero());
    }
    if rest.is_empty() {
        return Err(not_a_duration());
    }
    let too_long = || duration_out_of_range_message(&format!("`{text}`"));
    let mut nanoseconds: i128 = 0;
    while !rest.is_empty() {
        let whole_digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let whole = &rest[..whole_digits];
        rest = &rest[whole_digits..];
        let fraction = match rest.strip_prefix('.') {
            Some(after) => {
                let digits = after.bytes().take_while(u8::is_ascii_digit).count();
                rest = &after[digits..];
                &after[..digits]
            }
            None => "",
        };
        if whole.is_empty() && fraction.is_empty() {
            return Err(not_a_duration());
        }
        let (suffix, scale) = UNITS
            .iter()
            .find(|(suffix, _)| rest.starts_with(suffix))
            .ok_or_else(not_a_duration)?;
        rest = &rest[suffix.len()..];
        // More than 40 digits is past any range; refusing them keeps the sums in an i128.
        if whole.len() > 40 {
            return Err(too_long());
        }
        let whole: i128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| not_a_duration())?
        };
        let mut amount = whole.checked_mul(*scale).ok_or_else(too_long)?;
        // The fraction's digits below a nanosecond are dropped, as CEL drops them.
        let mut place = *scale;
        for digit in fraction.bytes() {
            place /= 10;
            amount += i128::from(digit - b'0') * place;
        }
        nanoseconds = nanoseconds.checked_add(amount).ok_or_else(too_long)?;
    }
    if negative {
        nanoseconds = -nanoseconds;
    }
    from_nanoseconds(nanoseconds).ok_or_else(too_long)
}

/// A duration of `nanoseconds`, if it is in range.
pub fn from_nanoseconds(nanoseconds: i128) -> Option<Duration> {
    let nanoseconds = i64::try_from(nanoseconds).ok()?;
    Some(Duration::nanoseconds(nanoseconds))
}

/// All of `duration` in nanoseconds.
pub fn nanoseconds(duration: &Duration) -> i128 {
    i128::from(duration.num_seconds()) * 1_000_000_000 + i128::from(duration.subsec_nanos())
}

/// A duration as text that `duration()` reads back: `1h30m`, `59m59.75s`, `250ms`, `-5s`, `0s`.
pub fn format_duration(duration: &Duration) -> String {
    let total = nanoseconds(duration);
    let mut text = String::from(if total < 0 { "-" } else { "" });
    let magnitude = total.unsigned_abs();
    if magnitude == 0 {
        return "0s".into();
    }
    if magnitude < 1_000_000_000 && magnitude.is_multiple_of(1_000_000) {
        return format!("{text}{}ms", magnitude / 1_000_000);
    }
    let mut seconds = magnitude / 1_000_000_000;
    for (suffix, unit) in [("d", 86_400), ("h", 3_600), ("m", 60)] {
        if seconds >= unit {
            text.push_str(&format!("{}{suffix}", seconds / unit));
            seconds %= unit;
        }
    }
    let fraction = magnitude % 1_000_000_000;
    if fraction != 0 {
        let digits = format!("{fraction:09}");
        text.push_str(&format!("{seconds}.{}s", digits.trim_end_matches('0')));
    } else if seconds != 0 {
        text.push_str(&format!("{seconds}s"));
    }
    text
}

/// `duration` as whole milliseconds of waiting: `None` when negative (nothing to wait for is
/// decided by the caller) or too long for a timer.
pub fn milliseconds(duration: &Duration) -> Option<u64> {
    u64::try_from(duration.num_milliseconds()).ok()
}

/// Milliseconds from the clock `now_unix_milliseconds` until `deadline`, rounded up so a timer
/// never fires before it; 0 when it has passed.
pub fn milliseconds_until(deadline: &Timestamp, now_unix_milliseconds: u64) -> u64 {
    let at = deadline.timestamp_millis()
        + i64::from(!deadline.timestamp_subsec_nanos().is_multiple_of(1_000_000));
    u64::try_from(at)
        .unwrap_or(0)
        .saturating_sub(now_unix_milliseconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_protocol_and_cel_spellings() {
        for (text, nanoseconds) in [
            ("90s", 90_000_000_000i128),
            ("1h30m", 5_400_000_000_000),
            ("1d", 86_400_000_000_000),
            ("250ms", 250_000_000),
            ("1.5s", 1_500_000_000),
            ("-1.5h", -5_400_000_000_000),
            ("100us", 100_000),
            ("100µs", 100_000),
            ("7ns", 7),
            ("0", 0),
            ("0s", 0),
            (".5s", 500_000_000),
        ] {
            assert_eq!(
                super::nanoseconds(&parse_duration(text).unwrap()),
                nanoseconds,
                "{text}"
            );
        }
        for bad in ["", "-", "5", "s", "1.s5", "3x", "1h 30m", "1e3s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        let too_long = parse_duration("300000d").unwrap_err();
        assert!(too_long.contains("292 years"), "{too_long}");
        assert!(parse_duration(&"9".repeat(60)).is_err());
    }

    #[test]
    fn prints_what_it_reads() {
        for text in [
            "1h30m",
            "1.5s",
            "250ms",
            "-5s",
            "0s",
            "1d2h",
            "1.0000005s",
            "2m3s",
            "59m59.75s",
        ] {
            let duration = parse_duration(text).unwrap();
            assert_eq!(format_duration(&duration), text);
        }
    }

    #[test]
    fn timestamps_have_a_range() {
        assert!(parse_timestamp(MIN_TIMESTAMP_TEXT).is_ok());
        assert!(parse_timestamp(MAX_TIMESTAMP_TEXT).is_ok());
        let past = parse_timestamp("10000-01-01T00:00:00Z").unwrap_err();
        assert!(
            past.contains("RFC 3339") || past.contains("outside"),
            "{past}"
        );
        let offset = parse_timestamp("2026-01-01T10:00:00+01:00").unwrap();
        assert_eq!(format_timestamp(&offset), "2026-01-01T09:00:00.000Z");
        let fine = parse_timestamp("2026-01-01T09:00:00.000000001Z").unwrap();
        assert_eq!(format_timestamp(&fine), "2026-01-01T09:00:00.000000001Z");
        assert_eq!(
            from_unix_milliseconds(1_795_318_800_123).map(|t| format_timestamp(&t)),
            Some(crate::base::clock::format_rfc3339(1_795_318_800_123))
        );
    }
}
