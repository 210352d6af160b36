//! The standard streams. stdout carries results, each line written through [`outln!`]
//! so that a reader who stops early (`warren tools | head -1`) ends the command quietly,
//! as with other Unix tools, where `println!` would panic. stderr is a terminal shared
//! by two writers: the live agent tree (`ui`) and log records (`telemetry`). Log records
//! erase the tree's frame before they are written, so the two never overwrite each
//! other.

use std::io::Write;
use std::sync::{Mutex, PoisonError};

/// Lines of the live frame now on stderr: shared by the view and [`LiveStderr`] so a
/// log line can erase the frame before it is written.
pub(crate) static DRAWN: Mutex<usize> = Mutex::new(0);

/// stderr for log records: while a live frame is shown, erases it first (the next tick
/// redraws it below the record), so logs and the tree never overwrite each other.
pub(crate) struct LiveStderr;

/// Erases the `lines` lines above the cursor one by one and leaves the cursor on the
/// first. Not with "erase below" (`ESC [ J`): from the top-left corner that clears the
/// whole screen, which tmux (`scroll-on-clear`) and other terminals first push into
/// the scrollback, where the erased tree would stand above the log record.
fn erase_lines(lines: usize) -> String {
    let mut erase = format!("\x1b[{lines}A\r");
    for _ in 0..lines {
        // Down without scrolling (`ESC [ B` stops at the last row, as `\n` would not).
        erase.push_str("\x1b[2K\x1b[B");
    }
    erase.push_str(&format!("\x1b[{lines}A"));
    erase
}

impl Write for LiveStderr {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let mut drawn = DRAWN.lock().unwrap_or_else(PoisonError::into_inner);
        let mut err = std::io::stderr().lock();
        if *drawn > 0 {
            err.write_all(erase_lines(*drawn).as_bytes())?;
            *drawn = 0;
        }
        err.write_all(bytes)?;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// The terminal's width in columns (80 when stderr is not a terminal).
pub(crate) fn terminal_width() -> usize {
    rustix::termios::tcgetwinsize(std::io::stderr())
        .ok()
        .map(|size| usize::from(size.ws_col))
        .filter(|cols| *cols > 0)
        .unwrap_or(80)
}

/// The terminal's height in rows (`None` when stderr is not a terminal: nothing
/// bounds what is drawn).
pub(crate) fn terminal_height() -> Option<usize> {
    rustix::termios::tcgetwinsize(std::io::stderr())
        .ok()
        .map(|size| usize::from(size.ws_row))
        .filter(|rows| *rows > 0)
}

/// stdout's reader went away (a closed pipe): nobody is left to read the rest, so the
/// command stops and exits with success, without a message.
#[derive(Debug, thiserror::Error)]
#[error("stdout was closed")]
pub(crate) struct StdoutClosed;

/// Writes one line of results to stdout. A closed pipe is [`StdoutClosed`]; any other
/// failure (a full disk behind `>`) is an error naming stdout.
pub(crate) fn write_line(line: std::fmt::Arguments<'_>) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_fmt(line)
        .and_then(|()| out.write_all(b"\n"))
        .map_err(|error| {
            if error.kind() == std::io::ErrorKind::BrokenPipe {
                anyhow::Error::new(StdoutClosed)
            } else {
                anyhow::Error::new(error).context("writing to stdout")
            }
        })
}

/// `println!` for results, returning an `anyhow::Result` (see [`write_line`]).
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::term::write_line(format_args!($($arg)*))
    };
}
pub(crate) use outln;

/// [`outln!`] for reports people read (`warren runs`, `show`, `diff`, `replay`): the
/// line with its control characters escaped ([`visible`]), since it quotes what
/// models, tools and journals said.
macro_rules! reportln {
    ($($arg:tt)*) => {
        $crate::term::write_line(format_args!(
            "{}",
            $crate::term::visible(&format!($($arg)*))
        ))
    };
}
pub(crate) use reportln;

/// The first `max` characters of `text`, with `…` when cut.
pub(crate) fn bounded(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// `text` with every control character but line ends and tabs shown escaped (`\x1b`,
/// `\u{9b}`), and the bidirectional overrides that reorder what is shown: text a
/// model, a tool or a journal gave cannot drive the terminal it is printed on (OSC 52
/// writes the clipboard, others retitle the window or rewrite what was printed).
pub(crate) fn visible(text: &str) -> std::borrow::Cow<'_, str> {
    use std::fmt::Write as _;
    if !text.chars().any(hidden) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        let code = u32::from(c);
        if !hidden(c) {
            shown.push(c);
        } else if code < 0x80 {
            write!(shown, "\\x{code:02x}").expect("writing to a String");
        } else {
            write!(shown, "\\u{{{code:x}}}").expect("writing to a String");
        }
    }
    std::borrow::Cow::Owned(shown)
}

/// Whether `c` is not printed as it is by [`visible`].
fn hidden(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::visible;

    #[test]
    fn control_characters_are_shown_escaped_and_lines_kept() {
        assert_eq!(visible("plain\ttext\nnext"), "plain\ttext\nnext");
        assert_eq!(
            visible("\x1b]52;c;aGk=\x07 \u{9b}2J \r\u{202e}"),
            "\\x1b]52;c;aGk=\\x07 \\u{9b}2J \\x0d\\u{202e}"
        );
    }
}
