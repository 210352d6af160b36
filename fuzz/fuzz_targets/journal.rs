//! The journal reader (`journal::read`: lines, records, the tree) on arbitrary bytes
//! as a journal file: it never panics; a readable journal's run and records agree,
//! its tree has every parent before its children and no agent deeper than the bound,
//! its ids and figures keep their rules, and a crash's cut inside a character at the
//! end changes nothing read.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    warren::fuzzing::journal(data);
});
