//! End to end in tmux: the real binary on a real terminal. `kforge open` on the recorded
//! session (navigate, diff, compare, help, quit, terminal restored), attached to a
//! session that this test appends to while it holds the session lock (as a running
//! engine would), and on a batch (its rows, a task's session opened from it and left back
//! to it). Skipped with a message when tmux is not installed (CI installs it with
//! `apt-get install -y tmux`).

mod tui_common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use kforge::session::store::SessionDir;
use kforge::tui::testing::have_tmux;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sessions/softmax")
}

/// A private tmux server with one 120x40 window running a command.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(name: &str, command: &str, home: &Path) -> Tmux {
        let socket = format!("kforge-test-{}-{name}", std::process::id());
        let t = Tmux { socket };
        let full = format!(
            "env HOME={home} XDG_CONFIG_HOME={home}/.config TERM=xterm-256color {command}; echo EXITED $?; sleep 30",
            home = home.display()
        );
        let ok = t
            .cmd(&[
                "new-session",
                "-d",
                "-s",
                "t",
                "-x",
                "120",
                "-y",
                "40",
                &full,
            ])
            .status
            .success();
        assert!(ok, "tmux new-session failed");
        t
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
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", "t"]).stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        for k in keys {
            self.cmd(&["send-keys", "-t", "t", k]);
            std::thread::sleep(Duration::from_millis(80));
        }
    }

    /// Whether the pane shows the alternate screen now.
    fn alternate_on(&self) -> bool {
        let out = self.cmd(&["display-message", "-p", "-t", "t", "#{alternate_on}"]);
        String::from_utf8_lossy(&out.stdout).trim() == "1"
    }

    fn wait_for(&self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let s = self.screen();
            if s.contains(text) {
                return s;
            }
            if Instant::now() > deadline {
                panic!("timed out waiting for {text:?}; screen:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

fn kforge() -> &'static str {
    env!("CARGO_BIN_EXE_kforge")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

#[test]
fn open_browse_and_quit() {
    if !have_tmux() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let t = Tmux::start(
        "open",
        &format!("{} open {}", kforge(), fixture().display()),
        home.path(),
    );
    let s = t.wait_for("Candidates 9");
    assert!(s.contains("read-only") || s.contains("finished"), "{s}");
    t.keys(&["g", "j"]);
    t.wait_for("#3 repair 1");
    t.keys(&["G", "k", "2"]);
    t.wait_for("(parent) →");
    t.keys(&["s"]);
    t.wait_for("side by side");
    t.keys(&["3"]);
    t.wait_for("reference");
    t.keys(&["?"]);
    t.wait_for("Keys (from your keymap)");
    // `/` filters the pane in focus: the tree.
    t.keys(&["Escape", "/"]);
    t.keys(&["s", "t", "a", "g", "e", "Enter"]);
    t.wait_for("Candidates 3/9 /stage");
    t.keys(&["q"]);
    let s = t.wait_for("EXITED 0");
    // The alternate screen is gone: the shell's screen shows what open printed.
    assert!(s.contains("session: "), "{s}");
    assert!(!s.contains("Candidates 9"), "terminal not restored:\n{s}");
}

#[test]
fn attach_to_a_running_session() {
    if !have_tmux() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("session");
    copy_dir(&fixture(), &dir);
    let all = std::fs::read_to_string(fixture().join("events.jsonl")).unwrap();
    let lines: Vec<&str> = all.lines().collect();
    // The run so far: up to the creation of #4.
    let cut = lines
        .iter()
        .position(|l| l.contains("\"candidate_created\",\"id\":4"))
        .unwrap()
        + 1;
    std::fs::write(dir.join("events.jsonl"), lines[..cut].join("\n") + "\n").unwrap();
    // This test is the engine: it holds the session lock and appends.
    let session = SessionDir::open(&dir).unwrap();
    let _lock = session.lock().unwrap();
    let t = Tmux::start(
        "attach",
        &format!(
            "env EDITOR=\"sed -i '1i # edited by the test'\" {} open {}",
            kforge(),
            dir.display()
        ),
        home.path(),
    );
    t.wait_for("attached");
    t.wait_for("Candidates 4");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join("events.jsonl"))
        .unwrap();
    let rest = &lines[cut..];
    // Up to the first gate: the dialog opens in the attached TUI.
    let gate = rest.iter().position(|l| l.contains("gate_opened")).unwrap() + 1;
    for l in &rest[..gate] {
        writeln!(f, "{l}").unwrap();
    }
    f.flush().unwrap();
    // The gate waits in the status bar; `a` opens it, `y` approves.
    t.wait_for("1 waiting for you");
    t.keys(&["a"]);
    t.wait_for("Waiting for you — gate 1");
    t.keys(&["y"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let control = dir.join("control.jsonl");
    loop {
        let c = std::fs::read_to_string(&control).unwrap_or_default();
        if c.contains("\"command\":\"resolve\"") {
            assert!(c.contains("\"gate\":1") && c.contains("approve"), "{c}");
            break;
        }
        assert!(Instant::now() < deadline, "no command in control.jsonl");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Gate 3, here made a gate before evaluating #9's kernel (the recorded session has a
    // final-best gate there, which has nothing to rewrite): rewrite the kernel in $EDITOR
    // (a script that adds a line); the TUI suspends, the editor runs, the TUI comes back.
    let gate3 = rest
        .iter()
        .position(|l| l.contains("gate_opened") && l.contains("\"gate\":3"))
        .unwrap()
        + 1;
    for l in &rest[gate..gate3] {
        let l = l
            .replace("\"kind\":\"final_best\"", "\"kind\":\"evaluation\"")
            .replace(
                "Declare #9 (1.83x) the final best?",
                "Evaluate candidate 9?",
            );
        writeln!(f, "{l}").unwrap();
    }
    f.flush().unwrap();
    // Everything up to gate 3 has arrived once candidate 9 shows.
    t.wait_for("Candidates 9");
    t.keys(&["a"]);
    t.wait_for("Waiting for you — gate 3");
    t.keys(&["e"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let c = std::fs::read_to_string(&control).unwrap_or_default();
        if c.contains("rewrite") {
            assert!(
                c.contains("\"gate\":3") && c.contains("# edited by the test"),
                "{c}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "no rewrite in control.jsonl");
        std::thread::sleep(Duration::from_millis(100));
    }
    t.wait_for("Candidates 9");
    // The rest of the run arrives live.
    for l in &rest[gate3..] {
        writeln!(f, "{l}").unwrap();
    }
    f.flush().unwrap();
    t.wait_for("Candidates 9");
    t.wait_for("finished");
    t.keys(&["q"]);
    let s = t.wait_for("EXITED 0");
    assert!(s.contains("session: ") || s.contains("detached"), "{s}");
}

#[test]
fn open_a_batch_then_a_tasks_session_and_come_back() {
    use tui_common::batch::*;
    if !have_tmux() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let batch = write_batch(&home.path().join("kb_level1"));
    let t = Tmux::start(
        "batch",
        &format!("{} open {}", kforge(), batch.dir.display()),
        home.path(),
    );
    let counts = "3 finished, 1 running, 1 waiting, 1 refused, 1 resumable";
    let s = t.wait_for(counts);
    for key in [
        COMPLETE,
        NO_CORRECT,
        INTERRUPTED,
        RUNNING,
        CPU,
        WAITING,
        REFUSED,
    ] {
        assert!(s.contains(key), "no row for {key}:\n{s}");
    }
    assert!(
        s.contains("1.52x") && s.contains("no_correct_kernel"),
        "{s}"
    );
    // A waiting task has no session: a message, nothing opens.
    t.keys(&["G", "k", "Enter"]);
    t.wait_for(&format!("{WAITING} is waiting: it has no session yet"));
    // The finished task's session, in the session view on the same screen.
    t.keys(&["g", "Enter"]);
    let s = t.wait_for("Candidates 2");
    assert!(s.contains(COMPLETE) && s.contains("read-only"), "{s}");
    assert!(!s.contains(counts), "the batch view is still drawn:\n{s}");
    assert!(t.alternate_on());
    // q leaves the session view only: the batch view is back and answers keys.
    t.keys(&["q"]);
    let s = t.wait_for(counts);
    assert!(!s.contains("Candidates 2"), "{s}");
    assert!(t.alternate_on());
    t.keys(&["j", "Enter"]);
    let s = t.wait_for("Candidates 2");
    assert!(s.contains(NO_CORRECT), "{s}");
    t.keys(&["q"]);
    t.wait_for(counts);
    t.keys(&["q"]);
    let s = t.wait_for("EXITED 0");
    assert!(s.contains("batch: "), "{s}");
    assert!(!s.contains(counts), "terminal not restored:\n{s}");
}
