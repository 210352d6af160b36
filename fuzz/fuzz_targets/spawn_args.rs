//! `SpawnRequest::parse` on arbitrary JSON values (invalid JSON is skipped): it never
//! panics, and an accepted request has a non-blank task, the profile as given (a blank
//! one meaning the parent's), a one-line description of at most 80 characters, no
//! blank tool names, and limits in range.
#![no_main]

use libfuzzer_sys::fuzz_target;
use warren::jobs::spawn_request::SpawnRequest;

fuzz_target!(|data: &[u8]| {
    let Ok(args) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let Ok(request) = SpawnRequest::parse(&args) else {
        return;
    };
    assert!(!request.task.trim().is_empty());
    assert_eq!(
        request.profile.as_deref(),
        args["profile"].as_str().filter(|p| !p.trim().is_empty())
    );
    if let Some(description) = &request.description {
        assert!(!description.is_empty() && description.chars().count() <= 80);
        assert_eq!(
            description.split_whitespace().collect::<Vec<_>>().join(" "),
            *description
        );
    }
    if args["tools"].is_string() {
        let tools = request.tools.as_deref().unwrap_or_default();
        assert!(tools.iter().all(|t| !t.is_empty() && t.trim() == t));
    }
    assert!(request.max_turns.is_none_or(|n| n >= 1));
    assert!(request.timeout_s.is_none_or(|n| n >= 1));
    assert!(request
        .max_cost_usd
        .is_none_or(|usd| usd.is_finite() && usd >= 0.0));
});
