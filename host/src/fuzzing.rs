//! Entry points for the fuzz targets in `fuzz/`, compiled only under `--cfg fuzzing`
//! (which `cargo fuzz` sets): thin wrappers that reach crate-private parsers without
//! widening the public API. Each runs the same code path the host runs.

use std::convert::Infallible;
use std::sync::OnceLock;

use bytes::Bytes;
use http_body_util::StreamBody;
use hyper::body::Frame;
use serde_json::json;

use crate::llm::anthropic::Anthropic;
use crate::llm::http::HttpApi;
use crate::llm::openai::OpenAi;
use crate::llm::sse::SseParser;
use crate::llm::{ChatResponse, LlmError, ModelConfig, Secrets};

/// What the built-in providers stream beside the text (not the library's API: a
/// provider given in code streams its text alone).
pub use crate::llm::chat::StreamEvent;

// `config` keeps `agent_files` private; the file names nothing else in the crate but
// `crate::config::output_schema` and `crate::config::limits` (never `super::`), so it
// is compiled here a second time, from the same source, to be called directly.
#[allow(dead_code, clippy::duplicate_mod)]
#[path = "config/agent_files.rs"]
mod agent_files;

/// What the SSE parser made of a whole stream.
#[derive(Debug, PartialEq, Eq)]
pub struct SseOutcome {
    /// Every dispatched event as (`event:` field, data, offset), those `finish`
    /// dispatched included.
    pub events: Vec<(Option<String>, String, usize)>,
    /// How many of `events` `finish` dispatched.
    pub finished: usize,
    /// The unfinished event before `finish`, as `SseParser::unfinished` reports it.
    pub unfinished: Option<(usize, String)>,
    /// Bytes consumed before `finish`.
    pub position: usize,
    /// Bytes the parser's line-end search looked at: at most the stream's length
    /// when the parser is linear, however the stream is cut.
    pub examined: usize,
}

/// Feeds `chunks` to one `SseParser`, in order, then ends the body.
pub fn sse<'a>(chunks: impl IntoIterator<Item = &'a [u8]>) -> SseOutcome {
    let mut parser = SseParser::default();
    let mut events = Vec::new();
    for chunk in chunks {
        events.extend(parser.push(chunk));
    }
    let unfinished = parser.unfinished();
    let position = parser.position();
    let examined = parser.examined;
    let last = parser.finish();
    let finished = last.len();
    events.extend(last);
    SseOutcome {
        events: events
            .into_iter()
            .map(|e| (e.event, e.data, e.offset))
            .collect(),
        finished,
        unfinished,
        position,
        examined,
    }
}

/// What a provider's stream assembly returned, and what it streamed on the way.
#[derive(Debug)]
pub struct StreamOutcome {
    /// The assembled response or the error.
    pub result: Result<ChatResponse, LlmError>,
    /// The events sent to the sink, in order.
    pub events: Vec<StreamEvent>,
}

/// The provider `cell` holds, built by `new` from the plain config of `provider` on
/// first use.
fn plain<P>(
    cell: &'static OnceLock<P>,
    provider: &str,
    new: fn(&str, &ModelConfig, &Secrets) -> Result<P, LlmError>,
) -> &'static P {
    cell.get_or_init(|| {
        new("fuzz", &model_config(provider), &Default::default()).expect("a plain config builds")
    })
}

/// Runs the OpenAI stream assembly over `body` as the response body.
pub fn openai_stream(body: &[u8]) -> StreamOutcome {
    static PROVIDER: OnceLock<OpenAi> = OnceLock::new();
    let provider = plain(&PROVIDER, "openai", OpenAi::new);
    assemble(body, |response, sink| {
        runtime().block_on(provider.read_stream(response, sink))
    })
}

/// Runs the Anthropic stream assembly over `body` as the response body.
pub fn anthropic_stream(body: &[u8]) -> StreamOutcome {
    static PROVIDER: OnceLock<Anthropic> = OnceLock::new();
    let provider = plain(&PROVIDER, "anthropic", Anthropic::new);
    assemble(body, |response, sink| {
        runtime().block_on(provider.read_stream(response, sink))
    })
}

/// Parses `text` as the `warren.toml` at `path` (agent files beside it included), as
/// the host does; returns whether it was accepted.
pub fn config(path: &std::path::Path, text: &str) -> bool {
    crate::config::Config::parse(path, text).is_ok()
}

/// Parses an agent file and checks what an accepted one promises; returns whether it
/// was accepted.
pub fn agent_file(text: &str) -> bool {
    let parsed = agent_files::parse(text);
    if !text.starts_with('\u{feff}') {
        assert_eq!(
            parsed,
            agent_files::parse(&format!("\u{feff}{text}")),
            "a byte-order mark changes nothing"
        );
    }
    let Ok(file) = parsed else {
        return false;
    };
    assert!(file.name.as_deref().is_none_or(|n| !n.trim().is_empty()));
    assert!(file.model.as_deref().is_none_or(|m| !m.trim().is_empty()));
    assert!(file
        .max_turns
        .is_none_or(|t| (1..=crate::config::limits::MAX_TURNS).contains(&u64::from(t))));
    assert!(file
        .tools
        .iter()
        .flatten()
        .chain(&file.disallowed_tools)
        .all(|t| !t.is_empty()));
    assert_eq!(file.prompt, file.prompt.trim());
    true
}

/// A model config with every default: no key variable named, no price.
fn model_config(provider: &str) -> ModelConfig {
    serde_json::from_value(json!({ "provider": provider, "model": "fuzz" }))
        .expect("a plain model config deserializes")
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a current-thread runtime builds")
    })
}

/// Wraps `body` as a streamed HTTP response, hands it to `read` with a sink, and
/// collects what the sink received.
fn assemble(
    body: &[u8],
    read: impl FnOnce(reqwest::Response, &crate::llm::EventSink) -> Result<ChatResponse, LlmError>,
) -> StreamOutcome {
    let frame = Frame::data(Bytes::copy_from_slice(body));
    let stream = StreamBody::new(futures_util::stream::iter([Ok::<_, Infallible>(frame)]));
    let response = reqwest::Response::from(http::Response::new(reqwest::Body::wrap(stream)));
    let (sink, mut receiver) = crate::llm::EventSink::channel();
    let result = read(response, &sink);
    let mut events = Vec::new();
    while let Ok(event) = receiver.try_recv() {
        events.push(event);
    }
    StreamOutcome { result, events }
}

/// Reads `bytes` as a journal file, as every command reads one (lines, records, the
/// tree), and checks what a journal read promises: the run and the records agree on
/// whether it is readable; every agent's parent comes before it and none is deeper
/// than the bound; every id keeps the id rule and every figure is finite and not
/// negative; a resume's spending too; and a cut inside a character at the end, as a
/// crash leaves, changes nothing read. Returns whether the journal was readable.
pub fn journal(bytes: &[u8]) -> bool {
    use crate::journal::check::{is_valid_id, MAX_TREE_DEPTH};
    use crate::journal::read;
    static DIR: OnceLock<std::path::PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("warren-fuzz-journal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        dir
    });
    let path = dir.join("input.jsonl");
    std::fs::write(&path, bytes).expect("writing the input");
    let records = read::records(&path);
    let run = read::run(&path);
    assert_eq!(records.is_ok(), run.is_ok(), "{records:?} {run:?}");
    let (Ok(records), Ok(run)) = (records, run) else {
        return false;
    };
    let mut depths: std::collections::HashMap<&str, u32> = Default::default();
    for agent in &run.agents {
        assert!(is_valid_id(&agent.id));
        let depth = match &agent.parent {
            None => 0,
            Some(parent) => depths.get(parent.as_str()).expect("a parent comes first") + 1,
        };
        assert!(depth <= MAX_TREE_DEPTH);
        depths.insert(&agent.id, depth);
        assert!(agent.cost_usd.is_finite() && agent.cost_usd >= 0.0);
    }
    assert!(is_valid_id(&run.id));
    assert!(run.cost_usd.is_finite() && run.cost_usd >= 0.0);
    if let Ok(resume) = crate::journal::Resume::new(records.clone()) {
        assert!(resume.spent_usd.is_finite() && resume.spent_usd >= 0.0);
    }
    if bytes.ends_with(b"\n") {
        let mut torn = bytes.to_vec();
        torn.extend_from_slice(
            "{\"ts_ms\":1,\"text\":\"é"
                .as_bytes()
                .split_last()
                .expect("not empty")
                .1,
        );
        std::fs::write(&path, &torn).expect("writing the input");
        let again = read::records(&path).expect("a torn last line is left out");
        assert_eq!(again, records);
    }
    true
}

/// Parses `data` as a spawn tool's arguments (`SpawnRequest::parse`; invalid JSON is
/// skipped) and checks what an accepted request promises: a non-blank task, the
/// profile as given (a blank one meaning the parent's), a one-line description of at
/// most 80 characters, no blank tool names, and limits in range. Returns whether it
/// was accepted.
pub fn spawn_args(data: &[u8]) -> bool {
    let Ok(args) = serde_json::from_slice::<serde_json::Value>(data) else {
        return false;
    };
    let Ok(request) = crate::jobs::spawn_request::SpawnRequest::parse(&args) else {
        return false;
    };
    assert!(!request.task.trim().is_empty());
    assert_eq!(
        request.profile.as_deref(),
        args["profile"].as_str().filter(|p| !p.trim().is_empty())
    );
    if let Some(description) = &request.description {
        assert!(!description.is_empty() && description.chars().count() <= 80);
        assert_eq!(
            description.split_whitespace().collect::<Vec<_>>().join(" "),
            *description
        );
    }
    if args["tools"].is_string() {
        let tools = request.tools.as_deref().unwrap_or_default();
        assert!(tools.iter().all(|t| !t.is_empty() && t.trim() == t));
    }
    assert!(request.max_turns.is_none_or(|n| n >= 1));
    assert!(request.timeout_s.is_none_or(|n| n >= 1));
    assert!(request
        .max_cost_usd
        .is_none_or(|usd| usd.is_finite() && usd >= 0.0));
    true
}
