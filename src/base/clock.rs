//! Wall-clock helpers: RFC 3339 timestamps with no date library, and real-time waits that ignore the virtual clock.

use std::future::Future;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, now.
pub fn unix_milliseconds_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}

/// A timer runtime on its own thread, never paused: real work (processes, file I/O) is timed on
/// it, so under `--virtual-time` a real process gets its real timeout instead of losing at once
/// to a clock that jumps ahead whenever the run waits. `None` if the thread cannot start.
fn real_clock() -> Option<&'static tokio::runtime::Handle> {
    static CLOCK: OnceLock<Option<tokio::runtime::Handle>> = OnceLock::new();
    CLOCK
        .get_or_init(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .ok()?;
            let handle = runtime.handle().clone();
            std::thread::Builder::new()
                .name("real-clock".into())
                .spawn(move || runtime.block_on(std::future::pending::<()>()))
                .ok()?;
            Some(handle)
        })
        .as_ref()
}

/// Waits `duration` of real time, whatever tokio's clock of the calling runtime does.
pub async fn real_sleep(duration: Duration) {
    let Some(clock) = real_clock() else {
        // No timer thread: the caller's clock is the best there is.
        return tokio::time::sleep(duration).await;
    };
    let (sender, receiver) = tokio::sync::oneshot::channel::<()>();
    let timer = clock.spawn(async move {
        tokio::time::sleep(duration).await;
        let _ = sender.send(());
    });
    // Dropping the wait (the work finished first) withdraws the timer.
    struct Withdraw(tokio::task::JoinHandle<()>);
    impl Drop for Withdraw {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    let _withdraw = Withdraw(timer);
    let _ = receiver.await;
}

/// `work`, unless `duration` of real time passes first.
pub async fn real_timeout<F: Future>(duration: Duration, work: F) -> Option<F::Output> {
    tokio::select! {
        output = work => Some(output),
        () = real_sleep(duration) => None,
    }
}

/// `2026-11-22T03:40:00.123Z` for a Unix time in milliseconds.
pub fn format_rfc3339(unix_milliseconds: u64) -> String {
    let seconds = unix_milliseconds / 1000;
    let days = (seconds / 86_400) as i64;
    let (year, month, day) = civil_from_days(days);
    let second_of_day = seconds % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        second_of_day / 3600,
        (second_of_day / 60) % 60,
        second_of_day % 60,
        unix_milliseconds % 1000
    )
}

/// `2026-01-01T00:00:00Z` or `2026-01-01T00:00:00.250Z` → Unix milliseconds; UTC only, as
/// `format_rfc3339` writes it.
pub fn parse_rfc3339(text: &str) -> Option<u64> {
    let text = text.strip_suffix('Z')?;
    let (date, time) = text.split_once('T')?;
    let mut date_parts = date.splitn(3, '-');
    let year: i64 = date_parts.next()?.parse().ok()?;
    let month: u32 = date_parts.next()?.parse().ok()?;
    let day: u32 = date_parts.next()?.parse().ok()?;
    let (time, fraction) = time.split_once('.').unwrap_or((time, "0"));
    let mut time_parts = time.splitn(3, ':');
    let hour: u64 = time_parts.next()?.parse().ok()?;
    let minute: u64 = time_parts.next()?.parse().ok()?;
    let second: u64 = time_parts.next()?.parse().ok()?;
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    if fraction.is_empty() || fraction.len() > 3 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let milliseconds: u64 = format!("{fraction:0<3}").parse().ok()?;
    let days = days_from_civil(year, month, day);
    // A day past the month's end (e.g. 02-30) would land in the next month.
    if civil_from_days(days) != (year, month, day) {
        return None;
    }
    let seconds = u64::try_from(days).ok()? * 86_400 + hour * 3600 + minute * 60 + second;
    seconds.checked_mul(1000)?.checked_add(milliseconds)
}

/// (year, month, day) → days since 1970-01-01, the inverse of `civil_from_days`.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year.rem_euclid(400);
    let month_index = i64::from((month + 9) % 12);
    let day_of_year = (153 * month_index + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Days since 1970-01-01 → (year, month, day), after Howard Hinnant's civil calendar algorithm.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(
            format_rfc3339(1_795_318_800_123),
            "2026-11-22T03:40:00.123Z"
        );
    }

    #[test]
    fn parses_what_it_formats() {
        for milliseconds in [0, 951_782_400_000, 1_795_318_800_123, 4_102_444_799_999] {
            assert_eq!(
                parse_rfc3339(&format_rfc3339(milliseconds)),
                Some(milliseconds)
            );
        }
        assert_eq!(
            parse_rfc3339("2026-01-01T00:00:00Z"),
            Some(1_767_225_600_000)
        );
        assert_eq!(
            parse_rfc3339("2026-01-01T00:00:00.5Z"),
            Some(1_767_225_600_500)
        );
        for bad in [
            "2026-02-30T00:00:00Z",
            "2026-01-01 00:00:00Z",
            "2026-01-01T00:00:00",
            "x",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }
}
