//! JSON-RPC 2.0 as MCP's stdio transport carries it: one message a line, UTF-8, no
//! embedded newlines. Requests have an `id` and get exactly one response; notifications
//! have none and never get one.

use serde_json::{Value, json};

/// The JSON-RPC error codes this server answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// The line is not JSON.
    ParseError,
    /// JSON, but not a JSON-RPC 2.0 request or notification.
    InvalidRequest,
    MethodNotFound,
    /// The method exists but its params are wrong (an unknown tool included).
    InvalidParams,
}

impl ErrorCode {
    pub fn code(self) -> i64 {
        match self {
            ErrorCode::ParseError => -32700,
            ErrorCode::InvalidRequest => -32600,
            ErrorCode::MethodNotFound => -32601,
            ErrorCode::InvalidParams => -32602,
        }
    }
}

/// A protocol error: the response to a request that could not be served.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: ErrorCode,
    pub message: String,
}

impl RpcError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
        }
    }
}

/// One incoming line, classified.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request: it gets one response with the same `id`.
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    /// A notification: no response, ever.
    Notification { method: String, params: Value },
    /// A response from the client (this server sends no requests): ignored.
    Response,
    /// Not a message this server can serve: answered with this error, to `id` (null when
    /// the id could not be read).
    Invalid { id: Value, error: RpcError },
}

/// Classifies one line of input (without its newline).
pub fn parse_line(line: &str) -> Incoming {
    let value: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => {
            return Incoming::Invalid {
                id: Value::Null,
                error: RpcError::new(ErrorCode::ParseError, format!("parse error: {e}")),
            };
        }
    };
    let invalid = |id: Value, why: &str| Incoming::Invalid {
        id,
        error: RpcError::new(ErrorCode::InvalidRequest, format!("invalid request: {why}")),
    };
    let Some(object) = value.as_object() else {
        // Batches were removed from MCP (2025-06-18): an array is not a message either.
        return invalid(Value::Null, "a message is one JSON object");
    };
    let id = object.get("id").cloned();
    if let Some(id) = &id
        && !(id.is_string() || id.is_number() || id.is_null())
    {
        return invalid(Value::Null, "`id` must be a string or a number");
    }
    let reply_to = id.clone().unwrap_or(Value::Null);
    if object.get("jsonrpc") != Some(&json!("2.0")) {
        return invalid(reply_to, "`jsonrpc` must be \"2.0\"");
    }
    let Some(method) = object.get("method") else {
        if object.contains_key("result") || object.contains_key("error") {
            return Incoming::Response;
        }
        return invalid(reply_to, "no `method`");
    };
    let Some(method) = method.as_str() else {
        return invalid(reply_to, "`method` must be a string");
    };
    let params = object.get("params").cloned().unwrap_or(Value::Null);
    if !(params.is_object() || params.is_array() || params.is_null()) {
        return invalid(reply_to, "`params` must be an object or an array");
    }
    match id {
        Some(id) => Incoming::Request {
            id,
            method: method.to_string(),
            params,
        },
        None => Incoming::Notification {
            method: method.to_string(),
            params,
        },
    }
}

/// A success response, as one line (no newline).
pub fn success_line(id: &Value, result: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

/// An error response, as one line (no newline).
pub fn error_line(id: &Value, error: &RpcError) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": error.code.code(), "message": error.message},
    })
    .to_string()
}

/// A notification to the client, as one line (no newline).
pub fn notification_line(method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(line: &str) -> (Value, i64) {
        match parse_line(line) {
            Incoming::Invalid { id, error } => (id, error.code.code()),
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn the_specs_initialize_request_is_a_request() {
        let line = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#;
        match parse_line(line) {
            Incoming::Request { id, method, params } => {
                assert_eq!(id, json!(1));
                assert_eq!(method, "initialize");
                assert_eq!(params["protocolVersion"], "2025-06-18");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn initialized_and_cancelled_are_notifications() {
        for line in [
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"123","reason":"User requested cancellation"}}"#,
        ] {
            assert!(
                matches!(parse_line(line), Incoming::Notification { .. }),
                "{line}"
            );
        }
    }

    #[test]
    fn string_ids_are_kept() {
        let line = r#"{"jsonrpc":"2.0","id":"abc","method":"ping"}"#;
        assert_eq!(
            parse_line(line),
            Incoming::Request {
                id: json!("abc"),
                method: "ping".into(),
                params: Value::Null
            }
        );
    }

    #[test]
    fn not_json_is_a_parse_error_with_a_null_id() {
        assert_eq!(error_of("{not json"), (Value::Null, -32700));
        assert_eq!(error_of(""), (Value::Null, -32700));
    }

    #[test]
    fn malformed_messages_are_invalid_requests() {
        assert_eq!(error_of("[1,2]"), (Value::Null, -32600));
        assert_eq!(error_of("42"), (Value::Null, -32600));
        assert_eq!(
            error_of(r#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#),
            (json!(3), -32600)
        );
        assert_eq!(error_of(r#"{"jsonrpc":"2.0","id":4}"#), (json!(4), -32600));
        assert_eq!(
            error_of(r#"{"jsonrpc":"2.0","id":5,"method":7}"#),
            (json!(5), -32600)
        );
        assert_eq!(
            error_of(r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#),
            (Value::Null, -32600)
        );
        assert_eq!(
            error_of(r#"{"jsonrpc":"2.0","id":6,"method":"ping","params":3}"#),
            (json!(6), -32600)
        );
    }

    #[test]
    fn responses_from_the_client_are_recognised() {
        assert_eq!(
            parse_line(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Incoming::Response
        );
    }

    #[test]
    fn responses_are_single_lines() {
        let ok = success_line(&json!(1), json!({"text": "two\nlines"}));
        assert!(!ok.contains('\n'), "{ok}");
        assert_eq!(
            serde_json::from_str::<Value>(&ok).unwrap(),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"text": "two\nlines"}})
        );
        let err = error_line(
            &Value::Null,
            &RpcError::new(ErrorCode::MethodNotFound, "no"),
        );
        assert_eq!(
            serde_json::from_str::<Value>(&err).unwrap(),
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32601, "message": "no"}})
        );
    }
}
