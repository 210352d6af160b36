//! How journal times are shown: one calendar (UTC) for every report, page and MCP
//! task time, and one check of which times can be shown as dates at all.

/// The latest journal time shown as a date, in ms since the Unix epoch: the last
/// instant JavaScript's `Date` holds (year 275760), so the web page can show every
/// time `warren runs` does. A later one reads as invalid, alone, not as an error of
/// the list it is in.
pub(crate) const MAX_TIME_MS: u64 = 8_640_000_000_000_000;

/// `ms` since the Unix epoch as `YYYY-MM-DD HH:MM:SS` (UTC), or `invalid time` past
/// [`MAX_TIME_MS`]: how every report and page shows a journal's time.
pub(crate) fn utc_text(ms: u64) -> String {
    if ms > MAX_TIME_MS {
        return "invalid time".into();
    }
    let (year, month, day, hour, minute, second, _) = civil_utc(ms);
    format!("{year:04}-{month:02}-{day:02} {hour:02}:{minute:02}:{second:02}")
}

/// `time` as ISO 8601 in UTC (`2026-11-24T23:22:34.123Z`).
pub(crate) fn iso8601(time: std::time::SystemTime) -> String {
    let ms = time
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    let (year, month, day, hour, minute, second, milli) =
        civil_utc(u64::try_from(ms).unwrap_or(u64::MAX));
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{milli:03}Z")
}

/// `ms` since the Unix epoch in UTC as (year, month, day, hour, minute, second,
/// millisecond): the one calendar of journal times (`warren runs`, MCP task times).
pub(crate) fn civil_utc(ms: u64) -> (i64, i64, i64, u64, u64, u64, u64) {
    let secs = ms / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = i64::try_from(days).unwrap_or(0) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        year,
        month,
        day,
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        ms % 1000,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_iso8601_utc() {
        assert_eq!(iso8601(std::time::UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let time = std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_795_000_954_123);
        assert_eq!(iso8601(time), "2026-11-18T11:22:34.123Z");
        let leap = std::time::UNIX_EPOCH + std::time::Duration::from_secs(951_782_400);
        assert_eq!(iso8601(leap), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn times_read_as_utc() {
        assert_eq!(utc_text(0), "1970-01-01 00:00:00");
        assert_eq!(utc_text(1_795_999_999_000), "2026-11-30 00:53:19");
        assert_eq!(utc_text(951_782_400_000), "2000-02-29 00:00:00");
        assert_eq!(utc_text(u64::MAX), "invalid time");
    }
}
