//! Logs and traces. Logs go to stderr, chosen with `RUST_LOG`. Traces follow the
//! OpenTelemetry GenAI conventions (`invoke_agent {profile}`, `chat {model}`,
//! `execute_tool {tool}`, `gen_ai.*` attributes) and are exported as OTLP/HTTP JSON to
//! `{endpoint}/v1/traces` when an endpoint is given (`--otlp-endpoint` or
//! `OTEL_EXPORTER_OTLP_ENDPOINT`), with headers from `OTEL_EXPORTER_OTLP_HEADERS`
//! (`key=value,…`, so Langfuse's `Authorization=Basic …` works).
//!
//! The exporter is a small `tracing` layer: it keeps each span's ids and attributes,
//! and ships finished spans in batches from a background task. A span's exported name
//! is its `otel.name` field when it has one (tracing names are static strings).

use std::collections::hash_map::RandomState;
use std::fmt::Write as _;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::Subscriber;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Whether spans are exported (set once, when the exporter starts): what only an
/// exporter reads (an agent's input and output on its span) is built only then.
static EXPORTING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether spans are exported.
pub(crate) fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// The variable that asks for the GenAI conventions' names of v1.36 and before beside
/// today's (`WARREN_OTEL_GENAI_COMPAT=1.36`): `gen_ai.system` beside
/// `gen_ai.provider.name`, for a tracing backend not yet reading the new name.
pub(crate) const GENAI_COMPAT_VARIABLE: &str = "WARREN_OTEL_GENAI_COMPAT";

/// Whether spans also carry the GenAI conventions' names of v1.36 and before; read
/// once per process. (`OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`
/// asks for what warren emits anyway: today's names only.)
pub(crate) fn genai_compat() -> bool {
    static COMPAT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *COMPAT.get_or_init(|| {
        let compat = std::env::var(GENAI_COMPAT_VARIABLE).is_ok_and(|v| v.trim() == "1.36");
        let latest = std::env::var("OTEL_SEMCONV_STABILITY_OPT_IN").is_ok_and(|v| {
            v.split(',')
                .any(|p| p.trim() == "gen_ai_latest_experimental")
        });
        compat && !latest
    })
}

/// Finished spans waiting to be sent, at most this many (older ones are dropped).
const MAX_QUEUED_SPANS: usize = 100_000;
/// How often queued spans are sent.
const EXPORT_INTERVAL: Duration = Duration::from_millis(500);

/// One span's data while it is open.
struct SpanData {
    name: String,
    trace_id: u128,
    span_id: u64,
    parent_span_id: Option<u64>,
    start_ns: u128,
    attributes: Vec<(String, Value)>,
}

struct Fields<'a>(&'a mut Vec<(String, Value)>);

/// Reads only `warren.traceparent` from a span's fields.
struct Traceparent(Option<String>);

impl Visit for Traceparent {
    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "warren.traceparent" {
            self.0 = Some(value.to_string());
        }
    }
}

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push((
            field.name().to_string(),
            json!({"stringValue": format!("{value:?}")}),
        ));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0
            .push((field.name().to_string(), json!({"stringValue": value})));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.push((
            field.name().to_string(),
            json!({"intValue": value.to_string()}),
        ));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.push((
            field.name().to_string(),
            json!({"intValue": value.to_string()}),
        ));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0
            .push((field.name().to_string(), json!({"boolValue": value})));
    }
}

/// The W3C `traceparent` of `span` (`00-TRACE-SPAN-01`), when traces are recorded.
pub(crate) fn traceparent(span: &tracing::Span) -> Option<String> {
    span.with_subscriber(|(id, dispatch)| {
        let registry = dispatch.downcast_ref::<tracing_subscriber::Registry>()?;
        let span = registry.span(id)?;
        let extensions = span.extensions();
        let data = extensions.get::<SpanData>()?;
        Some(format!(
            "00-{:032x}-{:016x}-01",
            data.trace_id, data.span_id
        ))
    })
    .flatten()
}

/// `(trace id, span id)` of a W3C `traceparent`.
fn parse_traceparent(text: &str) -> Option<(u128, u64)> {
    let mut parts = text.split('-');
    let (_version, trace, span) = (parts.next()?, parts.next()?, parts.next()?);
    let trace = u128::from_str_radix(trace, 16).ok().filter(|t| *t != 0)?;
    let span = u64::from_str_radix(span, 16).ok().filter(|s| *s != 0)?;
    Some((trace, span))
}

/// Random ids from the process's hash seeds and a counter.
fn random_u64(counter: &AtomicU64) -> u64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(counter.fetch_add(1, Ordering::Relaxed));
    hasher.finish() | 1
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// The `tracing` layer that gives every span its trace and span ids and, when an
/// exporter runs, records finished spans for it. Ids are given even without an
/// exporter: log lines name their trace either way.
struct OtlpLayer {
    /// Finished spans waiting for the exporter; `None` when nothing is exported.
    queue: Option<Arc<Mutex<Vec<Value>>>>,
    ids: AtomicU64,
}

/// The trace of the innermost current span that has one. Read from the registry, not
/// through the log layer's context: that context hides the spans the log filter leaves
/// out (info spans under the default `warn`), which are the agents' spans.
fn current_trace_id() -> Option<u128> {
    tracing::dispatcher::get_default(|dispatch| {
        let registry = dispatch.downcast_ref::<tracing_subscriber::Registry>()?;
        let current = dispatch.current_span();
        let span = registry.span(current.id()?)?;
        span.scope()
            .find_map(|span| span.extensions().get::<SpanData>().map(|d| d.trace_id))
    })
}

/// Log lines within an agent's work begin with the trace they belong to
/// (`trace_id=…`), so a log line and that trace can be found from each other.
struct WithTraceId<F>(F);

impl<S, N, F> FormatEvent<S, N> for WithTraceId<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        if let Some(trace) = current_trace_id() {
            write!(writer, "trace_id={trace:032x} ")?;
        }
        self.0.format_event(ctx, writer, event)
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for OtlpLayer {
    fn on_new_span(&self, attributes: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let parent = span.parent().and_then(|p| {
            p.extensions()
                .get::<SpanData>()
                .map(|d| (d.trace_id, d.span_id))
        });
        let mut data = SpanData {
            name: span.name().to_string(),
            trace_id: parent.map_or_else(
                || (u128::from(random_u64(&self.ids)) << 64) | u128::from(random_u64(&self.ids)),
                |p| p.0,
            ),
            span_id: random_u64(&self.ids),
            parent_span_id: parent.map(|p| p.1),
            start_ns: now_ns(),
            attributes: Vec::new(),
        };
        // Attributes are kept only for export; without it only a remote parent's trace
        // context is read (every agent's spans pass here, so this stays cheap).
        let mut traceparent = Traceparent(None);
        if self.queue.is_some() {
            attributes.record(&mut Fields(&mut data.attributes));
            traceparent.0 = data
                .attributes
                .iter()
                .find(|(key, _)| key == "warren.traceparent")
                .and_then(|(_, value)| value["stringValue"].as_str())
                .map(str::to_string);
        } else if parent.is_none() {
            attributes.record(&mut traceparent);
        }
        // A root span that carries a remote parent's trace context joins its trace.
        if parent.is_none() {
            let remote = traceparent.0.as_deref().and_then(parse_traceparent);
            if let Some((trace_id, span_id)) = remote {
                data.trace_id = trace_id;
                data.parent_span_id = Some(span_id);
            }
        }
        span.extensions_mut().insert(data);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if self.queue.is_none() {
            return;
        }
        if let Some(span) = ctx.span(id) {
            if let Some(data) = span.extensions_mut().get_mut::<SpanData>() {
                values.record(&mut Fields(&mut data.attributes));
            }
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(data) = span.extensions_mut().remove::<SpanData>() else {
            return;
        };
        let Some(queue) = &self.queue else { return };
        let mut name = data.name;
        let mut kind = SPAN_KIND_INTERNAL;
        let mut attributes = Vec::new();
        for (key, value) in data.attributes {
            if key == "otel.name" {
                name = value["stringValue"].as_str().unwrap_or(&name).to_string();
            } else if key == "otel.kind" {
                kind = span_kind(value["stringValue"].as_str().unwrap_or_default());
            } else {
                attributes.retain(|a: &Value| a["key"] != key.as_str());
                attributes.push(json!({"key": key, "value": value}));
            }
        }
        let error = attributes.iter().any(|a| a["key"] == "error.type");
        let mut record = json!({
            "traceId": format!("{:032x}", data.trace_id),
            "spanId": format!("{:016x}", data.span_id),
            "name": name,
            "kind": kind,
            "startTimeUnixNano": data.start_ns.to_string(),
            "endTimeUnixNano": now_ns().to_string(),
            "attributes": attributes,
            "status": {"code": if error { 2 } else { 0 }},
        });
        if let Some(parent) = data.parent_span_id {
            record["parentSpanId"] = format!("{parent:016x}").into();
        }
        let mut queue = queue.lock().expect("span queue poisoned");
        if queue.len() < MAX_QUEUED_SPANS {
            queue.push(record);
        }
    }
}

/// OTLP's `SPAN_KIND_INTERNAL`: work inside warren.
const SPAN_KIND_INTERNAL: u8 = 1;

/// The OTLP span kind a span's `otel.kind` field names (`client` for a call to
/// a model or a remote agent, `server` for a request served), else internal.
fn span_kind(kind: &str) -> u8 {
    match kind {
        "server" => 2,
        "client" => 3,
        "producer" => 4,
        "consumer" => 5,
        _ => SPAN_KIND_INTERNAL,
    }
}

/// Running telemetry; call [`Telemetry::shutdown`] before exiting to flush spans.
pub(crate) struct Telemetry {
    exporter: Option<(Arc<Mutex<Vec<Value>>>, Exporter)>,
}

struct Exporter {
    client: reqwest::Client,
    url: String,
    headers: Vec<(String, String)>,
    task: tokio::task::JoinHandle<()>,
}

/// `OTEL_EXPORTER_OTLP_HEADERS`: `key=value` pairs separated by commas, values
/// percent-decoded.
pub(crate) fn parse_headers(text: &str) -> Vec<(String, String)> {
    text.split(',')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), percent_decode(v.trim())))
        .filter(|(k, _)| !k.is_empty())
        .collect()
}

/// `text` with `%XX` escapes decoded (as in URLs and `OTEL_EXPORTER_OTLP_HEADERS`).
pub(crate) fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Some(byte) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(byte);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn send(
    client: &reqwest::Client,
    url: &str,
    headers: &[(String, String)],
    spans: Vec<Value>,
) {
    if spans.is_empty() {
        return;
    }
    let body = json!({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "warren"}}]},
        "scopeSpans": [{"scope": {"name": "warren", "version": env!("CARGO_PKG_VERSION")}, "spans": spans}]
    }]});
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string());
    for (name, value) in headers {
        request = request.header(name, value);
    }
    match request.send().await {
        Ok(response) if response.status().is_success() => {}
        Ok(response) if response.status().is_redirection() => eprintln!(
            "warning: the OTLP endpoint answered HTTP {} with a redirect, which is not followed \
             (the export carries OTEL_EXPORTER_OTLP_HEADERS): set the endpoint to where it points",
            response.status()
        ),
        Ok(response) => eprintln!(
            "warning: the OTLP endpoint answered HTTP {}",
            response.status()
        ),
        Err(error) => eprintln!("warning: cannot send traces to the OTLP endpoint: {error}"),
    }
}

/// Leaves off stderr rmcp's warning about one answer that is no fault: rmcp logs
/// every error answer at warn (`response error`), and a client that probes a newer
/// protocol revision first (fastmcp sends `server/discover` for 2026-07-28, then
/// `initialize`) is meant to get UNSUPPORTED_PROTOCOL_VERSION (-32022) with the
/// revisions warren speaks, and does, on every connection.
struct ProbeAnswers;

impl<S> tracing_subscriber::layer::Filter<S> for ProbeAnswers {
    fn enabled(&self, _: &tracing::Metadata<'_>, _: &Context<'_, S>) -> bool {
        true
    }

    fn event_enabled(&self, event: &tracing::Event<'_>, _: &Context<'_, S>) -> bool {
        let metadata = event.metadata();
        if !metadata.target().starts_with("rmcp") || *metadata.level() != tracing::Level::WARN {
            return true;
        }
        let mut answer = RecordLine::default();
        event.record(&mut answer);
        !(answer.message == "response error" && answer.fields.contains("ErrorCode(-32022)"))
    }
}

/// A record as one line: the message, then `key=value` for each other field (what
/// `warren mcp` sends its clients, and what a record is checked by here).
#[derive(Default)]
pub(crate) struct RecordLine {
    /// The message.
    pub(crate) message: String,
    /// ` key=value` for each other field.
    pub(crate) fields: String,
}

impl Visit for RecordLine {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={value}", field.name());
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }
}

impl Telemetry {
    /// Installs the global subscriber: logs to stderr (`RUST_LOG`, default `warn`),
    /// with an endpoint the OTLP exporter, and `extra`, a layer that sees every record
    /// (`warren mcp` adds the one that sends them to MCP clients). Call inside a tokio
    /// runtime.
    pub(crate) fn init_with(
        otlp_endpoint: Option<String>,
        extra: Option<Box<dyn Layer<tracing_subscriber::Registry> + Send + Sync>>,
    ) -> Telemetry {
        // Colours only on a terminal: a log piped to a file or a CI page stays plain.
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let logs = tracing_subscriber::fmt::layer()
            .with_ansi(ansi)
            .with_writer(|| crate::term::LiveStderr)
            .event_format(WithTraceId(
                tracing_subscriber::fmt::format()
                    .with_ansi(ansi)
                    .with_target(false),
            ))
            .with_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
            .with_filter(ProbeAnswers);
        let endpoint = otlp_endpoint.filter(|e| !e.is_empty());
        let queue: Option<Arc<Mutex<Vec<Value>>>> = endpoint.as_ref().map(|_| Arc::default());
        let spans = OtlpLayer {
            queue: queue.clone(),
            ids: AtomicU64::new(0),
        }
        .with_filter(tracing_subscriber::filter::filter_fn(|meta| {
            meta.is_span() && meta.target().starts_with("warren")
        }));
        tracing_subscriber::registry()
            .with(extra)
            .with(spans)
            .with(logs)
            .init();
        let (Some(endpoint), Some(queue)) = (endpoint, queue) else {
            return Telemetry { exporter: None };
        };
        EXPORTING.store(true, Ordering::Relaxed);
        let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
        let headers = std::env::var("OTEL_EXPORTER_OTLP_HEADERS")
            .map(|h| parse_headers(&h))
            .unwrap_or_default();
        // Redirects as for model calls: the headers often carry the backend's key.
        let client = reqwest::Client::builder()
            .redirect(crate::llm::redirect_policy())
            .build()
            .expect("the HTTP client builds (as reqwest::Client::new assumes)");
        let task = {
            let (client, url, headers, queue) =
                (client.clone(), url.clone(), headers.clone(), queue.clone());
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(EXPORT_INTERVAL).await;
                    let spans = std::mem::take(&mut *queue.lock().expect("span queue poisoned"));
                    send(&client, &url, &headers, spans).await;
                }
            })
        };
        Telemetry {
            exporter: Some((
                queue,
                Exporter {
                    client,
                    url,
                    headers,
                    task,
                },
            )),
        }
    }

    /// Sends every span still queued.
    pub(crate) async fn shutdown(self) {
        if let Some((queue, exporter)) = self.exporter {
            exporter.task.abort();
            let spans = std::mem::take(&mut *queue.lock().expect("span queue poisoned"));
            send(&exporter.client, &exporter.url, &exporter.headers, spans).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn otlp_headers_parse_and_decode() {
        assert_eq!(
            parse_headers("Authorization=Basic%20abc%3D,x-team = blue,,bad"),
            [
                ("Authorization".to_string(), "Basic abc=".to_string()),
                ("x-team".to_string(), "blue".to_string())
            ]
        );
    }
}
