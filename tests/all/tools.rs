//! The coding tools of the bundled plugins, used as intended and kept inside the
//! profile's grants: [`files`] (`read_file` windows, `edit_file`), [`search`] (`glob`,
//! `grep`) and [`fetch`].

use std::time::{Duration, SystemTime};

use serde_json::Value;
use warren::{ToolAccess, ToolCallError, ToolRegistry};

use crate::support::World;

mod fetch;
mod files;
mod search;

/// Read-only docs, writable out.
const READER: &str = r#"
[profiles.main.capabilities]
fs = [{ host = "docs", guest = "/docs", mode = "ro" }, { host = "out", guest = "/out", mode = "rw" }]
"#;

/// Calls `tool` with `arguments`.
async fn call(
    registry: &ToolRegistry,
    access: &ToolAccess,
    tool: &str,
    arguments: Value,
) -> Result<String, ToolCallError> {
    registry.call(access, tool, &arguments.to_string()).await
}

/// Writes `relative` in the world with `text`, modified `age_s` seconds ago.
fn file(world: &World, relative: &str, text: &str, age_s: u64) {
    let path = world.path(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    let file = std::fs::File::options().write(true).open(&path).unwrap();
    file.set_modified(SystemTime::now() - Duration::from_secs(age_s))
        .unwrap();
}

/// Checks that `result` is an invalid-input error whose message contains `expected`.
fn assert_invalid(result: Result<String, ToolCallError>, expected: &str) {
    let error = result.unwrap_err();
    assert!(
        matches!(error, ToolCallError::InvalidInput { .. }),
        "{error}"
    );
    assert!(error.to_string().contains(expected), "{error}");
}
