//! Every key `warren.toml` accepts, in one table: where it goes, its default, its
//! bounds and a one-line doc. Defaults and bounds are named from the constants and
//! types the resolver uses, so each value has one home; the tests below hold the
//! table to the schema the file is read with, to the resolved defaults and to the
//! bounds enforced, and render the configuration reference (docs/configuration.md)
//! from it.

use super::approval::DEFAULT_APPROVAL_TIMEOUT_S;
use super::journal::{RunMib, DEFAULT_JOURNAL_DIR, DEFAULT_MAX_RUN_MIB};
use super::limits::{
    AgentSeconds, Agents, Depth, FollowUps, HostConcurrency, MessageKib, PendingRequests,
    QueuedMessages, RunConcurrency, ToolCount, ToolKib, Turns, DEFAULT_MAX_AGENTS,
    DEFAULT_MAX_CONCURRENT, DEFAULT_MAX_CONCURRENT_TOTAL, DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_DESCRIPTION_KB, DEFAULT_MAX_FOLLOW_UPS, DEFAULT_MAX_MESSAGE_KB,
    DEFAULT_MAX_PENDING_REQUESTS, DEFAULT_MAX_PROFILE_TOOLS_KB, DEFAULT_MAX_QUEUED_MESSAGES,
    DEFAULT_MAX_SCHEMA_KB, DEFAULT_MAX_TOOLS, DEFAULT_MAX_TURNS, DEFAULT_TIMEOUT_S,
};
use super::plugins::DEFAULT_PLUGIN_DIR;
use super::profile::MAX_PROFILE_DESCRIPTION_BYTES;
use super::queue::{
    Attempts, GraceSeconds, LockMs, MaxStalled, ParentTimeout, Retention, StalledIntervalMs,
    DEFAULT_ATTEMPTS, DEFAULT_KEEP_RESULTS_S, DEFAULT_LOCK_MS, DEFAULT_MAX_STALLED,
    DEFAULT_PARENT_TIMEOUT_S, DEFAULT_QUEUE_NAME, DEFAULT_SHUTDOWN_GRACE_S,
    DEFAULT_STALLED_INTERVAL_MS,
};
use super::values::{Bounds, Dollars};
use crate::llm::anthropic::DEFAULT_MAX_TOKENS;
use crate::llm::model::{
    DEFAULT_CONNECT_TIMEOUT_S, DEFAULT_MAX_RESPONSE_MIB, DEFAULT_MAX_RETRIES,
    DEFAULT_READ_TIMEOUT_S, DEFAULT_RETRY_BASE_MS, DEFAULT_STREAM, MAX_RESPONSE_MIB,
};
use crate::policy::CallLimits;

/// A table of the file that keys are written in: one or more dotted paths (`*` for a
/// name the user picks), and what the table is for.
pub(crate) struct Table {
    /// Its dotted paths (`""` is the top level).
    pub(crate) paths: &'static [&'static str],
    /// What it is for, one line.
    pub(crate) doc: &'static str,
}

/// One key of `warren.toml`.
#[derive(Clone, Copy)]
pub(crate) struct Key {
    /// The table it is written in.
    pub(crate) table: &'static Table,
    /// Its name in that table; `fs[].mode` is `mode` in each table of the `fs` list.
    pub(crate) name: &'static str,
    /// What it is when not written.
    pub(crate) default: KeyDefault,
    /// The values it may take, beyond its type.
    pub(crate) bounds: Bounds,
    /// What it does, one line.
    pub(crate) doc: &'static str,
}

/// What a key is when it is not written.
#[derive(Clone, Copy, Debug)]
pub(crate) enum KeyDefault {
    /// This integer.
    Int(u64),
    /// This number.
    Float(f64),
    /// This boolean.
    Bool(bool),
    /// This string.
    Str(&'static str),
    /// This list of strings.
    List(&'static [&'static str]),
    /// An empty table.
    EmptyTable,
    /// The value of the key at this dotted path.
    Key(&'static str),
    /// Nothing that can be written as a value: what its absence means.
    Absent(&'static str),
    /// Nothing that can be written as a value: what its absence means, then the
    /// value used where one is needed.
    Fallback(&'static str, u64),
    /// It must be written (the TOML given is an example).
    Required(&'static str),
}

/// Declares each table of the file, one a line: its constant, its dotted paths and
/// what it is for.
macro_rules! tables {
    ($($name:ident = $paths:expr, $doc:expr;)*) => {
        $(const $name: Table = Table { paths: $paths, doc: $doc };)*
    };
}

tables! {
    PLUGINS = &["plugins"], "Which plugin files and built-ins load, where compiled plugins are cached, and what one plugin may offer (a plugin past a bound is refused at load, naming it).";
    PLUGIN = &["plugins.*"], "How one plugin's tools are offered: NAME is its file name without `.wasm` (or a built-in's name); see [plugins.md](plugins.md).";
    PLUGIN_ANNOTATE = &["plugins.*.annotate.*"], "What tool NAME of the plugin does, as MCP tool annotations say it; a hint left out takes MCP's default.";
    MODEL = &["models.*"], "One model: which wire format it speaks and how to reach it (see [Models](#models)).";
    PRICE = &["models.*.price"], "Prices in US dollars per million tokens, for cost accounting (no `price`: free).";
    DEFAULTS = &["defaults"], "What every profile inherits, and the limits of every run.";
    CAPABILITIES = &["defaults.capabilities", "profiles.*.capabilities"], "What a profile's tools may touch; a profile's table goes over `[defaults.capabilities]` field by field. See [Capabilities and their limits](security.md#capabilities-and-their-limits).";
    FS_GRANT = &["defaults.capabilities.fs[]", "profiles.*.capabilities.fs[]"], "One granted directory, an entry of `fs` (`fs = [{ host = \"docs\", guest = \"/docs\" }]`).";
    PROFILE = &["profiles.*"], "A profile: the tools, capabilities, prompt, model and limits of the agents that run under it.";
    REMOTE = &["profiles.*.a2a"], "The profile runs a remote A2A agent instead of a model here: a parent spawns, awaits and cancels it as any sub-agent (see [A2A agents as children](a2a.md#remote-a2a-agents-as-children)). Such a profile may set `description`, `timeout_s`, `max_turns` and `max_cost_usd`; `tools`, `disallowed_tools`, `capabilities`, `model`, a prompt, `approval` or an output schema are refused (warren cannot enforce them there), not ignored.";
    QUEUE = &["queue"], "Sub-agents through Redis (optional; see [workers.md](workers.md)).";
    JOURNAL = &["journal"], "Where runs are recorded (see [journal.md](journal.md)).";
    TOP = &[""], "Names for names: tables whose keys are the user's.";
}

/// A key with no bounds.
const fn key(
    table: &'static Table,
    name: &'static str,
    default: KeyDefault,
    doc: &'static str,
) -> Key {
    bounded(table, name, default, Bounds::None, doc)
}

/// A key with bounds.
const fn bounded(
    table: &'static Table,
    name: &'static str,
    default: KeyDefault,
    bounds: Bounds,
    doc: &'static str,
) -> Key {
    Key {
        table,
        name,
        default,
        bounds,
        doc,
    }
}

/// A per-call limit of a capabilities table, named by the policy's table of them.
const fn limit(name: &'static str, default: u64, (min, max): (u64, u64), doc: &'static str) -> Key {
    bounded(
        &CAPABILITIES,
        name,
        KeyDefault::Int(default),
        Bounds::Int { min, max },
        doc,
    )
}

use KeyDefault::{Absent, Bool, EmptyTable, Float, Int, List, Required, Str};

/// Every key of `warren.toml`, table by table, in the reference's order.
#[rustfmt::skip]
pub(crate) const KEYS: &[Key] = &[
    key(&PLUGINS, "dir", Str(DEFAULT_PLUGIN_DIR), "every `*.wasm` file here is loaded (the default directory may be missing; a named one may not)"),
    key(&PLUGINS, "files", List(&[]), "more plugin files"),
    key(&PLUGINS, "cache_dir", Absent("`$XDG_CACHE_HOME/warren/components`, else `~/.cache/warren/components`"), "where compiled plugins are cached"),
    key(&PLUGINS, "cache", Bool(true), "`false`: no compile cache, plugins are compiled on every start"),
    key(&PLUGINS, "builtins", Bool(true), "the built-in plugins: `true`, `false`, or a list of names (`[\"files\"]`)"),
    bounded(&PLUGINS, "max_tools", Int(DEFAULT_MAX_TOOLS as u64), ToolCount::BOUNDS, "tools one plugin may offer"),
    bounded(&PLUGINS, "max_description_kb", Int(DEFAULT_MAX_DESCRIPTION_KB as u64), ToolKib::BOUNDS, "KiB of one tool's description"),
    bounded(&PLUGINS, "max_schema_kb", Int(DEFAULT_MAX_SCHEMA_KB as u64), ToolKib::BOUNDS, "KiB of one tool's input schema"),
    bounded(&PLUGINS, "max_profile_tools_kb", Int(DEFAULT_MAX_PROFILE_TOOLS_KB as u64), ToolKib::BOUNDS, "KiB of all tool definitions one profile sees (every model request carries them)"),
    key(&PLUGIN, "wit", Absent("none"), "a typed component's WIT (a file, or a directory with `deps/`), whose doc comments describe its tools"),
    key(&PLUGIN, "rename", EmptyTable, "new tool names, by the name the plugin offers: `{ shapes_area = \"area\" }`"),
    key(&PLUGIN, "describe", EmptyTable, "descriptions replacing the plugin's: `{ shapes_scale = \"Scale a shape.\" }`"),
    key(&PLUGIN, "hide", List(&[]), "tools not offered at all"),
    key(&PLUGIN_ANNOTATE, "title", Absent("none"), "a human-readable title"),
    key(&PLUGIN_ANNOTATE, "read_only", Absent("MCP's: `false`"), "it changes nothing outside itself"),
    key(&PLUGIN_ANNOTATE, "destructive", Absent("MCP's: `true`"), "a change it makes may destroy or overwrite what was there"),
    key(&PLUGIN_ANNOTATE, "idempotent", Absent("MCP's: `false`"), "calling it again with the same arguments changes nothing more"),
    key(&PLUGIN_ANNOTATE, "open_world", Absent("MCP's: `true`"), "it reaches things outside the granted directories"),
    key(&MODEL, "provider", Required("\"openai\""), "`openai` (any OpenAI-compatible server), `anthropic`, `scripted`, or `custom` (a provider given in code)"),
    key(&MODEL, "base_url", Absent("the provider's: `https://api.openai.com/v1`, `https://api.anthropic.com/v1`"), "API root, `http://` or `https://` with a host (e.g. `http://localhost:11434/v1` for Ollama); checked at start"),
    key(&MODEL, "model", Required("\"gpt-4o-mini\""), "the model name the API expects (required for `openai` and `anthropic`)"),
    key(&MODEL, "api_key_env", Absent("`OPENAI_API_KEY` or `ANTHROPIC_API_KEY`, by provider; unset means no key"), "the environment variable holding the API key (one named here must be set)"),
    key(&MODEL, "headers", EmptyTable, "extra request headers: `{ \"HTTP-Referer\" = \"https://example.org\" }`"),
    key(&MODEL, "max_tokens", KeyDefault::Fallback("not sent, but Anthropic requires one:", DEFAULT_MAX_TOKENS as u64), "output token limit per call"),
    key(&MODEL, "stream", Bool(DEFAULT_STREAM), "SSE streaming; `false`: one JSON response (about half the host CPU, but it must all come within `read_timeout_s`)"),
    bounded(&MODEL, "connect_timeout_s", Float(DEFAULT_CONNECT_TIMEOUT_S), Bounds::Positive, "seconds to wait for a connection"),
    bounded(&MODEL, "read_timeout_s", Float(DEFAULT_READ_TIMEOUT_S), Bounds::Positive, "seconds to wait for the headers, and between stream chunks"),
    key(&MODEL, "max_retries", Int(DEFAULT_MAX_RETRIES as u64), "retries on 429, 5xx, connection errors and timeouts"),
    key(&MODEL, "retry_base_ms", Int(DEFAULT_RETRY_BASE_MS), "first backoff delay, doubled per retry, with jitter; `Retry-After` is honoured"),
    bounded(&MODEL, "max_response_mib", Int(DEFAULT_MAX_RESPONSE_MIB as u64), Bounds::Int { min: 1, max: MAX_RESPONSE_MIB as u64 }, "longest response read (the body as sent, SSE framing included); more is a `malformed_response` error"),
    key(&MODEL, "script", Absent("none; required by `provider = \"scripted\"`"), "the script a scripted model replays (see host/src/llm/scripted.rs for the format)"),
    key(&PRICE, "input_per_mtok", Required("0.15"), "uncached prompt tokens"),
    key(&PRICE, "output_per_mtok", Required("0.6"), "generated tokens"),
    key(&PRICE, "cached_input_per_mtok", Absent("the input price"), "prompt tokens read from cache"),
    key(&DEFAULTS, "model", Absent("the only `[models]` entry, when there is just one"), "a `[models]` or `[model_aliases]` name"),
    bounded(&DEFAULTS, "max_turns", Int(DEFAULT_MAX_TURNS as u64), Turns::BOUNDS, "turns of one agent"),
    bounded(&DEFAULTS, "max_turns_ceiling", Absent("each profile's `max_turns`"), Turns::BOUNDS, "a spawn may raise `max_turns` up to this, in every profile that sets no ceiling of its own"),
    bounded(&DEFAULTS, "timeout_s", Int(DEFAULT_TIMEOUT_S), AgentSeconds::BOUNDS, "wall time of one agent"),
    bounded(&DEFAULTS, "max_concurrent", Int(DEFAULT_MAX_CONCURRENT as u64), RunConcurrency::BOUNDS, "sub-agents working at once per run; more are queued (one waiting for its own sub-agents gives its slot back meanwhile)"),
    bounded(&DEFAULTS, "max_concurrent_total", Int(DEFAULT_MAX_CONCURRENT_TOTAL as u64), HostConcurrency::BOUNDS, "sub-agents running at once across every run of one host"),
    bounded(&DEFAULTS, "max_depth", Int(DEFAULT_MAX_DEPTH as u64), Depth::BOUNDS, "how deep agents may nest: 1, the root's children get no spawn tools"),
    bounded(&DEFAULTS, "budget_usd", Absent("no cap"), Dollars::BOUNDS, "cost cap of a whole run, shared by the tree"),
    bounded(&DEFAULTS, "max_message_kb", Int(DEFAULT_MAX_MESSAGE_KB as u64), MessageKib::BOUNDS, "KiB one `message_agent` message may hold; a longer one is rejected, naming this key"),
    bounded(&DEFAULTS, "max_queued_messages", Int(DEFAULT_MAX_QUEUED_MESSAGES as u64), QueuedMessages::BOUNDS, "messages that may wait unread in one agent's mailbox; one more is rejected, naming this key"),
    bounded(&DEFAULTS, "max_agents", Int(DEFAULT_MAX_AGENTS as u64), Agents::BOUNDS, "agents one run's process may hold, the root included, over the run's whole life (a tree of 100 children of 100 each is 10,101); one more spawn is refused, naming this key. On a worker, each job's tree counts against the worker's own"),
    bounded(&DEFAULTS, "max_follow_ups", Int(DEFAULT_MAX_FOLLOW_UPS as u64), FollowUps::BOUNDS, "follow-ups (message_agent mode \"follow_up\") that may wake one agent after it finished, each resuming it with its history; one more is rejected, naming this key (0: finished agents take none)"),
    bounded(&DEFAULTS, "max_pending_requests", Int(DEFAULT_MAX_PENDING_REQUESTS as u64), PendingRequests::BOUNDS, "approvals and questions that may wait for a person at once in one run; one more is denied (or unanswered), naming this key"),
    key(&CAPABILITIES, "fs", List(&[]), "granted directories, each `{ host, guest, mode }` (below)"),
    key(&CAPABILITIES, "scratch", Bool(false), "a private writable directory at `/scratch`, removed when the agent ends"),
    key(&CAPABILITIES, "env", List(&[]), "variables the guest sees: a name passes the host's value (if set); `{ name, value }` sets one"),
    key(&CAPABILITIES, "net", List(&[]), "`host[:port]` patterns for HTTP (`*.example.com`); raw TCP only to literal IPs listed"),
    limit("fuel", CallLimits::DEFAULT.fuel, CallLimits::BOUNDS.fuel, "instructions per call"),
    limit("tool_timeout_ms", CallLimits::DEFAULT.tool_timeout_ms, CallLimits::BOUNDS.tool_timeout_ms, "wall time per call, in milliseconds"),
    limit("memory_mb", CallLimits::DEFAULT.memory_mb, CallLimits::BOUNDS.memory_mb, "linear memory per call, in MiB"),
    limit("max_output_kb", CallLimits::DEFAULT.max_output_kb, CallLimits::BOUNDS.max_output_kb, "cap on the result, and on each of stdout and stderr, in KiB"),
    limit("max_handles", CallLimits::DEFAULT.max_handles, CallLimits::BOUNDS.max_handles, "open files, streams, sockets and HTTP fields a call holds at once"),
    limit("max_log_kb", CallLimits::DEFAULT.max_log_kb, CallLimits::BOUNDS.max_log_kb, "`host-log` KiB per call (each record costs at least 128 bytes)"),
    limit("max_write_mb", CallLimits::DEFAULT.max_write_mb, CallLimits::BOUNDS.max_write_mb, "MiB one call may write to files, every grant and scratch included"),
    limit("scratch_mb", CallLimits::DEFAULT.scratch_mb, CallLimits::BOUNDS.scratch_mb, "size of the scratch directory, in MiB"),
    key(&FS_GRANT, "host", Required("\"docs\""), "the directory, relative to the config file; it must exist"),
    key(&FS_GRANT, "guest", Required("\"/docs\""), "where the guest sees it: absolute, no `.` or `..` parts"),
    key(&FS_GRANT, "mode", Str("ro"), "`ro` refuses every change; `rw` allows them"),
    bounded(&PROFILE, "description", Absent("none"), Bounds::Bytes(MAX_PROFILE_DESCRIPTION_BYTES), "what the profile is for, shown to a parent that may spawn it"),
    key(&PROFILE, "bootstrap_files", Absent("`AGENTS.md` and `ENVIRONMENT.md` beside the config, if present"), "files first in the prompt (each at most 1 MiB)"),
    key(&PROFILE, "system_prompt_file", Absent("none"), "a prompt file, after the bootstrap files"),
    key(&PROFILE, "system_prompt", Absent("none"), "the inline prompt, after the file (a spawn's `system_prompt` comes last)"),
    key(&PROFILE, "model", KeyDefault::Key("defaults.model"), "a `[models]` or `[model_aliases]` name, or `inherit`: a sub-agent runs on its parent's model (a root, on `defaults.model`)"),
    bounded(&PROFILE, "max_turns", KeyDefault::Key("defaults.max_turns"), Turns::BOUNDS, "turns of one agent"),
    bounded(&PROFILE, "max_turns_ceiling", Absent("`[defaults] max_turns_ceiling`, else its `max_turns`"), Turns::BOUNDS, "a spawn may raise `max_turns` up to this"),
    bounded(&PROFILE, "timeout_s", KeyDefault::Key("defaults.timeout_s"), AgentSeconds::BOUNDS, "wall time of one agent"),
    bounded(&PROFILE, "max_cost_usd", Absent("no cap"), Dollars::BOUNDS, "cost cap of one agent"),
    key(&PROFILE, "tools", List(&["*"]), "the tools it may call: names, `*` patterns, or other systems' names (`\"Read\"`)"),
    key(&PROFILE, "disallowed_tools", List(&[]), "subtracted after `tools`; naming `Task` or `spawn_agent` withholds the spawn tools"),
    key(&PROFILE, "output_schema", Absent("none: the answer is text"), "the JSON Schema its answer must match, as an inline table (see [typed results](sub-agents.md#typed-results))"),
    key(&PROFILE, "output_schema_file", Absent("none"), "the same, from a JSON file (not with `output_schema`)"),
    key(&PROFILE, "approval", List(&[]), "calls that wait for a person's yes: tool names or `*` patterns, `@writes` (a plugin call under a writable grant), `@network` (under a `net` list), `@spawn`, `@code` (`run_python`, `run_js`), or `\"*\"` (every call); a sub-agent's rule adds its parent's (see [approvals](sub-agents.md#approvals-and-questions))"),
    bounded(&PROFILE, "approval_timeout_s", Int(DEFAULT_APPROVAL_TIMEOUT_S), AgentSeconds::BOUNDS, "how long a call (or an `ask_person` question) waits for an answer; then it is denied (unanswered), saying so to the model"),
    key(&REMOTE, "url", Required("\"https://agents.example.com/echo\""), "the agent's base URL (its card at `/.well-known/agent-card.json` below it), or the card's own URL (ending `.json`); `http://` or `https://`"),
    key(&REMOTE, "token_env", Absent("no token is sent"), "the environment variable holding the bearer token sent to the agent; read when a child starts, never logged"),
    key(&REMOTE, "unsandboxed", Required("true"), "must be `true`: the opt-in, as the agent's tools, files and network are its own and no capability of warren's applies"),
    key(&QUEUE, "redis", Absent("sub-agents run in-process"), "`redis://[user:password@]host:port[/db]` (or `--redis`, `$WARREN_REDIS`)"),
    key(&QUEUE, "name", Str(DEFAULT_QUEUE_NAME), "the BullMQ queue name: keys `bull:NAME:*`"),
    bounded(&QUEUE, "keep_results_s", Int(DEFAULT_KEEP_RESULTS_S), Retention::BOUNDS, "how long finished jobs and their results stay"),
    bounded(&QUEUE, "attempts", Int(DEFAULT_ATTEMPTS as u64), Attempts::BOUNDS, "tries of a job that keeps failing before it ends failed"),
    bounded(&QUEUE, "lock_ms", Int(DEFAULT_LOCK_MS), LockMs::BOUNDS, "a worker's lock on a job: a killed worker's job is taken again after at most this"),
    bounded(&QUEUE, "stalled_interval_ms", Int(DEFAULT_STALLED_INTERVAL_MS), StalledIntervalMs::BOUNDS, "how often workers look for stalled jobs"),
    bounded(&QUEUE, "max_stalled", Int(DEFAULT_MAX_STALLED as u64), MaxStalled::BOUNDS, "stalls before a job ends failed"),
    bounded(&QUEUE, "shutdown_grace_s", Int(DEFAULT_SHUTDOWN_GRACE_S), GraceSeconds::BOUNDS, "a stopping worker's jobs get this long, then are handed back"),
    bounded(&QUEUE, "parent_timeout_s", Int(DEFAULT_PARENT_TIMEOUT_S), ParentTimeout::BOUNDS, "a parent silent this long (dead, or cut off from Redis): its jobs are cancelled"),
    key(&QUEUE, "default_profile", Absent("`main` (the file's, or the implicit one)"), "the profile of jobs that name none (producers other than warren)"),
    key(&QUEUE, "fail_jobs_on", List(&["error"]), "agent end states that fail the BullMQ job, so `attempts` and backoff apply"),
    bounded(&QUEUE, "keep_failed_s", Absent("forever (BullMQ's `removeOnFail: false`)"), Retention::BOUNDS, "how long failed jobs stay"),
    key(&JOURNAL, "dir", Str(DEFAULT_JOURNAL_DIR), "where runs are journaled, relative to the config file"),
    key(&JOURNAL, "enabled", Bool(true), "`false`: no run is journaled (`warren run --no-journal`: this run)"),
    bounded(&JOURNAL, "max_run_mib", Int(DEFAULT_MAX_RUN_MIB), RunMib::BOUNDS, "one run's journal at most; past it the run goes on unjournaled and cannot be resumed"),
    key(&TOP, "tool_aliases", EmptyTable, "tool names for warren tools beside Claude Code's, which are built in (see [agent-files.md](agent-files.md)): `[tool_aliases]` then `Bash = \"run_checks\"`"),
    key(&TOP, "model_aliases", EmptyTable, "model names used by agent files: `[model_aliases]` then `sonnet = \"default\"`"),
];

impl Key {
    /// Its dotted paths, one per table it may be written in (`*` for a name).
    pub(crate) fn paths(&self) -> impl Iterator<Item = String> + '_ {
        self.table.paths.iter().map(|table| match *table {
            "" => self.name.to_string(),
            table => format!("{table}.{}", self.name),
        })
    }
}

impl KeyDefault {
    /// The default as TOML text, when it is a value one can write.
    pub(crate) fn toml(&self) -> Option<String> {
        Some(match *self {
            KeyDefault::Int(value) => grouped(value),
            KeyDefault::Float(value) => format!("{value:?}"),
            KeyDefault::Bool(value) => value.to_string(),
            KeyDefault::Str(value) => format!("{value:?}"),
            KeyDefault::List(values) => {
                let values: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
                format!("[{}]", values.join(", "))
            }
            KeyDefault::EmptyTable => "{}".to_string(),
            KeyDefault::Key(path) => KEYS
                .iter()
                .find(|key| key.paths().any(|p| p == path))?
                .default
                .toml()?,
            KeyDefault::Absent(_) | KeyDefault::Fallback(..) | KeyDefault::Required(_) => {
                return None
            }
        })
    }
}

/// `value` as TOML writes a long number: `_` between groups of three digits.
pub(super) fn grouped(value: u64) -> String {
    separated(value, '_')
}

/// `value` with `separator` between groups of three digits, from five digits on.
pub(super) fn separated(value: u64, separator: char) -> String {
    let digits = value.to_string();
    if digits.len() < 5 {
        return digits;
    }
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(separator);
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::Path;

    use super::*;
    use crate::config::raw::schema::schema_keys;
    use crate::config::reference::reference;
    use crate::config::Config;

    /// Every dotted key of the table.
    fn table_paths() -> BTreeSet<String> {
        KEYS.iter().flat_map(Key::paths).collect()
    }

    #[test]
    fn the_table_holds_exactly_the_keys_the_file_accepts() {
        let schema = schema_keys();
        let table = table_paths();
        let missing: Vec<&String> = schema.difference(&table).collect();
        let extra: Vec<&String> = table.difference(&schema).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "keys the file accepts but the table lacks: {missing:?}; keys in the table the file does not accept: {extra:?}"
        );
        assert_eq!(
            table.len(),
            KEYS.iter().map(|k| k.table.paths.len()).sum::<usize>(),
            "a key listed twice"
        );
    }

    /// A directory to parse configs in, with the directories the examples name.
    fn project() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["docs", "plugins"] {
            std::fs::create_dir(dir.path().join(sub)).unwrap();
        }
        dir
    }

    /// `text`, a TOML value.
    fn value(text: &str) -> toml::Value {
        let table: toml::Table = toml::from_str(&format!("v = {text}")).unwrap();
        table["v"].clone()
    }

    /// Sets `path` in `table` (creating the tables on the way; `*` is the name `x`,
    /// `fs[]` the first table of the list `fs`), to `leaf` when given.
    fn insert(table: &mut toml::Table, path: &str, leaf: Option<toml::Value>) {
        let (head, rest) = match path.split_once('.') {
            Some((head, rest)) => (head, Some(rest)),
            None => (path, None),
        };
        let head = head.replace('*', "x");
        match (rest, head.strip_suffix("[]")) {
            (None, Some(list)) => {
                let entry = table
                    .entry(list)
                    .or_insert_with(|| toml::Value::Array(Vec::new()));
                if entry.as_array().unwrap().is_empty() {
                    entry
                        .as_array_mut()
                        .unwrap()
                        .push(toml::Value::Table(Default::default()));
                }
            }
            (None, None) => {
                let leaf = leaf.unwrap_or_else(|| toml::Value::Table(toml::Table::new()));
                table.insert(head, leaf);
            }
            (Some(rest), Some(list)) => {
                let entry = table.entry(list).or_insert_with(|| {
                    toml::Value::Array(vec![toml::Value::Table(Default::default())])
                });
                let inner = entry.as_array_mut().unwrap()[0].as_table_mut().unwrap();
                insert(inner, rest, leaf);
            }
            (Some(rest), None) => {
                let entry = table
                    .entry(head)
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                insert(entry.as_table_mut().unwrap(), rest, leaf);
            }
        }
    }

    /// The smallest file that can hold `path`: the tables around it, and the keys they
    /// require.
    fn around(path: &str) -> toml::Table {
        let mut table = toml::Table::new();
        let (tables, _) = path.rsplit_once('.').unwrap_or(("", path));
        if !tables.is_empty() {
            insert(&mut table, tables, None);
        }
        for key in KEYS {
            let KeyDefault::Required(example) = key.default else {
                continue;
            };
            for required in key.paths() {
                let (within, _) = required.rsplit_once('.').unwrap_or(("", &required));
                let inside = tables == within || tables.starts_with(&format!("{within}."));
                if inside && required != path {
                    insert(&mut table, &required, Some(value(example)));
                }
            }
        }
        table
    }

    fn parse(dir: &Path, table: &toml::Table) -> Result<Config, String> {
        let text = toml::to_string(table).unwrap();
        Config::parse(&dir.join("warren.toml"), &text)
            .map_err(|e| format!("{e}\n(the file:\n{text})"))
    }

    #[test]
    fn the_plugins_keys_messages_list_are_the_tables() {
        let table: Vec<&str> = KEYS
            .iter()
            .filter(|key| key.table.paths == ["plugins"])
            .map(|key| key.name)
            .collect();
        assert_eq!(crate::config::plugin_tables::PLUGINS_KEYS, table);
    }

    #[test]
    fn every_default_is_what_the_key_resolves_to_unwritten() {
        let dir = project();
        let mut checked = 0;
        for key in KEYS {
            let Some(default) = key.default.toml() else {
                continue;
            };
            for path in key.paths() {
                let without = around(&path);
                let mut with = without.clone();
                insert(&mut with, &path, Some(value(&default)));
                let unwritten = parse(dir.path(), &without).unwrap();
                let written = parse(dir.path(), &with).unwrap();
                assert_eq!(
                    format!("{written:?}"),
                    format!("{unwritten:?}"),
                    "{path} = {default} is not what leaving it out gives"
                );
                checked += 1;
            }
        }
        assert!(checked > 50, "{checked}");
    }

    #[test]
    fn every_bound_is_enforced_naming_the_key() {
        let dir = project();
        let mut checked = 0;
        for key in KEYS {
            // The values at the bounds, and just past them.
            let (at, past): (Vec<String>, Vec<String>) = match key.bounds {
                Bounds::None => continue,
                Bounds::Int { min, max } => (
                    vec![min.to_string(), max.to_string()],
                    vec![(min as i64 - 1).to_string(), (max + 1).to_string()],
                ),
                Bounds::NonNegative => (vec!["0.0".into()], vec!["-0.01".into()]),
                Bounds::Positive => (vec!["0.001".into()], vec!["0.0".into()]),
                Bounds::Bytes(max) => (
                    vec![format!("{:?}", "x".repeat(max))],
                    vec![format!("{:?}", "x".repeat(max + 1))],
                ),
            };
            for path in key.paths() {
                for text in &at {
                    let mut table = around(&path);
                    insert(&mut table, &path, Some(value(text)));
                    if let Err(error) = parse(dir.path(), &table) {
                        panic!("{path} = {text} is within the table's bounds, but: {error}");
                    }
                }
                for text in &past {
                    let mut table = around(&path);
                    insert(&mut table, &path, Some(value(text)));
                    let Err(error) = parse(dir.path(), &table) else {
                        panic!("{path} = {text} is past the table's bounds, but loads");
                    };
                    let dotted = path.replace('*', "x");
                    let line = toml::to_string(&table)
                        .unwrap()
                        .lines()
                        .position(|l| l.starts_with(&format!("{} = ", key.name)))
                        .unwrap()
                        + 1;
                    assert!(
                        error.contains(&dotted)
                            || error.contains(&format!("{line} | {} = ", key.name)),
                        "{path} = {text}: the error does not name the key: {error}"
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 40, "{checked}");
    }

    /// docs/configuration.md holds [`reference`] between its markers.
    /// `WARREN_BLESS=1 cargo test -p warren --lib config::keys` rewrites it.
    #[test]
    fn the_configuration_reference_is_the_table() {
        const BEGIN: &str = "<!-- keys:begin: generated from host/src/config/keys.rs -->\n";
        const END: &str = "<!-- keys:end -->";
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/configuration.md");
        let text = std::fs::read_to_string(&file).unwrap();
        let (Some(begin), Some(end)) = (text.find(BEGIN), text.find(END)) else {
            panic!("{} has no {BEGIN:?} … {END:?} markers", file.display());
        };
        let written = &text[begin + BEGIN.len()..end];
        let rendered = reference();
        if written != rendered && std::env::var_os("WARREN_BLESS").is_some() {
            let blessed = format!("{}{BEGIN}{rendered}{}", &text[..begin], &text[end..]);
            std::fs::write(&file, blessed).unwrap();
            return;
        }
        assert!(
            written == rendered,
            "{} is not the key table: run `WARREN_BLESS=1 cargo test -p warren --lib config::keys` to rewrite it",
            file.display()
        );
    }
}
