//! The `command` protocol: a local program is the model. kforge starts it (no shell, the
//! argv as configured, in its own process group, with only the environment variables of
//! `PASSED_ENV` and the provider's `pass_env`: an allowlist, so that no secret of kforge's
//! environment reaches it unnamed),
//! writes the prompt to its stdin, closes it, and streams its stdout as the answer.
//!
//! The prompt on stdin is plain text: the system prompt, a blank line, then the
//! conversation. A single user message is written as is; a longer conversation gives each
//! message a header line `### user` / `### assistant`.
//!
//! The program may report usage on the last line of its stdout:
//! `{"kforge_usage": {"input_tokens": 1200, "output_tokens": 800, "cost_usd": 0.01}}`
//! (every field optional). That line is not part of the answer. Without it, usage is zero
//! and the cost unknown.

use std::ffi::OsString;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use super::config::ResolvedProvider;
use super::config::program_name;
use super::error::{CommandFailure, ErrorContext, ExitText, LlmError};
use super::types::{ChatRequest, StreamEvent, Usage};

/// The most stdout kept as one answer (the same cap as one event of an HTTP stream).
pub const MAX_ANSWER_BYTES: usize = super::sse::MAX_EVENT_BYTES;
/// The most stderr kept (its end) for an error message.
const MAX_STDERR_BYTES: usize = 64 * 1024;
/// The last lines of stderr an error shows.
const STDERR_LINES: usize = 20;
/// How long a program gets between SIGTERM and SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(2);
/// The key of the optional usage line.
const USAGE_KEY: &str = "{\"kforge_usage\"";

/// The variables every command provider's program gets from kforge's environment, where
/// set: where programs are, who the user is and where their home and configuration
/// directories are, the locale and terminal, temporary files, the time zone, and the
/// configuration directories of the two programs docs/llm.md shows (`claude` reads
/// `CLAUDE_CONFIG_DIR`, `codex` reads `CODEX_HOME`). A `*` ends a prefix. Everything else,
/// keys and tokens included, only when the provider's `pass_env` names it.
pub const PASSED_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "TMPDIR",
    "TZ",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
];

/// Whether variable `name` is what `pattern` names: the same name, or `PREFIX*`.
fn env_matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == pattern,
    }
}

/// The environment a command provider's program runs with: of `vars` (kforge's own),
/// those that [`PASSED_ENV`] or `pass_env` name.
pub fn program_env(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    pass_env: &[String],
) -> Vec<(OsString, OsString)> {
    vars.into_iter()
        .filter(|(name, _)| {
            name.to_str().is_some_and(|name| {
                PASSED_ENV
                    .iter()
                    .copied()
                    .chain(pass_env.iter().map(String::as_str))
                    .any(|pattern| env_matches(pattern, name))
            })
        })
        .collect()
}

/// The text written to the program's stdin.
pub fn prompt_text(req: &ChatRequest) -> String {
    let mut out = String::new();
    if let Some(system) = req.system.as_deref().filter(|s| !s.trim().is_empty()) {
        out.push_str(system.trim_end());
        out.push_str("\n\n");
    }
    match req.messages.as_slice() {
        [only] => out.push_str(&only.content),
        many => {
            for (i, m) in many.iter().enumerate() {
                if i > 0 {
                    out.push_str("\n\n");
                }
                out.push_str(&format!("### {}\n\n", m.role.as_str()));
                out.push_str(m.content.trim_end());
            }
        }
    }
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// Where `program` would be found when run: a path with a `/` as is, a bare name on
/// `PATH`; `None` when it is not there as an executable file (`kforge doctor`).
pub fn find_program(program: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let path = std::path::PathBuf::from(program);
        return executable(&path).then_some(path);
    }
    let dirs = std::env::var_os("PATH")?;
    std::env::split_paths(&dirs)
        .map(|d| d.join(program))
        .find(|p| executable(p))
}

/// Sends SIGTERM, then SIGKILL after [`KILL_GRACE`], to a process group when dropped
/// armed: a call that times out, is cancelled or fails leaves nothing running.
struct GroupKill(Option<u32>);

impl GroupKill {
    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for GroupKill {
    fn drop(&mut self) {
        let Some(pgid) = self.0.take().and_then(|p| i32::try_from(p).ok()) else {
            return;
        };
        // SAFETY: kill(2) with a negative pid signals the group the program leads; no
        // memory is involved.
        unsafe { libc::kill(-pgid, libc::SIGTERM) };
        std::thread::spawn(move || {
            std::thread::sleep(KILL_GRACE);
            // SAFETY: as above; a group already gone makes this a no-op (ESRCH).
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        });
    }
}

/// Turns stdout bytes into text events: UTF-8 split across reads is joined, and a last
/// line that may be the usage line is held back until more output or the end says.
#[derive(Default)]
struct Output {
    pending_bytes: Vec<u8>,
    held: String,
    total: usize,
    /// Whether any text other than white space was emitted.
    saw_visible: bool,
}

impl Output {
    fn push(&mut self, bytes: &[u8]) -> Option<String> {
        self.total += bytes.len();
        self.pending_bytes.extend_from_slice(bytes);
        let valid = match std::str::from_utf8(&self.pending_bytes) {
            Ok(_) => self.pending_bytes.len(),
            // An incomplete character at the end waits for the next read.
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => self.pending_bytes.len(),
        };
        let rest = self.pending_bytes.split_off(valid);
        let text = String::from_utf8_lossy(&self.pending_bytes).into_owned();
        self.pending_bytes = rest;
        self.take(text)
    }

    fn take(&mut self, text: String) -> Option<String> {
        let mut all = std::mem::take(&mut self.held);
        all.push_str(&text);
        let trimmed = all.trim_end();
        let line_start = trimmed.rfind('\n').map_or(0, |i| i + 1);
        let last = trimmed[line_start..].trim_start();
        let may_be_usage = if last.len() < USAGE_KEY.len() {
            USAGE_KEY.starts_with(last)
        } else {
            last.starts_with(USAGE_KEY)
        };
        let emit = if may_be_usage {
            self.held = all[line_start..].to_string();
            all[..line_start].to_string()
        } else {
            all
        };
        self.saw_visible |= !emit.trim().is_empty();
        (!emit.is_empty()).then_some(emit)
    }

    /// At the end: the held text (when not a usage line) and the usage, if reported.
    fn finish(&mut self) -> (Option<String>, Option<Usage>) {
        let mut tail =
            String::from_utf8_lossy(&std::mem::take(&mut self.pending_bytes)).into_owned();
        tail.insert_str(0, &std::mem::take(&mut self.held));
        if let Some(usage) = parse_usage(&tail) {
            return (None, Some(usage));
        }
        self.saw_visible |= !tail.trim().is_empty();
        ((!tail.is_empty()).then_some(tail), None)
    }
}

/// `{"kforge_usage": {...}}` as usage.
fn parse_usage(line: &str) -> Option<Usage> {
    let value: serde_json::Value = serde_json::from_str(line.trim()).ok()?;
    let u = value.get("kforge_usage")?.as_object()?;
    let n = |k: &str| u.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
    Some(Usage {
        input_tokens: n("input_tokens"),
        cached_input_tokens: n("cached_input_tokens"),
        cache_write_tokens: 0,
        output_tokens: n("output_tokens"),
        reasoning_tokens: n("reasoning_tokens"),
        reported_cost_usd: u.get("cost_usd").and_then(serde_json::Value::as_f64),
    })
}

/// The end of a program's stderr, bounded.
async fn read_tail<R: AsyncRead + Unpin>(mut r: R) -> Vec<u8> {
    let mut tail = Vec::new();
    let mut buf = [0u8; 8192];
    while let Ok(n) = r.read(&mut buf).await {
        if n == 0 {
            break;
        }
        tail.extend_from_slice(&buf[..n]);
        if tail.len() > 2 * MAX_STDERR_BYTES {
            tail.drain(..tail.len() - MAX_STDERR_BYTES);
        }
    }
    tail
}

/// The last lines of stderr for a message, without secrets.
fn stderr_excerpt(ctx: &ErrorContext, bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let last = lines[lines.len().saturating_sub(STDERR_LINES)..].join(" | ");
    // `clean` keeps the start of what it is given: give it the end.
    let chars: Vec<char> = last.chars().collect();
    let end: String = chars[chars.len().saturating_sub(400)..].iter().collect();
    ctx.clean(&end)
}

/// One call: runs the program and streams its stdout through `emit` (`Text` as it
/// arrives, then `Usage` when the program reported it).
pub(crate) async fn call(
    p: &ResolvedProvider,
    req: &ChatRequest,
    ctx: &ErrorContext,
    emit: &mut (dyn FnMut(StreamEvent) + Send),
) -> Result<(), LlmError> {
    let fail = |failure: CommandFailure| LlmError::Command {
        provider: p.name.clone(),
        failure,
    };
    let Some((program, args)) = p.command.split_first() else {
        return Err(LlmError::Config(format!(
            "provider `{}` has no command to run",
            p.name
        )));
    };
    let shown = program_name(program);
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    cmd.env_clear()
        .envs(program_env(std::env::vars_os(), &p.pass_env));
    let mut child = cmd.spawn().map_err(|e| {
        fail(CommandFailure::Spawn {
            program: program.clone(),
            message: e.to_string(),
        })
    })?;
    let mut group = GroupKill(child.id());
    tracing::info!(provider = %p.name, program = %shown, pid = child.id(), "llm command started");
    let prompt = prompt_text(req);
    let (Some(mut stdin), Some(mut stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(fail(CommandFailure::Io {
            program: shown,
            message: "no pipe to the program".into(),
        }));
    };
    let write = async move {
        // A program that does not read its stdin closes the pipe: not an error here.
        let _ = stdin.write_all(prompt.as_bytes()).await;
        let _ = stdin.shutdown().await;
        drop(stdin);
        Ok::<(), CommandFailure>(())
    };
    let mut out = Output::default();
    let read = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = stdout
                .read(&mut buf)
                .await
                .map_err(|e| CommandFailure::Io {
                    program: shown.clone(),
                    message: e.to_string(),
                })?;
            if n == 0 {
                return Ok(());
            }
            if out.total + n > MAX_ANSWER_BYTES {
                return Err(CommandFailure::TooLarge {
                    program: shown.clone(),
                    limit: MAX_ANSWER_BYTES,
                });
            }
            if let Some(text) = out.push(&buf[..n]) {
                emit(StreamEvent::Text(text));
            }
        }
    };
    let errors = async { Ok::<Vec<u8>, CommandFailure>(read_tail(stderr).await) };
    let work = async {
        let ((), (), stderr) = tokio::try_join!(write, read, errors)?;
        let status = child.wait().await.map_err(|e| CommandFailure::Io {
            program: shown.clone(),
            message: e.to_string(),
        })?;
        Ok::<_, CommandFailure>((status, stderr))
    };
    let after = p
        .wall_timeout
        .unwrap_or(super::config::DEFAULT_COMMAND_TIMEOUT);
    let (status, stderr) = match tokio::time::timeout(after, work).await {
        Err(_) => {
            return Err(fail(CommandFailure::TimedOut {
                program: shown,
                after,
            }));
        }
        Ok(r) => r.map_err(fail)?,
    };
    // The leader is reaped: its pid may be reused, so the group is not signalled again.
    group.disarm();
    let (tail, usage) = out.finish();
    if let Some(text) = tail {
        emit(StreamEvent::Text(text));
    }
    if !status.success() {
        use std::os::unix::process::ExitStatusExt;
        let status = match (status.code(), status.signal()) {
            (Some(c), _) => ExitText::Code(c),
            (None, Some(s)) => ExitText::Signal(s),
            (None, None) => ExitText::Code(-1),
        };
        return Err(fail(CommandFailure::Exited {
            program: shown,
            status,
            stderr: stderr_excerpt(ctx, &stderr),
        }));
    }
    if !out.saw_visible {
        return Err(fail(CommandFailure::Silent {
            program: shown,
            stderr: stderr_excerpt(ctx, &stderr),
        }));
    }
    if let Some(usage) = usage {
        emit(StreamEvent::Usage(usage));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::llm::config::ProviderKind;
    use crate::llm::types::{CostSource, Message};
    use crate::llm::{Completion, LlmClient};

    /// A `#!/bin/sh` script named `name` in `dir`, executable.
    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn provider(argv: &[&str], timeout: Option<Duration>) -> ResolvedProvider {
        let mut p = ResolvedProvider::new("stub", ProviderKind::Command, "", "stub");
        p.command = argv.iter().map(|s| s.to_string()).collect();
        p.wall_timeout = timeout;
        p
    }

    async fn ask(p: ResolvedProvider, cancel: &CancellationToken) -> Result<Completion, LlmError> {
        let req = ChatRequest {
            system: Some("You write Triton kernels.".into()),
            messages: vec![Message::user("Write relu.")],
            ..ChatRequest::default()
        };
        let client = LlmClient::new(p).unwrap();
        client.complete(&req, cancel, |_| {}).await
    }

    fn failure(r: Result<Completion, LlmError>) -> CommandFailure {
        match r {
            Err(LlmError::Command { failure, .. }) => failure,
            other => panic!("expected a command failure, got {other:?}"),
        }
    }

    /// Waits until `pid` is gone (or a zombie), at most 10 s.
    async fn gone(pid: i32) -> bool {
        for _ in 0..100 {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
            let alive = state.is_some_and(|s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
            });
            if !alive {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    async fn read_pid(file: &Path) -> i32 {
        for _ in 0..100 {
            if let Some(pid) = std::fs::read_to_string(file)
                .ok()
                .and_then(|t| t.trim().parse().ok())
            {
                return pid;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the stub never wrote its pid");
    }

    #[test]
    fn programs_are_found_on_path_or_by_their_path() {
        assert!(find_program("sh").is_some());
        assert!(find_program("kforge-no-such-program").is_none());
        let dir = tempfile::tempdir().unwrap();
        let stub = script(dir.path(), "stub", "true");
        assert_eq!(find_program(stub.to_str().unwrap()), Some(stub.clone()));
        std::fs::write(dir.path().join("plain"), "x").unwrap();
        assert!(find_program(dir.path().join("plain").to_str().unwrap()).is_none());
    }

    #[test]
    fn the_program_gets_only_the_variables_allowed() {
        let vars = [
            ("PATH", "/usr/bin"),
            ("HOME", "/home/me"),
            ("LC_ALL", "C.UTF-8"),
            ("GEMINI_API_KEY", "g"),
            ("HF_TOKEN", "h"),
            ("KFORGE_PROVIDER", "k"),
            ("CLAUDE_CODE_USE_BEDROCK", "1"),
            ("MY_TOOL_HOME", "/opt/tool"),
            ("MY_TOOLBOX", "x"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let names = |pass: &[&str]| -> Vec<String> {
            let pass: Vec<String> = pass.iter().map(|s| s.to_string()).collect();
            program_env(vars.clone(), &pass)
                .into_iter()
                .map(|(k, _)| k.into_string().unwrap())
                .collect()
        };
        assert_eq!(names(&[]), ["PATH", "HOME", "LC_ALL"]);
        assert_eq!(
            names(&["MY_TOOL_HOME", "CLAUDE_CODE_*"]),
            [
                "PATH",
                "HOME",
                "LC_ALL",
                "CLAUDE_CODE_USE_BEDROCK",
                "MY_TOOL_HOME"
            ]
        );
    }

    #[test]
    fn the_prompt_is_the_system_prompt_a_blank_line_and_the_user_prompt() {
        let req = ChatRequest::prompt("Write relu.").with_system("Be brief.");
        assert_eq!(prompt_text(&req), "Be brief.\n\nWrite relu.\n");
        let mut talk = ChatRequest::prompt("first");
        talk.messages.push(Message::assistant("answer"));
        talk.messages.push(Message::user("again"));
        assert_eq!(
            prompt_text(&talk),
            "### user\n\nfirst\n\n### assistant\n\nanswer\n\n### user\n\nagain\n"
        );
    }

    #[test]
    fn output_joins_split_characters_and_holds_back_only_a_usage_line() {
        let mut out = Output::default();
        let bytes = "é\n".as_bytes();
        assert_eq!(out.push(&bytes[..1]), None);
        assert_eq!(out.push(&bytes[1..]).as_deref(), Some("é\n"));
        // A line that starts like the usage line waits; more text releases it.
        assert_eq!(out.push(b"{\"kforge").as_deref(), None);
        assert_eq!(
            out.push(b"\"x\nmore").as_deref(),
            Some("{\"kforge\"x\nmore")
        );
        assert_eq!(
            out.push(b"\n{\"kforge_usage\": {\"output_tokens\": 7}}\n")
                .as_deref(),
            Some("\n")
        );
        let (tail, usage) = out.finish();
        assert_eq!(tail, None);
        assert_eq!(usage.unwrap().output_tokens, 7);
        // Not valid JSON at the end: it is text after all.
        let mut out = Output::default();
        assert_eq!(out.push(b"{\"kforge_usage\": oops").as_deref(), None);
        assert_eq!(out.finish().0.as_deref(), Some("{\"kforge_usage\": oops"));
    }

    #[tokio::test]
    async fn an_answer_streams_from_stdout_with_the_prompt_on_stdin_and_no_cost() {
        let dir = tempfile::tempdir().unwrap();
        let seen = dir.path().join("stdin.txt");
        let stub = script(
            dir.path(),
            "answer",
            &format!(
                "cat > '{}'\necho \"cargo=${{CARGO_PKG_NAME:-unset}} args=$*\"\nprintf '```python\\nprint(1)\\n```\\n'",
                seen.display()
            ),
        );
        // Cargo sets CARGO_PKG_NAME for the tests; the program gets no such variable.
        assert!(std::env::var_os("CARGO_PKG_NAME").is_some());
        let p = provider(&[stub.to_str().unwrap(), "-p", "two words"], None);
        let mut texts = Vec::new();
        let req = ChatRequest::prompt("Write relu.").with_system("You write Triton kernels.");
        let c = LlmClient::new(p)
            .unwrap()
            .complete(&req, &CancellationToken::new(), |ev| {
                if let StreamEvent::Text(t) = ev {
                    texts.push(t.clone());
                }
            })
            .await
            .unwrap();
        assert_eq!(
            c.text,
            "cargo=unset args=-p two words\n```python\nprint(1)\n```\n"
        );
        assert_eq!(texts.concat(), c.text, "the text came as events");
        assert_eq!(c.cost, None, "cost unknown");
        assert_eq!(c.usage, Usage::default());
        assert_eq!(
            std::fs::read_to_string(&seen).unwrap(),
            "You write Triton kernels.\n\nWrite relu.\n"
        );
    }

    #[tokio::test]
    async fn a_usage_line_is_read_and_kept_out_of_the_answer() {
        let dir = tempfile::tempdir().unwrap();
        let stub = script(
            dir.path(),
            "usage",
            "cat > /dev/null\necho answer\necho '{\"kforge_usage\": {\"input_tokens\": 10, \"output_tokens\": 5, \"cost_usd\": 0.25}}'",
        );
        let c = ask(
            provider(&[stub.to_str().unwrap()], None),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        assert_eq!(c.text, "answer\n");
        assert_eq!((c.usage.input_tokens, c.usage.output_tokens), (10, 5));
        let cost = c.cost.unwrap();
        assert_eq!((cost.usd, cost.source), (0.25, CostSource::Reported));
    }

    #[tokio::test]
    async fn a_non_zero_exit_reports_the_code_and_the_end_of_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let stub = script(
            dir.path(),
            "fails",
            "cat > /dev/null\necho 'partial'\necho 'first line' >&2\necho 'boom: no credit left' >&2\nexit 3",
        );
        let f = failure(
            ask(
                provider(&[stub.to_str().unwrap()], None),
                &CancellationToken::new(),
            )
            .await,
        );
        let CommandFailure::Exited { status, stderr, .. } = &f else {
            panic!("{f:?}");
        };
        assert_eq!(*status, ExitText::Code(3));
        assert!(stderr.ends_with("boom: no credit left"), "{stderr}");
        let shown = f.to_string();
        assert!(shown.contains("exited with code 3"), "{shown}");
    }

    #[tokio::test]
    async fn a_program_that_prints_nothing_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let stub = script(dir.path(), "silent", "cat > /dev/null\necho '  '");
        let f = failure(
            ask(
                provider(&[stub.to_str().unwrap()], None),
                &CancellationToken::new(),
            )
            .await,
        );
        assert!(matches!(f, CommandFailure::Silent { .. }), "{f:?}");
        assert!(f.to_string().contains("printed nothing"), "{f}");
    }

    #[tokio::test]
    async fn a_missing_program_cannot_start() {
        let f = failure(
            ask(
                provider(&["/nonexistent/kforge-no-such-program"], None),
                &CancellationToken::new(),
            )
            .await,
        );
        assert!(matches!(f, CommandFailure::Spawn { .. }), "{f:?}");
    }

    #[tokio::test]
    async fn a_hanging_program_times_out_and_its_process_group_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let stub = script(
            dir.path(),
            "hangs",
            &format!("sleep 1000 &\necho $! > '{}'\nwait", pidfile.display()),
        );
        let p = provider(&[stub.to_str().unwrap()], Some(Duration::from_secs(1)));
        let f = failure(ask(p, &CancellationToken::new()).await);
        let CommandFailure::TimedOut { after, .. } = &f else {
            panic!("{f:?}");
        };
        assert_eq!(*after, Duration::from_secs(1));
        assert!(f.to_string().contains("wall_timeout_s"), "{f}");
        let sleeper = read_pid(&pidfile).await;
        assert!(
            gone(sleeper).await,
            "the program's child {sleeper} still runs"
        );
    }

    #[tokio::test]
    async fn cancelling_kills_the_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let stub = script(
            dir.path(),
            "hangs",
            &format!(
                "cat > /dev/null\nsleep 1000 &\necho $! > '{}'\nwait",
                pidfile.display()
            ),
        );
        let cancel = CancellationToken::new();
        let call = ask(provider(&[stub.to_str().unwrap()], None), &cancel);
        let canceller = async {
            let pid = read_pid(&pidfile).await;
            cancel.cancel();
            pid
        };
        let (result, sleeper) = tokio::join!(call, canceller);
        assert!(matches!(result, Err(LlmError::Cancelled)), "{result:?}");
        assert!(
            gone(sleeper).await,
            "the program's child {sleeper} still runs"
        );
    }
}
