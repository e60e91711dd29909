//! `kforge mcp` driven by a client written here, as a coding agent drives it: newline-
//! delimited JSON-RPC 2.0 on the server's stdin/stdout. initialize, the initialized
//! notification, tools/list, one `eval` on a CPU fixture, the session tools on a golden
//! session, protocol errors, a tool error, and a clean exit when stdin closes.

mod eval_common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use eval_common::{fixtures, isolate};
use serde_json::{Value, json};

struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    notifications: Vec<Value>,
}

impl Client {
    fn start() -> Client {
        let mut command = Command::new(env!("CARGO_BIN_EXE_kforge"));
        command
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        isolate(&mut command);
        let mut child = command.spawn().unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Client {
            child,
            stdin,
            stdout,
            notifications: Vec::new(),
        }
    }

    fn send_line(&mut self, line: &str) {
        self.send_bytes(line.as_bytes());
    }

    fn send_bytes(&mut self, line: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn send(&mut self, message: Value) {
        self.send_line(&message.to_string());
    }

    /// The next message from the server: one line, one JSON object.
    fn receive(&mut self) -> Value {
        let mut line = String::new();
        let n = self.stdout.read_line(&mut line).unwrap();
        assert!(n > 0, "the server closed stdout");
        assert!(line.ends_with('\n'));
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not one JSON message a line ({e}): {line}"))
    }

    /// The next response; the notifications before it are kept in `notifications`.
    fn reply(&mut self) -> Value {
        loop {
            let message = self.receive();
            if message.get("id").is_some() {
                return message;
            }
            self.notifications.push(message);
        }
    }

    fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let reply = self.reply();
        assert_eq!(reply["jsonrpc"], "2.0", "{reply}");
        assert_eq!(reply["id"], id, "{reply}");
        reply
    }

    fn call(&mut self, id: u64, tool: &str, arguments: Value) -> Value {
        let reply = self.request(
            id,
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
        );
        reply["result"].clone()
    }
}

fn text_of(result: &Value) -> &str {
    assert_eq!(result["content"][0]["type"], "text", "{result}");
    result["content"][0]["text"].as_str().unwrap()
}

#[test]
fn an_agent_initializes_lists_evaluates_reads_a_session_and_gets_errors() {
    let f = fixtures();
    let mut c = Client::start();

    let init = c.request(
        1,
        "initialize",
        json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "mcp_e2e", "version": "0"},
        }),
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
    assert_eq!(init["result"]["capabilities"]["tools"], json!({}));
    assert_eq!(init["result"]["serverInfo"]["name"], "kforge");
    // A notification: no reply (the next reply read below is ping's).
    c.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    assert_eq!(c.request(2, "ping", json!({}))["result"], json!({}));

    let list = c.request(3, "tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["eval", "task_check", "session_summary", "candidate_code"]
    );
    for t in tools {
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
        assert_eq!(t["outputSchema"]["type"], "object", "{t}");
        assert!(!t["description"].as_str().unwrap().is_empty());
        assert!(!t["title"].as_str().unwrap().is_empty());
        assert!(t["annotations"]["readOnlyHint"].is_boolean(), "{t}");
    }

    // One evaluation on the CPU: the verdict as `kforge eval` prints it, the result as JSON,
    // and its phases as progress notifications since the call asks for them.
    let reply = c.request(
        4,
        "tools/call",
        json!({
            "name": "eval",
            "arguments": {
                "task": f.join("tasks/relu.py"),
                "kernel": f.join("kernels/relu_ok.py"),
                "device": "cpu",
            },
            "_meta": {"progressToken": "p4"},
        }),
    );
    let result = reply["result"].clone();
    let progress: Vec<&Value> = c
        .notifications
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .collect();
    assert!(!progress.is_empty(), "{:?}", c.notifications);
    let progress_sent = progress.len();
    // Steps: the set-up, 5 trials, the signed-input trial; rising with every notification.
    let mut last = -1.0;
    for n in &progress {
        assert_eq!(n["params"]["progressToken"], "p4", "{n}");
        assert_eq!(n["params"]["total"], 7, "{n}");
        let p = n["params"]["progress"].as_f64().unwrap();
        assert!(p > last && p < 7.0, "{n} after {last}");
        last = p;
        assert!(n["params"]["message"].is_string(), "{n}");
    }
    // The signed-input trial was reached (the oracle and the compiled reading follow it
    // within its step).
    assert!(
        progress
            .iter()
            .any(|n| n["params"]["progress"] == 6.0
                && n["params"]["message"] == "signed-input trial"),
        "the signed-input trial was reached: {progress:?}"
    );
    assert!((6.0..7.0).contains(&last), "{progress:?}");
    assert_eq!(result["isError"], false, "{result}");
    let verdict = text_of(&result);
    assert!(
        verdict.contains("CORRECT  5/5 trials, signed-input trial\n"),
        "{verdict}"
    );
    assert!(verdict.contains("audit (6 forwards): "), "{verdict}");
    assert!(verdict.contains("\nsandbox "), "{verdict}");
    let structured = &result["structuredContent"];
    assert_eq!(structured["correct"], true, "{structured}");
    assert_eq!(structured["status"], "correct");
    assert_eq!(structured["device"]["kind"], "cpu");

    // The kernel as text rather than a path, and a failing one: a verdict, not a tool error.
    let kernel = std::fs::read_to_string(f.join("kernels/relu_identity.py")).unwrap();
    let result = c.call(
        5,
        "eval",
        json!({"task": f.join("tasks/relu.py"), "kernel_source": kernel, "device": "cpu", "trials": 2}),
    );
    assert_eq!(result["isError"], false, "{result}");
    assert!(
        text_of(&result).contains("FAILED  mismatch: signed-input trial"),
        "{result}"
    );
    assert_eq!(result["structuredContent"]["correct"], false);

    // Missing arguments: a tool error the agent can read and correct (not a protocol error).
    let result = c.call(6, "eval", json!({"task": f.join("tasks/relu.py")}));
    assert_eq!(result["isError"], true, "{result}");
    assert!(text_of(&result).contains("missing `kernel`"), "{result}");

    // The session tools on a golden session, which they only read.
    let session = f.join("sessions/softmax");
    let events_before = std::fs::read(session.join("events.jsonl")).unwrap();
    let summary = c.call(7, "session_summary", json!({"session": session}));
    assert_eq!(summary["isError"], false, "{summary}");
    let s = &summary["structuredContent"];
    assert_eq!(s["task"], "softmax", "{s}");
    assert_eq!(s["candidates"].as_array().unwrap().len(), 9, "{s}");
    let best = s["best"]["id"].as_u64().expect("a best candidate");
    assert!(
        text_of(&summary).contains(&format!("best: #{best} ")),
        "{summary}"
    );
    let code = c.call(
        8,
        "candidate_code",
        json!({"session": session, "candidate": best}),
    );
    assert_eq!(code["isError"], false, "{code}");
    let file = s["best"]["file"].as_str().unwrap();
    assert_eq!(
        text_of(&code),
        std::fs::read_to_string(session.join(file)).unwrap()
    );
    let missing = c.call(
        9,
        "candidate_code",
        json!({"session": session, "candidate": "#99"}),
    );
    assert_eq!(missing["isError"], true, "{missing}");
    assert_eq!(
        std::fs::read(session.join("events.jsonl")).unwrap(),
        events_before
    );

    // Calls run off the reader: a ping sent after an evaluation is answered first; the
    // cancelled evaluation gets no response at all, as the spec says. It is given many
    // trials so that it is still running when the cancel comes, on a loaded host too (at 5
    // trials it once finished, in ~2 s, before the cancel was read).
    c.send(json!({
        "jsonrpc": "2.0", "id": 20, "method": "tools/call",
        "params": {"name": "eval", "arguments": {
            "task": f.join("tasks/relu.py"), "kernel": f.join("kernels/relu_ok.py"), "device": "cpu",
            "trials": 200,
        }},
    }));
    assert_eq!(c.request(21, "ping", json!({}))["result"], json!({}));
    c.send(json!({
        "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 20, "reason": "the agent moved on"},
    }));

    // The task check `kforge run` does before a session.
    let check = c.call(
        22,
        "task_check",
        json!({"task": f.join("tasks/relu.py"), "device": "cpu"}),
    );
    assert_eq!(check["isError"], false, "{check}");
    assert_eq!(check["structuredContent"]["status"], "ready", "{check}");
    assert!(text_of(&check).contains("task relu OK on cpu"), "{check}");

    // A line that is not UTF-8 while an evaluation runs: an error, and the evaluation goes
    // on to its verdict (it once ended the server).
    c.send(json!({
        "jsonrpc": "2.0", "id": 23, "method": "tools/call",
        "params": {"name": "eval", "arguments": {
            "task": f.join("tasks/relu.py"), "kernel": f.join("kernels/relu_ok.py"), "device": "cpu",
            "trials": 2,
        }},
    }));
    c.send_bytes(b"{\"jsonrpc\": \"2.0\", \"method\": \"\xff\xfe\"}");
    let garbled = c.reply();
    assert_eq!(garbled["error"]["code"], -32700, "{garbled}");
    assert_eq!(garbled["id"], Value::Null, "{garbled}");
    let survived = c.reply();
    assert_eq!(survived["id"], 23, "{survived}");
    assert_eq!(survived["result"]["structuredContent"]["correct"], true);

    // Arguments by position: refused as a malformed request.
    let positional = c.request(
        24,
        "tools/call",
        json!({"name": "candidate_code", "arguments": [session, best]}),
    );
    assert_eq!(positional["error"]["code"], -32602, "{positional}");

    // Protocol errors: not JSON (id null), an unknown method, an unknown tool.
    c.send_line("{\"jsonrpc\": \"2.0\", \"id\": 10, \"method\": ");
    let parse = c.reply();
    assert_eq!(parse["id"], Value::Null, "{parse}");
    assert_eq!(parse["error"]["code"], -32700, "{parse}");
    let unknown = c.request(11, "prompts/get", json!({}));
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    let no_tool = c.request(12, "tools/call", json!({"name": "rm_rf", "arguments": {}}));
    assert_eq!(no_tool["error"]["code"], -32602, "{no_tool}");

    // No progress for a call after its response.
    let p4 = |n: &&Value| n["params"]["progressToken"] == "p4";
    assert_eq!(c.notifications.iter().filter(p4).count(), progress_sent);

    // Closing stdin ends the server, cleanly.
    drop(c.stdin.take());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut c.stdout, &mut rest).unwrap();
    assert_eq!(rest, "", "nothing after the last reply");
    let status = c.child.wait().unwrap();
    assert!(status.success(), "{status}");
}
