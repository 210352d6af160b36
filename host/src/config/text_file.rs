//! Reading the text files a configuration finds or names (agent files, `AGENTS.md`
//! and `ENVIRONMENT.md`, `bootstrap_files`, `system_prompt_file`): regular files only,
//! opened without blocking (a FIFO would wait for a writer) and checked on the open
//! descriptor, and at most a given number of bytes read (`/proc` files and devices
//! report no size, so metadata is never trusted).

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Most bytes of one bootstrap or prompt file (`AGENTS.md`, `ENVIRONMENT.md`,
/// `bootstrap_files`, `system_prompt_file`): its text goes into every request of the
/// profiles that use it.
pub(crate) const MAX_PROMPT_FILE_BYTES: usize = 1024 * 1024;

/// The UTF-8 text of the regular file at `path`, at most `max` bytes; when `inside` is
/// given, `path` must resolve (symlinks followed) to a file under that directory. The
/// error says why, without the path.
pub(crate) fn read_text(path: &Path, max: usize, inside: Option<&Path>) -> Result<String, String> {
    let resolved = match inside {
        Some(dir) => {
            let resolved = path
                .canonicalize()
                .map_err(|e| format!("cannot read: {e}"))?;
            let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
            if !resolved.starts_with(&dir) {
                return Err(format!(
                    "it resolves to {}, outside {}; a file found beside the configuration is read only from inside its directory (name it in bootstrap_files to use it)",
                    resolved.display(),
                    dir.display()
                ));
            }
            resolved
        }
        None => path.to_path_buf(),
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(&resolved)
        .map_err(|e| format!("cannot read: {e}"))?;
    let kind = file
        .metadata()
        .map_err(|e| format!("cannot read: {e}"))?
        .file_type();
    if !kind.is_file() {
        return Err("not a regular file (a directory, FIFO, socket or device)".into());
    }
    let mut bytes = Vec::new();
    file.take(max as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() > max {
        return Err(format!("more than {max} bytes; the limit is {max}"));
    }
    String::from_utf8(bytes)
        .map_err(|e| format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_fifos_and_long_files_are_refused_without_reading_them_whole() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            read_text(Path::new("/dev/zero"), 1024, None).unwrap_err(),
            "not a regular file (a directory, FIFO, socket or device)"
        );
        let fifo = dir.path().join("fifo");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        assert!(read_text(&fifo, 1024, None)
            .unwrap_err()
            .starts_with("not a regular file"));
        // A /proc file reports a size of 0 and is longer than that.
        assert_eq!(
            read_text(Path::new("/proc/self/maps"), 16, None).unwrap_err(),
            "more than 16 bytes; the limit is 16"
        );
        let file = dir.path().join("ok.md");
        std::fs::write(&file, "fine").unwrap();
        assert_eq!(read_text(&file, 4, Some(dir.path())).unwrap(), "fine");
    }

    #[test]
    fn a_symlink_out_of_the_directory_is_refused_when_it_must_stay_inside() {
        let (project, elsewhere) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let secret = elsewhere.path().join("credentials");
        std::fs::write(&secret, "key").unwrap();
        let link = project.path().join("AGENTS.md");
        std::os::unix::fs::symlink(&secret, &link).unwrap();
        let error = read_text(&link, 1024, Some(project.path())).unwrap_err();
        assert!(error.contains("outside"), "{error}");
        assert_eq!(read_text(&link, 1024, None).unwrap(), "key");
    }
}
