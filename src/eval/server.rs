//! One harness server process: started with an environment scrubbed of secrets, spoken
//! to over JSON lines. Its stderr is kept (last lines) to explain a server that dies.

use std::collections::VecDeque;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

use super::envelope::{Event, Request};
use super::protocol::Hello;

/// How long the server may take to import torch and triton.
const HELLO_TIMEOUT: Duration = Duration::from_secs(300);
const STDERR_LINES: usize = 200;

/// Names of kforge's environment the harness server gets, whole: what Python, torch,
/// Triton, CUDA and a C compiler read. Everything else stays in kforge: API keys under any
/// name, kforge's own settings (`KFORGE_*`, but for `KFORGE_NCU`, which the server reads).
const HARNESS_ENV_EXACT: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "TERM",
    "LD_LIBRARY_PATH",
    "PYTHONHASHSEED",
    "OMP_NUM_THREADS",
    "OMP_WAIT_POLICY",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "CC",
    "CXX",
    "XDG_CACHE_HOME",
    "KFORGE_NCU",
];

/// Name prefixes passed to the harness server (locale, CUDA, the NVIDIA container runtime's,
/// Triton's and torch's knobs). Both sandboxes filter again with their own allow-list.
const HARNESS_ENV_PREFIXES: &[&str] = &[
    "LC_",
    "CUDA_",
    "CUDNN_",
    "NVIDIA_",
    "TRITON_",
    "TORCH_",
    "PYTORCH_",
    "TORCHINDUCTOR_",
    // The harness's diagnostic switches (knobs.py), which a result taken with one says.
    "KFORGE_DIAG_",
];

/// Values shaped like credentials (the harness's `sandbox.SECRET_VALUE`): dropped whatever
/// the variable's name.
static SECRET_VALUE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(
        r"(?:^|[^A-Za-z0-9])(?:sk-[A-Za-z0-9_-]{8,}|sk_(?:live|test)_|gh[pousr]_[A-Za-z0-9]{16,}|github_pat_|xox[abprs]-|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}|hf_[A-Za-z0-9]{20,}|eyJ[A-Za-z0-9_-]{8,}\.|-----BEGIN)",
    )
    .expect("valid regex")
});

/// Whether kforge passes the variable `name=value` on to the harness server: an allow-list
/// of names, never one that looks like a credential, never a value that does.
pub fn passes_to_harness(name: &str, value: &str) -> bool {
    let allowed = HARNESS_ENV_EXACT.contains(&name)
        || HARNESS_ENV_PREFIXES.iter().any(|p| name.starts_with(p));
    allowed && !is_secret_env(name) && !SECRET_VALUE.is_match(value)
}

/// This process's environment as passed to the harness (`passes_to_harness`), for a
/// `Command` that has cleared its own: every process that may run a task's or a kernel's code.
pub fn harness_env() -> impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)> {
    std::env::vars_os().filter(|(k, v)| {
        k.to_str()
            .zip(v.to_str())
            .is_some_and(|(k, v)| passes_to_harness(k, v))
    })
}

/// Environment variable names that look like credentials. They are removed from every
/// process that may run generated code.
pub fn is_secret_env(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    [
        "KEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "AUTH",
    ]
    .iter()
    .any(|w| upper.contains(w))
}

pub struct HarnessServer {
    child: Child,
    stdin: ChildStdin,
    events: mpsc::UnboundedReceiver<Value>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    pub hello: Hello,
}

impl HarnessServer {
    /// Starts `python -m kforge_harness serve` (`harness` is the directory holding the
    /// package) and waits for its hello. `interpret` starts it
    /// with `TRITON_INTERPRET=1` (CPU evaluation): Triton reads it when it is imported.
    pub async fn start(
        python: &Path,
        harness: &Path,
        cache_dir: &Path,
        interpret: bool,
    ) -> Result<HarnessServer> {
        let mut command = Command::new(python);
        command.args(["-m", "kforge_harness", "serve"]);
        // Directories no kernel may see, even where the sandbox would otherwise show them.
        for hidden in crate::paths::config_dir().into_iter() {
            command.arg("--hide").arg(hidden);
        }
        command
            .current_dir(harness)
            .env_clear()
            .envs(harness_env())
            .env("PYTHONUNBUFFERED", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("PYTHONPATH", harness)
            .env("TRITON_CACHE_DIR", cache_dir.join("triton"))
            .env("TRITON_INTERPRET", if interpret { "1" } else { "0" })
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .with_context(|| format!("cannot start {}", python.display()))?;
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");

        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let tail = stderr_tail.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(target: "kforge::harness", "{line}");
                let mut tail = tail.lock().expect("stderr tail lock");
                tail.push_back(line);
                if tail.len() > STDERR_LINES {
                    tail.pop_front();
                }
            }
        });
        let (tx, events) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                match serde_json::from_str::<Value>(&line) {
                    Ok(v) => {
                        if tx.send(v).is_err() {
                            break;
                        }
                    }
                    Err(_) => tracing::warn!("harness wrote a non-JSON line: {line}"),
                }
            }
        });

        let mut server = HarnessServer {
            child,
            stdin,
            events,
            stderr_tail,
            hello: Hello::default(),
        };
        let first = tokio::time::timeout(HELLO_TIMEOUT, server.events.recv()).await;
        let hello_value = match first {
            Ok(Some(v)) => v,
            Ok(None) => {
                let status = server.child.wait().await.ok();
                bail!(
                    "the Python harness exited before starting ({}):\n{}",
                    status.map(|s| s.to_string()).unwrap_or_default(),
                    server.stderr_text()
                );
            }
            Err(_) => {
                server.kill().await;
                bail!(
                    "the Python harness did not start within {}s:\n{}",
                    HELLO_TIMEOUT.as_secs(),
                    server.stderr_text()
                );
            }
        };
        let hello: Hello =
            serde_json::from_value(hello_value).context("malformed hello from the harness")?;
        if !hello.ok {
            server.kill().await;
            bail!(
                "{} cannot import torch and triton: {}",
                python.display(),
                hello.error.as_deref().unwrap_or("unknown error")
            );
        }
        server.hello = hello;
        tracing::info!(
            python = %python.display(),
            pid = server.child.id(),
            interpret,
            torch = server.hello.torch.as_deref().unwrap_or("?"),
            triton = server.hello.triton.as_deref().unwrap_or("?"),
            "evaluator server started"
        );
        Ok(server)
    }

    pub async fn send(&mut self, request: &Request) -> Result<()> {
        let mut line = serde_json::to_string(request)?;
        line.push('\n');
        self.stdin
            .write_all(line.as_bytes())
            .await
            .map_err(|e| anyhow!("the harness stopped reading: {e}"))?;
        self.stdin.flush().await?;
        Ok(())
    }

    /// Next event from the server; `None` once it has exited.
    pub async fn next_event(&mut self) -> Option<Event> {
        self.events.recv().await.map(Event::read)
    }

    /// Sends a request and waits for the event answering it (by id), ignoring others; an
    /// `error` answer, or one that does not parse, is an `Err`.
    pub async fn call(&mut self, request: Request, timeout: Duration) -> Result<Event> {
        let id = request.id().cloned();
        self.send(&request).await?;
        let wait = async {
            while let Some(event) = self.next_event().await {
                if id.is_some() && event.id() == id.as_ref() {
                    return Some(event);
                }
            }
            None
        };
        match tokio::time::timeout(timeout, wait).await {
            Ok(Some(Event::Error(e))) => bail!("harness error: {}", e.error),
            Ok(Some(Event::Malformed { event, error, .. })) => {
                bail!("malformed {event} event from the harness: {error}")
            }
            Ok(Some(event)) => Ok(event),
            Ok(None) => bail!("the harness exited:\n{}", self.stderr_text()),
            Err(_) => bail!("the harness did not answer within {}s", timeout.as_secs()),
        }
    }

    pub fn stderr_text(&self) -> String {
        self.stderr_tail
            .lock()
            .expect("stderr tail lock")
            .iter()
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }

    /// Asks the server to exit, killing it if it does not within a few seconds.
    pub async fn shutdown(mut self) {
        tracing::info!(pid = self.child.id(), "evaluator server stopping");
        let _ = self.send(&Request::Shutdown).await;
        if tokio::time::timeout(Duration::from_secs(5), self.child.wait())
            .await
            .is_err()
        {
            self.kill().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names_are_recognised() {
        for name in [
            "OPENAI_API_KEY",
            "anthropic_api_key",
            "HF_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "DB_PASSWORD",
        ] {
            assert!(is_secret_env(name), "{name}");
        }
        for name in ["PATH", "HOME", "CUDA_VISIBLE_DEVICES", "TRITON_INTERPRET"] {
            assert!(!is_secret_env(name), "{name}");
        }
    }

    #[test]
    fn the_harness_gets_an_allow_listed_environment() {
        for (name, value) in [
            ("PATH", "/usr/local/bin:/usr/bin"),
            ("HOME", "/home/me"),
            ("LD_LIBRARY_PATH", "/usr/local/cuda/lib64"),
            ("CUDA_VISIBLE_DEVICES", "0,1"),
            ("LC_ALL", "C.UTF-8"),
            ("TRITON_PTXAS_PATH", "/usr/local/cuda/bin/ptxas"),
            ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),
            ("KFORGE_NCU", "/opt/nvidia/ncu"),
            ("KFORGE_DIAG_NO_GATE", "1"),
        ] {
            assert!(passes_to_harness(name, value), "{name}");
        }
        for (name, value) in [
            // Keys and tokens under names no denylist knows.
            ("MISTRAL_API_KEY", "abc"),
            ("GROQ_API_KEY", "abc"),
            ("ANTHROPIC_AUTH_TOKEN", "abc"),
            ("OPENROUTER_CREDENTIALS", "abc"),
            ("LLM_ACCESS", "sk-proj-abcdefghijklmnop"),
            ("SERVICE_BEARER", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0"),
            // kforge's own settings: the provider, the model, the config and cache paths.
            ("KFORGE_PROVIDER", "openai"),
            ("KFORGE_CONFIG_DIR", "/home/me/.config/kforge"),
            ("KFORGE_PLANTED", "value"),
            // An allowed name holding a credential.
            ("TRITON_DEBUG", "ghp_0123456789abcdefABCDEF"),
            ("PATH", "/usr/bin:sk-live-0123456789abcdef"),
            ("SSH_AUTH_SOCK", "/run/user/1000/ssh"),
        ] {
            assert!(!passes_to_harness(name, value), "{name}={value}");
        }
    }
}
