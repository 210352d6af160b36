//! `warren plugin new NAME --lang rust|python|js`: a working plugin to start from,
//! with the WIT contract copied in, one example tool (`NAME_greet`), a build script, a
//! test script that checks the tool through warren, and a `warren.toml` to try it with.
//! `--typed`: a typed component instead (Rust), with its own WIT and no warren
//! interface; its exported functions are the tools.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// The languages `warren plugin new` can scaffold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Language {
    /// Rust with wit-bindgen, built for wasm32-wasip2.
    Rust,
    /// Python with componentize-py.
    Python,
    /// JavaScript with componentize-js.
    Js,
}

/// `(path, text)` for each file `path` under `$dir` (relative to this file), its
/// text embedded, so each file is named once; `path from "other/"` takes it from
/// another directory.
macro_rules! embedded {
    (@text $dir:literal $path:literal) => {
        include_str!(concat!($dir, $path))
    };
    (@text $dir:literal $path:literal $other:literal) => {
        include_str!(concat!($other, $path))
    };
    ($dir:literal: $($path:literal $(from $other:literal)?),* $(,)?) => {
        &[$(($path, embedded!(@text $dir $path $($other)?))),*]
    };
}

/// The contract, copied into every new plugin so it builds on its own.
const WIT: &[(&str, &str)] = embedded!("../../../":
    "wit/plugin.wit",
    "wit/deps/cli.wit",
    "wit/deps/clocks.wit",
    "wit/deps/filesystem.wit",
    "wit/deps/http.wit",
    "wit/deps/io.wit",
    "wit/deps/random.wit",
    "wit/deps/sockets.wit",
);

const COMMON: &[(&str, &str)] = embedded!("../../templates/": "test.sh", "warren.toml");

const RUST: &[(&str, &str)] =
    embedded!("../../templates/rust/": "Cargo.toml", "src/lib.rs", "build.sh");

const PYTHON: &[(&str, &str)] =
    embedded!("../../templates/python/": "app.py", "requirements.txt", "build.sh");

/// A typed component: its own WIT, no warren contract.
const TYPED_RUST: &[(&str, &str)] = embedded!("../../templates/typed-rust/":
    "Cargo.toml",
    "src/lib.rs",
    "wit/world.wit",
    "build.sh" from "../../templates/rust/",
    "test.sh",
    "warren.toml",
);

const JS: &[(&str, &str)] = embedded!("../../templates/js/":
    "plugin.js",
    "package.json",
    "build.mjs",
    "build.sh",
);

/// The longest example tool name after the plugin's prefix (the typed scaffold's
/// second function), so the prefix can be cut to keep every tool name within 64.
const LONGEST_EXAMPLE_SUFFIX: &str = "_greet_person";

/// What the example tools' names start with: the plugin's name as one snake_case word
/// (`my-tool` → `my_tool`), so the tools of two scaffolded plugins never clash. A word
/// that starts with a digit joins the one before it (`tool-2x` → `tool2x`), since the
/// typed scaffold's WIT function names may not start a word with one; the prefix is cut
/// so the longest example stays within the 64 characters of a tool name.
fn tool_prefix(name: &str) -> String {
    let mut prefix = String::new();
    for word in name.split(['-', '_']).filter(|word| !word.is_empty()) {
        if !prefix.is_empty() && !word.starts_with(|c: char| c.is_ascii_digit()) {
            prefix.push('_');
        }
        prefix.push_str(word);
    }
    prefix.truncate(64 - LONGEST_EXAMPLE_SUFFIX.len());
    prefix.trim_end_matches('_').to_string()
}

/// The example tool of a plugin scaffolded as `name`, for `warren plugin new` to name.
pub(crate) fn example_tool(name: &str) -> String {
    format!("{}_greet", tool_prefix(name))
}

/// Writes a new plugin called `name` in `dir/name`; returns the files written. A
/// `typed` plugin is a typed component (Rust only for now).
pub(crate) fn new_plugin(
    dir: &Path,
    name: &str,
    language: Language,
    typed: bool,
) -> anyhow::Result<Vec<PathBuf>> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    anyhow::ensure!(valid, "plugin name `{name}` must start with a lower-case letter and use only a-z, 0-9, `_` and `-`");
    let root = dir.join(name);
    anyhow::ensure!(
        !root.exists(),
        "{} already exists; choose another name or directory",
        root.display()
    );
    anyhow::ensure!(
        !typed || language == Language::Rust,
        "`--typed` scaffolds a Rust component; for Python and JavaScript see tests/fixtures/typed-python and tests/fixtures/typed-js in the warren repository"
    );
    let files: Vec<&(&str, &str)> = match language {
        _ if typed => TYPED_RUST.iter().collect(),
        Language::Rust => WIT.iter().chain(COMMON).chain(RUST).collect(),
        Language::Python => WIT.iter().chain(COMMON).chain(PYTHON).collect(),
        Language::Js => WIT.iter().chain(COMMON).chain(JS).collect(),
    };
    let prefix = tool_prefix(name);
    let mut written = Vec::new();
    for (path, template) in files {
        let target = root.join(path);
        std::fs::create_dir_all(target.parent().expect("templates live in a directory"))
            .with_context(|| format!("creating {}", root.display()))?;
        let text = template
            .replace("{{name}}", name)
            .replace("{{crate}}", &name.replace('-', "_"))
            .replace("{{prefix}}", &prefix)
            .replace("{{wit_prefix}}", &prefix.replace('_', "-"));
        std::fs::write(&target, text).with_context(|| format!("writing {}", target.display()))?;
        if path.ends_with(".sh") {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755))?;
        }
        written.push(target);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_tools_are_named_after_the_plugin_within_the_name_limit() {
        assert_eq!(example_tool("weather"), "weather_greet");
        assert_eq!(example_tool("my-tool_2x"), "my_tool2x_greet");
        let long = format!("a{}", "-bc".repeat(30));
        let longest = format!("{}{LONGEST_EXAMPLE_SUFFIX}", tool_prefix(&long));
        assert!(crate::config::is_valid_name(&longest), "{longest}");
        assert!(!tool_prefix(&long).ends_with('_'));
    }
}
