//! The line diffs replays and `warren diff` print, bounded: a diff of two texts is
//! computed only when each is at most [`MAX_DIFF_BYTES`], stops looking for the
//! shortest edit at [`DIFF_DEADLINE`], and prints at most [`MAX_DIFF_LINES`]; past
//! a bound it says so and falls back to the two texts' sizes and the first line
//! where they differ. A changed 0.9 MB tool result or two 150,000-line answers then
//! cost a bounded time and a page of output.

use std::time::{Duration, Instant};

/// The longest text diffed line by line, in bytes (each side).
pub(crate) const MAX_DIFF_BYTES: usize = 1 << 20;

/// How long a diff may search for the shortest edit before it falls back.
pub(crate) const DIFF_DEADLINE: Duration = Duration::from_secs(2);

/// The most lines of diff printed; the rest are counted.
pub(crate) const MAX_DIFF_LINES: usize = 400;

/// The most characters of a line the fallback quotes.
const QUOTED_CHARS: usize = 200;

/// A unified line diff from `was` (recorded, `-`) to `now` (`+`), three lines of
/// context, within the bounds above.
pub(crate) fn line_diff(was: &str, now: &str) -> String {
    if was.len() > MAX_DIFF_BYTES || now.len() > MAX_DIFF_BYTES {
        return first_difference(
            was,
            now,
            &format!(
                "too large to diff line by line (over {} KiB)",
                MAX_DIFF_BYTES >> 10
            ),
        );
    }
    // Both end with a line end, so a last line's missing one is no difference.
    let ended = |text: &str| {
        let mut text = text.to_string();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text
    };
    let (was_ended, now_ended) = (ended(was), ended(now));
    let deadline = Instant::now() + DIFF_DEADLINE;
    let diff = similar::TextDiff::configure()
        .deadline(deadline)
        .diff_lines(&was_ended, &now_ended);
    if Instant::now() >= deadline {
        return first_difference(
            was,
            now,
            &format!("not diffed within {} s", DIFF_DEADLINE.as_secs()),
        );
    }
    let text = diff
        .unified_diff()
        .context_radius(3)
        .header("recorded", "now")
        .to_string();
    let total = text.lines().count();
    if total <= MAX_DIFF_LINES {
        return text;
    }
    let mut cut: String = text
        .lines()
        .take(MAX_DIFF_LINES)
        .flat_map(|line| [line, "\n"])
        .collect();
    cut.push_str(&format!(
        "… {} more lines of diff not shown\n",
        total - MAX_DIFF_LINES
    ));
    cut
}

/// What is said of two texts not diffed (`why`): their sizes, and the first line
/// where they differ.
fn first_difference(was: &str, now: &str, why: &str) -> String {
    let quote = |line: Option<&str>| match line {
        Some(line) if line.chars().count() > QUOTED_CHARS => {
            format!("{}…", line.chars().take(QUOTED_CHARS).collect::<String>())
        }
        Some(line) => line.to_string(),
        None => "(no line: the text ended)".into(),
    };
    let mut said = format!(
        "recorded: {} lines, {} bytes; now: {} lines, {} bytes ({why})\n",
        was.lines().count(),
        was.len(),
        now.lines().count(),
        now.len()
    );
    let (mut old, mut new) = (was.lines(), now.lines());
    let mut number = 0;
    loop {
        number += 1;
        match (old.next(), new.next()) {
            (None, None) => break,
            (a, b) if a == b => continue,
            (a, b) => {
                said.push_str(&format!(
                    "first difference, at line {number}:\n-{}\n+{}\n",
                    quote(a),
                    quote(b)
                ));
                break;
            }
        }
    }
    said
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_diff_is_unified_and_a_large_one_says_where_it_begins() {
        let diff = line_diff("a\nb\nc\n", "a\nB\nc");
        assert!(diff.contains("-b\n+B\n"), "{diff}");
        let was: String = (0..150_000).map(|n| format!("line {n}\n")).collect();
        let now = was.replacen("line 7\n", "line seven\n", 1);
        let started = Instant::now();
        let diff = line_diff(&was, &now);
        assert!(
            started.elapsed() < DIFF_DEADLINE * 2,
            "{:?}",
            started.elapsed()
        );
        assert!(
            diff.contains("first difference, at line 8:\n-line 7\n+line seven"),
            "{diff}"
        );
        assert!(diff.contains("recorded: 150000 lines"), "{diff}");
    }
}
