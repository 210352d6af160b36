//! What goes wrong between a provider and its server: retries, limits, redirects,
//! malformed and truncated streams, errors inside a stream, hangs and cancellation.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::json;

use super::fake_llm::{FakeLlm, Reply};
use super::{anthropic_events, chat, chat_error, conversation, model, text_of, KEY};
use crate::llm::{connect, EventSink, FinishReason, LlmError, ModelConfig};

#[tokio::test]
async fn server_errors_are_retried_then_succeed() {
    let server = FakeLlm::start().await;
    server.push(Reply::status(500, r#"{"error":"boom"}"#));
    server.push(Reply::status(503, r#"{"error":"overloaded"}"#));
    server.push(Reply::json(
        json!({"choices": [{"finish_reason": "stop", "message": {"content": "fine"}}]}),
    ));
    let response = chat(&model("openai", &server, "stream = false"), &conversation())
        .await
        .0
        .unwrap();
    assert_eq!(response.message.text, "fine");
    assert_eq!(server.requests().len(), 3);
}

/// A non-streamed answer is read whole whether it comes in one piece or in several.
#[tokio::test]
async fn a_whole_answer_in_pieces_is_read_whole() {
    let body =
        json!({"choices": [{"finish_reason": "stop", "message": {"content": "in three pieces"}}],
                      "usage": {"prompt_tokens": 7, "completion_tokens": 3}})
        .to_string();
    let (a, rest) = body.split_at(10);
    let (b, c) = rest.split_at(20);
    for pieces in [vec![body.as_str()], vec![a, b, c]] {
        let server = FakeLlm::start().await;
        server.push(Reply::Stream {
            pieces: pieces.iter().map(|p| p.to_string()).collect(),
            delay: Duration::from_millis(20),
        });
        let response = chat(&model("openai", &server, "stream = false"), &conversation())
            .await
            .0
            .unwrap();
        assert_eq!(response.message.text, "in three pieces");
        assert_eq!(
            (response.usage.input_tokens, response.usage.output_tokens),
            (7, 3)
        );
    }
}

/// A response longer than `max_response_mib` is cut off at the limit with a
/// `malformed_response` error and not retried, whether it is one JSON body, a stream of events
/// or one line that never ends; one under the limit is read. An out-of-range limit
/// is a configuration error naming the field.
#[tokio::test]
async fn a_response_longer_than_the_limit_is_not_read() {
    const MIB: usize = 1024 * 1024;
    let answer = json!({"choices": [{"finish_reason": "stop", "message": {"content": "x".repeat(MIB + MIB / 2)}}]})
        .to_string();
    let event = format!(
        "data: {}\n\n",
        json!({"choices": [{"index": 0, "delta": {"content": "y".repeat(1000)}}]})
    );
    let events = vec![event.as_str(); (MIB + MIB / 2) / event.len()];
    let endless_line = format!("data: {}", "z".repeat(MIB + MIB / 2));
    // (config, pieces, whether the whole is an answer to read under a 2 MiB limit)
    let cases: [(&str, Vec<&str>, bool); 3] = [
        ("stream = false", vec![&answer[..MIB], &answer[MIB..]], true),
        ("stream = true", events, true),
        (
            "stream = true",
            vec![&endless_line[..MIB], &endless_line[MIB..]],
            false,
        ),
    ];
    for (stream, pieces, readable) in cases {
        for limit in [1, 2].into_iter().filter(|&limit| limit == 1 || readable) {
            let server = FakeLlm::start().await;
            for _ in 0..2 {
                server.push(Reply::raw_stream(&pieces));
            }
            let extra = format!("{stream}\nmax_response_mib = {limit}");
            match chat(&model("openai", &server, &extra), &conversation())
                .await
                .0
            {
                Ok(response) if limit == 2 => {
                    let text = response.message.text;
                    assert!(text.len() > MIB, "{stream}: {} bytes", text.len());
                }
                Err(LlmError::Malformed { offset, detail, .. }) if limit == 1 => {
                    assert_eq!(offset, MIB, "{stream}");
                    assert!(detail.contains("max_response_mib (1 MiB)"), "{detail}");
                }
                other => panic!("{stream}, limit {limit}: {other:?}"),
            }
            assert_eq!(server.requests().len(), 1, "{stream}: not retried");
        }
    }
    for limit in [0, 4097] {
        let config = toml::from_str::<ModelConfig>(&format!(
            "provider = \"openai\"\nmodel = \"m\"\nmax_response_mib = {limit}\n"
        ))
        .unwrap();
        let error = connect("big", &config, &Default::default())
            .err()
            .unwrap()
            .to_string();
        assert!(
            error.contains("model `big`: max_response_mib must be between 1 and 4096"),
            "{error}"
        );
    }
}

#[tokio::test]
async fn retry_after_is_honoured() {
    let server = FakeLlm::start().await;
    server.push(Reply::retry_after(1));
    server.push(Reply::json(
        json!({"choices": [{"finish_reason": "stop", "message": {"content": "waited"}}]}),
    ));
    let started = Instant::now();
    let response = chat(&model("openai", &server, "stream = false"), &conversation())
        .await
        .0
        .unwrap();
    assert_eq!(response.message.text, "waited");
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "waited only {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn persistent_rate_limiting_and_server_errors_give_up_with_typed_errors() {
    let server = FakeLlm::start().await;
    for _ in 0..3 {
        server.push(Reply::status(429, r#"{"error":"rate limited"}"#));
    }
    let error = chat_error(&model("openai", &server, "stream = false")).await;
    assert!(
        matches!(error, LlmError::RateLimited { retries: 2, .. }),
        "{error}"
    );
    assert_eq!(
        server.requests().len(),
        3,
        "one try and max_retries = 2 retries"
    );
    for _ in 0..3 {
        server.push(Reply::status(502, "bad gateway page"));
    }
    let error = chat_error(&model("anthropic", &server, "")).await;
    assert!(
        matches!(
            error,
            LlmError::Server {
                status: 502,
                retries: 2,
                ..
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("bad gateway page"), "{error}");
}

#[tokio::test]
async fn client_errors_are_not_retried_and_never_show_the_key() {
    type Expect = fn(&LlmError) -> bool;
    let cases: [(u16, &str, Expect); 5] = [
        (401, r#"{"error":{"message":"invalid x-api-key"}}"#, |e| {
            matches!(e, LlmError::Auth { status: 401, .. })
        }),
        (403, r#"{"error":"forbidden"}"#, |e| {
            matches!(e, LlmError::Auth { status: 403, .. })
        }),
        (
            404,
            r#"{"error":{"message":"The model `test-model` does not exist"}}"#,
            |e| matches!(e, LlmError::UnknownModel { .. }),
        ),
        (
            400,
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens"}}"#,
            |e| matches!(e, LlmError::ContextTooLong { .. }),
        ),
        (422, r#"{"error":"bad field"}"#, |e| {
            matches!(e, LlmError::BadRequest { status: 422, .. })
        }),
    ];
    for (status, body, expected) in cases {
        let server = FakeLlm::start().await;
        server.push(Reply::status(status, body));
        let error = chat_error(&model("openai", &server, "")).await;
        assert!(expected(&error), "{status}: {error}");
        assert_eq!(server.requests().len(), 1, "{status} is not retried");
        assert!(!format!("{error} {error:?}").contains("Bearer"), "{error}");
    }
}

/// A redirect to another origin is never followed: the request carries the API key
/// (Anthropic's `x-api-key` is not among the headers an HTTP client drops when a
/// redirect changes host) and the whole conversation. The error names where the
/// server pointed, without the query, and says what to change. A 307 or 308 within
/// the same origin (a trailing-slash fix) is followed with the same body and key; a
/// 302 there is not, since the client would resend the call as a GET without a body.
#[tokio::test]
async fn redirects_are_refused_and_nothing_reaches_the_other_address() {
    let elsewhere = FakeLlm::start().await;
    for (provider, status) in [("anthropic", 307), ("openai", 308), ("openai", 302)] {
        let server = FakeLlm::start().await;
        server.push(Reply::Full {
            status,
            headers: vec![(
                "location",
                format!("{}/messages?token=s3cret#part", elsewhere.base_url),
            )],
            body: String::new(),
        });
        let error = chat_error(&model(provider, &server, "")).await;
        assert!(
            matches!(&error, LlmError::Redirected { status: s, .. } if *s == status),
            "{provider} {status}: {error}"
        );
        let text = error.to_string();
        assert!(
            text.contains(&format!("`{}/messages`", elsewhere.base_url))
                && text.contains("base_url"),
            "{text}"
        );
        assert!(!text.contains("s3cret") && !text.contains(KEY), "{text}");
        // The target ends in Anthropic's own path (`messages`), so the remedy names
        // the base URL to set; for OpenAI (`chat/completions`) it cannot.
        let remedy = format!("set base_url to `{}`", elsewhere.base_url);
        assert_eq!(text.contains(&remedy), provider == "anthropic", "{text}");
        assert_eq!(server.requests().len(), 1, "a redirect is not retried");
        assert_eq!(error.kind(), "redirected");
    }
    assert!(
        elsewhere.requests().is_empty(),
        "the redirect target got {:?}",
        elsewhere.requests()
    );
    let server = FakeLlm::start().await;
    server.push(Reply::status(301, ""));
    let error = chat_error(&model("openai", &server, "")).await;
    assert!(error.to_string().contains("no Location header"), "{error}");

    let server = FakeLlm::start().await;
    let moved = |status| Reply::Full {
        status,
        headers: vec![("location", "/v1/chat/completions?moved".into())],
        body: String::new(),
    };
    server.push(moved(307));
    server.push(Reply::answer("followed", (1, 1)));
    let config = model("openai", &server, "stream = false");
    let response = chat(&config, &conversation()).await.0.unwrap();
    assert_eq!(response.message.text, "followed");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].body, requests[0].body);
    assert_eq!(
        requests[1].headers["authorization"],
        format!("Bearer {KEY}")
    );
    server.push(moved(302));
    let error = chat_error(&config).await;
    assert!(
        matches!(error, LlmError::Redirected { status: 302, .. }),
        "{error}"
    );
    assert_eq!(server.requests().len(), 3, "the 302 is not followed");
}

#[tokio::test]
async fn malformed_and_truncated_streams_report_the_position() {
    let server = FakeLlm::start().await;
    let (config, request) = (model("openai", &server, ""), conversation());
    let openai = || chat(&config, &request);
    let first = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n";
    server.push(Reply::raw_stream(&[first, "data: {not json}\n\n"]));
    let (result, events) = openai().await;
    let error = result.unwrap_err();
    let LlmError::Malformed { offset, detail, .. } = &error else {
        panic!("{error}")
    };
    assert_eq!(*offset, first.len());
    assert!(detail.contains("{not json}"), "{detail}");
    assert_eq!(
        text_of(&events),
        "Hi",
        "what streamed before the fault was delivered"
    );

    server.push(Reply::raw_stream(&[
        first,
        "data: {\"choices\":[{\"delta\":{\"content\":\"cu",
    ]));
    let error = openai().await.0.unwrap_err();
    // The body ended cleanly in the middle of a JSON value: malformed, at the event.
    assert!(
        matches!(&error, LlmError::Malformed { offset, .. } if *offset == first.len()),
        "{error}"
    );
    assert!(error.to_string().contains("bad JSON in stream"), "{error}");

    // A body that ends cleanly without `[DONE]` or a finish reason (Ollama and others)
    // is complete; the finish reason is inferred.
    server.push(Reply::raw_stream(&[first]));
    let response = openai().await.0.unwrap();
    assert_eq!(response.message.text, "Hi");
    assert_eq!(response.finish, FinishReason::Stop);

    // A body the transport cuts (no final chunk) is a typed truncation, retried.
    server.push(Reply::Cut(vec![first.to_string()]));
    server.push(Reply::raw_stream(&[first, "data: [DONE]\n\n"]));
    let response = openai().await.0.unwrap();
    assert_eq!(response.message.text, "Hi");
    for _ in 0..3 {
        server.push(Reply::Cut(vec![first.to_string()]));
    }
    let error = openai().await.0.unwrap_err();
    assert!(
        matches!(&error, LlmError::Truncated { offset, .. } if *offset == first.len()),
        "{error}"
    );

    let events = anthropic_events("partial", "{}");
    let cut: Vec<String> = events[..4]
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect();
    let cut: Vec<&str> = cut.iter().map(String::as_str).collect();
    // Truncated, so retried (twice): every attempt ends the same way.
    for _ in 0..3 {
        server.push(Reply::raw_stream(&cut));
    }
    let error = chat_error(&model("anthropic", &server, "")).await;
    assert!(
        matches!(error, LlmError::Truncated { .. })
            && error.to_string().contains("before message_delta"),
        "{error}"
    );
}

/// What real streams do that the corpus has no recording of: an error event inside a
/// 200 stream (Anthropic `overloaded_error`, an OpenAI-compatible rate limit), retried
/// with backoff and typed when it persists; arguments sent as an object.
#[tokio::test]
async fn errors_inside_a_stream_are_typed_and_retried() {
    let server = FakeLlm::start().await;
    let overloaded = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
    server.push(Reply::raw_stream(&[overloaded]));
    server.push(Reply::anthropic_stream(anthropic_events(
        "after the retry",
        "",
    )));
    let response = chat(&model("anthropic", &server, ""), &conversation())
        .await
        .0
        .unwrap();
    assert_eq!(response.message.text, "after the retry");
    for _ in 0..3 {
        server.push(Reply::raw_stream(&[overloaded]));
    }
    let error = chat_error(&model("anthropic", &server, "")).await;
    assert!(
        matches!(error, LlmError::Server { status: 529, .. }),
        "{error}"
    );
    assert!(
        error.to_string().contains("overloaded_error: Overloaded")
            && !error.to_string().contains("HTTP 0"),
        "{error}"
    );

    let limited = "data: {\"error\":{\"message\":\"Rate limit reached\",\"type\":\"requests\",\"code\":\"rate_limit_exceeded\"}}\n\n";
    for _ in 0..3 {
        server.push(Reply::raw_stream(&[limited]));
    }
    let error = chat_error(&model("openai", &server, "")).await;
    assert!(matches!(error, LlmError::RateLimited { .. }), "{error}");

    let whole = "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"c1\",\"function\":{\"name\":\"read_file\",\"arguments\":{\"path\":\"/a\"}}}]},\"finish_reason\":\"tool_calls\"}]}\r\n\r\n";
    server.push(Reply::raw_stream(&[whole]));
    let response = chat(&model("openai", &server, ""), &conversation())
        .await
        .0
        .unwrap();
    assert_eq!(response.message.tool_calls[0].arguments, r#"{"path":"/a"}"#);
    assert_eq!(response.finish, FinishReason::ToolCalls);
}

#[tokio::test]
async fn a_hung_request_times_out_and_is_retried() {
    let server = FakeLlm::start().await;
    server.push(Reply::Hang);
    server.push(Reply::json(
        json!({"choices": [{"finish_reason": "stop", "message": {"content": "second try"}}]}),
    ));
    let mut config = model("openai", &server, "stream = false");
    config.read_timeout_s = 0.3;
    let response = chat(&config, &conversation()).await.0.unwrap();
    assert_eq!(response.message.text, "second try");
}

#[tokio::test]
async fn dropping_the_call_aborts_a_hung_request_at_once() {
    let server = FakeLlm::start().await;
    server.push(Reply::Hang);
    let mut config = model("openai", &server, "");
    config.read_timeout_s = 600.0;
    let provider = connect("test", &config, &Default::default()).unwrap();
    let task =
        tokio::spawn(async move { provider.chat(&conversation(), &EventSink::none()).await });
    while server.requests().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    task.abort();
    let aborted = Instant::now();
    while !server.hang_dropped.load(Ordering::SeqCst) {
        assert!(
            aborted.elapsed() < Duration::from_secs(5),
            "the server never saw the connection close"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_named_key_variable_must_exist() {
    let server = FakeLlm::start().await;
    let mut config = model("openai", &server, "");
    config.api_key_env = Some("WARREN_TEST_SURELY_UNSET_KEY".into());
    let error = connect("gpt", &config, &Default::default()).err().unwrap();
    assert_eq!(
        error.to_string(),
        "model `gpt`: api_key_env names WARREN_TEST_SURELY_UNSET_KEY, which is not set"
    );
}
