//! Plain words for a failed file operation. Inside the guest, `std::io::Error` carries a
//! WASI errno and prints it as "(os error N)"; readers look N up as a Linux errno,
//! which it is not (WASI's 63 is EPERM, Linux's 63 is ENOSR), so messages give the
//! words for the WASI errno and never the number.

use std::io;

/// WASI's ENOTCAPABLE: the path is outside every preopen.
pub(crate) const NOT_CAPABLE: i32 = 76;

/// What went wrong, as words right for WASI. An error that carries no errno (a file that
/// is not UTF-8) already says it in words.
pub(crate) fn words(error: &io::Error) -> String {
    match error.raw_os_error() {
        Some(errno) => wasi_words(errno).map_or_else(
            || format!("{} (WASI errno {errno})", error.kind()),
            str::to_string,
        ),
        None => error.to_string(),
    }
}

/// The errnos wasi-libc gives for each `wasi:filesystem` error code (and for a path
/// outside every preopen), numbered as WASI numbers them.
fn wasi_words(errno: i32) -> Option<&'static str> {
    Some(match errno {
        2 => "permission denied",
        6 => "resource temporarily unavailable",
        7 => "operation already in progress",
        8 => "bad file descriptor",
        10 => "resource busy",
        16 => "resource deadlock would occur",
        19 => "disk quota exceeded",
        20 => "file exists",
        22 => "file too large",
        25 => "illegal byte sequence",
        26 => "operation in progress",
        27 => "interrupted",
        28 => "invalid argument",
        29 => "input/output error",
        31 => "is a directory",
        32 => "too many levels of symbolic links",
        34 => "too many links",
        35 => "message too large",
        37 => "file name too long",
        43 => "no such device",
        44 => "no such file or directory",
        46 => "no locks available",
        48 => "out of memory",
        51 => "no space left on device",
        54 => "not a directory",
        55 => "directory not empty",
        56 => "state not recoverable",
        58 => "not supported",
        59 => "not a terminal",
        60 => "no such device or address",
        61 => "value too large",
        63 => "operation not permitted",
        64 => "broken pipe",
        69 => "read-only file system",
        70 => "invalid seek",
        74 => "text file busy",
        75 => "cross-device link",
        NOT_CAPABLE => "outside the directories this sandbox grants",
        _ => return None,
    })
}
