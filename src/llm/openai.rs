//! OpenAI-compatible chat completions: request body and a tolerant chunk decoder.
//!
//! Chunks are read as untyped JSON so that `null`s, missing fields, unknown fields and
//! odd types (`"choices": null`, `"usage": null`, `"content": null`) are all harmless.

use serde_json::{Value, json};

use super::config::{MaxTokensField, ResolvedProvider};
use super::error::{ErrorContext, LlmError};
use super::sse::SseEvent;
use super::types::{ChatRequest, FinishReason, StreamEvent, Usage};

/// `{base_url}/chat/completions` (a base that already names the endpoint is kept).
pub fn endpoint(base_url: &str) -> String {
    let base = base_url.trim_end_matches('/');
    if base.ends_with("/chat/completions") {
        base.to_string()
    } else {
        format!("{base}/chat/completions")
    }
}

pub fn request_body(p: &ResolvedProvider, req: &ChatRequest) -> Value {
    let mut messages = Vec::new();
    if let Some(system) = &req.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    messages.extend(
        req.messages
            .iter()
            .map(|m| json!({"role": m.role.as_str(), "content": m.content})),
    );
    let mut body = json!({"model": p.model, "messages": messages, "stream": true});
    if p.include_usage {
        body["stream_options"] = json!({"include_usage": true});
    }
    if let Some(max) = req.max_tokens.or(p.max_tokens) {
        let field = match p.max_tokens_field {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        };
        body[field] = json!(max);
    }
    if let Some(t) = req.temperature.or(p.temperature) {
        body["temperature"] = json!(t);
    }
    if let Some(effort) = &p.reasoning_effort {
        body["reasoning_effort"] = json!(effort);
    }
    body
}

/// Decodes `data:` chunks into events; `[DONE]` ends the stream.
#[derive(Debug, Default)]
pub struct Decoder {
    pub response_model: Option<String>,
    finished: bool,
}

impl Decoder {
    /// One SSE event. Returns `true` at the end marker.
    pub fn on_event(
        &mut self,
        ev: &SseEvent,
        ctx: &ErrorContext,
        out: &mut Vec<StreamEvent>,
    ) -> Result<bool, LlmError> {
        let data = ev.data.trim();
        if data == "[DONE]" {
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| ctx.malformed(format!("a stream chunk is not JSON ({e})"), data))?;
        // A whole response in one `data:` line (some proxies send that to a streamed
        // request) is the whole answer: no `[DONE]` has to follow.
        self.on_chunk(&chunk, ctx, out)
    }

    /// One chunk, or a whole non-streamed response (its choices carry `message`). Returns
    /// `true` for a whole response.
    pub fn on_chunk(
        &mut self,
        chunk: &Value,
        ctx: &ErrorContext,
        out: &mut Vec<StreamEvent>,
    ) -> Result<bool, LlmError> {
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            return Err(ctx.in_stream_error(error));
        }
        if self.response_model.is_none() {
            self.response_model = chunk.get("model").and_then(Value::as_str).map(String::from);
        }
        let choices = chunk
            .get("choices")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for choice in choices
            .iter()
            .filter(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
        {
            let delta = choice.get("delta").or_else(|| choice.get("message"));
            let field = |name: &str| {
                delta
                    .and_then(|d| d.get(name))
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
            };
            // Servers that send both carry the same text in each: take one.
            if let Some(r) = field("reasoning_content").or_else(|| field("reasoning")) {
                out.push(StreamEvent::Reasoning(r.to_string()));
            }
            // A refusal is the answer, shown as text.
            if let Some(t) = field("content").or_else(|| field("refusal")) {
                out.push(StreamEvent::Text(t.to_string()));
            }
            let reason = choice
                .get("finish_reason")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty());
            if let Some(reason) = reason.filter(|_| !self.finished) {
                if reason == "error" {
                    return Err(LlmError::InStream {
                        provider: ctx.provider.clone(),
                        kind: "finish_reason".into(),
                        message: "the server ended the answer with finish_reason \"error\"".into(),
                        retryable: false,
                    });
                }
                self.finished = true;
                out.push(StreamEvent::Finish(FinishReason(reason.to_string())));
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            out.push(StreamEvent::Usage(parse_usage(usage)));
        }
        Ok(is_whole_response(chunk, choices))
    }
}

/// `object: "chat.completion"` (chunks are `chat.completion.chunk`), or, from servers that
/// leave `object` out, choices that all carry a `message` and none a `delta`.
fn is_whole_response(chunk: &Value, choices: &[Value]) -> bool {
    match chunk.get("object").and_then(Value::as_str) {
        Some(object) => object == "chat.completion",
        None => {
            !choices.is_empty()
                && choices
                    .iter()
                    .all(|c| c.get("message").is_some() && c.get("delta").is_none())
        }
    }
}

/// OpenAI usage -> normalized usage (DeepSeek cache fields and OpenRouter cost included).
pub fn parse_usage(u: &Value) -> Usage {
    let n = |path: &str| u.pointer(path).and_then(Value::as_u64);
    Usage {
        input_tokens: n("/prompt_tokens").unwrap_or(0),
        cached_input_tokens: n("/prompt_tokens_details/cached_tokens")
            .or(n("/prompt_cache_hit_tokens"))
            .unwrap_or(0),
        cache_write_tokens: 0,
        output_tokens: n("/completion_tokens").unwrap_or(0),
        reasoning_tokens: n("/completion_tokens_details/reasoning_tokens").unwrap_or(0),
        reported_cost_usd: u.get("cost").and_then(Value::as_f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::config::ProviderKind;

    fn ctx() -> ErrorContext {
        ErrorContext::plain()
    }

    fn decode(chunks: &[&str]) -> (Vec<StreamEvent>, Result<bool, LlmError>) {
        let mut d = Decoder::default();
        let mut out = Vec::new();
        let mut last = Ok(false);
        for c in chunks {
            last = d.on_event(
                &SseEvent {
                    name: "message".into(),
                    data: c.to_string(),
                },
                &ctx(),
                &mut out,
            );
            if last.is_err() {
                break;
            }
        }
        (out, last)
    }

    #[test]
    fn body_has_stream_options_and_the_right_limit_field() {
        let mut p = ResolvedProvider::new("x", ProviderKind::OpenAi, "http://h/v1/", "gpt-5");
        p.max_tokens = Some(100);
        let req = ChatRequest::prompt("hi").with_system("sys");
        let b = request_body(&p, &req);
        assert_eq!(b["stream_options"]["include_usage"], json!(true));
        assert_eq!(b["max_completion_tokens"], json!(100));
        assert_eq!(
            b["messages"][0],
            json!({"role": "system", "content": "sys"})
        );
        assert_eq!(b["messages"][1], json!({"role": "user", "content": "hi"}));
        p.include_usage = false;
        p.max_tokens_field = MaxTokensField::MaxTokens;
        let b = request_body(
            &p,
            &ChatRequest {
                max_tokens: Some(7),
                ..req
            },
        );
        assert!(b.get("stream_options").is_none());
        assert_eq!(b["max_tokens"], json!(7));
        assert_eq!(endpoint("http://h/v1/"), "http://h/v1/chat/completions");
    }

    #[test]
    fn nulls_and_unknown_fields_are_harmless() {
        let (ev, r) = decode(&[
            r#"{"choices":null,"usage":null,"x":1}"#,
            r#"{"choices":[{"index":0,"delta":{"content":null,"reasoning":"r"},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"a","reasoning_content":null},"finish_reason":""}]}"#,
            "[DONE]",
        ]);
        assert!(r.unwrap());
        assert_eq!(
            ev,
            vec![
                StreamEvent::Reasoning("r".into()),
                StreamEvent::Text("a".into())
            ]
        );
    }

    #[test]
    fn usage_fields_normalize() {
        let u = parse_usage(&json!({
            "prompt_tokens": 100, "completion_tokens": 50, "prompt_cache_hit_tokens": 60,
            "completion_tokens_details": {"reasoning_tokens": 30}, "cost": 0.001
        }));
        assert_eq!(
            (
                u.input_tokens,
                u.cached_input_tokens,
                u.output_tokens,
                u.reasoning_tokens
            ),
            (100, 60, 50, 30)
        );
        assert_eq!(u.reported_cost_usd, Some(0.001));
    }

    #[test]
    fn a_whole_response_ends_the_stream_and_a_chunk_does_not() {
        let whole = r#"{"object":"chat.completion","choices":[{"index":0,"message":{"content":"a"},"finish_reason":"stop"}]}"#;
        let (ev, r) = decode(&[whole]);
        assert!(r.unwrap(), "no [DONE] needed after a whole response");
        assert_eq!(
            ev,
            vec![
                StreamEvent::Text("a".into()),
                StreamEvent::Finish(FinishReason("stop".into()))
            ]
        );
        let without_object =
            r#"{"choices":[{"index":0,"message":{"content":"a"},"finish_reason":"stop"}]}"#;
        assert!(decode(&[without_object]).1.unwrap());
        for chunk in [
            r#"{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"a"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"a"}}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":1}}"#,
        ] {
            assert!(!decode(&[chunk]).1.unwrap(), "{chunk}");
        }
    }

    #[test]
    fn malformed_and_error_chunks() {
        let (_, r) = decode(&[r#"{"choices":[{"delta":{"content":"a"}"#]);
        assert!(matches!(r, Err(LlmError::Malformed { .. })));
        let (_, r) = decode(&[r#"{"error":{"message":"boom","type":"server_error"}}"#]);
        assert!(matches!(r, Err(LlmError::InStream { .. })), "{r:?}");
        let (_, r) = decode(&[r#"{"choices":[{"delta":{},"finish_reason":"error"}]}"#]);
        assert!(matches!(r, Err(LlmError::InStream { .. })), "{r:?}");
    }
}
