//! warren's trace export read by a receiver written to OpenTelemetry's own schema:
//! `tests/fixtures/otlp-python/receiver.py` parses every OTLP/HTTP export with the
//! official generated classes (`opentelemetry-proto`), refusing a field that is
//! misnamed or mistyped, and keeps what it parsed. The spans of the offline demo's
//! run carry the GenAI conventions' current names: `invoke_agent {agent}`, `chat
//! {model}` (kind CLIENT) with `gen_ai.provider.name` and the usage including cache
//! reads, `execute_tool {tool}` with a sandboxed call's `warren.*` figures, and
//! `gen_ai.conversation.id` = the run id on each.

use std::io::BufRead as _;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::support::{demo_config, root, text};

/// `receiver.py` on a free port, writing what it parsed to `out`.
struct Receiver {
    child: std::process::Child,
    url: String,
    log: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Receiver {
    fn start(out: &std::path::Path) -> Receiver {
        let python = crate::guests::python_venv(
            "tests/fixtures/otlp-python",
            "target/otlp-python",
            "the OTLP receiver",
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new(python)
            .arg(root().join("tests/fixtures/otlp-python/receiver.py"))
            .arg(port.to_string())
            .arg(out)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let collected = log.clone();
        let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                collected.lock().unwrap().push_str(&(line + "\n"));
            }
        });
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("listening"), "receiver.py said {line:?}");
        Receiver {
            child,
            url: format!("http://127.0.0.1:{port}"),
            log,
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn an_otlp_receiver_on_opentelemetrys_schema_takes_every_export_and_its_genai_names() {
    crate::support::guests();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("spans.jsonl");
    let receiver = Receiver::start(&out);
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_warren"))
        .arg("--config")
        .arg(demo_config())
        .args([
            "run",
            "Summarise.",
            "--quiet",
            "--otlp-endpoint",
            &receiver.url,
        ])
        .env_remove("WARREN_OTEL_GENAI_COMPAT")
        .env_remove("OTEL_SEMCONV_STABILITY_OPT_IN")
        .output()
        .await
        .unwrap();
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let log = receiver.log.lock().unwrap().clone();
    assert!(
        !log.contains("rejected"),
        "an export broke OTLP's schema: {log}"
    );
    assert!(!stderr.contains("HTTP 400"), "{stderr}");
    let spans: Vec<Value> = std::fs::read_to_string(&out)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let named = |prefix: &str| -> Vec<&Value> {
        spans
            .iter()
            .filter(|s| s["name"].as_str().is_some_and(|n| n.starts_with(prefix)))
            .collect()
    };
    let root = named("invoke_agent main");
    assert_eq!(root.len(), 1, "{log}\n{spans:#?}");
    assert_eq!(root[0]["parentSpanId"], "", "{}", root[0]);
    let run = root[0]["attributes"]["warren.run.id"].as_str().unwrap();
    let trace = root[0]["traceId"].as_str().unwrap();
    for span in &spans {
        assert_eq!(span["traceId"], trace, "one trace for the run: {span}");
        if span["attributes"].get("gen_ai.operation.name").is_some() {
            assert_eq!(span["attributes"]["gen_ai.conversation.id"], run, "{span}");
        }
    }
    let chats = named("chat ");
    assert!(!chats.is_empty(), "{spans:#?}");
    for chat in &chats {
        let attributes = &chat["attributes"];
        assert_eq!(chat["kind"], 3, "a model call is a CLIENT span: {chat}");
        assert_eq!(attributes["gen_ai.operation.name"], "chat", "{chat}");
        assert_eq!(
            attributes["gen_ai.provider.name"], "warren.scripted",
            "{chat}"
        );
        assert!(attributes.get("gen_ai.system").is_none(), "{chat}");
        for usage in ["input_tokens", "output_tokens", "cache_read.input_tokens"] {
            let key = format!("gen_ai.usage.{usage}");
            assert!(attributes[&key].is_i64(), "{key} is not an integer: {chat}");
        }
    }
    for agent in named("invoke_agent ") {
        assert_eq!(agent["kind"], 1, "an agent here is INTERNAL: {agent}");
        assert_eq!(agent["attributes"]["gen_ai.operation.name"], "invoke_agent");
        assert!(
            agent["attributes"]["gen_ai.agent.id"].is_string(),
            "{agent}"
        );
    }
    let code = named("execute_tool run_python");
    assert_eq!(code.len(), 1, "{spans:#?}");
    let attributes = &code[0]["attributes"];
    assert_eq!(attributes["gen_ai.tool.name"], "run_python");
    for figure in [
        "warren.fuel_used",
        "warren.memory_peak_bytes",
        "warren.output_bytes",
    ] {
        assert!(
            attributes[figure].as_i64().is_some_and(|n| n > 0),
            "{figure}: {}",
            code[0]
        );
    }
}
