//! The one name rule (profile, tool and queue names), names made from ones written
//! elsewhere, and names listed in messages.

/// A valid profile name made from one written elsewhere (an agent file's `name` or file
/// name): every run of characters other than ASCII letters, digits, `_` and `-` becomes
/// one `-`, `-` at either end is dropped, and the result is cut to 64 characters
/// (`code.reviewer` → `code-reviewer`, `Code Reviewer` → `Code-Reviewer`). `None` when
/// nothing is left.
pub(crate) fn profile_name_from(written: &str) -> Option<String> {
    let mut name = String::new();
    for c in written.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            name.push(c);
        } else if !name.ends_with('-') {
            name.push('-');
        }
    }
    let name: String = name.trim_matches('-').chars().take(64).collect();
    let name = name.trim_end_matches('-').to_string();
    (!name.is_empty()).then_some(name)
}

/// The one name rule: profile, tool and queue names are 1 to 64 ASCII letters,
/// digits, `_` and `-`.
pub(crate) fn is_valid_name(s: &str) -> bool {
    name_chars(s, false)
}

/// A tool name that may also hold `*` wildcards.
pub(crate) fn is_valid_pattern(s: &str) -> bool {
    name_chars(s, true)
}

/// Whether `s` is 1 to 64 letters, digits, `_` and `-` (and `*`, with `allow_star`).
fn name_chars(s: &str, allow_star: bool) -> bool {
    (1..=64).contains(&s.len())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || (allow_star && c == '*'))
}

/// [`name_chars`] as a check whose error names the kind of name, `what`.
pub(super) fn name_like(s: &str, what: &str, allow_star: bool) -> Result<(), String> {
    if name_chars(s, allow_star) {
        Ok(())
    } else {
        Err(format!(
            "`{s}` is not a valid {what} (letters, digits, `_` and `-`, at most 64)"
        ))
    }
}

/// `names` joined with commas, or `none`.
pub(crate) fn names_or_none<'a>(names: impl IntoIterator<Item = &'a String>) -> String {
    let names: Vec<&str> = names.into_iter().map(String::as_str).collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}
