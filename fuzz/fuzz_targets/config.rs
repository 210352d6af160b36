//! `Config::parse` (through `warren::fuzzing::config`) on arbitrary UTF-8 as `warren.toml` in a fixed directory that
//! holds two agent files (so `[models]`, `[model_aliases]` and `[tool_aliases]` also
//! meet agent-file resolution): it never panics; errors are fine.
//!
//! Inputs naming `/dev`, `/proc` or `/sys`, or using TOML `\u` escapes (which could
//! spell them), are skipped: `system_prompt_file = "/dev/zero"` would read forever,
//! which is the file system's doing, not the parser's.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

const AGENTS: [(&str, &str); 2] = [
    (
        "reviewer.md",
        "---\nname: reviewer\ndescription: Reviews code\ntools: Read, Grep, Glob\nmodel: fast\nmaxTurns: 5\n---\nReview.\n",
    ),
    (
        "planner.md",
        "---\nname: planner\ntools: [Read, Write, Bash]\ndisallowedTools: Bash\nmodel: inherit\npermissionMode: plan\n---\nPlan.\n",
    ),
];

fn config_path() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let dir = std::env::temp_dir().join("warren-fuzz-config");
        std::fs::create_dir_all(dir.join("agents")).expect("creating the config directory");
        for (name, text) in AGENTS {
            std::fs::write(dir.join("agents").join(name), text).expect("writing an agent file");
        }
        dir.join("warren.toml")
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if ["/dev", "/proc", "/sys", "\\u", "\\U"]
        .iter()
        .any(|banned| text.contains(banned))
    {
        return;
    }
    warren::fuzzing::config(config_path(), text);
});
