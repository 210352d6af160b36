//! The directories the profile grants, as the guest sees them: its WASI preopens, each
//! with whether it may be changed. Error messages name them, since WASI answers a path
//! outside every grant only with "no such file".

use crate::wasi::filesystem::preopens;
use crate::wasi::filesystem::types::DescriptorFlags;

/// One granted directory.
pub(crate) struct Mount {
    /// Where the guest sees it, e.g. `/docs`.
    pub(crate) path: String,
    /// Whether tools may change what is under it (`mode = "rw"`, or the scratch
    /// directory), so a refused write can be explained.
    pub(crate) writable: bool,
}

/// Every granted directory, sorted by path.
pub(crate) fn granted() -> Vec<Mount> {
    let mut mounts: Vec<Mount> = preopens::get_directories()
        .into_iter()
        .map(|(dir, path)| Mount {
            // The host marks a preopen it lets the guest change with mutate-directory.
            writable: dir
                .get_flags()
                .is_ok_and(|flags| flags.contains(DescriptorFlags::MUTATE_DIRECTORY)),
            path,
        })
        .collect();
    mounts.sort_by(|a, b| a.path.cmp(&b.path));
    mounts.dedup_by(|a, b| a.path == b.path);
    mounts
}

/// The grant `path` falls under (the innermost one), if any.
pub(crate) fn under<'a>(mounts: &'a [Mount], path: &str) -> Option<&'a Mount> {
    let resolved = resolve(path);
    mounts
        .iter()
        .filter(|mount| contains(&mount.path, &resolved))
        .max_by_key(|mount| mount.path.len())
}

/// Whether `path` is `dir` or below it.
pub(crate) fn contains(dir: &str, path: &str) -> bool {
    dir == "/" || path == dir || path.starts_with(&format!("{dir}/"))
}

/// `path` as the guest's libc resolves it: relative to `/` (its working directory),
/// with `.` and `..` applied, so `/docs/../x` is not taken for a path under `/docs`.
fn resolve(path: &str) -> String {
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            name => parts.push(name),
        }
    }
    format!("/{}", parts.join("/"))
}

/// The grants as messages name them: `/docs (read-only), /out`.
pub(crate) fn shown(mounts: &[Mount]) -> String {
    mounts
        .iter()
        .map(|mount| {
            if mount.writable {
                mount.path.clone()
            } else {
                format!("{} (read-only)", mount.path)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}
