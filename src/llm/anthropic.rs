//! Anthropic Messages: request body and a decoder for its named SSE events.
//!
//! Usage in `message_delta` is cumulative: it overwrites what `message_start` said.
//! `ping`, `content_block_stop`, `signature_delta`, `input_json_delta` and event types
//! this code does not know are ignored.

use serde_json::{Value, json};

use super::config::ResolvedProvider;
use super::error::{ErrorContext, LlmError};
use super::sse::SseEvent;
use super::types::{ChatRequest, FinishReason, StreamEvent, Usage};

pub const API_VERSION: &str = "2023-06-01";

/// `{base_url}/v1/messages`, tolerating a base that already ends in `/v1` or the endpoint.
pub fn endpoint(base_url: &str) -> String {
    let base = base_url.trim_end_matches('/');
    if base.ends_with("/v1/messages") {
        base.to_string()
    } else if base.ends_with("/v1") {
        format!("{base}/messages")
    } else {
        format!("{base}/v1/messages")
    }
}

pub fn request_body(p: &ResolvedProvider, req: &ChatRequest) -> Value {
    let messages: Vec<Value> = req
        .messages
        .iter()
        .map(|m| json!({"role": m.role.as_str(), "content": m.content}))
        .collect();
    let max_tokens = req
        .max_tokens
        .or(p.max_tokens)
        .unwrap_or(super::config::DEFAULT_ANTHROPIC_MAX_TOKENS);
    let mut body =
        json!({"model": p.model, "max_tokens": max_tokens, "messages": messages, "stream": true});
    if let Some(system) = &req.system {
        body["system"] = json!(system);
    }
    match p.thinking_budget {
        // Thinking requires the default temperature.
        Some(budget) => body["thinking"] = json!({"type": "enabled", "budget_tokens": budget}),
        None => {
            if let Some(t) = req.temperature.or(p.temperature) {
                body["temperature"] = json!(t);
            }
        }
    }
    body
}

/// Raw Anthropic counters; `input_tokens` excludes cache reads and writes.
#[derive(Debug, Default)]
struct Counters {
    input: u64,
    cache_read: u64,
    cache_write: u64,
    output: u64,
}

impl Counters {
    /// Overwrites the counters present in `u` (cumulative semantics).
    fn update(&mut self, u: &Value) {
        let n = |k: &str| u.get(k).and_then(Value::as_u64);
        self.input = n("input_tokens").unwrap_or(self.input);
        self.cache_read = n("cache_read_input_tokens").unwrap_or(self.cache_read);
        self.cache_write = n("cache_creation_input_tokens").unwrap_or(self.cache_write);
        self.output = n("output_tokens").unwrap_or(self.output);
    }

    fn normalized(&self) -> Usage {
        Usage {
            input_tokens: self.input + self.cache_read + self.cache_write,
            cached_input_tokens: self.cache_read,
            cache_write_tokens: self.cache_write,
            output_tokens: self.output,
            reasoning_tokens: 0,
            reported_cost_usd: None,
        }
    }
}

#[derive(Debug, Default)]
pub struct Decoder {
    pub response_model: Option<String>,
    counters: Counters,
}

impl Decoder {
    /// One SSE event. Returns `true` at `message_stop`, or after a whole message.
    pub fn on_event(
        &mut self,
        ev: &SseEvent,
        ctx: &ErrorContext,
        out: &mut Vec<StreamEvent>,
    ) -> Result<bool, LlmError> {
        let data = ev.data.trim();
        if ev.name == "ping" || data.is_empty() {
            return Ok(false);
        }
        let v: Value = serde_json::from_str(data)
            .map_err(|e| ctx.malformed(format!("an event is not JSON ({e})"), data))?;
        self.on_value(&ev.name, &v, ctx, out)
    }

    /// One event's JSON, `name` being its SSE name (`message` when it had none: the JSON's
    /// `type` says what it is). A whole JSON answer comes here as an unnamed event too.
    pub fn on_value(
        &mut self,
        name: &str,
        v: &Value,
        ctx: &ErrorContext,
        out: &mut Vec<StreamEvent>,
    ) -> Result<bool, LlmError> {
        let name = match name {
            "message" => v.get("type").and_then(Value::as_str).unwrap_or(""),
            name => name,
        };
        match name {
            // A whole, non-streamed message: what some proxies (LiteLLM's /v1/messages)
            // send to a streamed request, in one `data:` line or as a JSON document.
            "message" => {
                self.whole_message(v, ctx, out)?;
                return Ok(true);
            }
            // A gateway's own error shape, without Anthropic's `type`.
            "" if v.get("error").is_some_and(|e| !e.is_null()) => {
                return Err(ctx.in_stream_error(&v["error"]));
            }
            "message_start" => {
                let message = v.get("message");
                self.response_model = message
                    .and_then(|m| m.get("model"))
                    .and_then(Value::as_str)
                    .map(String::from);
                if let Some(u) = message
                    .and_then(|m| m.get("usage"))
                    .filter(|u| u.is_object())
                {
                    self.counters.update(u);
                    out.push(StreamEvent::Usage(self.counters.normalized()));
                }
            }
            "content_block_start" => {
                let block = v.get("content_block");
                let text = |k: &str| {
                    block
                        .and_then(|b| b.get(k))
                        .and_then(Value::as_str)
                        .filter(|s| !s.is_empty())
                };
                if let Some(t) = text("thinking") {
                    out.push(StreamEvent::Reasoning(t.to_string()));
                }
                if let Some(t) = text("text") {
                    out.push(StreamEvent::Text(t.to_string()));
                }
            }
            "content_block_delta" => {
                let delta = v.get("delta");
                let text = |k: &str| {
                    delta
                        .and_then(|d| d.get(k))
                        .and_then(Value::as_str)
                        .filter(|s| !s.is_empty())
                };
                match delta.and_then(|d| d.get("type")).and_then(Value::as_str) {
                    Some("text_delta") => {
                        out.extend(text("text").map(|t| StreamEvent::Text(t.to_string())))
                    }
                    Some("thinking_delta") => {
                        out.extend(text("thinking").map(|t| StreamEvent::Reasoning(t.to_string())))
                    }
                    _ => {} // signature_delta, input_json_delta, citations_delta, future kinds
                }
            }
            "message_delta" => {
                let reason = v
                    .pointer("/delta/stop_reason")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty());
                if let Some(reason) = reason {
                    out.push(StreamEvent::Finish(FinishReason(reason.to_string())));
                }
                if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
                    self.counters.update(u);
                    out.push(StreamEvent::Usage(self.counters.normalized()));
                }
            }
            "message_stop" => return Ok(true),
            "error" => return Err(ctx.in_stream_error(v.get("error").unwrap_or(v))),
            _ => {} // content_block_stop and event types added after this was written
        }
        Ok(false)
    }
}

impl Decoder {
    /// A whole message: its thinking and text blocks, stop reason and usage, in the order
    /// a stream would have given them.
    fn whole_message(
        &mut self,
        message: &Value,
        ctx: &ErrorContext,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), LlmError> {
        let Some(blocks) = message.get("content").and_then(Value::as_array) else {
            return Err(ctx.malformed(
                "a whole message without a content list",
                &message.to_string(),
            ));
        };
        self.response_model = message
            .get("model")
            .and_then(Value::as_str)
            .map(String::from);
        for block in blocks {
            let field = |k: &str| {
                block
                    .get(k)
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
            };
            match block.get("type").and_then(Value::as_str) {
                Some("thinking") => out.extend(field("thinking").map(StreamEvent::Reasoning)),
                Some("text") => out.extend(field("text").map(StreamEvent::Text)),
                _ => {} // redacted_thinking, tool_use and later kinds
            }
        }
        if let Some(reason) = message
            .get("stop_reason")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            out.push(StreamEvent::Finish(FinishReason(reason.to_string())));
        }
        if let Some(u) = message.get("usage").filter(|u| u.is_object()) {
            self.counters.update(u);
            out.push(StreamEvent::Usage(self.counters.normalized()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::config::ProviderKind;

    #[test]
    fn endpoint_tolerates_v1_suffix() {
        assert_eq!(
            endpoint("https://api.anthropic.com"),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(endpoint("http://h/v1/"), "http://h/v1/messages");
        assert_eq!(endpoint("http://h/v1/messages"), "http://h/v1/messages");
    }

    #[test]
    fn body_has_max_tokens_system_and_thinking() {
        let mut p = ResolvedProvider::new(
            "a",
            ProviderKind::Anthropic,
            "http://h",
            "claude-sonnet-4-5",
        );
        p.temperature = Some(0.2);
        let req = ChatRequest::prompt("hi").with_system("sys");
        let b = request_body(&p, &req);
        assert_eq!(
            b["max_tokens"],
            json!(super::super::config::DEFAULT_ANTHROPIC_MAX_TOKENS)
        );
        assert_eq!(b["system"], json!("sys"));
        assert_eq!(b["temperature"], json!(0.2f32));
        p.thinking_budget = Some(2048);
        let b = request_body(&p, &req);
        assert_eq!(
            b["thinking"],
            json!({"type": "enabled", "budget_tokens": 2048})
        );
        assert!(b.get("temperature").is_none());
    }

    fn ctx() -> ErrorContext {
        ErrorContext::plain()
    }

    #[test]
    fn a_whole_message_is_the_whole_answer() {
        let message = json!({
            "type": "message", "model": "claude-x",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "s"},
                {"type": "text", "text": "one"},
                {"type": "tool_use", "id": "t", "name": "f", "input": {}},
                {"type": "text", "text": "two"}
            ],
            "stop_reason": "max_tokens",
            "usage": {"input_tokens": 3, "cache_read_input_tokens": 10, "output_tokens": 7}
        });
        let mut d = Decoder::default();
        let mut out = Vec::new();
        assert!(d.on_value("message", &message, &ctx(), &mut out).unwrap());
        assert_eq!(d.response_model.as_deref(), Some("claude-x"));
        let mut usage = Counters::default();
        usage.update(&message["usage"]);
        assert_eq!(
            out,
            vec![
                StreamEvent::Reasoning("hmm".into()),
                StreamEvent::Text("one".into()),
                StreamEvent::Text("two".into()),
                StreamEvent::Finish(FinishReason("max_tokens".into())),
                StreamEvent::Usage(usage.normalized()),
            ]
        );
        let no_content = json!({"type": "message", "content": "text"});
        let e = Decoder::default()
            .on_value("message", &no_content, &ctx(), &mut Vec::new())
            .unwrap_err();
        assert!(matches!(e, LlmError::Malformed { .. }), "{e}");
    }

    #[test]
    fn a_gateway_error_without_a_type_is_an_error() {
        let v = json!({"error": {"message": "upstream failed", "type": "api_error"}});
        let e = Decoder::default()
            .on_value("message", &v, &ctx(), &mut Vec::new())
            .unwrap_err();
        assert!(
            e.is_retryable() && e.to_string().contains("upstream failed"),
            "{e}"
        );
        let v = json!({"ok": true, "error": null});
        assert!(
            !Decoder::default()
                .on_value("message", &v, &ctx(), &mut Vec::new())
                .unwrap()
        );
    }

    #[test]
    fn cumulative_usage_overwrites() {
        let mut c = Counters::default();
        c.update(&json!({"input_tokens": 10, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 5, "output_tokens": 1}));
        c.update(&json!({"output_tokens": 40}));
        c.update(&json!({"output_tokens": 42}));
        let u = c.normalized();
        assert_eq!(
            (
                u.input_tokens,
                u.cached_input_tokens,
                u.cache_write_tokens,
                u.output_tokens
            ),
            (115, 100, 5, 42)
        );
    }
}
