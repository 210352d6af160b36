//! `SpawnRequest::parse` on arbitrary JSON values (invalid JSON is skipped): it never
//! panics, and an accepted request has a non-blank task, the profile as given (a blank
//! one meaning the parent's), a one-line description of at most 80 characters, no
//! blank tool names, and limits in range (checked in `warren::fuzzing::spawn_args`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    warren::fuzzing::spawn_args(data);
});
