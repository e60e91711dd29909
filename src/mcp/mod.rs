//! `kforge mcp`: a Model Context Protocol server over stdio (docs/mcp.md). JSON-RPC 2.0
//! framed by hand (`jsonrpc`): `initialize`, `ping`, `tools/list`, `tools/call`, and the
//! `notifications/initialized` and `notifications/cancelled` notifications, and
//! `notifications/progress` for a call that asks for it. Tool calls run
//! off the reader loop, so `ping` and other calls are answered while an evaluation runs.
//! Only protocol messages go to stdout; everything else goes to stderr and the log.

pub mod catalog;
pub mod jsonrpc;
pub mod progress;
pub mod result;
mod session_tools;
pub mod tools;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use jsonrpc::{ErrorCode, Incoming, RpcError};
use progress::ProgressUpdate;
use tools::{Tool, ToolOutcome, Tools};

/// The protocol revisions this server speaks, newest first: a client's revision among them
/// is answered with, any other gets the newest (the client then decides whether it can go
/// on, as the lifecycle says).
pub const PROTOCOL_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The methods served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Initialize,
    Ping,
    ToolsList,
    ToolsCall,
}

impl Method {
    fn parse(name: &str) -> Option<Method> {
        Some(match name {
            "initialize" => Method::Initialize,
            "ping" => Method::Ping,
            "tools/list" => Method::ToolsList,
            "tools/call" => Method::ToolsCall,
            _ => return None,
        })
    }
}

/// The notifications acted on; any other is ignored, as JSON-RPC asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Notification {
    Initialized,
    Cancelled,
}

impl Notification {
    fn parse(name: &str) -> Option<Notification> {
        Some(match name {
            "notifications/initialized" => Notification::Initialized,
            "notifications/cancelled" => Notification::Cancelled,
            _ => return None,
        })
    }
}

/// What a request is answered with: now, or later by a tool call's task.
enum Reply {
    Now(Result<Value, RpcError>),
    Later,
}

/// The revision answered to a client that asks for `asked`.
pub fn negotiate(asked: Option<&str>) -> &'static str {
    PROTOCOL_VERSIONS
        .into_iter()
        .find(|v| Some(*v) == asked)
        .unwrap_or(PROTOCOL_VERSIONS[0])
}

fn initialize_result(params: &Value) -> Value {
    let version = negotiate(params.get("protocolVersion").and_then(Value::as_str));
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {}},
        "serverInfo": {
            "name": "kforge",
            "title": "kforge",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "LLM-driven Triton kernel optimization: the trusted evaluator and sessions",
        },
        "instructions": "kforge's trusted evaluator for Triton kernels on KernelBench tasks: \
            `eval` a kernel against a task, `task_check` a task, read sessions with \
            `session_summary` and `candidate_code`. Paths are relative to the server's \
            working directory.",
    })
}

/// The server's state between messages: the tools, the output line channel and the
/// calls in flight (by request id, for cancellation).
struct Server {
    tools: Arc<Tools>,
    out: mpsc::UnboundedSender<String>,
    in_flight: Arc<Mutex<HashMap<String, CancellationToken>>>,
    calls: JoinSet<()>,
}

impl Server {
    fn send(&self, line: String) {
        // The writer is gone only when stdout is: nothing more can be said.
        let _ = self.out.send(line);
    }

    fn handle(&mut self, incoming: Incoming) {
        match incoming {
            Incoming::Request { id, method, params } => match self.request(&id, &method, params) {
                Reply::Now(Ok(result)) => self.send(jsonrpc::success_line(&id, result)),
                Reply::Now(Err(error)) => self.send(jsonrpc::error_line(&id, &error)),
                Reply::Later => {}
            },
            Incoming::Notification { method, params } => self.notification(&method, &params),
            Incoming::Response => {}
            Incoming::Invalid { id, error } => {
                tracing::debug!("mcp: {}", error.message);
                self.send(jsonrpc::error_line(&id, &error));
            }
        }
    }

    fn request(&mut self, id: &Value, method: &str, params: Value) -> Reply {
        let Some(method) = Method::parse(method) else {
            return Reply::Now(Err(RpcError::new(
                ErrorCode::MethodNotFound,
                format!("method not found: {method}"),
            )));
        };
        Reply::Now(Ok(match method {
            Method::Initialize => initialize_result(&params),
            Method::Ping => json!({}),
            Method::ToolsList => {
                json!({"tools": Tool::ALL.iter().map(|t| t.describe()).collect::<Vec<_>>()})
            }
            Method::ToolsCall => return self.call(id, params),
        }))
    }

    fn call(&mut self, id: &Value, params: Value) -> Reply {
        if !params.is_object() {
            return Reply::Now(Err(RpcError::new(
                ErrorCode::InvalidParams,
                "tools/call params must be an object: {\"name\": TOOL, \"arguments\": {...}}",
            )));
        }
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Reply::Now(Err(RpcError::new(
                ErrorCode::InvalidParams,
                "tools/call needs `name`, the tool's name",
            )));
        };
        let Some(tool) = Tool::from_name(name) else {
            return Reply::Now(Err(RpcError::new(
                ErrorCode::InvalidParams,
                format!("unknown tool: {name}"),
            )));
        };
        // Arguments are named: an array (positional) or any other value is a malformed
        // request, not something to guess at.
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => json!({}),
            Some(object @ Value::Object(_)) => object.clone(),
            Some(other) => {
                let what = if other.is_array() {
                    "an array"
                } else {
                    "not an object"
                };
                return Reply::Now(Err(RpcError::new(
                    ErrorCode::InvalidParams,
                    format!(
                        "`arguments` of {name} is {what}: it must be an object of named arguments, \
                         e.g. {{\"session\": \"runs/s1\"}} (tools/list gives each tool's inputSchema)"
                    ),
                )));
            }
        };
        let cancel = CancellationToken::new();
        let key = id.to_string();
        self.in_flight
            .lock()
            .unwrap()
            .insert(key.clone(), cancel.clone());
        let (tools, out, in_flight, id) = (
            self.tools.clone(),
            self.out.clone(),
            self.in_flight.clone(),
            id.clone(),
        );
        // A client that asks for progress (`_meta.progressToken`) gets the evaluation's
        // phases as `notifications/progress`, none after the response: the response is sent
        // with `answered` set, under its lock.
        let answered = Arc::new(Mutex::new(false));
        let progress = params
            .get("_meta")
            .and_then(|m| m.get("progressToken"))
            .filter(|t| t.is_string() || t.is_number())
            .map(|token| self.progress_forwarder(token.clone(), answered.clone()));
        tracing::info!(tool = name, "mcp: tool call");
        self.calls.spawn(async move {
            let outcome = tools.call(tool, arguments, cancel, progress).await;
            in_flight.lock().unwrap().remove(&key);
            let mut answered = answered.lock().unwrap();
            *answered = true;
            match outcome {
                ToolOutcome::Done(result) => {
                    let _ = out.send(jsonrpc::success_line(&id, result.to_json()));
                }
                // A cancelled request gets no response (the client has forgotten it).
                ToolOutcome::Cancelled => tracing::info!("mcp: call {key} cancelled"),
            }
        });
        Reply::Later
    }

    /// A sender of progress that becomes `notifications/progress` for `token` until the
    /// call is `answered`; it ends when the sender is dropped.
    fn progress_forwarder(
        &mut self,
        token: Value,
        answered: Arc<Mutex<bool>>,
    ) -> mpsc::UnboundedSender<ProgressUpdate> {
        let (tx, mut rx) = mpsc::unbounded_channel::<ProgressUpdate>();
        let out = self.out.clone();
        self.calls.spawn(async move {
            while let Some(update) = rx.recv().await {
                let answered = answered.lock().unwrap();
                if *answered {
                    break;
                }
                let _ = out.send(jsonrpc::notification_line(
                    "notifications/progress",
                    json!({
                        "progressToken": token,
                        "progress": number(update.progress),
                        "total": update.total,
                        "message": update.message,
                    }),
                ));
                drop(answered);
            }
        });
        tx
    }

    fn notification(&self, method: &str, params: &Value) {
        match Notification::parse(method) {
            Some(Notification::Initialized) => tracing::info!("mcp: client initialized"),
            Some(Notification::Cancelled) => {
                if let Some(id) = params.get("requestId")
                    && let Some(cancel) = self.in_flight.lock().unwrap().get(&id.to_string())
                {
                    cancel.cancel();
                }
            }
            None => tracing::debug!("mcp: notification {method} ignored"),
        }
    }

    /// At the end of input: cancels the calls in flight, waits for them, stops the
    /// evaluator.
    async fn finish(mut self) {
        for cancel in self.in_flight.lock().unwrap().values() {
            cancel.cancel();
        }
        while self.calls.join_next().await.is_some() {}
        self.tools.shutdown().await;
    }
}

/// A whole number as an integer in JSON (`3`, not `3.0`), others as they are.
fn number(x: f64) -> Value {
    if x.fract() == 0.0 && x >= 0.0 && x < 2f64.powi(53) {
        json!(x as u64)
    } else {
        json!(x)
    }
}

/// Serves MCP on `input`/`output` until the input ends.
pub async fn serve<R, W>(input: R, mut output: W, tools: Tools) -> Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out, mut lines_out) = mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(async move {
        while let Some(line) = lines_out.recv().await {
            output.write_all(line.as_bytes()).await?;
            output.write_all(b"\n").await?;
            output.flush().await?;
        }
        anyhow::Ok(())
    });
    let mut server = Server {
        tools: Arc::new(tools),
        out,
        in_flight: Arc::default(),
        calls: JoinSet::new(),
    };
    let mut input = input;
    while let Some(frame) = jsonrpc::read_frame(&mut input, jsonrpc::MAX_MESSAGE_BYTES).await? {
        if jsonrpc::is_blank(&frame) {
            continue;
        }
        server.handle(jsonrpc::parse_frame(&frame));
        // Reap finished calls as we go.
        while server.calls.try_join_next().is_some() {}
    }
    server.finish().await;
    writer.await??;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    /// Runs the server on these input lines and returns its output lines as JSON.
    async fn exchange(lines: &[&str]) -> Vec<Value> {
        let input = lines.join("\n") + "\n";
        exchange_bytes(input.as_bytes()).await
    }

    /// Runs the server on this input and returns its output lines as JSON.
    async fn exchange_bytes(input: &[u8]) -> Vec<Value> {
        let (client, server_side) = tokio::io::duplex(1 << 16);
        let (mut read, write) = tokio::io::split(client);
        drop(write);
        serve(
            tokio::io::BufReader::new(input),
            server_side,
            Tools::new(Config::default()),
        )
        .await
        .unwrap();
        let mut text = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut read, &mut text)
            .await
            .unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[tokio::test]
    async fn initialize_echoes_a_known_version_and_offers_tools() {
        let out = exchange(&[
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"1999-01-01"}}"#,
        ])
        .await;
        assert_eq!(out.len(), 2, "the notification gets no reply: {out:?}");
        assert_eq!(out[0]["id"], 1);
        assert_eq!(out[0]["result"]["protocolVersion"], "2025-03-26");
        assert_eq!(out[0]["result"]["capabilities"], json!({"tools": {}}));
        assert_eq!(out[0]["result"]["serverInfo"]["name"], "kforge");
        assert_eq!(out[1]["result"]["protocolVersion"], PROTOCOL_VERSIONS[0]);
    }

    #[test]
    fn the_current_revision_is_spoken_and_older_ones_negotiated_down_to() {
        assert_eq!(negotiate(Some("2025-11-25")), "2025-11-25");
        for older in ["2025-06-18", "2025-03-26", "2024-11-05"] {
            assert_eq!(negotiate(Some(older)), older);
        }
        // A revision this server does not know (newer, or garbage): its latest.
        assert_eq!(negotiate(Some("2026-07-28")), "2025-11-25");
        assert_eq!(negotiate(None), "2025-11-25");
    }

    #[tokio::test]
    async fn malformed_input_is_answered_and_the_server_keeps_serving() {
        let mut input = Vec::new();
        input.extend_from_slice(
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":\"\xff\"}}\n",
        );
        input.extend_from_slice(b"\xc0\xaf\xfe garbage\n");
        input.extend_from_slice(b"[{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}]\n");
        input.extend_from_slice(b"\"just a string\"\n");
        input.extend_from_slice(&vec![b'x'; jsonrpc::MAX_MESSAGE_BYTES + 10]);
        input.extend_from_slice(b"\n{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}\n");
        let out = exchange_bytes(&input).await;
        let codes: Vec<(Value, i64)> = out
            .iter()
            .map(|m| (m["id"].clone(), m["error"]["code"].as_i64().unwrap_or(0)))
            .collect();
        assert_eq!(
            codes,
            [
                (json!(1), -32700),
                (Value::Null, -32700),
                (Value::Null, -32600),
                (Value::Null, -32600),
                (Value::Null, -32600),
                (json!(3), 0),
            ],
            "{out:?}"
        );
        assert_eq!(out[5]["result"], json!({}));
    }

    #[tokio::test]
    async fn tool_arguments_are_named_or_refused() {
        let out = exchange(&[
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"candidate_code","arguments":["runs/s1", 3]}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"session_summary","arguments":"runs/s1"}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":["session_summary", {}]}"#,
        ])
        .await;
        assert_eq!(out.len(), 3, "{out:?}");
        for reply in &out {
            assert_eq!(reply["error"]["code"], -32602, "{reply}");
        }
        let message = out[0]["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("is an array: it must be an object of named arguments"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn errors_and_reads_without_an_evaluator() {
        let out = exchange(&[
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
            "{oops",
            r#"{"jsonrpc":"2.0","id":3,"method":"resources/list"}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"nope"}}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"session_summary","arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/whatever"}"#,
        ])
        .await;
        let by_id = |id: Value| {
            out.iter()
                .find(|m| m["id"] == id)
                .unwrap_or_else(|| panic!("no reply to {id}: {out:?}"))
        };
        assert_eq!(out.len(), 6, "{out:?}");
        assert_eq!(by_id(json!(1))["result"], json!({}));
        let names: Vec<_> = by_id(json!(2))["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            names,
            ["eval", "task_check", "session_summary", "candidate_code"]
        );
        for tool in by_id(json!(2))["result"]["tools"].as_array().unwrap() {
            assert!(tool["outputSchema"].is_object(), "{tool}");
            assert!(tool["annotations"].is_object(), "{tool}");
        }
        assert_eq!(by_id(Value::Null)["error"]["code"], -32700);
        assert_eq!(by_id(json!(3))["error"]["code"], -32601);
        assert_eq!(by_id(json!(4))["error"]["code"], -32602);
        let missing = &by_id(json!(5))["result"];
        assert_eq!(missing["isError"], true, "{missing}");
        assert!(
            missing["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("invalid arguments"),
            "{missing}"
        );
    }
}
