//! A task's id and its times as the protocol and the task files write them.

use std::io::Read as _;
use std::time::{SystemTime, UNIX_EPOCH};

/// A new task id: 128 random bits, as 32 hex digits.
pub(super) fn task_id() -> std::io::Result<String> {
    let mut bytes = [0; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(hex::encode(bytes))
}

pub(crate) use crate::journal::iso8601;

/// `time` in milliseconds since the Unix epoch.
pub(super) fn epoch_ms(time: SystemTime) -> u64 {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_are_128_random_bits() {
        let id = task_id().unwrap();
        assert_eq!(id.len(), 32);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(task_id().unwrap(), id);
    }
}
