//! OpenAI-compatible streams against wiremock (whole bodies at once): the provider
//! flavours, retries, errors and framing corners.

mod llm_common;

use kforge::llm::{CostSource, LlmError, ProviderKind, Truncation};
use llm_common::*;
use wiremock::matchers::{body_partial_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const PATH: &str = "/v1/chat/completions";

async fn server_with(body: impl Into<String>, expected_requests: u64) -> MockServer {
    let server = MockServer::start().await;
    mount(&server, PATH, sse(body), None, expected_requests).await;
    server
}

fn openai(server: &MockServer, model: &str) -> kforge::llm::ResolvedProvider {
    provider(ProviderKind::OpenAi, &format!("{}/v1", server.uri()), model)
}

#[tokio::test]
async fn openai_text_then_usage_chunk() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(PATH))
        .and(header("authorization", format!("Bearer {KEY}").as_str()))
        .and(body_partial_json(serde_json::json!({
            "model": "gpt-4o",
            "stream": true,
            "stream_options": {"include_usage": true},
            "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
        })))
        .respond_with(sse(fixture("openai_text_usage.sse")))
        .expect(1)
        .mount(&server)
        .await;
    let (events, result) = call(openai(&server, "gpt-4o")).await;
    assert_eq!(
        events,
        vec![
            text("Hello"),
            text(" world"),
            finish("stop"),
            usage(1200, 1000, 0, 300, 0)
        ]
    );
    let c = result.unwrap();
    assert_eq!(c.text, "Hello world");
    assert_eq!(c.response_model.as_deref(), Some("gpt-4o-2024-08-06"));
    assert_eq!(c.attempts, 1);
    let cost = c.cost.unwrap();
    // gpt-4o: 200 fresh input at 2.50, 1000 cached at 1.25, 300 output at 10.00 per Mtok.
    let expected = (200.0 * 2.50 + 1000.0 * 1.25 + 300.0 * 10.0) / 1e6;
    assert!((cost.usd - expected).abs() < 1e-12, "{cost:?}");
    assert_eq!(cost.source, CostSource::PriceTable);
    assert!(c.time_to_first_token.unwrap() <= c.latency);
}

#[tokio::test]
async fn include_usage_can_be_switched_off() {
    let server = server_with(fixture("openai_text_usage.sse"), 1).await;
    let mut p = openai(&server, "gpt-4o");
    p.include_usage = false;
    let (_, result) = call(p).await;
    result.unwrap();
    let requests = server.received_requests().await.unwrap();
    let body: serde_json::Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert!(body.get("stream_options").is_none(), "{body}");
}

#[tokio::test]
async fn deepseek_reasoning_content_with_usage_on_a_content_chunk() {
    let server = server_with(fixture("deepseek_reasoning.sse"), 1).await;
    let (events, result) = call(openai(&server, "deepseek-reasoner")).await;
    assert_eq!(
        events,
        vec![
            reasoning("Think"),
            reasoning("ing."),
            text("Answer"),
            text("!"),
            finish("stop"),
            usage(2000, 1500, 0, 1000, 800),
        ]
    );
    let c = result.unwrap();
    assert_eq!(
        (c.text.as_str(), c.reasoning.as_str()),
        ("Answer!", "Thinking.")
    );
    let expected = (500.0 * 0.28 + 1500.0 * 0.028 + 1000.0 * 0.42) / 1e6;
    assert!((c.cost.unwrap().usd - expected).abs() < 1e-12);
}

#[tokio::test]
async fn vllm_reasoning_field_and_null_choices() {
    let server = server_with(fixture("vllm_reasoning.sse"), 1).await;
    let mut p = openai(&server, "Qwen/Qwen3-8B");
    p.free = true;
    let (events, result) = call(p).await;
    assert_eq!(
        events,
        vec![
            reasoning("six times seven"),
            text("42"),
            finish("stop"),
            usage(15, 0, 0, 9, 0)
        ]
    );
    let cost = result.unwrap().cost.unwrap();
    assert_eq!((cost.usd, cost.source), (0.0, CostSource::Free));
}

#[tokio::test]
async fn openrouter_processing_comments_and_reported_cost() {
    let server = server_with(fixture("openrouter_cost.sse"), 1).await;
    let (events, result) = call(openai(&server, "openai/gpt-5")).await;
    let mut with_cost = usage(10, 0, 0, 5, 0);
    if let kforge::llm::StreamEvent::Usage(u) = &mut with_cost {
        u.reported_cost_usd = Some(0.00042);
    }
    assert_eq!(events, vec![text("Hi"), finish("stop"), with_cost]);
    let cost = result.unwrap().cost.unwrap();
    assert_eq!((cost.usd, cost.source), (0.00042, CostSource::Reported));
}

#[tokio::test]
async fn unknown_model_cost_stays_unknown() {
    let server = server_with(fixture("openai_text_usage.sse"), 1).await;
    let (_, result) = call(openai(&server, "my-private-model")).await;
    assert_eq!(result.unwrap().cost, None);
}

#[tokio::test]
async fn rate_limited_then_success_honours_retry_after_ms() {
    let server = MockServer::start().await;
    mount(&server, PATH,
            ResponseTemplate::new(429)
                .insert_header("retry-after-ms", "20")
                .set_body_string(r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#),
        Some(1), 1).await;
    mount(
        &server,
        PATH,
        sse(fixture("openai_text_usage.sse")),
        None,
        1,
    )
    .await;
    let mut p = openai(&server, "gpt-4o");
    p.retry.max_delay = std::time::Duration::from_secs(1);
    let (events, result) = call(p).await;
    let reason = "rate limited by provider `testprov` (retry after 20 ms): Rate limit reached";
    // The server's 20 ms replace the policy's 10 ms base delay.
    assert_eq!(
        events,
        vec![
            retrying(2, 20, reason),
            text("Hello"),
            text(" world"),
            finish("stop"),
            usage(1200, 1000, 0, 300, 0)
        ]
    );
    assert_eq!(result.unwrap().attempts, 2);
}

#[tokio::test]
async fn server_errors_are_retried_until_the_limit() {
    let server = MockServer::start().await;
    mount(
        &server,
        PATH,
        ResponseTemplate::new(503).set_body_string("upstream unavailable"),
        None,
        3,
    )
    .await;
    let (events, result) = call(openai(&server, "gpt-4o")).await;
    let reason = "provider `testprov` answered HTTP 503: upstream unavailable";
    assert_eq!(
        events,
        vec![retrying(2, 10, reason), retrying(3, 10, reason)]
    );
    assert!(
        matches!(result, Err(LlmError::Http { status: 503, .. })),
        "{result:?}"
    );
}

#[tokio::test]
async fn insufficient_quota_is_not_retried() {
    let server = MockServer::start().await;
    mount(&server, PATH, ResponseTemplate::new(429).set_body_string(
            r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#,
        ), None, 1).await;
    let (events, result) = call(openai(&server, "gpt-4o")).await;
    assert_eq!(events, vec![]);
    let err = result.unwrap_err();
    assert!(matches!(err, LlmError::QuotaExceeded { .. }), "{err:?}");
    assert!(
        err.to_string().contains("exceeded your current quota"),
        "{err}"
    );
}

#[tokio::test]
async fn error_after_the_first_token_is_not_retried() {
    let server = server_with(fixture("openai_error_after_token.sse"), 1).await;
    let (events, result) = call(openai(&server, "gpt-4o")).await;
    assert_eq!(events, vec![text("Hel")]);
    let err = result.unwrap_err();
    assert!(matches!(err, LlmError::Overloaded { .. }), "{err:?}");
    assert!(
        err.is_retryable(),
        "retryable in kind, yet not retried after a token"
    );
}

#[tokio::test]
async fn eof_without_done_is_truncation() {
    let server = server_with(fixture("openai_no_done.sse"), 1).await;
    let (events, result) = call(openai(&server, "gpt-4o")).await;
    assert_eq!(events, vec![text("Hel"), text("lo")]);
    match result {
        Err(LlmError::Truncated {
            cause: Truncation::StreamEnded,
            partial,
        }) => assert_eq!(partial.text, "Hello"),
        other => panic!("expected truncation, got {other:?}"),
    }
}

#[tokio::test]
async fn finish_reason_length_is_truncation_with_the_partial_answer() {
    let server = server_with(fixture("openai_length.sse"), 1).await;
    let (events, result) = call(openai(&server, "gpt-4o")).await;
    assert_eq!(
        events,
        vec![
            text("```python\nclass ModelNew"),
            finish("length"),
            usage(10, 0, 0, 16, 0)
        ]
    );
    let err = result.unwrap_err();
    assert!(err.to_string().contains("raise max_tokens"), "{err}");
    let partial = err.partial().unwrap();
    assert_eq!(partial.usage.output_tokens, 16);
    assert!(partial.cost.is_some(), "a cut answer still costs money");
}

#[tokio::test]
async fn unauthorized_names_the_env_var_and_never_the_key() {
    let server = MockServer::start().await;
    let body = format!(
        r#"{{"error":{{"message":"Incorrect API key provided: {KEY}. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}}}"#
    );
    mount(
        &server,
        PATH,
        ResponseTemplate::new(401).set_body_string(body),
        None,
        1,
    )
    .await;
    let (events, result) = call(openai(&server, "gpt-4o")).await;
    assert_eq!(events, vec![]);
    let err = result.unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(matches!(err, LlmError::Auth { status: 401, .. }), "{err:?}");
    assert!(shown.contains("set TEST_KEY_VAR"), "{shown}");
    assert!(!shown.contains(KEY), "the key leaked: {shown}");
}

#[tokio::test]
async fn missing_model_names_the_model() {
    let server = MockServer::start().await;
    mount(&server, PATH, ResponseTemplate::new(404).set_body_string(
            r#"{"error":{"message":"The model `gpt-9` does not exist or you do not have access to it.","type":"invalid_request_error","code":"model_not_found"}}"#,
        ), None, 1).await;
    let (_, result) = call(openai(&server, "gpt-9")).await;
    let err = result.unwrap_err();
    assert!(
        matches!(&err, LlmError::ModelNotFound { model, .. } if model == "gpt-9"),
        "{err:?}"
    );
    assert!(err.to_string().contains("model `gpt-9` not found"), "{err}");
}

#[tokio::test]
async fn malformed_chunk_is_an_error_after_the_good_ones() {
    let server = server_with(fixture("openai_malformed.sse"), 1).await;
    let (events, result) = call(openai(&server, "gpt-4o")).await;
    assert_eq!(events, vec![text("Hi")]);
    let err = result.unwrap_err();
    assert!(matches!(err, LlmError::Malformed { .. }), "{err:?}");
    assert!(
        err.to_string().contains("oops"),
        "the excerpt shows the bad data: {err}"
    );
}

#[tokio::test]
async fn crlf_framing_reads_like_lf() {
    let server = server_with(fixture("openai_text_usage.sse").replace('\n', "\r\n"), 1).await;
    let (events, result) = call(openai(&server, "gpt-4o")).await;
    assert_eq!(
        events,
        vec![
            text("Hello"),
            text(" world"),
            finish("stop"),
            usage(1200, 1000, 0, 300, 0)
        ]
    );
    result.unwrap();
}

#[tokio::test]
async fn last_event_without_a_blank_line_still_counts() {
    let body = format!("{}data: [DONE]\n", content_chunk("ok"));
    let server = server_with(body, 1).await;
    let (events, result) = call(openai(&server, "gpt-4o")).await;
    assert_eq!(events, vec![text("ok")]);
    result.unwrap();
}

#[tokio::test]
async fn a_server_ignoring_stream_true_still_works() {
    let server = MockServer::start().await;
    let body = serde_json::json!({
        "model": "gpt-4o", "choices": [{"index": 0, "message": {"role": "assistant", "content": "whole"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1}
    });
    mount(
        &server,
        PATH,
        ResponseTemplate::new(200).set_body_json(body),
        None,
        1,
    )
    .await;
    let (events, result) = call(openai(&server, "gpt-4o")).await;
    assert_eq!(
        events,
        vec![text("whole"), finish("stop"), usage(3, 0, 0, 1, 0)]
    );
    assert_eq!(result.unwrap().text, "whole");
}

#[tokio::test]
async fn stream_api_ends_with_done() {
    use futures::StreamExt;
    let server = server_with(fixture("openai_text_usage.sse"), 1).await;
    let client = kforge::llm::LlmClient::new(openai(&server, "gpt-4o")).unwrap();
    let items: Vec<_> = client
        .stream(
            kforge::llm::ChatRequest::prompt("hi"),
            tokio_util::sync::CancellationToken::new(),
        )
        .collect()
        .await;
    let events: Vec<_> = items.into_iter().map(Result::unwrap).collect();
    assert_eq!(events.len(), 5);
    assert_eq!(
        events[..4],
        [
            text("Hello"),
            text(" world"),
            finish("stop"),
            usage(1200, 1000, 0, 300, 0)
        ]
    );
    match &events[4] {
        kforge::llm::StreamEvent::Done(c) => assert_eq!(c.text, "Hello world"),
        other => panic!("expected Done, got {other:?}"),
    }
}

#[tokio::test]
async fn an_html_page_under_200_says_check_base_url() {
    let server = MockServer::start().await;
    let page =
        ResponseTemplate::new(200).set_body_raw("<html><body>Welcome</body></html>", "text/html");
    mount(&server, PATH, page, None, 1).await;
    let (events, result) = call(openai(&server, "gpt-4o")).await;
    assert_eq!(events, vec![]);
    let err = result.unwrap_err();
    assert!(
        matches!(err, LlmError::Malformed { .. }) && err.to_string().contains("check base_url"),
        "{err}"
    );
}

#[tokio::test]
async fn a_password_in_base_url_is_never_shown() {
    let server = MockServer::start().await;
    let body = r#"{"error":{"message":"bad credentials for user:hunter2-secret"}}"#;
    mount(
        &server,
        PATH,
        ResponseTemplate::new(403).set_body_string(body),
        None,
        1,
    )
    .await;
    let base = server
        .uri()
        .replace("http://", "http://user:hunter2-secret@");
    let (_, result) = call(provider(
        ProviderKind::OpenAi,
        &format!("{base}/v1"),
        "gpt-4o",
    ))
    .await;
    let err = result.unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(matches!(err, LlmError::Auth { status: 403, .. }), "{shown}");
    assert!(!shown.contains("hunter2-secret"), "{shown}");
}

#[tokio::test]
async fn a_whole_json_answer_larger_than_64_kib_is_read_whole() {
    // The 64 KiB cap is for error bodies; a successful answer this long is ordinary.
    let long = "x".repeat(1 << 20);
    let body = serde_json::json!({
        "model": "gpt-4o", "choices": [{"index": 0, "message": {"role": "assistant", "content": long}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1}
    });
    let server = MockServer::start().await;
    mount(
        &server,
        PATH,
        ResponseTemplate::new(200).set_body_json(body),
        None,
        1,
    )
    .await;
    let (events, result) = call(openai(&server, "gpt-4o")).await;
    let c = match result {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    assert!(c.text == long, "{} characters of text", c.text.len());
    assert_eq!(events.len(), 3, "text, finish, usage");
}

#[tokio::test]
async fn an_in_stream_server_error_before_any_token_is_retried() {
    let server = MockServer::start().await;
    let error = r#"data: {"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}"#;
    mount(&server, PATH, sse(format!("{error}\n\n")), Some(1), 1).await;
    mount(
        &server,
        PATH,
        sse(fixture("openai_text_usage.sse")),
        None,
        1,
    )
    .await;
    let (events, result) = call(openai(&server, "gpt-4o")).await;
    let reason = "provider `testprov` reported an error in the stream (server_error): \
                  The server had an error while processing your request. Sorry about that!";
    assert_eq!(
        events,
        vec![
            retrying(2, 10, reason),
            text("Hello"),
            text(" world"),
            finish("stop"),
            usage(1200, 1000, 0, 300, 0)
        ]
    );
    assert_eq!(result.unwrap().attempts, 2);
}

#[tokio::test]
async fn an_in_stream_server_error_after_a_token_is_final() {
    let body = format!(
        "{}data: {}\n\n",
        content_chunk("Hel"),
        r#"{"error":{"message":"boom","type":"server_error"}}"#
    );
    let server = server_with(body, 1).await;
    let (events, result) = call(openai(&server, "gpt-4o")).await;
    assert_eq!(events, vec![text("Hel")]);
    let err = result.unwrap_err();
    assert!(
        matches!(err, LlmError::InStream { .. }) && err.to_string().contains("boom"),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_plain_text_200_says_what_it_is_and_is_not_retried() {
    let server = MockServer::start().await;
    let page = ResponseTemplate::new(200)
        .set_body_raw("Service is up. Try /v2/chat for the new API.", "text/plain");
    mount(&server, PATH, page, None, 1).await;
    let (events, result) = call(openai(&server, "gpt-4o")).await;
    assert_eq!(events, vec![], "not retried");
    let err = result.unwrap_err();
    let shown = err.to_string();
    assert!(
        shown.contains("the server answered 200 with text/plain, not an event stream or JSON")
            && shown.contains("Service is up. Try /v2/chat for the new API."),
        "{shown}"
    );
    assert!(!shown.contains("truncated"), "{shown}");
}

#[tokio::test]
async fn an_event_stream_labelled_text_plain_still_works() {
    let server = MockServer::start().await;
    let body = ResponseTemplate::new(200).set_body_raw(
        fixture("openai_text_usage.sse"),
        "text/plain; charset=utf-8",
    );
    mount(&server, PATH, body, None, 1).await;
    let (events, result) = call(openai(&server, "gpt-4o")).await;
    assert_eq!(events.len(), 4, "{events:?}");
    assert_eq!(result.unwrap().text, "Hello world");
}

/// A whole (non-streamed) `chat.completion` in one `data:` line, as some proxies send it.
fn whole_completion() -> serde_json::Value {
    serde_json::json!({
        "id": "chatcmpl-9", "object": "chat.completion", "created": 1, "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello whole"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}
    })
}

#[tokio::test]
async fn a_whole_completion_in_one_data_line_is_an_answer() {
    for tail in ["", "data: [DONE]\n\n"] {
        let server = server_with(format!("data: {}\n\n{tail}", whole_completion()), 1).await;
        let (events, result) = call(openai(&server, "gpt-4o")).await;
        assert_eq!(
            events,
            vec![text("Hello whole"), finish("stop"), usage(9, 0, 0, 2, 0)],
            "tail {tail:?}"
        );
        let c = result.unwrap();
        assert_eq!(c.text, "Hello whole");
        assert_eq!(c.response_model.as_deref(), Some("gpt-4o-2024-08-06"));
        assert_eq!(c.attempts, 1);
    }
}
