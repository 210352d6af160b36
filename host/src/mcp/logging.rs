//! Log records for MCP clients: a `tracing` layer that sends each record, as well as
//! writing it to stderr, to the connected clients as `notifications/message`, at or
//! above the level each client chose with `logging/setLevel` (warnings and errors
//! until it chooses).
//!
//! A record made while a session's tool call (or an agent it started) runs goes to
//! that session only; one made while an MCP task runs (its agents' denials name
//! paths, hosts and the task) goes only to the sessions of the credential that owns
//! the task; a record made outside every session and task (loading, the HTTP server)
//! goes to every session. What is sent: warren's own records (agents, the sandbox and
//! its denials, the plugins' logs) at the client's level, and other crates' warnings
//! and errors, never their debug chatter. rmcp's own records stay on stderr: sending
//! them would log the sending, and feed back.
//!
//! Sending never waits: each session has a bounded queue, and records that do not fit
//! are dropped (counted on stderr when the session ends).

// `logging/setLevel` and `notifications/message` are deprecated from MCP 2026-07-28
// on (SEP-2577); warren speaks the revisions up to 2025-11-25, where they are current.
#![allow(deprecated)]

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use tokio::sync::mpsc;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

use crate::listener::auth::Owner;
use crate::telemetry::RecordLine;

/// Records queued for one session before newer ones are dropped.
const QUEUE_RECORDS: usize = 512;
/// The span every tool call of a session runs in; its `mcp.session` field names the
/// session whose client gets the records made inside it.
pub(crate) const CALL_SPAN: &str = "mcp.call";
/// The span an MCP task's call runs in; its `mcp.owner` field (the credential, hex)
/// names whose sessions get the records made inside it.
pub(crate) const TASK_SPAN: &str = "mcp.task";

/// Every connected session's sink.
static SINKS: Mutex<Vec<Arc<SinkState>>> = Mutex::new(Vec::new());
/// The lowest threshold of any sink (`u8::MAX`: no sinks): the layer's quick check.
static LOWEST_THRESHOLD: AtomicU8 = AtomicU8::new(u8::MAX);

/// One session's wish and queue.
struct SinkState {
    /// The session.
    session: u64,
    /// The credential its client holds: the records of that credential's tasks are
    /// its too.
    owner: Owner,
    /// The least severe rank sent (see [`rank`]).
    threshold: AtomicU8,
    /// Where its records go (to the task that sends them to the client).
    sender: mpsc::Sender<LoggingMessageNotificationParam>,
    /// Records dropped because the queue was full.
    dropped: AtomicU64,
}

/// A session's registration: records go to its receiver until this is dropped.
pub(crate) struct LogSink {
    /// Shared with the layer through [`SINKS`].
    state: Arc<SinkState>,
}

impl LogSink {
    /// Registers `session` of a client holding `owner` at the default level
    /// (warning); its records arrive on the receiver.
    pub(crate) fn register(
        session: u64,
        owner: Owner,
    ) -> (LogSink, mpsc::Receiver<LoggingMessageNotificationParam>) {
        let (sender, receiver) = mpsc::channel(QUEUE_RECORDS);
        let state = Arc::new(SinkState {
            session,
            owner,
            threshold: AtomicU8::new(level_rank(LoggingLevel::Warning)),
            sender,
            dropped: AtomicU64::new(0),
        });
        sinks().push(state.clone());
        refresh_lowest();
        (LogSink { state }, receiver)
    }

    /// Sends records at `level` and more severe from now on.
    pub(crate) fn set_level(&self, level: LoggingLevel) {
        self.state
            .threshold
            .store(level_rank(level), Ordering::Relaxed);
        refresh_lowest();
    }
}

impl Drop for LogSink {
    fn drop(&mut self) {
        sinks().retain(|sink| !Arc::ptr_eq(sink, &self.state));
        refresh_lowest();
        let dropped = self.state.dropped.load(Ordering::Relaxed);
        if dropped > 0 {
            tracing::warn!(
                session = self.state.session,
                "{dropped} log record(s) were not sent to the MCP client: it read them too slowly"
            );
        }
    }
}

fn sinks() -> std::sync::MutexGuard<'static, Vec<Arc<SinkState>>> {
    SINKS.lock().unwrap_or_else(PoisonError::into_inner)
}

fn refresh_lowest() {
    let lowest = sinks()
        .iter()
        .map(|sink| sink.threshold.load(Ordering::Relaxed))
        .min()
        .unwrap_or(u8::MAX);
    LOWEST_THRESHOLD.store(lowest, Ordering::Relaxed);
}

/// MCP levels from least to most severe, as ranks.
fn level_rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// The MCP level of a `tracing` level (trace is debug: MCP has nothing finer).
fn mcp_level(level: &Level) -> LoggingLevel {
    match *level {
        Level::ERROR => LoggingLevel::Error,
        Level::WARN => LoggingLevel::Warning,
        Level::INFO => LoggingLevel::Info,
        Level::DEBUG | Level::TRACE => LoggingLevel::Debug,
    }
}

/// Whether a record with `metadata` may be sent to some client at all.
fn wanted(metadata: &Metadata<'_>) -> bool {
    let target = metadata.target();
    if metadata.is_span() {
        // Spans carry the session a record belongs to.
        return target.starts_with("warren");
    }
    if target.starts_with("rmcp") {
        return false;
    }
    let rank = level_rank(mcp_level(metadata.level()));
    let floor = if target.starts_with("warren") {
        0
    } else {
        level_rank(LoggingLevel::Warning)
    };
    rank >= floor && rank >= LOWEST_THRESHOLD.load(Ordering::Relaxed)
}

/// The layer to install (with its filter) for `warren mcp`.
pub(crate) fn layer<S>() -> impl Layer<S> + Send + Sync
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    ForwardLayer.with_filter(tracing_subscriber::filter::dynamic_filter_fn(
        |metadata, _| wanted(metadata),
    ))
}

/// Whose client gets the records made in a span, kept in its extensions.
#[derive(Clone, Copy, PartialEq)]
enum Route {
    /// A call span's session.
    Session(u64),
    /// A task span's credential: each of its sessions.
    Owner(Owner),
}

/// Reads `mcp.session` from a call span's fields, or `mcp.owner` from a task span's.
#[derive(Default)]
struct RouteField(Option<Route>);

impl Visit for RouteField {
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "mcp.session" {
            self.0 = Some(Route::Session(value));
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let mut owner = [0; 32];
        if field.name() == "mcp.owner"
            && hex::decode_to_slice(format!("{value:?}"), &mut owner).is_ok()
        {
            self.0 = Some(Route::Owner(owner));
        }
    }
}

impl Route {
    /// Whether `sink` gets the records routed so.
    fn reaches(self, sink: &SinkState) -> bool {
        match self {
            Route::Session(session) => sink.session == session,
            Route::Owner(owner) => sink.owner == owner,
        }
    }
}

/// Sends records to the sinks.
struct ForwardLayer;

impl<S> Layer<S> for ForwardLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attributes: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if ![CALL_SPAN, TASK_SPAN].contains(&attributes.metadata().name()) {
            return;
        }
        let mut field = RouteField::default();
        attributes.record(&mut field);
        if let (Some(route), Some(span)) = (field.0, ctx.span(id)) {
            span.extensions_mut().insert(route);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let metadata = event.metadata();
        let level = mcp_level(metadata.level());
        let rank = level_rank(level);
        // The innermost tagged span routes it (a task's agents run inside its span).
        let route = ctx.event_scope(event).and_then(|scope| {
            scope
                .into_iter()
                .find_map(|span| span.extensions().get::<Route>().copied())
        });
        let mut line = RecordLine::default();
        event.record(&mut line);
        let data = format!("{}{}", line.message, line.fields);
        for sink in sinks().iter() {
            let for_it = route.is_none_or(|route| route.reaches(sink));
            if for_it && rank >= sink.threshold.load(Ordering::Relaxed) {
                let record = LoggingMessageNotificationParam::new(level, data.clone().into())
                    .with_logger(metadata.target());
                // A closed queue is a session on its way out: nothing to count.
                if let Err(mpsc::error::TrySendError::Full(_)) = sink.sender.try_send(record) {
                    sink.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_rank_by_severity() {
        assert!(level_rank(mcp_level(&Level::TRACE)) < level_rank(mcp_level(&Level::INFO)));
        assert!(level_rank(mcp_level(&Level::WARN)) < level_rank(mcp_level(&Level::ERROR)));
        assert_eq!(
            level_rank(mcp_level(&Level::WARN)),
            level_rank(LoggingLevel::Warning)
        );
    }
}
