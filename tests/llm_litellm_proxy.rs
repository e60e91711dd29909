//! Conformance with a real, widely used gateway: the LiteLLM proxy from PyPI, serving
//! `mock_response` models (no model, no network) over OpenAI `/v1/chat/completions` and
//! Anthropic `/v1/messages`, driven through the `kforge ask` binary. Every other LLM test
//! talks to servers written by us, shaped after our reading of the protocols; this one
//! checks kforge against what a gateway really sends.
//!
//! LiteLLM is installed into a venv under CARGO_TARGET_TMPDIR (reused while it works, with
//! pip's cache beside it: nothing is written to the user's caches). Where python3, venv or
//! pip cannot install it (offline, no python), the test prints why and passes. It is one
//! `#[test]`, so that one install and one proxy serve every check; a lock file keeps two
//! test processes from installing at once.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The LiteLLM release installed: the newest that installs from the registry reachable
/// here (1.108 and later require a newer `certifi` than it holds).
const LITELLM_VERSION: &str = "1.106.2";
/// Caps on the steps that may hang on a slow or absent network.
const VENV_TIMEOUT: Duration = Duration::from_secs(120);
const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);
/// The proxy imports a lot of Python before it listens (5 to 10 s on 2 busy cores).
const READY_TIMEOUT: Duration = Duration::from_secs(180);
/// The proxy's master key: kforge sends it as its API key, on both protocols.
const MASTER_KEY: &str = "sk-kforge-litellm-conformance";
/// What the successful mock models answer.
const OPENAI_ANSWER: &str = "```python\nprint(1)\n```";
const ANTHROPIC_ANSWER: &str = "```python\nprint(2)\n```";

/// The proxy's models. LiteLLM's own mock syntax (`litellm/main.py`,
/// `_handle_mock_potential_exceptions`): the strings `litellm.RateLimitError` and
/// `litellm.ContextWindowExceededError` raise its errors (HTTP 429 and 400).
///
/// On `/v1/messages` a `mock_response` is answered as one whole JSON message whatever
/// `stream` says (`litellm/llms/anthropic/pass_through/messages/utils.py`), so
/// `mock-claude` tests kforge's whole-answer path. For a real Anthropic event stream,
/// `claude-streamed` is an OpenAI-compatible model served by this same proxy
/// (`mock-gpt`): LiteLLM turns its chat-completion chunks into Messages events, as it does
/// for any non-Anthropic backend. Router retries and cooldowns are off, so each request
/// reaches kforge as one answer.
fn proxy_config(port: u16) -> String {
    format!(
        r#"model_list:
  - model_name: mock-gpt
    litellm_params:
      model: openai/gpt-4o
      api_key: fake
      mock_response: "```python\nprint(1)\n```"
  - model_name: mock-claude
    litellm_params:
      model: anthropic/claude-sonnet-4-5
      api_key: fake
      mock_response: "```python\nprint(2)\n```"
  - model_name: claude-streamed
    litellm_params:
      model: hosted_vllm/mock-gpt
      api_base: http://127.0.0.1:{port}/v1
      api_key: {MASTER_KEY}
  - model_name: mock-ratelimit
    litellm_params:
      model: openai/gpt-4o
      api_key: fake
      mock_response: "litellm.RateLimitError"
  - model_name: mock-toolong
    litellm_params:
      model: openai/gpt-4o
      api_key: fake
      mock_response: "litellm.ContextWindowExceededError"
router_settings:
  num_retries: 0
  disable_cooldowns: true
litellm_settings:
  num_retries: 0
"#
    )
}

#[test]
fn kforge_ask_works_through_a_real_litellm_proxy_on_both_protocols() {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let started = Instant::now();
    let venv = match install_litellm(root) {
        Ok(venv) => venv,
        Err(reason) => {
            println!("skipping: the LiteLLM proxy cannot be installed here: {reason}");
            return;
        }
    };
    println!(
        "LiteLLM {LITELLM_VERSION} ready in {:.1} s ({})",
        started.elapsed().as_secs_f64(),
        venv.display()
    );
    let dir = tempfile::tempdir_in(root).unwrap();
    let proxy = Proxy::start(&venv, dir.path());
    println!(
        "proxy listening on port {} after {:.1} s",
        proxy.port,
        proxy.ready_after.as_secs_f64()
    );
    write_kforge_config(dir.path(), proxy.port);

    // What each answer looks like on the wire, so that the cases below keep covering what
    // they say they cover if a LiteLLM release changes it.
    for (path, model, wanted) in [
        ("/v1/chat/completions", "mock-gpt", "text/event-stream"),
        ("/v1/messages", "mock-claude", "application/json"),
        ("/v1/messages", "claude-streamed", "text/event-stream"),
    ] {
        let content_type = proxy.content_type(path, model);
        assert!(
            content_type.starts_with(wanted),
            "{model} at {path}: {content_type}{}",
            proxy.log_tail()
        );
    }

    for (what, provider, model, answer, finish) in [
        (
            "streamed chunks",
            "gw-openai",
            "mock-gpt",
            OPENAI_ANSWER,
            "stop",
        ),
        (
            "a whole message",
            "gw-anthropic",
            "mock-claude",
            ANTHROPIC_ANSWER,
            "end_turn",
        ),
        (
            "streamed events",
            "gw-anthropic",
            "claude-streamed",
            OPENAI_ANSWER,
            "end_turn",
        ),
    ] {
        let out = kforge(
            dir.path(),
            &["ask", "--provider", provider, "--model", model, "Print 1."],
        );
        let (stdout, stderr) = texts(&out);
        println!("== {provider}, {model}: {what}\n{stdout}{stderr}");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{model}: {stderr}{}",
            proxy.log_tail()
        );
        assert_eq!(stdout, format!("{answer}\n"), "{model}: {stderr}");
        assert!(
            stderr.contains(&format!("provider {provider}, model {model}")),
            "{model}: {stderr}"
        );
        let (input, output) = token_counts(&stderr)
            .unwrap_or_else(|| panic!("{model}: no usage line on stderr: {stderr}"));
        assert!(
            input > 0 && output > 0,
            "{model}: usage is reported: {stderr}"
        );
        assert!(
            stderr.contains(&format!("1 attempt, finish {finish}")),
            "{model}: {stderr}"
        );
        assert_clean_exit(model, &stderr);
    }

    for provider in ["gw-openai", "gw-anthropic"] {
        // A 429 is retried (max_retries = 1 in the config), then reported with LiteLLM's text.
        let out = kforge(
            dir.path(),
            &[
                "ask",
                "--provider",
                provider,
                "--model",
                "mock-ratelimit",
                "hi",
            ],
        );
        let (stdout, stderr) = texts(&out);
        println!("== {provider}, mock-ratelimit: HTTP 429\n{stderr}");
        assert_eq!(out.status.code(), Some(1), "{provider}: {stderr}");
        assert!(stdout.is_empty(), "{provider}: {stdout}");
        assert_eq!(
            stderr.matches("retrying (attempt 2)").count(),
            1,
            "{provider}: one retry announced: {stderr}"
        );
        assert!(
            stderr.contains(&format!("\nerror: rate limited by provider `{provider}`"))
                && stderr.contains("this is a mock rate limit error"),
            "{provider}: {stderr}"
        );
        assert_clean_exit(provider, &stderr);

        // A 400 is final: no retry, the status and LiteLLM's reason in the message.
        let out = kforge(
            dir.path(),
            &[
                "ask",
                "--provider",
                provider,
                "--model",
                "mock-toolong",
                "hi",
            ],
        );
        let (stdout, stderr) = texts(&out);
        println!("== {provider}, mock-toolong: HTTP 400\n{stderr}");
        assert_eq!(out.status.code(), Some(1), "{provider}: {stderr}");
        assert!(stdout.is_empty(), "{provider}: {stdout}");
        assert!(!stderr.contains("retrying"), "{provider}: {stderr}");
        assert!(
            stderr.contains(&format!("error: provider `{provider}` answered HTTP 400"))
                && stderr.contains("mock context window exceeded error"),
            "{provider}: {stderr}"
        );
        assert_clean_exit(provider, &stderr);
    }
}

/// No panic, and the proxy's master key (kforge's API key) is not echoed anywhere.
fn assert_clean_exit(provider: &str, stderr: &str) {
    assert!(!stderr.contains("panicked"), "{provider}: {stderr}");
    assert!(!stderr.contains(MASTER_KEY), "{provider}: {stderr}");
}

/// `input N` and `output N` of the summary's `tokens:` line.
fn token_counts(stderr: &str) -> Option<(u64, u64)> {
    let line = stderr.lines().find(|l| l.starts_with("tokens: "))?;
    let after = |word: &str| -> Option<u64> {
        let rest = &line[line.find(word)? + word.len()..];
        rest.split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    Some((after("input ")?, after("output ")?))
}

fn texts(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Two providers at the proxy, one per protocol, both keyed with the master key. The
/// Anthropic base URL is the server's root: kforge appends `/v1/messages`.
fn write_kforge_config(dir: &Path, port: u16) {
    fs::create_dir_all(dir.join("config")).unwrap();
    let config = format!(
        r#"[llm]
max_retries = 1

[llm.providers.gw-openai]
protocol = "openai"
base_url = "http://127.0.0.1:{port}/v1"
model = "mock-gpt"
api_key_env = "LITELLM_KEY"

[llm.providers.gw-anthropic]
protocol = "anthropic"
base_url = "http://127.0.0.1:{port}"
model = "mock-claude"
api_key_env = "LITELLM_KEY"
"#
    );
    fs::write(dir.join("config/config.toml"), config).unwrap();
}

/// Runs the binary in `dir` with nothing of the user's environment but PATH: its config
/// and cache in `dir`, the key in `LITELLM_KEY`.
fn kforge(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kforge"))
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir.join("home"))
        .env("KFORGE_CONFIG_DIR", dir.join("config"))
        .env("KFORGE_CACHE_DIR", dir.join("cache"))
        .env("LITELLM_KEY", MASTER_KEY)
        .stdin(Stdio::null())
        .output()
        .expect("kforge runs")
}

/// The LiteLLM proxy, killed when dropped (at the end of the test or on a panic).
struct Proxy {
    child: Child,
    port: u16,
    log: PathBuf,
    ready_after: Duration,
}

impl Proxy {
    /// Starts `litellm --config` on a free loopback port, with a temp HOME and only the
    /// environment it needs, and waits until `/health/liveliness` answers 200.
    fn start(venv: &Path, dir: &Path) -> Proxy {
        let port = free_port();
        let config = dir.join("litellm.yaml");
        fs::write(&config, proxy_config(port)).unwrap();
        let home = dir.join("proxy-home");
        fs::create_dir_all(&home).unwrap();
        let log = dir.join("litellm.log");
        let out = File::create(&log).unwrap();
        let started = Instant::now();
        let child = Command::new(venv.join("bin/litellm"))
            .arg("--config")
            .arg(&config)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .current_dir(dir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("LITELLM_MASTER_KEY", MASTER_KEY)
            // The price list ships with the package: do not fetch it from GitHub.
            .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("the installed litellm runs");
        let mut proxy = Proxy {
            child,
            port,
            log,
            ready_after: Duration::ZERO,
        };
        while !proxy.is_live() {
            if let Ok(Some(status)) = proxy.child.try_wait() {
                panic!(
                    "the LiteLLM proxy exited with {status}:{}",
                    proxy.log_tail()
                );
            }
            assert!(
                started.elapsed() < READY_TIMEOUT,
                "the LiteLLM proxy did not answer within {} s:{}",
                READY_TIMEOUT.as_secs(),
                proxy.log_tail()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        proxy.ready_after = started.elapsed();
        proxy
    }

    /// `GET /health/liveliness` answers 200.
    fn is_live(&self) -> bool {
        let request =
            "GET /health/liveliness HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
        self.exchange(request)
            .is_some_and(|answer| answer.starts_with("HTTP/1.1 200"))
    }

    /// The content type of the answer to a streamed request for `model` at `path`.
    fn content_type(&self, path: &str, model: &str) -> String {
        let body = format!(
            r#"{{"model":"{model}","max_tokens":64,"stream":true,"messages":[{{"role":"user","content":"hi"}}]}}"#
        );
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\
             Authorization: Bearer {MASTER_KEY}\r\nx-api-key: {MASTER_KEY}\r\n\
             anthropic-version: 2023-06-01\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let answer = self.exchange(&request).unwrap_or_default();
        let head = answer.split("\r\n\r\n").next().unwrap_or_default();
        head.lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("content-type")
                    .then(|| value.trim().to_string())
            })
            .unwrap_or_else(|| format!("no content type in: {head}"))
    }

    /// One request on a fresh connection, and the whole answer (plain HTTP/1.1, so that no
    /// client library is needed).
    fn exchange(&self, request: &str) -> Option<String> {
        let mut conn = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        conn.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
        conn.write_all(request.as_bytes()).ok()?;
        let mut answer = Vec::new();
        conn.read_to_end(&mut answer).ok()?;
        Some(String::from_utf8_lossy(&answer).into_owned())
    }

    /// The end of the proxy's log, for failure messages.
    fn log_tail(&self) -> String {
        let log = fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines[lines.len().saturating_sub(40)..].join("\n");
        format!("\n--- end of {} ---\n{tail}", self.log.display())
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nothing listens on now (the proxy takes it a moment later).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// The venv holding LiteLLM `LITELLM_VERSION`, installed unless a working one is there.
/// `Err` says why it cannot be installed.
fn install_litellm(root: &Path) -> Result<PathBuf, String> {
    fs::create_dir_all(root).map_err(|e| format!("cannot create {}: {e}", root.display()))?;
    let venv = root.join("litellm-venv");
    let _lock = InstallLock::take(&root.join("litellm-venv.lock"))?;
    if installed_version(&venv).as_deref() == Some(LITELLM_VERSION) {
        return Ok(venv);
    }
    // A venv of another version, or one left half-made by an interrupted install.
    if venv.exists() {
        fs::remove_dir_all(&venv)
            .map_err(|e| format!("cannot remove the old {}: {e}", venv.display()))?;
    }
    // This install's output only, so that a failure shows its own last lines.
    let log = root.join("litellm-install.log");
    File::create(&log).map_err(|e| format!("cannot write {}: {e}", log.display()))?;
    run_capped(
        Command::new("python3").arg("-m").arg("venv").arg(&venv),
        "python3 -m venv",
        VENV_TIMEOUT,
        &log,
    )?;
    let started = Instant::now();
    run_capped(
        Command::new(venv.join("bin/python"))
            .args([
                "-m",
                "pip",
                "install",
                "--no-input",
                "--disable-pip-version-check",
            ])
            .arg(format!("litellm[proxy]=={LITELLM_VERSION}"))
            // pip's cache beside the venv, not in ~/.cache.
            .env("PIP_CACHE_DIR", root.join("pip-cache")),
        "pip install",
        INSTALL_TIMEOUT,
        &log,
    )?;
    println!(
        "installed litellm[proxy]=={LITELLM_VERSION} in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    match installed_version(&venv) {
        Some(v) if v == LITELLM_VERSION => Ok(venv),
        other => Err(format!(
            "pip succeeded but the venv holds litellm {other:?}, not {LITELLM_VERSION}"
        )),
    }
}

/// The litellm version the venv's Python sees, if it has a working one and its command.
fn installed_version(venv: &Path) -> Option<String> {
    if !venv.join("bin/litellm").exists() {
        return None;
    }
    let out = Command::new(venv.join("bin/python"))
        .args([
            "-c",
            "import importlib.metadata as m; print(m.version('litellm'))",
        ])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Runs `cmd` with its output appended to `log`, killing it after `limit`. `Err` names
/// the step and gives the end of its output.
fn run_capped(cmd: &mut Command, what: &str, limit: Duration, log: &Path) -> Result<(), String> {
    let out = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("cannot write {}: {e}", log.display()))?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("{what}: cannot run {}: {e}", cmd.get_program().display()))?;
    let started = Instant::now();
    loop {
        match child.try_wait().map_err(|e| format!("{what}: {e}"))? {
            Some(status) if status.success() => return Ok(()),
            Some(status) => {
                return Err(format!(
                    "{what} failed ({status}); the end of {}:\n{}",
                    log.display(),
                    tail(log, 5)
                ));
            }
            None if started.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{what} did not finish within {} s (see {})",
                    limit.as_secs(),
                    log.display()
                ));
            }
            None => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

fn tail(path: &Path, n: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let mut end: Vec<String> = lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| match l.char_indices().nth(300) {
            Some((cut, _)) => format!("{}...", &l[..cut]),
            None => l.to_string(),
        })
        .collect();
    end.retain(|l| !l.trim().is_empty());
    end.join("\n")
}

/// A lock file held while installing, so that two test processes do not install into the
/// same venv at once. It holds the owner's pid: a lock whose owner is gone (a test killed
/// mid-install) is taken over. (The liveness check reads /proc: elsewhere a lock is always
/// taken over, which only loses the protection.)
struct InstallLock(PathBuf);

impl InstallLock {
    fn take(path: &Path) -> Result<InstallLock, String> {
        let started = Instant::now();
        loop {
            match OpenOptions::new().write(true).create_new(true).open(path) {
                Ok(mut f) => {
                    let _ = write!(f, "{}", std::process::id());
                    return Ok(InstallLock(path.to_path_buf()));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let owner = fs::read_to_string(path).unwrap_or_default();
                    // Empty: its owner has created it and not yet written its pid.
                    let alive = owner.trim().is_empty()
                        || Path::new(&format!("/proc/{}", owner.trim())).exists();
                    if !alive {
                        let _ = fs::remove_file(path);
                        continue;
                    }
                    if started.elapsed() > INSTALL_TIMEOUT + VENV_TIMEOUT {
                        return Err(format!(
                            "another test process (pid {}) has held {} too long",
                            owner.trim(),
                            path.display()
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(500));
                }
                Err(e) => return Err(format!("cannot create {}: {e}", path.display())),
            }
        }
    }
}

impl Drop for InstallLock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}
