//! A live run's control socket: how `warren send` and `warren approve` in another
//! terminal (and the web view) reach the process that runs the run. A journaled run
//! listens on `control.sock` beside its journal (owner-only, in the owner-only run
//! directory) until its root ends; each connection carries one request as a JSON
//! line (`op`: `send` a message, list the `pending` requests for a person, or
//! `answer` one) and gets its reply as one.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Semaphore;

use crate::agent::Runtime;
use crate::events::{MessageMode, PersonAnswer, PersonRequest, Verdict};
use crate::jobs::{JobId, Tree};
use crate::scheduler::{Receipt, Sender};

/// The socket's name, beside the run's journal.
pub(crate) const CONTROL_SOCKET: &str = "control.sock";

/// Connections served at once; one more is answered busy.
const MAX_CONNECTIONS: usize = 8;

/// How long a connection may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest path a Unix socket may have (`sun_path`, less its terminating zero).
const MAX_SOCKET_PATH: usize = 107;

/// One request on the socket.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum ControlRequest {
    /// A person's message to an agent.
    Send(SendRequest),
    /// The approvals and questions waiting for a person.
    Pending,
    /// A person's answer to one.
    Answer(AnswerRequest),
}

/// A person's answer, as `warren approve` and the web view send it.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct AnswerRequest {
    /// The request's id.
    pub(crate) request: String,
    /// `approve`, `approve_tool`, `deny` or `answer`.
    pub(crate) verdict: String,
    /// A denial's reason, or a question's answer.
    #[serde(default)]
    pub(crate) text: String,
    /// Who answers, as the journal records it (`cli:NAME`, `web`).
    pub(crate) by: String,
}

/// One message, as `warren send` sends it.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct SendRequest {
    /// The agent's job id (or `root`).
    pub(crate) agent: String,
    /// The text.
    pub(crate) message: String,
    /// `queue` (default), `interrupt` or `follow_up`.
    pub(crate) mode: Option<String>,
    /// Who sends it, as the agent is told.
    pub(crate) from: String,
}

/// What became of it.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct SendReply {
    /// `queued`, `resumed` or `rejected`.
    pub(crate) receipt: String,
    /// The message's number in the run, when accepted.
    pub(crate) seq: Option<u64>,
    /// The receipt in a sentence.
    pub(crate) text: String,
    /// The requests waiting for a person (`pending`), or the one answered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) requests: Vec<PersonRequest>,
}

/// The control socket of the run whose journal is `journal`.
pub(crate) fn socket_path(journal: &Path) -> PathBuf {
    journal.with_file_name(CONTROL_SOCKET)
}

/// Starts serving `tree`'s control socket (a journaled run's) until its root `root`
/// ends; a socket that cannot be opened (its path too long, say) is logged, and the
/// run goes on without one.
pub(crate) fn serve(runtime: Arc<Runtime>, tree: Arc<Tree>, root: JobId) {
    let Some(journal) = &tree.journal else {
        return;
    };
    let path = socket_path(journal.path());
    if path.as_os_str().len() > MAX_SOCKET_PATH {
        tracing::warn!(
            path = %path.display(),
            "the run's control socket path is too long for a Unix socket: `warren send` cannot reach this run (use a shorter [journal] dir)"
        );
        return;
    }
    // A socket left by a process that died (this run is resumed) is stale.
    let _ = std::fs::remove_file(&path);
    let listener = match UnixListener::bind(&path) {
        Ok(listener) => listener,
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "cannot open the run's control socket: `warren send` cannot reach this run");
            return;
        }
    };
    use std::os::unix::fs::PermissionsExt as _;
    if let Err(error) = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)) {
        tracing::warn!(path = %path.display(), %error, "cannot make the control socket owner-only; closing it");
        let _ = std::fs::remove_file(&path);
        return;
    }
    let Some(mut done) = tree.job(&root).map(|job| job.done) else {
        return;
    };
    tokio::spawn(async move {
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        loop {
            let accepted = tokio::select! {
                _ = done.wait_for(|ended| *ended) => break,
                accepted = listener.accept() => accepted,
            };
            let Ok((stream, _)) = accepted else {
                // Out of descriptors, say: try again shortly rather than spin.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                // Told without waiting (a fresh socket's buffer takes the line), and
                // closed at once: a flood holds no task and no descriptor.
                let reply = rejected("the run is serving other messages: send again".into());
                let _ = stream.try_write(reply_line(&reply).as_bytes());
                continue;
            };
            let (runtime, tree, root) = (runtime.clone(), tree.clone(), root.clone());
            tokio::spawn(async move {
                let _slot = slot;
                handle(&runtime, &tree, &root, stream).await;
            });
        }
        let _ = std::fs::remove_file(&path);
    });
}

/// Serves one connection: reads its request, leaves the message, answers the receipt.
async fn handle(runtime: &Runtime, tree: &Arc<Tree>, root: &JobId, stream: UnixStream) {
    // A message may escape every byte (six per byte) and the rest is small.
    let most = (tree.limits.max_message_kb * 1024 * 6 + 4096) as u64;
    let (read, write) = stream.into_split();
    let mut line = String::new();
    let mut reader = BufReader::new(read.take(most + 1));
    let read = tokio::time::timeout(READ_TIMEOUT, reader.read_line(&mut line)).await;
    let reply = match read {
        Err(_) => rejected(format!("no request within {} s", READ_TIMEOUT.as_secs())),
        Ok(Err(error)) => rejected(format!("cannot read the request: {error}")),
        Ok(Ok(_)) if line.len() as u64 > most => rejected(format!(
            "the request passes {most} bytes: the message is over [defaults] max_message_kb"
        )),
        Ok(Ok(_)) => match serde_json::from_str::<ControlRequest>(&line) {
            Err(error) => rejected(format!("not a request: {error}")),
            Ok(ControlRequest::Send(request)) => send(runtime, tree, root, request).await,
            Ok(ControlRequest::Pending) => {
                let requests = tree.requests.pending();
                SendReply {
                    receipt: "pending".into(),
                    seq: None,
                    text: format!("{} waiting", requests.len()),
                    requests,
                }
            }
            Ok(ControlRequest::Answer(request)) => answer(tree, request),
        },
    };
    drop(reader);
    write_reply(write, reply).await;
}

/// Leaves `request`'s message as a person's, and says what became of it.
async fn send(
    runtime: &Runtime,
    tree: &Arc<Tree>,
    root: &JobId,
    request: SendRequest,
) -> SendReply {
    let mode = match MessageMode::parse(request.mode.as_deref()) {
        Ok(mode) => mode,
        Err(why) => return rejected(why),
    };
    let to = match request.agent.trim() {
        "root" => root.clone(),
        id => JobId(id.to_string()),
    };
    let from: String = request.from.chars().take(64).collect();
    let receipt = runtime
        .scheduler
        .message_from(tree, Sender::Person(&from), &to, request.message, mode)
        .await;
    let text = receipt.sentence(&to);
    tracing::info!(agent = %to, from = %from, receipt = %text, "a message from warren send");
    let (name, seq) = match &receipt {
        Receipt::Queued { seq, .. } => ("queued", Some(*seq)),
        Receipt::Resumed { seq } => ("resumed", Some(*seq)),
        Receipt::Rejected(_) => ("rejected", None),
    };
    SendReply {
        receipt: name.into(),
        seq,
        text,
        requests: Vec::new(),
    }
}

/// Gives `request`'s answer to the request waiting for it.
fn answer(tree: &Tree, request: AnswerRequest) -> SendReply {
    let verdict = match Verdict::parse(&request.verdict) {
        Ok(verdict) => verdict,
        Err(why) => return rejected(why),
    };
    let by: String = request.by.chars().take(64).collect();
    let answer = PersonAnswer {
        verdict,
        text: request.text,
        by: by.clone(),
    };
    match tree.requests.answer(request.request.trim(), answer) {
        Ok(asked) => {
            tracing::info!(request = %asked.id, agent = %asked.agent, by = %by, ?verdict, "a request answered through the control socket");
            SendReply {
                receipt: "answered".into(),
                seq: None,
                text: format!(
                    "request {} of agent {} ({}): {}",
                    asked.id,
                    asked.path,
                    asked.tool,
                    verdict_words(verdict)
                ),
                requests: vec![asked],
            }
        }
        Err(why) => rejected(why),
    }
}

/// What a verdict did, in words.
fn verdict_words(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Approve => "approved once",
        Verdict::ApproveTool => "approved, and the tool for the rest of the run",
        Verdict::Deny => "denied",
        Verdict::Answer => "answered",
    }
}

fn rejected(why: String) -> SendReply {
    SendReply {
        receipt: "rejected".into(),
        seq: None,
        text: format!("rejected: {why}"),
        requests: Vec::new(),
    }
}

/// `reply` as one JSON line.
fn reply_line(reply: &SendReply) -> String {
    let mut line = serde_json::to_string(reply).unwrap_or_default();
    line.push('\n');
    line
}

/// Writes `reply` as one JSON line (a peer that does not read is given up on).
async fn write_reply(mut out: impl AsyncWriteExt + Unpin, reply: SendReply) {
    let line = reply_line(&reply);
    let _ = tokio::time::timeout(READ_TIMEOUT, out.write_all(line.as_bytes())).await;
}

/// Sends `request` to the run listening on `socket` and reads its receipt. `Err`:
/// nothing listens there (the run's process is gone), or it did not answer.
pub(crate) async fn request(socket: &Path, request: &ControlRequest) -> std::io::Result<SendReply> {
    let mut stream = UnixStream::connect(socket).await?;
    let mut line = serde_json::to_string(request).map_err(std::io::Error::other)?;
    line.push('\n');
    stream.write_all(line.as_bytes()).await?;
    // A listing of many pending requests, each with its arguments, is long.
    let mut reader = BufReader::new(stream.take(64 << 20));
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(30), reader.read_line(&mut answer))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no receipt in 30 s"))??;
    serde_json::from_str(&answer).map_err(std::io::Error::other)
}
