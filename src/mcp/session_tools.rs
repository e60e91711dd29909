//! The read-only session tools, `session_summary` and `candidate_code`. A session's
//! `events.jsonl` is data the tools did not write (a session can come from anyone): a
//! file it names is read only when, every link resolved, it lies inside the session
//! directory the call named, checked again on the file actually opened.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use serde::Deserialize;
use serde_json::{Value, json};

use super::result::{ToolResult, params};
use crate::protocol::CandidateId;
use crate::session::state::{Candidate, CandidateStatus, SessionState};
use crate::session::store::parse_events;

/// The most of `events.jsonl` read.
const MAX_EVENTS_BYTES: u64 = 256 * 1024 * 1024;
/// The most of a kernel file read.
const MAX_CODE_BYTES: u64 = 16 * 1024 * 1024;

/// A session directory, read only inside itself.
struct SessionView {
    /// The directory, every link resolved.
    root: PathBuf,
    /// As the call named it, for messages.
    shown: String,
}

impl SessionView {
    fn open(path: &str) -> Result<SessionView> {
        let root = std::fs::canonicalize(path).map_err(|e| anyhow!("{path}: {e}"))?;
        if !root.is_dir() {
            bail!("{path} is not a directory");
        }
        let view = SessionView {
            root,
            shown: path.to_string(),
        };
        if !view.root.join("events.jsonl").exists() {
            bail!("{path} is not a kforge session (no events.jsonl)");
        }
        Ok(view)
    }

    /// The session's state, folded from its events.
    fn state(&self) -> Result<SessionState> {
        let text = self.read("events.jsonl", MAX_EVENTS_BYTES)?;
        Ok(SessionState::from_records(&parse_events(&text).records))
    }

    /// A file of the session by its path relative to the session directory, as the events
    /// name it: refused when it is absolute, climbs out with `..`, or resolves (through
    /// links) to anything outside the directory, or is not a regular file.
    fn read(&self, relative: &str, limit: u64) -> Result<String> {
        let outside = || {
            anyhow!(
                "the session {} names `{relative}`, which is not a file inside it: not read",
                self.shown
            )
        };
        let path = Path::new(relative);
        if relative.is_empty()
            || !path
                .components()
                .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(outside());
        }
        let resolved = std::fs::canonicalize(self.root.join(path))
            .with_context(|| format!("cannot read {relative} in the session {}", self.shown))?;
        if !resolved.starts_with(&self.root) {
            return Err(outside());
        }
        // The resolved path has no link left: open it without following one, and check the
        // file that was opened, so that a link put in place meanwhile is caught too.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&resolved)
            .map_err(|_| outside())?;
        let opened = opened_path(&file)?;
        if !opened.starts_with(&self.root) || !file.metadata()?.is_file() {
            return Err(outside());
        }
        let mut bytes = Vec::new();
        file.take(limit + 1).read_to_end(&mut bytes)?;
        if bytes.len() as u64 > limit {
            bail!(
                "{relative} in the session {} is larger than {} MiB: not read",
                self.shown,
                limit >> 20
            );
        }
        String::from_utf8(bytes).map_err(|_| anyhow!("{relative} is not UTF-8 text"))
    }
}

/// The path of the file an open descriptor refers to, as the kernel resolved it.
fn opened_path(file: &File) -> Result<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .context("cannot tell which file was opened (/proc is needed)")
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionParams {
    session: String,
}

/// A candidate's id: a number (the schema's form), or `"3"`/`"#3"` as people write it.
#[derive(Deserialize)]
#[serde(untagged)]
enum CandidateArg {
    Number(u32),
    Text(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CandidateParams {
    session: String,
    candidate: CandidateArg,
}

/// Why a candidate has no score, or its score with its interval and `noisy`.
fn score_text(c: &Candidate, timing_meaningful: bool) -> String {
    match c.status {
        CandidateStatus::Pending => return "not evaluated yet".into(),
        CandidateStatus::Evaluating => return "being evaluated".into(),
        CandidateStatus::Dropped => {
            return format!(
                "not evaluated ({})",
                c.dropped_reason.as_deref().unwrap_or("dropped")
            );
        }
        CandidateStatus::Failed => {
            return match c.eval.as_ref().map(|e| e.summary.as_str()) {
                Some(summary) if !summary.is_empty() => format!("no score: {summary}"),
                _ => "no score".into(),
            };
        }
        CandidateStatus::Correct => {}
    }
    match c.score() {
        Some(_) => crate::report::speedup_text(c),
        None if !timing_meaningful => "not timed (CPU: correctness only)".into(),
        None => "not timed".into(),
    }
}

/// One line of the summary for a candidate: id, kind, status, score (or why none), flags.
fn candidate_line(c: &Candidate, timing_meaningful: bool) -> String {
    let mut line = format!(
        "#{} {} {}: {}",
        c.id,
        c.kind.word(),
        crate::report::status_label(c),
        score_text(c, timing_meaningful)
    );
    let flags = c.eval.as_ref().map(|e| e.flags.as_slice()).unwrap_or(&[]);
    if !flags.is_empty() {
        line.push_str(&format!("; flags: {}", flags.join(", ")));
    }
    line
}

pub fn session_summary(arguments: Value) -> Result<ToolResult> {
    let p: SessionParams = params(arguments)?;
    let state = SessionView::open(&p.session)?.state()?;
    let summary = crate::report::summary_json(&state);
    let timing_meaningful = state.info.as_ref().is_some_and(|i| i.timing_meaningful);
    let mut text = format!(
        "session {}: task {}, {}/{}, on {}, state {}\n",
        p.session,
        summary["task"].as_str().unwrap_or("?"),
        summary["provider"].as_str().unwrap_or("?"),
        summary["model"].as_str().unwrap_or("?"),
        summary["device"].as_str().unwrap_or("?"),
        summary["state"].as_str().unwrap_or("?"),
    );
    match state.best.and_then(|id| state.candidates.get(&id)) {
        Some(best) => text.push_str(&format!(
            "best: {}\n",
            candidate_line(best, timing_meaningful)
        )),
        None => text.push_str("best: none yet\n"),
    }
    for c in state.candidates.values() {
        text.push_str(&candidate_line(c, timing_meaningful));
        text.push('\n');
    }
    let total = &summary["usage"]["total"];
    text.push_str(&format!(
        "usage: {} LLM calls, {} input / {} output tokens, cost {}\n",
        total["calls"],
        total["input"],
        total["output"],
        total["cost_usd"]
            .as_f64()
            .map_or("unknown".to_string(), |c| format!("${c:.4}")),
    ));
    Ok(ToolResult::ok(text, summary))
}

pub fn candidate_code(arguments: Value) -> Result<ToolResult> {
    let p: CandidateParams = params(arguments)?;
    let id = match p.candidate {
        CandidateArg::Number(n) => CandidateId(n),
        CandidateArg::Text(t) => t
            .parse()
            .map_err(|_| anyhow!("`candidate` must be a candidate id, e.g. 3"))?,
    };
    let view = SessionView::open(&p.session)?;
    let state = view.state()?;
    let candidate = state
        .candidates
        .get(&id)
        .ok_or_else(|| anyhow!("session {} has no candidate #{id}", p.session))?;
    let code = view.read(&candidate.file, MAX_CODE_BYTES)?;
    Ok(ToolResult::ok(
        code.clone(),
        json!({
            "candidate": id,
            "file": candidate.file,
            "status": crate::report::status_label(candidate),
            "code": code,
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn golden() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sessions/softmax")
    }

    /// A copy of the golden session's events with these replacements, in a session
    /// directory `s` (with an empty `kernels/`) of a new temporary directory.
    fn session_with(edits: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("s");
        std::fs::create_dir_all(session.join("kernels")).unwrap();
        let mut events = std::fs::read_to_string(golden().join("events.jsonl")).unwrap();
        for (from, to) in edits {
            assert_eq!(events.matches(from).count(), 1, "{from}");
            events = events.replace(from, to);
        }
        std::fs::write(session.join("events.jsonl"), events).unwrap();
        dir
    }

    /// A copy of the golden session whose candidate #1 names `file` instead of its own.
    fn hostile_session(file: &str) -> tempfile::TempDir {
        let named = format!("\"file\":{}", serde_json::to_string(file).unwrap());
        session_with(&[("\"file\":\"kernels/1-seed.py\"", &named)])
    }

    fn code_of(session: &Path, candidate: u32) -> Result<ToolResult> {
        candidate_code(json!({"session": session, "candidate": candidate}))
    }

    #[test]
    fn a_session_cannot_name_a_file_outside_itself() {
        let secret_dir = tempfile::tempdir().unwrap();
        let secret = secret_dir.path().join("secret.txt");
        std::fs::write(&secret, "SECRET-CONTENTS").unwrap();
        let secret_name = secret.to_str().unwrap().to_string();
        let climb = format!("../../../../../../../../..{secret_name}");
        for named in [secret_name.as_str(), climb.as_str(), "../events.jsonl", ""] {
            let dir = hostile_session(named);
            let err = code_of(&dir.path().join("s"), 1).expect_err(named);
            let message = format!("{err:#}");
            assert!(
                message.contains("not a file inside it"),
                "{named}: {message}"
            );
            assert!(!message.contains("SECRET-CONTENTS"), "{message}");
        }
        // Links, to a file or through a directory, are followed and then refused.
        for (link, target, named) in [
            ("kernels/evil.py", secret.clone(), "kernels/evil.py"),
            ("up", secret_dir.path().to_path_buf(), "up/secret.txt"),
        ] {
            let dir = hostile_session(named);
            std::os::unix::fs::symlink(&target, dir.path().join("s").join(link)).unwrap();
            let err = code_of(&dir.path().join("s"), 1).expect_err(named);
            assert!(
                format!("{err:#}").contains("not a file inside it"),
                "{named}: {err:#}"
            );
        }
        // events.jsonl itself a link out of the session: not read either.
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("events.jsonl");
        std::fs::copy(golden().join("events.jsonl"), &outside).unwrap();
        std::fs::create_dir(dir.path().join("s")).unwrap();
        std::os::unix::fs::symlink(&outside, dir.path().join("s/events.jsonl")).unwrap();
        let err = session_summary(json!({"session": dir.path().join("s")}))
            .err()
            .unwrap();
        assert!(
            format!("{err:#}").contains("not a file inside it"),
            "{err:#}"
        );
    }

    #[test]
    fn links_inside_the_session_and_a_linked_session_are_read() {
        let dir = hostile_session("kernels/alias.py");
        let session = dir.path().join("s");
        std::fs::write(session.join("kernels/real.py"), "REAL = 1\n").unwrap();
        std::os::unix::fs::symlink("real.py", session.join("kernels/alias.py")).unwrap();
        std::os::unix::fs::symlink(&session, dir.path().join("linked")).unwrap();
        let code = code_of(&dir.path().join("linked"), 1).unwrap();
        assert_eq!(code.text, "REAL = 1\n");
    }

    #[test]
    fn the_summary_says_why_a_candidate_has_no_score_and_lists_flags() {
        // The golden session as if it had run on the CPU, its correct seed flagged.
        let dir = session_with(&[
            ("\"timing_meaningful\":true", "\"timing_meaningful\":false"),
            (
                "\"score\":0.92,\"kernel_ms\":0.04478,\"reference_ms\":0.0412,\"flags\":[]",
                "\"score\":null,\"kernel_ms\":null,\"reference_ms\":null,\"flags\":[\"weak_reference\"]",
            ),
        ]);
        let summary = session_summary(json!({"session": dir.path().join("s")})).unwrap();
        let text = &summary.text;
        assert!(!text.contains("n/a"), "{text}");
        let line = |id: u32| {
            text.lines()
                .find(|l| l.starts_with(&format!("#{id} ")))
                .unwrap_or_else(|| panic!("#{id}: {text}"))
        };
        assert_eq!(
            line(2),
            "#2 seed correct: not timed (CPU: correctness only); flags: weak_reference"
        );
        assert!(
            line(1).contains("no score: compile error: arange's arguments"),
            "{text}"
        );
        let two = &summary.structured.as_ref().unwrap()["candidates"][1];
        assert_eq!(two["flags"], json!(["weak_reference"]), "{two}");
        // On a GPU, a score with its interval.
        let gpu = session_summary(json!({"session": golden()})).unwrap();
        assert!(gpu.text.contains("#2 seed correct: 0.92x"), "{}", gpu.text);
    }
}
