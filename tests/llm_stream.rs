//! Timed token-by-token streams from a local axum server: split UTF-8, stalls, keep-alives,
//! cancellation and the wall-clock cap.

mod llm_common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use kforge::llm::{LlmError, ProviderKind};
use llm_common::*;
use tokio_util::sync::CancellationToken;

const DONE: &str = "data: [DONE]\n\n";

/// A content chunk, then `n` keep-alive comments `gap_ms` apart (no end marker).
fn token_then_keep_alives(token: &str, n: usize, gap_ms: u64) -> Vec<Part> {
    let mut script = vec![send(content_chunk(token))];
    for _ in 0..n {
        script.push(sleep_ms(gap_ms));
        script.push(send(": keep-alive\n\n"));
    }
    script
}

/// Waits up to 2 s for the server to see its response body dropped.
async fn wait_for_disconnect(server: &ScriptServer) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while !server.dropped_early.load(Ordering::SeqCst) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn utf8_split_across_chunks() {
    let chunk = content_chunk("café ✓");
    let bytes = chunk.as_bytes();
    let cut = chunk.find('é').unwrap() + 1; // inside the two bytes of é
    let cut2 = chunk.find('✓').unwrap() + 2; // inside the three bytes of ✓
    let server = script_server(vec![
        send(&bytes[..cut]),
        sleep_ms(30),
        send(&bytes[cut..cut2]),
        sleep_ms(30),
        send(&bytes[cut2..]),
        send(DONE),
    ])
    .await;
    let (events, result) = call(provider(ProviderKind::OpenAi, &server.base_url, "m")).await;
    assert_eq!(events, vec![text("café ✓")]);
    assert_eq!(result.unwrap().text, "café ✓");
    assert_eq!(server.requests.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn tokens_arrive_one_by_one_and_keep_alives_reset_the_read_timeout() {
    // 5 gaps of 200 ms (< 300 ms read timeout) filled by comments: 1 s in all, no timeout.
    let mut script = token_then_keep_alives("a", 5, 200);
    script.extend([send(content_chunk("b")), send(DONE)]);
    let server = script_server(script).await;
    let (events, result) = call(provider(ProviderKind::OpenAi, &server.base_url, "m")).await;
    assert_eq!(events, vec![text("a"), text("b")]);
    let c = result.unwrap();
    assert!(
        c.time_to_first_token.unwrap() < Duration::from_millis(500),
        "{c:?}"
    );
    assert!(c.latency >= Duration::from_secs(1), "{c:?}");
    assert_eq!(server.requests.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn stall_after_a_token_is_a_read_timeout_and_not_retried() {
    let server = script_server(vec![
        send(content_chunk("Hel")),
        sleep_ms(10_000),
        send(DONE),
    ])
    .await;
    let started = Instant::now();
    let (events, result) = call(provider(ProviderKind::OpenAi, &server.base_url, "m")).await;
    assert_eq!(events, vec![text("Hel")]);
    let err = result.unwrap_err();
    assert!(
        matches!(err, LlmError::ReadTimeout { after } if after == Duration::from_millis(300)),
        "{err:?}"
    );
    assert!(err.to_string().contains("300 ms"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(server.requests.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn cancellation_closes_the_connection() {
    let server = script_server(token_then_keep_alives("Hel", 100, 50)).await;
    let cancel = CancellationToken::new();
    let client =
        kforge::llm::LlmClient::new(provider(ProviderKind::OpenAi, &server.base_url, "m")).unwrap();
    let trigger = cancel.clone();
    let mut events = Vec::new();
    let started = Instant::now();
    let result = client
        .complete(&kforge::llm::ChatRequest::prompt("hi"), &cancel, |e| {
            events.push(e.clone());
            trigger.cancel();
        })
        .await;
    assert_eq!(events, vec![text("Hel")]);
    assert!(matches!(result, Err(LlmError::Cancelled)), "{result:?}");
    assert!(started.elapsed() < Duration::from_secs(1));
    // The server notices the closed connection at its next write (every 50 ms).
    wait_for_disconnect(&server).await;
    assert!(
        server.dropped_early.load(Ordering::SeqCst),
        "the server still streams to a cancelled call"
    );
    assert_eq!(server.requests.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn dropping_the_stream_cancels_the_call() {
    use futures::StreamExt;
    let server = script_server(token_then_keep_alives("Hel", 100, 50)).await;
    let client =
        kforge::llm::LlmClient::new(provider(ProviderKind::OpenAi, &server.base_url, "m")).unwrap();
    let mut stream = client.stream(
        kforge::llm::ChatRequest::prompt("hi"),
        CancellationToken::new(),
    );
    assert_eq!(stream.next().await.unwrap().unwrap(), text("Hel"));
    drop(stream);
    wait_for_disconnect(&server).await;
    assert!(server.dropped_early.load(Ordering::SeqCst));
    assert_eq!(server.requests.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn wall_clock_cap_stops_a_stream_that_never_ends() {
    let mut script = Vec::new();
    for i in 0..100 {
        script.push(send(content_chunk(&i.to_string())));
        script.push(sleep_ms(100));
    }
    let server = script_server(script).await;
    let mut p = provider(ProviderKind::OpenAi, &server.base_url, "m");
    p.wall_timeout = Some(Duration::from_millis(450));
    let started = Instant::now();
    let (events, result) = call(p).await;
    assert!(
        matches!(result, Err(LlmError::WallTimeout { .. })),
        "{result:?}"
    );
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(450) && elapsed < Duration::from_millis(1500),
        "{elapsed:?}"
    );
    // Tokens at 0, 100, 200, ... ms: about five arrive before the cap, in order.
    assert!((1..=6).contains(&events.len()), "{events:?}");
    let expected: Vec<_> = (0..events.len()).map(|i| text(&i.to_string())).collect();
    assert_eq!(events, expected);
    assert_eq!(server.requests.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn refused_connection_to_a_local_server_fails_at_once() {
    // Bind then drop a listener: nothing listens on that port any more.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}/v1");
    let (events, result) = call(provider(ProviderKind::OpenAi, &base, "m")).await;
    assert_eq!(
        events,
        vec![],
        "no retries against a server that is not running"
    );
    let err = result.unwrap_err();
    assert!(
        matches!(
            err,
            LlmError::Connect {
                retryable: false,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("is the local server running?"),
        "{err}"
    );
}

#[tokio::test]
async fn connection_dropped_before_any_token_is_retried() {
    // The first response closes right after its headers; the body never starts.
    let server = script_server(vec![]).await;
    let (events, result) = call(provider(ProviderKind::OpenAi, &server.base_url, "m")).await;
    let reason = events.first().map(|e| format!("{e:?}")).unwrap_or_default();
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(
        reason.contains("the stream from `testprov` ended before its end marker"),
        "{reason}"
    );
    assert!(
        matches!(result, Err(LlmError::Truncated { .. })),
        "{result:?}"
    );
    assert_eq!(server.requests.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn no_response_headers_within_the_read_timeout_is_a_read_timeout() {
    let server = script_server_after(Duration::from_secs(10), vec![send(DONE)]).await;
    let started = Instant::now();
    let (events, result) = call(provider(ProviderKind::OpenAi, &server.base_url, "m")).await;
    assert_eq!(events, vec![]);
    assert!(
        matches!(result, Err(LlmError::ReadTimeout { .. })),
        "{result:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(server.requests.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_line_over_16_mib_is_a_clear_error_and_not_retried() {
    let mut script = vec![send(r#"data: {"choices":[{"index":0,"delta":{"content":""#)];
    let mib = "x".repeat(1 << 20);
    for _ in 0..17 {
        script.push(send(mib.clone()));
    }
    script.push(send("\"}}]}\n\ndata: [DONE]\n\n"));
    let server = script_server(script).await;
    let (events, result) = call(provider(ProviderKind::OpenAi, &server.base_url, "m")).await;
    // Never print these events or the result: 17 MiB of text.
    assert!(events.is_empty(), "{} events", events.len());
    let Err(err) = result else {
        panic!("the over-long line was accepted")
    };
    let shown = err.to_string();
    assert!(matches!(err, LlmError::Malformed { .. }), "{shown}");
    assert!(
        shown.contains("longer than 16 MiB")
            && shown.contains(r#"(data: {"choices""#)
            && !shown.contains("data: data:"),
        "{shown}"
    );
    assert!(
        shown.len() < 2000,
        "the excerpt is short: {} bytes",
        shown.len()
    );
    assert_eq!(server.requests.load(Ordering::SeqCst), 1);
}
