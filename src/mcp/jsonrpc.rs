//! JSON-RPC 2.0 as MCP's stdio transport carries it: one message a line, UTF-8, no
//! embedded newlines. Requests have an `id` and get exactly one response; notifications
//! have none and never get one. Lines are read as bytes and bounded (`read_frame`), so
//! that no input (invalid UTF-8, a line without end) can stop the server: each malformed
//! line is answered with an error and the next one is read.

use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// The longest message read (a task or kernel sent as text is far smaller); a longer line
/// is skipped to its end and answered with an error.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// One line of input, without its newline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    Line(Vec<u8>),
    /// A line longer than the limit: its bytes were dropped as they came.
    TooLong {
        bytes: usize,
    },
}

/// Reads the next line, holding at most `max` bytes of it; `None` at the end of input. A
/// last line without a newline counts.
pub async fn read_frame<R: AsyncBufRead + Unpin>(
    input: &mut R,
    max: usize,
) -> std::io::Result<Option<Frame>> {
    let mut line = Vec::new();
    let mut bytes = 0usize;
    let mut read_any = false;
    loop {
        let buf = input.fill_buf().await?;
        if buf.is_empty() {
            if !read_any {
                return Ok(None);
            }
            break;
        }
        read_any = true;
        let (chunk, ended) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], true),
            None => (buf, false),
        };
        let used = chunk.len() + usize::from(ended);
        bytes += chunk.len();
        if bytes <= max {
            line.extend_from_slice(chunk);
        } else if !line.is_empty() {
            line = Vec::new();
        }
        input.consume(used);
        if ended {
            break;
        }
    }
    Ok(Some(if bytes > max {
        Frame::TooLong { bytes }
    } else {
        Frame::Line(line)
    }))
}

/// Classifies one frame: a line as `parse_line` does it, with input that is not UTF-8 a
/// parse error (answered to the request's id when one can still be read, so that the
/// client's call does not wait forever), and a line over the limit an invalid request.
pub fn parse_frame(frame: &Frame) -> Incoming {
    let line = match frame {
        Frame::TooLong { bytes } => {
            return Incoming::Invalid {
                id: Value::Null,
                error: RpcError::new(
                    ErrorCode::InvalidRequest,
                    format!(
                        "invalid request: a message is at most {} bytes, this line had {bytes}",
                        MAX_MESSAGE_BYTES
                    ),
                ),
            };
        }
        Frame::Line(line) => line.strip_suffix(b"\r").unwrap_or(line),
    };
    match std::str::from_utf8(line) {
        Ok(text) => parse_line(text),
        Err(e) => {
            let lossy = String::from_utf8_lossy(line);
            let id = serde_json::from_str::<Value>(&lossy)
                .ok()
                .and_then(|v| v.get("id").cloned())
                .filter(|id| id.is_string() || id.is_number())
                .unwrap_or(Value::Null);
            Incoming::Invalid {
                id,
                error: RpcError::new(
                    ErrorCode::ParseError,
                    format!(
                        "parse error: the message is not UTF-8 (invalid byte at offset {})",
                        e.valid_up_to()
                    ),
                ),
            }
        }
    }
}

/// Whether a frame holds only white space (skipped, as blank lines are).
pub fn is_blank(frame: &Frame) -> bool {
    matches!(frame, Frame::Line(line) if line.iter().all(u8::is_ascii_whitespace))
}

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
        return invalid(
            Value::Null,
            if value.is_array() {
                "batches are not supported: send one JSON object a line"
            } else {
                "a message is one JSON object"
            },
        );
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

    async fn frames(input: &[u8], max: usize) -> Vec<Frame> {
        let mut reader = tokio::io::BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        while let Some(frame) = read_frame(&mut reader, max).await.unwrap() {
            out.push(frame);
        }
        out
    }

    #[tokio::test]
    async fn frames_are_lines_of_bytes_bounded_in_length() {
        let line = |s: &[u8]| Frame::Line(s.to_vec());
        assert_eq!(
            frames(b"ab\n\xff\xfe\n\nlast", 100).await,
            [line(b"ab"), line(b"\xff\xfe"), line(b""), line(b"last")]
        );
        // A line over the limit is dropped whole and the next one read as usual.
        assert_eq!(
            frames(b"0123456789\nok\n", 5).await,
            [Frame::TooLong { bytes: 10 }, line(b"ok")]
        );
        assert_eq!(frames(b"", 5).await, []);
    }

    #[test]
    fn malformed_frames_are_answered() {
        let invalid = |frame: Frame| match parse_frame(&frame) {
            Incoming::Invalid { id, error } => (id, error.code.code(), error.message),
            other => panic!("{other:?}"),
        };
        // Not UTF-8: a parse error, to the request's id where it can still be read.
        let (id, code, message) = invalid(Frame::Line(
            b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"\xff\"}".to_vec(),
        ));
        assert_eq!((id, code), (json!(7), -32700));
        assert!(message.contains("not UTF-8"), "{message}");
        let (id, code, _) = invalid(Frame::Line(b"\xc3\x28".to_vec()));
        assert_eq!((id, code), (Value::Null, -32700));
        let (id, code, message) = invalid(Frame::TooLong { bytes: 1 << 30 });
        assert_eq!((id, code), (Value::Null, -32600));
        assert!(message.contains("at most"), "{message}");
        let (_, code, message) = invalid(Frame::Line(
            b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]".to_vec(),
        ));
        assert_eq!(code, -32600);
        assert!(message.contains("batches are not supported"), "{message}");
        // A CRLF line is a line.
        assert!(matches!(
            parse_frame(&Frame::Line(
                b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r".to_vec()
            )),
            Incoming::Request { .. }
        ));
        assert!(is_blank(&Frame::Line(b" \t\r".to_vec())));
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
