//! A task's id and its times as the protocol and the task files write them.

use std::io::Read as _;
use std::time::{SystemTime, UNIX_EPOCH};

/// A new task id: 128 random bits, as 32 hex digits.
pub(super) fn task_id() -> std::io::Result<String> {
    let mut bytes = [0; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(hex::encode(bytes))
}

/// `time` as ISO 8601 in UTC (`2026-11-24T23:22:34.123Z`).
pub(crate) fn iso8601(time: SystemTime) -> String {
    let ms = time
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    let (year, month, day, hour, minute, second, milli) =
        crate::journal::civil_utc(u64::try_from(ms).unwrap_or(u64::MAX));
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{milli:03}Z")
}

/// `time` in milliseconds since the Unix epoch.
pub(super) fn epoch_ms(time: SystemTime) -> u64 {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn times_are_iso8601_utc() {
        assert_eq!(iso8601(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let time = UNIX_EPOCH + Duration::from_millis(1_795_000_954_123);
        assert_eq!(iso8601(time), "2026-11-18T11:22:34.123Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(iso8601(leap), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn task_ids_are_128_random_bits() {
        let id = task_id().unwrap();
        assert_eq!(id.len(), 32);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(task_id().unwrap(), id);
    }
}
