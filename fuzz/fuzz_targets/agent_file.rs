//! The agent-file parser (`config::agent_files::parse`) on arbitrary UTF-8: it never
//! panics, a leading byte-order mark changes nothing, and an accepted file keeps its
//! promises (non-blank name and model, `maxTurns` in 1..=1000, no empty tool names,
//! a trimmed prompt).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        warren::fuzzing::agent_file(text);
    }
});
