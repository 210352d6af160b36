//! `fetch` against a local server: HTML as text, text as is, cuts, refusals and
//! denials.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::json;
use warren::ToolCallError;

use super::{assert_invalid, call};
use crate::support::World;

/// Serves `body` with `status` and `headers` (each ending in CRLF) to every request on 127.0.0.1:0;
/// returns the port and a counter of requests served.
async fn serve(
    status: &'static str,
    headers: &'static str,
    body: String,
) -> (u16, Arc<AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = Arc::new(AtomicUsize::new(0));
    let counter = served.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            let response = format!(
                "HTTP/1.1 {status}\r\n{headers}content-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 8192];
                let mut request = Vec::new();
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buffer[..n]),
                    }
                }
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    (port, served)
}

const PAGE: &str = r#"<!doctype html>
<html><head><title>Page title</title><style>body { color: red }</style></head>
<body><h1>Main heading</h1>
<p>Some <b>bold</b> text with <a href="https://example.com/more">a link</a>.</p>
<h2>Second</h2><ul><li>first item</li><li>second item</li></ul>
<script>var hidden = 1;</script></body></html>"#;

/// A profile that may reach the test server at `port` and nothing else.
fn net_profile(port: u16) -> String {
    format!("[profiles.main.capabilities]\nnet = [\"127.0.0.1:{port}\"]\n")
}

#[tokio::test]
async fn fetch_turns_html_into_text_and_passes_text_through() {
    let world = World::new();
    let (port, _) = serve(
        "200 OK",
        "content-type: text/html; charset=utf-8\r\n",
        PAGE.into(),
    )
    .await;
    let (registry, access) = world.load(&net_profile(port), "main").await;
    let url = format!("http://127.0.0.1:{port}/page");
    let page = call(&registry, &access, "fetch", json!({"url": url}))
        .await
        .unwrap();
    let (first, text) = page.split_once("\n\n").unwrap();
    assert_eq!(first, format!("{url} (200, text/html; charset=utf-8)"));
    for expected in [
        "# Main heading",
        "## Second",
        "first item",
        "a link",
        "https://example.com/more",
        "**bold**",
    ] {
        assert!(text.contains(expected), "{expected:?} in {text}");
    }
    for absent in ["<p>", "<h1>", "var hidden", "color: red"] {
        assert!(!text.contains(absent), "{absent:?} in {text}");
    }

    let (port, _) = serve(
        "404 Not Found",
        "content-type: text/plain\r\n",
        "plain <b>words</b>\n".into(),
    )
    .await;
    let (registry, access) = world.load(&net_profile(port), "main").await;
    let url = format!("http://127.0.0.1:{port}/missing");
    assert_eq!(
        call(&registry, &access, "fetch", json!({"url": url}))
            .await
            .unwrap(),
        format!("{url} (404, text/plain)\n\nplain <b>words</b>\n")
    );
}

#[tokio::test]
async fn fetch_cuts_long_text_and_refuses_binary_and_redirects() {
    let world = World::new();
    let (port, _) = serve(
        "200 OK",
        "content-type: application/json\r\n",
        "é".repeat(500),
    )
    .await;
    let (registry, access) = world.load(&net_profile(port), "main").await;
    let url = format!("http://127.0.0.1:{port}/");
    let cut = call(
        &registry,
        &access,
        "fetch",
        json!({"url": url, "max_length": 100}),
    )
    .await
    .unwrap();
    assert_eq!(
        cut,
        format!(
            "{url} (200, application/json)\n\n{}\n[cut at 100 characters of 500]",
            "é".repeat(100)
        )
    );
    assert_invalid(
        call(
            &registry,
            &access,
            "fetch",
            json!({"url": url, "max_length": 0}),
        )
        .await,
        "max_length",
    );
    assert_invalid(
        call(
            &registry,
            &access,
            "fetch",
            json!({"url": "ftp://example.com/"}),
        )
        .await,
        "not an http:// or https:// URL",
    );

    let (port, _) = serve("200 OK", "content-type: image/png\r\n", "\u{89}PNG".into()).await;
    let (registry, access) = world.load(&net_profile(port), "main").await;
    let url = format!("http://127.0.0.1:{port}/logo.png");
    let error = call(&registry, &access, "fetch", json!({"url": url}))
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("fetch failed: {url} is not text (content-type image/png)")
    );

    let (port, served) = serve("302 Found", "location: /next\r\n", String::new()).await;
    let (registry, access) = world.load(&net_profile(port), "main").await;
    let url = format!("http://127.0.0.1:{port}/old");
    let answer = call(&registry, &access, "fetch", json!({"url": url}))
        .await
        .unwrap();
    assert_eq!(
        answer,
        format!(
            "{url} (302, no content-type)\nredirect to http://127.0.0.1:{port}/next \
             (not followed: fetch that URL to read it)"
        )
    );
    assert_eq!(served.load(Ordering::SeqCst), 1, "only the first URL");
}

#[tokio::test]
async fn fetch_without_a_net_grant_is_denied() {
    let world = World::new();
    let (port, served) = serve("200 OK", "content-type: text/plain\r\n", "hello".into()).await;
    // Without a `net` grant the network interfaces are not linked at all: the plugin
    // is stopped at its first wasi:http call, before any request exists. With a grant
    // for another port, the request itself is refused.
    for (profile, denied) in [
        (
            "[profiles.main]\n".to_string(),
            "network access (wasi:http/".to_string(),
        ),
        (
            net_profile(port.wrapping_add(1)),
            format!("HTTP request to 127.0.0.1:{port}"),
        ),
    ] {
        let (registry, access) = world.load(&profile, "main").await;
        let error = call(
            &registry,
            &access,
            "fetch",
            json!({"url": format!("http://127.0.0.1:{port}/")}),
        )
        .await
        .unwrap_err();
        let ToolCallError::Denied {
            capability,
            request,
            ..
        } = &error
        else {
            panic!("{error}")
        };
        assert_eq!(capability, "capabilities.net");
        assert!(request.starts_with(&denied), "{request}");
    }
    assert_eq!(
        served.load(Ordering::SeqCst),
        0,
        "no request reached the server"
    );
}
