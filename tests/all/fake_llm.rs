//! A fake LLM server on 127.0.0.1:0: real HTTP/1.1, scripted replies in either wire
//! format (JSON or SSE streams), faults (error statuses, Retry-After, malformed JSON,
//! a stream cut mid-event, a hang), and a record of every request it got.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What the server answers to one request.
pub(crate) enum Reply {
    /// A complete response.
    Full {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: String,
    },
    /// `text/event-stream`, each piece written (and flushed) separately, then close.
    Stream {
        pieces: Vec<String>,
        delay: Duration,
    },
    /// A chunked stream whose connection drops before the final chunk: the body is
    /// cut by the transport (incomplete chunked encoding).
    Cut(Vec<String>),
    /// Headers never come; the connection stays open until the client drops it.
    Hang,
    /// The inner reply after a pause (model latency).
    Delayed(Duration, Box<Reply>),
    /// The inner reply once the test hands the semaphore a permit: a reply held
    /// until something outside the run has happened.
    Gated(Arc<tokio::sync::Semaphore>, Box<Reply>),
    /// `status` with a body of `bytes` bytes (its `content-length` says so), written
    /// 64 KiB at a time until it is all sent or the client stops reading: an error
    /// body too large to hold.
    Flood { status: u16, bytes: usize },
}

impl Reply {
    /// A non-streamed OpenAI answer with `text` and `usage` (prompt, completion).
    pub(crate) fn answer(text: &str, (prompt, completion): (u64, u64)) -> Reply {
        Reply::json(serde_json::json!({
            "choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion}
        }))
    }

    /// A non-streamed OpenAI turn calling each `(tool, arguments)`, with unique call
    /// ids, and `usage` (prompt, completion).
    pub(crate) fn tool_calls(calls: &[(&str, Value)], (prompt, completion): (u64, u64)) -> Reply {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let tool_calls: Vec<Value> = calls
            .iter()
            .map(|(name, args)| {
                let id = format!(
                    "call_{}",
                    NEXT.fetch_add(1, Ordering::Relaxed)
                );
                serde_json::json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}})
            })
            .collect();
        Reply::json(serde_json::json!({
            "choices": [{"finish_reason": "tool_calls", "message": {"role": "assistant", "content": null, "tool_calls": tool_calls}}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion}
        }))
    }

    pub(crate) fn json(body: Value) -> Reply {
        Reply::Full {
            status: 200,
            headers: vec![("content-type", "application/json".into())],
            body: body.to_string(),
        }
    }

    pub(crate) fn status(status: u16, body: &str) -> Reply {
        Reply::Full {
            status,
            headers: vec![("content-type", "application/json".into())],
            body: body.to_string(),
        }
    }

    pub(crate) fn retry_after(seconds: u32) -> Reply {
        Reply::Full {
            status: 429,
            headers: vec![("retry-after", seconds.to_string())],
            body: r#"{"error":{"message":"slow down"}}"#.into(),
        }
    }

    /// An OpenAI stream: `data: {chunk}` per value, then `data: [DONE]`.
    pub(crate) fn openai_stream(chunks: Vec<Value>) -> Reply {
        let mut pieces: Vec<String> = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
        pieces.push("data: [DONE]\n\n".into());
        Reply::Stream {
            pieces,
            delay: Duration::ZERO,
        }
    }

    /// An Anthropic stream: `event: {type}` and `data: {value}` per value.
    pub(crate) fn anthropic_stream(events: Vec<Value>) -> Reply {
        let pieces = events
            .iter()
            .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
            .collect();
        Reply::Stream {
            pieces,
            delay: Duration::ZERO,
        }
    }

    /// Raw stream pieces, for malformed and cut streams.
    pub(crate) fn raw_stream(pieces: &[&str]) -> Reply {
        Reply::Stream {
            pieces: pieces.iter().map(|p| p.to_string()).collect(),
            delay: Duration::ZERO,
        }
    }
}

/// A `[models.fake]` table for the server at `base_url`: model `fake-model`, not
/// streamed, no retries, its key from `CARGO_PKG_NAME` (set by cargo for tests).
pub(crate) fn model_table(base_url: &str) -> String {
    format!(
        "[models.fake]\nprovider = \"openai\"\nbase_url = \"{base_url}\"\nmodel = \"fake-model\"\napi_key_env = \"CARGO_PKG_NAME\"\nstream = false\nmax_retries = 0\n"
    )
}

/// The newest message of a request's `body`, as JSON text ("" when it has none).
pub(crate) fn newest(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .map(Value::to_string)
        .unwrap_or_default()
}

/// Queued replies, each with the text its request's newest message must contain.
type Routes = VecDeque<(Option<String>, Reply)>;

/// Answers a request no queued reply matched, from its whole body.
pub(crate) type Responder = Arc<dyn Fn(&Value) -> Option<Reply> + Send + Sync>;

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub(crate) struct Recorded {
    pub(crate) path: String,
    /// Header names lower-cased.
    pub(crate) headers: HashMap<String, String>,
    pub(crate) body: Value,
}

/// The running server.
pub(crate) struct FakeLlm {
    /// `http://127.0.0.1:PORT/v1`.
    pub(crate) base_url: String,
    replies: Arc<Mutex<Routes>>,
    responder: Arc<Mutex<Option<Responder>>>,
    requests: Arc<Mutex<Vec<Recorded>>>,
    /// Set when a hung connection was closed by the client.
    pub(crate) hang_dropped: Arc<AtomicBool>,
    /// A permit for each request that got [`Reply::Hang`], once it hangs.
    pub(crate) hangs: Arc<tokio::sync::Semaphore>,
}

impl FakeLlm {
    pub(crate) async fn start() -> FakeLlm {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = FakeLlm {
            base_url: format!("http://127.0.0.1:{port}/v1"),
            replies: Arc::default(),
            responder: Arc::default(),
            requests: Arc::default(),
            hang_dropped: Arc::default(),
            hangs: Arc::new(tokio::sync::Semaphore::new(0)),
        };
        let (replies, responder, requests, dropped) = (
            server.replies.clone(),
            server.responder.clone(),
            server.requests.clone(),
            (server.hang_dropped.clone(), server.hangs.clone()),
        );
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (replies, requests, dropped) =
                    (replies.clone(), requests.clone(), dropped.clone());
                let responder = responder.lock().unwrap().clone();
                tokio::spawn(
                    async move { serve(socket, replies, responder, requests, dropped).await },
                );
            }
        });
        server
    }

    /// Answers every request no queued reply matches with `responder`.
    pub(crate) fn respond_with(&self, responder: Responder) {
        *self.responder.lock().unwrap() = Some(responder);
    }

    pub(crate) fn push(&self, reply: Reply) {
        self.replies.lock().unwrap().push_back((None, reply));
    }

    /// Queues `reply` for the first request whose newest message contains `when`.
    pub(crate) fn route(&self, when: &str, reply: Reply) {
        self.replies
            .lock()
            .unwrap()
            .push_back((Some(when.to_string()), reply));
    }

    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// As an OTLP/HTTP receiver: every span posted to it, in order.
    pub(crate) fn otlp_spans(&self) -> Vec<Value> {
        self.requests()
            .iter()
            .flat_map(|p| {
                p.body["resourceSpans"][0]["scopeSpans"][0]["spans"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .collect()
    }
}

async fn serve(
    mut socket: TcpStream,
    replies: Arc<Mutex<Routes>>,
    responder: Option<Responder>,
    requests: Arc<Mutex<Vec<Recorded>>>,
    (dropped, hangs): (Arc<AtomicBool>, Arc<tokio::sync::Semaphore>),
) {
    let mut data = Vec::new();
    let mut buffer = [0u8; 8192];
    let header_end = loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        match socket.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => data.extend_from_slice(&buffer[..n]),
        }
    };
    let head = String::from_utf8_lossy(&data[..header_end]).into_owned();
    let mut lines = head.lines();
    let path = lines
        .next()
        .unwrap_or_default()
        .split(' ')
        .nth(1)
        .unwrap_or_default()
        .to_string();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while data.len() < header_end + length {
        match socket.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => data.extend_from_slice(&buffer[..n]),
        }
    }
    let body: Value =
        serde_json::from_slice(&data[header_end..header_end + length]).unwrap_or(Value::Null);
    let newest = newest(&body);
    requests.lock().unwrap().push(Recorded {
        path,
        headers,
        body: body.clone(),
    });
    let mut reply = {
        let mut replies = replies.lock().unwrap();
        let position = replies
            .iter()
            .position(|(when, _)| when.as_ref().is_none_or(|w| newest.contains(w.as_str())));
        position
            .and_then(|p| replies.remove(p))
            .map(|(_, reply)| reply)
    };
    if reply.is_none() {
        reply = responder.and_then(|respond| respond(&body));
    }
    let reply = loop {
        reply = match reply {
            Some(Reply::Delayed(pause, inner)) => {
                tokio::time::sleep(pause).await;
                Some(*inner)
            }
            Some(Reply::Gated(gate, inner)) => {
                if let Ok(permit) = gate.acquire().await {
                    permit.forget();
                }
                Some(*inner)
            }
            other => break other,
        };
    };
    match reply {
        None => {
            let _ = socket.write_all(b"HTTP/1.1 599 No Reply Scripted\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").await;
        }
        Some(Reply::Full {
            status,
            headers,
            body,
        }) => {
            let mut response = format!(
                "HTTP/1.1 {status} Scripted\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            for (name, value) in headers {
                response.push_str(&format!("{name}: {value}\r\n"));
            }
            response.push_str("\r\n");
            response.push_str(&body);
            let _ = socket.write_all(response.as_bytes()).await;
        }
        Some(Reply::Stream { pieces, delay }) => {
            let head =
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
            if socket.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            for piece in pieces {
                tokio::time::sleep(delay).await;
                if socket.write_all(piece.as_bytes()).await.is_err()
                    || socket.flush().await.is_err()
                {
                    return;
                }
            }
        }
        Some(Reply::Cut(pieces)) => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
            let _ = socket.write_all(head.as_bytes()).await;
            for piece in pieces {
                let chunk = format!("{:x}\r\n{piece}\r\n", piece.len());
                let _ = socket.write_all(chunk.as_bytes()).await;
            }
            let _ = socket.flush().await;
            // Dropped without the terminating `0` chunk.
            return;
        }
        Some(Reply::Hang) => {
            hangs.add_permits(1);
            // Wait for the client to give up; a read of 0 bytes means it closed.
            while let Ok(n) = socket.read(&mut buffer).await {
                if n == 0 {
                    break;
                }
            }
            dropped.store(true, Ordering::SeqCst);
        }
        Some(Reply::Flood { status, bytes }) => {
            let head = format!(
                "HTTP/1.1 {status} Flood\r\ncontent-type: application/json\r\ncontent-length: {bytes}\r\nconnection: close\r\n\r\n"
            );
            if socket.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let piece = vec![b'x'; 64 * 1024];
            let mut left = bytes;
            while left > 0 {
                let n = left.min(piece.len());
                if socket.write_all(&piece[..n]).await.is_err() {
                    return;
                }
                left -= n;
            }
        }
        Some(Reply::Delayed(..) | Reply::Gated(..)) => unreachable!("unwrapped above"),
    }
    let _ = socket.shutdown().await;
}
