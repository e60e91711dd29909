//! `kforge run` with its terminal UI, in tmux, against the mock LLM in step mode: the
//! person approves the first prompt, rewrites the seed kernel in `$EDITOR` through the gate
//! dialog, rejects the algorithm optimization, approves the final best, and quits.
//! Skipped with a message when tmux is not installed (`.ci/run` installs it).

mod engine_common;
mod eval_common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine_common::*;
use kforge::protocol::{Decision, EngineState, GateKind};
use kforge::session::state::SessionState;
use kforge::session::store::SessionDir;
use kforge::tui::testing::have_tmux;

struct Tmux {
    socket: String,
}

impl Tmux {
    /// A tmux server of its own (`tag` tells the tests of this binary apart: they run in
    /// parallel threads of one process) with window `t` running `command`.
    fn start(tag: &str, command: &str) -> Tmux {
        let t = Tmux {
            socket: format!("kforge-run-{}-{tag}", std::process::id()),
        };
        t.window("t", command);
        t
    }

    /// Another window on the same tmux server, running `command`.
    fn window(&self, name: &str, command: &str) {
        let full = format!("{command}; echo EXITED $?; sleep 60");
        let out = self.cmd(&[
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            "140",
            "-y",
            "45",
            &full,
        ]);
        assert!(out.status.success(), "tmux new-session failed");
    }

    fn cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux")
    }

    fn screen(&self) -> String {
        self.screen_of("t")
    }

    fn screen_of(&self, w: &str) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", w]).stdout).into_owned()
    }

    fn key(&self, key: &str) {
        self.key_to("t", key);
    }

    fn key_to(&self, w: &str, key: &str) {
        self.cmd(&["send-keys", "-t", w, key]);
        std::thread::sleep(Duration::from_millis(150));
    }

    fn open_gate(&self, n: u32) {
        self.open_gate_in("t", n);
    }

    /// Opens the gate dialog with `a` until it shows gate `n` (the screen may still show an
    /// answered gate for a moment; `esc` closes that one and `a` opens the next).
    fn open_gate_in(&self, w: &str, n: u32) {
        let wanted = format!("Waiting for you — gate {n} ");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            self.key_to(w, "a");
            let until = Instant::now() + Duration::from_secs(2);
            while Instant::now() < until {
                if self.screen_of(w).contains(&wanted) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            assert!(
                Instant::now() < deadline,
                "gate {n} did not open:\n{}",
                self.screen_of(w)
            );
            self.key_to(w, "Escape");
        }
    }

    fn wait_for(&self, text: &str, limit: Duration) -> String {
        self.wait_in("t", text, limit)
    }

    fn wait_in(&self, w: &str, text: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let s = self.screen_of(w);
            if s.contains(text) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {text:?} in window {w}; screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

fn shell_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

/// `kforge run` of the ReLU task on the CPU in step mode against the mock (its `config`),
/// one seed, no stages, with `env` set besides the harness's own.
fn step_run(env: &str, config: &Path, sessions: &Path) -> String {
    format!(
        "env TERM=xterm-256color {env} KFORGE_CACHE_DIR={} KFORGE_PYTHON={} {} run {} --cpu --mode step --seeds 1 --stages '' --provider mock --config {} --sessions-dir {}",
        shell_quote(&eval_common::test_cache()),
        shell_quote(&eval_common::interpreter()),
        shell_quote(Path::new(env!("CARGO_BIN_EXE_kforge"))),
        shell_quote(&fixtures().join("tasks/relu.py")),
        shell_quote(config),
        shell_quote(sessions),
    )
}

fn state_of(dir: &Path) -> Option<(SessionDir, SessionState)> {
    let entry = std::fs::read_dir(dir).ok()?.next()?.ok()?;
    let session = SessionDir::open(&entry.path()).ok()?;
    let state = SessionState::from_records(&session.read_events().ok()?.records);
    Some((session, state))
}

/// Waits until the session has an open gate of `kind`.
fn wait_gate(dir: &Path, kind: GateKind) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some((_, state)) = state_of(dir)
            && state.open_gate().is_some_and(|g| g.kind == kind)
        {
            return;
        }
        assert!(Instant::now() < deadline, "no {kind:?} gate opened");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_in_step_mode_approving_and_rewriting_through_the_dialog() {
    if !have_tmux() {
        return;
    }
    let script: Script = Arc::new(|step, _u, _n| match step {
        Step::Analysis => analysis_json("yes"),
        _ => fenced(&relu_ok("from the mock")),
    });
    let mock = MockLlm::start(script, Duration::ZERO).await;
    let work = tempfile::tempdir().unwrap();
    let config = mock.config(work.path());
    let sessions = work.path().join("sessions");
    let editor = work.path().join("editor.sh");
    std::fs::write(
        &editor,
        "#!/bin/sh\necho '# edited in the gate dialog' >> \"$1\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let command = step_run(
        &format!(
            "EDITOR={} VISUAL={}",
            shell_quote(&editor),
            shell_quote(&editor)
        ),
        &config,
        &sessions,
    );
    let sessions_for_test = sessions.clone();
    let result = tokio::task::spawn_blocking(move || {
        let t = Tmux::start("step", &command);
        // 1. The seed prompt: the gate waits in the status bar until the person opens it
        // (`a`), then approve it in the dialog.
        wait_gate(&sessions_for_test, GateKind::LlmCall);
        t.wait_for("1 waiting for you", Duration::from_secs(30));
        t.open_gate(1);
        t.wait_for("Send the seed prompt", Duration::from_secs(30));
        t.key("y");
        // 2. The seed kernel: rewrite it in $EDITOR before it is evaluated.
        wait_gate(&sessions_for_test, GateKind::Evaluation);
        t.open_gate(2);
        t.wait_for("Evaluate candidate 1", Duration::from_secs(30));
        t.key("e");
        // 3. No algorithm optimization.
        wait_gate(&sessions_for_test, GateKind::AlgorithmOptimization);
        t.open_gate(3);
        t.wait_for("algorithm analysis", Duration::from_secs(30));
        t.key("n");
        t.wait_for("Reject?", Duration::from_secs(30));
        t.key("y");
        // 4. The final best: approve; the run finishes and the TUI stays open.
        wait_gate(&sessions_for_test, GateKind::FinalBest);
        t.open_gate(4);
        t.wait_for("final best", Duration::from_secs(30));
        t.key("y");
        let deadline = Instant::now() + Duration::from_secs(60);
        while state_of(&sessions_for_test).is_none_or(|(_, s)| s.state != EngineState::Finished) {
            assert!(
                Instant::now() < deadline,
                "the run did not finish:\n{}",
                t.screen()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        t.key("q");
        t.wait_for("EXITED", Duration::from_secs(30))
    })
    .await
    .unwrap();
    assert!(result.contains("EXITED 0"), "{result}");
    let (session, state) = state_of(&sessions).unwrap();
    let decisions: Vec<(GateKind, Decision)> = state
        .gates
        .values()
        .map(|g| (g.kind, g.decision.clone().expect("every gate answered")))
        .collect();
    assert!(
        matches!(decisions[0], (GateKind::LlmCall, Decision::Approve)),
        "{decisions:?}"
    );
    assert!(
        matches!(
            decisions[1],
            (GateKind::Evaluation, Decision::Rewrite { .. })
        ),
        "{decisions:?}"
    );
    assert!(
        decisions
            .iter()
            .any(|d| matches!(d, (GateKind::AlgorithmOptimization, Decision::Reject)))
    );
    assert!(
        decisions
            .iter()
            .any(|d| matches!(d, (GateKind::FinalBest, Decision::Approve)))
    );
    let seed = state.candidates.values().next().unwrap();
    assert!(
        session
            .read_file(&seed.file)
            .unwrap()
            .contains("# edited in the gate dialog")
    );
    assert!(seed.is_correct());
    assert_eq!(mock.count(Step::Analysis), 0);
    assert_eq!(state.best, Some(seed.id));
}

/// A headless run in step mode and two windows attached to it with `kforge open`: both open
/// the seed prompt's gate, one approves, the other is told. The second window then stops
/// the run while the evaluation gate waits; the first becomes read-only and says so. The
/// gate is withdrawn, not skipped: `kforge resume` asks it again, a third window approves
/// it through the queue, and the kernel is evaluated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_attached_windows_and_a_stop_with_a_waiting_gate() {
    if !have_tmux() {
        return;
    }
    let script: Script = Arc::new(|step, _u, _n| match step {
        Step::Analysis => analysis_json("no"),
        _ => fenced(&relu_ok("from the mock")),
    });
    let mock = MockLlm::start(script, Duration::ZERO).await;
    let work = tempfile::tempdir().unwrap();
    let config = mock.config(work.path());
    let sessions = work.path().join("sessions");
    let env = format!(
        "env TERM=xterm-256color KFORGE_CONFIG_DIR={} KFORGE_CACHE_DIR={} KFORGE_PYTHON={}",
        shell_quote(&work.path().join("config")),
        shell_quote(&eval_common::test_cache()),
        shell_quote(&eval_common::interpreter())
    );
    let kforge = shell_quote(Path::new(env!("CARGO_BIN_EXE_kforge")));
    let run = format!(
        "{env} {kforge} run {} --cpu --mode step --seeds 1 --stages '' --provider mock --config {} --sessions-dir {} --headless",
        shell_quote(&fixtures().join("tasks/relu.py")),
        shell_quote(&config),
        shell_quote(&sessions),
    );
    let sessions_for_test = sessions.clone();
    let config_for_test = config.clone();
    let (after_stop, resumed) = tokio::task::spawn_blocking(move || {
        let t = Tmux::start("windows", &run);
        wait_gate(&sessions_for_test, GateKind::LlmCall);
        let (session, _) = state_of(&sessions_for_test).unwrap();
        let open = format!("{env} {kforge} open {}", shell_quote(&session.path));
        t.window("a", &open);
        t.window("b", &open);
        t.open_gate_in("a", 1);
        t.open_gate_in("b", 1);
        t.wait_in("b", "Send the seed prompt", Duration::from_secs(30));
        // A answers; B, reading the same gate, is told and its dialog closes.
        t.key_to("a", "y");
        t.wait_in(
            "b",
            "gate 1 was answered in another window (approve)",
            Duration::from_secs(30),
        );
        // The evaluation gate waits; B stops the run and leaves.
        wait_gate(&sessions_for_test, GateKind::Evaluation);
        t.wait_in("b", "1 waiting for you", Duration::from_secs(30));
        t.key_to("b", "q");
        t.wait_in("b", "Detach?", Duration::from_secs(30));
        t.key_to("b", "s");
        t.wait_in("b", "EXITED 0", Duration::from_secs(30));
        t.wait_for("EXITED 0", Duration::from_secs(60));
        // A is read-only now and says why when asked to act.
        t.wait_in("a", "read-only: the run ended", Duration::from_secs(30));
        t.key_to("a", "r");
        t.wait_in("a", "this window is read-only now", Duration::from_secs(30));
        t.key_to("a", "q");
        t.wait_in("a", "EXITED 0", Duration::from_secs(30));
        let (_, stopped) = state_of(&sessions_for_test).unwrap();
        // Resume: the withdrawn gate is asked again; window C approves it from the queue.
        let resume = format!(
            "{env} {kforge} resume {} --config {} --headless",
            shell_quote(&session.path),
            shell_quote(&config_for_test)
        );
        t.window("r", &resume);
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let (_, s) = state_of(&sessions_for_test).unwrap();
            if s.open_gate()
                .is_some_and(|g| g.kind == GateKind::Evaluation)
                && s.state != EngineState::Stopped
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the evaluation gate was not asked again"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        t.window("c", &open);
        t.wait_in("c", "1 waiting for you", Duration::from_secs(30));
        t.key_to("c", "a");
        t.wait_in("c", "Evaluate candidate 1", Duration::from_secs(30));
        t.key_to("c", "y");
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let (_, s) = state_of(&sessions_for_test).unwrap();
            if s.candidates
                .values()
                .next()
                .is_some_and(|c| c.eval.is_some())
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the approved kernel was not evaluated:\n{}",
                t.screen_of("c")
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        // Done: stop the resumed run from C.
        t.key_to("c", "q");
        t.wait_in("c", "Detach?", Duration::from_secs(30));
        t.key_to("c", "s");
        t.wait_in("r", "EXITED", Duration::from_secs(60));
        (stopped, state_of(&sessions_for_test).unwrap().1)
    })
    .await
    .unwrap();
    assert_eq!(after_stop.state, EngineState::Stopped);
    let eval_gate = after_stop
        .gates
        .values()
        .find(|g| g.kind == GateKind::Evaluation)
        .expect("the evaluation gate");
    assert!(
        eval_gate.decision.is_none() && eval_gate.withdrawn,
        "a gate waiting at stop is withdrawn, not answered: {eval_gate:?}"
    );
    let seed = resumed.candidates.values().next().unwrap();
    assert!(seed.is_correct(), "{seed:?}");
    assert_eq!(resumed.candidates.len(), 1, "no candidate made twice");
    assert_eq!(
        mock.count(Step::Seed),
        1,
        "the answered call was not sent again"
    );
}

/// Issue 39, items 1 and 5: the status bar names the mode from the start; Ctrl-C on an
/// active run asks first, and `y` stops the run and exits 130, as the README's table says
/// for Ctrl-C (the session stays resumable: `stopped`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_then_y_stops_the_run_and_exits_130() {
    if !have_tmux() {
        return;
    }
    let script: Script = Arc::new(|_step, _u, _n| fenced(&relu_ok("from the mock")));
    let mock = MockLlm::start(script, Duration::ZERO).await;
    let work = tempfile::tempdir().unwrap();
    let config = mock.config(work.path());
    let sessions = work.path().join("sessions");
    let command = step_run("", &config, &sessions);
    let sessions_for_test = sessions.clone();
    let result = tokio::task::spawn_blocking(move || {
        let t = Tmux::start("ctrlc", &command);
        wait_gate(&sessions_for_test, GateKind::LlmCall);
        t.wait_for("step mode", Duration::from_secs(30));
        t.key("C-c");
        t.wait_for("Quit while the run is active?", Duration::from_secs(30));
        t.key("y");
        t.wait_for("EXITED", Duration::from_secs(60))
    })
    .await
    .unwrap();
    assert!(result.contains("EXITED 130"), "{result}");
    let (_, state) = state_of(&sessions).unwrap();
    assert_eq!(state.state, EngineState::Stopped);
}
