//! A session directory on disk (docs/architecture.md, Sessions). `events.jsonl` is the source of
//! truth: appended one self-contained line at a time, flushed as written, fsynced at step
//! boundaries. A torn last line (a crash mid-write) is tolerated and reported. One writer
//! per session (an OS file lock that dies with its process); other processes follow the
//! events and send commands through `control.jsonl`.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result, bail};
use chrono::Utc;

use crate::protocol::{Command, Event, EventRecord};

pub const EVENTS_FILE: &str = "events.jsonl";
pub const CONTROL_FILE: &str = "control.jsonl";
pub const LOCK_FILE: &str = "session.lock";

#[derive(Debug, Clone)]
pub struct SessionDir {
    pub path: PathBuf,
    /// A stand-in for a disk that fills up (tests): see `with_write_limit`.
    limit: Option<Arc<WriteLimit>>,
}

/// Bytes this session may still write before every write fails as a full disk does.
#[derive(Debug)]
struct WriteLimit {
    bytes: AtomicU64,
    /// Where the disk fills on an event line instead of at a byte count (see
    /// `with_event_cut`).
    cut: Option<EventCut>,
}

/// The disk fills while `events.jsonl` gets its line number `lines_left + 1` (counted
/// from when the limit was set), `keep` of that line's bytes reaching the disk.
#[derive(Debug)]
struct EventCut {
    lines_left: AtomicU64,
    keep: Torn,
}

/// How much of the event line that fills the disk is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Torn {
    /// None of it: the disk fills exactly at a line boundary.
    Nothing,
    /// This many bytes (at most all but its newline).
    Bytes(usize),
    /// All of it but its newline: a whole event on a line that does not end.
    AllButNewline,
}

impl WriteLimit {
    /// Writes what the limit allows of `bytes`; fails with ENOSPC when that is not all,
    /// leaving the partial write behind as a real full disk does.
    fn write(&self, file: &mut File, bytes: &[u8]) -> std::io::Result<()> {
        let allowed = self.take(bytes.len());
        self.finish(file, bytes, allowed)
    }

    /// Like `write`, for a line of `events.jsonl` (where an event cut can fall).
    fn write_event_line(&self, file: &mut File, bytes: &[u8]) -> std::io::Result<()> {
        let Some(cut) = &self.cut else {
            return self.write(file, bytes);
        };
        let before = cut
            .lines_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if before {
            return self.write(file, bytes);
        }
        // This line fills the disk: what was left of it goes, and nothing after it.
        let allowed = self.take(bytes.len()).min(match cut.keep {
            Torn::Nothing => 0,
            Torn::Bytes(n) => n.min(bytes.len().saturating_sub(1)),
            Torn::AllButNewline => bytes.len().saturating_sub(1),
        });
        self.bytes.store(0, Ordering::SeqCst);
        self.finish(file, bytes, allowed)
    }

    /// Reserves up to `len` bytes of what is left; returns how many may be written.
    fn take(&self, len: usize) -> usize {
        self.bytes
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                Some(left.saturating_sub(len as u64))
            })
            .unwrap_or(0)
            .min(len as u64) as usize
    }

    fn finish(&self, file: &mut File, bytes: &[u8], allowed: usize) -> std::io::Result<()> {
        file.write_all(&bytes[..allowed])?;
        if allowed < bytes.len() {
            return Err(std::io::Error::from_raw_os_error(28));
        }
        Ok(())
    }
}

/// A file of the session opened for appending (events, console, a streaming answer):
/// every write goes through the session's write limit, if it has one.
pub struct AppendFile {
    file: File,
    limit: Option<Arc<WriteLimit>>,
    /// `events.jsonl`, where a test's event cut falls.
    events: bool,
}

impl AppendFile {
    pub fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match &self.limit {
            Some(limit) if self.events => limit.write_event_line(&mut self.file, bytes),
            Some(limit) => limit.write(&mut self.file, bytes),
            None => self.file.write_all(bytes),
        }
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }

    pub fn sync_data(&self) -> std::io::Result<()> {
        self.file.sync_data()
    }
}

/// Events read from disk, and the torn last line if there was one.
#[derive(Debug, Default)]
pub struct ReadEvents {
    pub records: Vec<EventRecord>,
    pub torn: Option<String>,
    /// Lines that are complete but not valid events (reported, skipped).
    pub invalid: Vec<(usize, String)>,
}

/// File-name-safe form of a name: letters, digits, `-`, `.`; the rest becomes `-`.
pub fn sanitize(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let trimmed = cleaned.trim_matches('-');
    if trimmed.is_empty() {
        "x".into()
    } else {
        trimmed.chars().take(48).collect()
    }
}

impl SessionDir {
    /// Creates `sessions_dir/<YYYYmmdd_HHMMSS>_<task>_<provider>_<model>/` (with a numeric
    /// suffix if that exists already).
    pub fn create(
        sessions_dir: &Path,
        task: &str,
        provider: &str,
        model: &str,
    ) -> Result<SessionDir> {
        let stamp = chrono::Local::now().format("%Y%m%d_%H%M%S");
        let base = format!(
            "{stamp}_{}_{}_{}",
            sanitize(task),
            sanitize(provider),
            sanitize(model)
        );
        std::fs::create_dir_all(sessions_dir).with_context(|| {
            format!("cannot create the sessions dir {}", sessions_dir.display())
        })?;
        for n in 0..100 {
            let name = if n == 0 {
                base.clone()
            } else {
                format!("{base}-{n}")
            };
            let path = sessions_dir.join(name);
            match std::fs::create_dir(&path) {
                Ok(()) => {
                    for sub in ["kernels", "llm", "eval", "prompts"] {
                        std::fs::create_dir_all(path.join(sub))?;
                    }
                    return Ok(SessionDir { path, limit: None });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(e).with_context(|| format!("cannot create {}", path.display()));
                }
            }
        }
        bail!(
            "cannot find a free session directory name under {}",
            sessions_dir.display()
        )
    }

    /// Creates the session directory at exactly `path` (a batch's `tasks/<key>`). A
    /// directory already there is taken if it holds no events yet (a batch stopped between
    /// making it and starting the session); one holding events is refused: that session is
    /// resumed, never started again.
    pub fn create_at(path: &Path) -> Result<SessionDir> {
        if path.join(EVENTS_FILE).exists() {
            bail!(
                "{} holds a session already (resume it instead)",
                path.display()
            );
        }
        for sub in ["kernels", "llm", "eval", "prompts"] {
            std::fs::create_dir_all(path.join(sub))
                .with_context(|| format!("cannot create {}", path.join(sub).display()))?;
        }
        Ok(SessionDir {
            path: path.to_path_buf(),
            limit: None,
        })
    }

    /// Opens an existing session directory (it must hold `events.jsonl`).
    pub fn open(path: &Path) -> Result<SessionDir> {
        if !path.exists() {
            bail!("{} does not exist", path.display());
        }
        if !path.join(EVENTS_FILE).is_file() {
            bail!(
                "{} is not a kforge session (no {EVENTS_FILE})",
                path.display()
            );
        }
        Ok(SessionDir {
            path: path.to_path_buf(),
            limit: None,
        })
    }

    /// The same session on a disk that holds only `bytes` more bytes: every write through
    /// this handle after that fails with ENOSPC, as a full disk does (a partial write
    /// first). This is how tests fill the disk without a tmpfs.
    pub fn with_write_limit(mut self, bytes: u64) -> SessionDir {
        self.limit = Some(Arc::new(WriteLimit {
            bytes: AtomicU64::new(bytes),
            cut: None,
        }));
        self
    }

    /// The same session on a disk that fills while `events.jsonl` gets its line number
    /// `lines + 1` from now: `keep` says how much of that line is written; every write
    /// after it fails with ENOSPC. Unlike a byte count, this falls on the same event
    /// whatever the lengths of timestamps and latencies (tests sweep it over a run).
    pub fn with_event_cut(mut self, lines: u64, keep: Torn) -> SessionDir {
        self.limit = Some(Arc::new(WriteLimit {
            bytes: AtomicU64::new(u64::MAX),
            cut: Some(EventCut {
                lines_left: AtomicU64::new(lines),
                keep,
            }),
        }));
        self
    }

    /// Opens a session file for appending (created when missing; `truncate` empties it).
    pub fn append_file(&self, relative: &str, truncate: bool) -> Result<AppendFile> {
        let path = self.file(relative);
        let file = OpenOptions::new()
            .create(true)
            .append(!truncate)
            .write(true)
            .truncate(truncate)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        Ok(AppendFile {
            file,
            limit: self.limit.clone(),
            events: relative == EVENTS_FILE,
        })
    }

    pub fn file(&self, relative: &str) -> PathBuf {
        self.path.join(relative)
    }

    /// Writes a file atomically (temp file + rename), creating parent dirs.
    pub fn write_file(&self, relative: &str, contents: &[u8]) -> Result<()> {
        let path = self.file(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        let written = File::create(&tmp).and_then(|mut f| {
            match &self.limit {
                Some(limit) => limit.write(&mut f, contents)?,
                None => f.write_all(contents)?,
            }
            f.sync_data()
        });
        if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, &path)) {
            std::fs::remove_file(&tmp).ok();
            return Err(e).with_context(|| format!("cannot write {}", path.display()));
        }
        Ok(())
    }

    pub fn read_file(&self, relative: &str) -> Result<String> {
        let path = self.file(relative);
        std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))
    }

    /// Reads all events, tolerating a torn last line.
    pub fn read_events(&self) -> Result<ReadEvents> {
        let path = self.file(EVENTS_FILE);
        let mut text = String::new();
        File::open(&path)
            .and_then(|mut f| f.read_to_string(&mut text))
            .with_context(|| format!("cannot read {}", path.display()))?;
        Ok(parse_events(&text))
    }

    /// Takes the single-writer lock. Fails with a clear message when another process
    /// holds it (that process is running this session).
    pub fn lock(&self) -> Result<SessionLock> {
        let path = self.file(LOCK_FILE);
        let file = crate::paths::open_lock_file(&path)?;
        if file.try_lock().is_err() {
            let holder = std::fs::read_to_string(&path).unwrap_or_default();
            bail!(
                "the session {} is being written by another kforge process{}; attach to it with `kforge open` instead",
                self.path.display(),
                holder
                    .trim()
                    .parse::<u32>()
                    .map(|p| format!(" (pid {p})"))
                    .unwrap_or_default()
            );
        }
        file.set_len(0).ok();
        (&file)
            .write_all(std::process::id().to_string().as_bytes())
            .ok();
        Ok(SessionLock { _file: file })
    }

    /// Whether another process is writing this session right now.
    pub fn is_live(&self) -> bool {
        let Ok(file) = OpenOptions::new()
            .read(true)
            .write(true)
            .open(self.file(LOCK_FILE))
        else {
            return false;
        };
        match file.try_lock() {
            Ok(()) => {
                file.unlock().ok();
                false
            }
            Err(_) => true,
        }
    }

    /// Appends a command for the process running this session.
    pub fn send_command(&self, command: &Command) -> Result<()> {
        let mut line = serde_json::to_string(command)?;
        line.push('\n');
        let path = self.file(CONTROL_FILE);
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        // One write of one line: appends of under PIPE_BUF bytes do not interleave.
        f.write_all(line.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(())
    }
}

/// Held while this process writes the session; released when dropped or when the
/// process dies (even by SIGKILL).
pub struct SessionLock {
    _file: File,
}

pub fn parse_events(text: &str) -> ReadEvents {
    let mut out = ReadEvents::default();
    let complete = text.ends_with('\n');
    let lines: Vec<&str> = text.split_terminator('\n').collect();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<EventRecord>(line) {
            Ok(r) => out.records.push(r),
            Err(_) if i + 1 == lines.len() && !complete => out.torn = Some(line.to_string()),
            Err(e) => out.invalid.push((i + 1, format!("{e}"))),
        }
    }
    out
}

/// Appends events to `events.jsonl`.
pub struct EventWriter {
    file: AppendFile,
    next_seq: u64,
    /// Set by a failed append: the file may end in a partial line, so nothing more is
    /// appended (resume cuts the torn line off before writing again).
    broken: bool,
}

impl EventWriter {
    /// Opens for appending after `last_seq`, the last event that `read_events` gives. A
    /// last line without its newline is settled the way `read_events` reads it, so the
    /// file says what the run resumed from: a whole event (a disk that filled just
    /// before the newline) gets its newline and stays; a torn one is cut off. Either way
    /// the next event starts on a line of its own.
    pub fn open(dir: &SessionDir, last_seq: u64) -> Result<EventWriter> {
        let path = dir.file(EVENTS_FILE);
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        let len = file.metadata()?.len();
        if len > 0 {
            let mut text = String::new();
            file.seek(SeekFrom::Start(0))?;
            file.read_to_string(&mut text)?;
            if !text.ends_with('\n') {
                if parse_events(&text).torn.is_some() {
                    let keep = text.rfind('\n').map_or(0, |i| i + 1);
                    file.set_len(keep as u64)?;
                } else {
                    // `read_events` took this line as an event: keep it, ended.
                    file.write_all(b"\n")?;
                }
            }
        }
        drop(file);
        Ok(EventWriter {
            file: dir.append_file(EVENTS_FILE, false)?,
            next_seq: last_seq + 1,
            broken: false,
        })
    }

    /// Appends one event as one line and flushes it to the OS.
    pub fn append(&mut self, event: Event) -> Result<EventRecord> {
        let record = EventRecord {
            seq: self.next_seq,
            ts: Utc::now(),
            event,
        };
        if self.broken {
            bail!("events.jsonl is not written to after a failed write");
        }
        let mut line = serde_json::to_string(&record)?;
        line.push('\n');
        if let Err(e) = self
            .file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.flush())
        {
            self.broken = true;
            return Err(e).context("cannot append to events.jsonl");
        }
        self.next_seq += 1;
        Ok(record)
    }

    /// Forces written events to disk (step boundaries).
    pub fn sync(&mut self) -> Result<()> {
        self.file.sync_data().context("cannot sync events.jsonl")
    }
}

/// Reads lines appended to a JSON-lines file since the last poll (for attach and control).
pub struct LineFollower {
    path: PathBuf,
    offset: u64,
    partial: String,
}

impl LineFollower {
    pub fn new(path: PathBuf, offset: u64) -> LineFollower {
        LineFollower {
            path,
            offset,
            partial: String::new(),
        }
    }

    /// Starts at the current end of the file (only lines written from now on).
    pub fn from_end(path: PathBuf) -> LineFollower {
        let offset = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        LineFollower::new(path, offset)
    }

    /// Complete new lines since the last call.
    pub fn poll(&mut self) -> Vec<String> {
        let Ok(mut file) = File::open(&self.path) else {
            return Vec::new();
        };
        if file.seek(SeekFrom::Start(self.offset)).is_err() {
            return Vec::new();
        }
        let mut reader = BufReader::new(file);
        let mut lines = Vec::new();
        loop {
            let mut buf = String::new();
            match reader.read_line(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    self.offset += n as u64;
                    if buf.ends_with('\n') {
                        let mut full = std::mem::take(&mut self.partial);
                        full.push_str(buf.trim_end_matches('\n'));
                        if !full.trim().is_empty() {
                            lines.push(full);
                        }
                    } else {
                        self.partial.push_str(&buf);
                    }
                }
            }
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::EngineState;

    #[test]
    fn names_are_sanitized() {
        assert_eq!(sanitize("19_ReLU"), "19-ReLU");
        assert_eq!(
            sanitize("deepseek/deepseek-chat:free"),
            "deepseek-deepseek-chat-free"
        );
        assert_eq!(sanitize("///"), "x");
    }

    #[test]
    fn write_read_and_torn_line() {
        let root = tempfile::tempdir().unwrap();
        let dir = SessionDir::create(root.path(), "relu", "mock", "m1").unwrap();
        assert!(
            dir.path
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .ends_with("_relu_mock_m1")
        );
        let mut w = EventWriter::open(&dir, 0).unwrap();
        w.append(Event::StateChanged {
            state: EngineState::Running,
        })
        .unwrap();
        w.append(Event::StateChanged {
            state: EngineState::Paused,
        })
        .unwrap();
        w.sync().unwrap();
        drop(w);
        // A crash in the middle of a line.
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.file(EVENTS_FILE))
            .unwrap();
        f.write_all(br#"{"seq":3,"ts":"2026-"#).unwrap();
        let read = SessionDir::open(&dir.path).unwrap().read_events().unwrap();
        assert_eq!(read.records.len(), 2);
        assert!(read.torn.is_some());
        assert!(read.invalid.is_empty());
        // Reopening cuts the torn line and continues the sequence.
        let mut w = EventWriter::open(&dir, 2).unwrap();
        let r = w
            .append(Event::StateChanged {
                state: EngineState::Running,
            })
            .unwrap();
        assert_eq!(r.seq, 3);
        let read = dir.read_events().unwrap();
        assert_eq!(read.records.len(), 3);
        assert!(read.torn.is_none());
    }

    /// A disk that filled just before an event's newline leaves a whole event on a line
    /// that does not end: `read_events` reads it, so reopening keeps it (and ends its
    /// line) instead of cutting it, and what a resume started from stays on disk.
    #[test]
    fn a_whole_last_event_without_its_newline_is_kept() {
        let root = tempfile::tempdir().unwrap();
        let dir = SessionDir::create(root.path(), "t", "p", "m").unwrap();
        let mut w = EventWriter::open(&dir, 0).unwrap();
        w.append(Event::StateChanged {
            state: EngineState::Running,
        })
        .unwrap();
        drop(w);
        let line = serde_json::to_string(&EventRecord {
            seq: 2,
            ts: Utc::now(),
            event: Event::StateChanged {
                state: EngineState::Paused,
            },
        })
        .unwrap();
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.file(EVENTS_FILE))
            .unwrap();
        f.write_all(line.as_bytes()).unwrap();
        let read = dir.read_events().unwrap();
        assert_eq!(read.records.len(), 2);
        assert!(read.torn.is_none());
        let mut w = EventWriter::open(&dir, read.records.last().unwrap().seq).unwrap();
        let r = w
            .append(Event::StateChanged {
                state: EngineState::Running,
            })
            .unwrap();
        assert_eq!(r.seq, 3);
        let read = dir.read_events().unwrap();
        assert_eq!(
            read.records.iter().map(|r| r.seq).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        assert!(read.torn.is_none() && read.invalid.is_empty());
    }

    /// An event cut falls on the same line whatever the lines' lengths: the lines before
    /// it are whole, that line is cut as asked, and nothing is written after it.
    #[test]
    fn an_event_cut_fills_the_disk_on_its_line() {
        let root = tempfile::tempdir().unwrap();
        let dir = SessionDir::create(root.path(), "t", "p", "m").unwrap();
        for (keep, torn) in [
            (Torn::Nothing, None),
            (Torn::Bytes(5), Some(5)),
            (Torn::AllButNewline, None),
        ] {
            std::fs::remove_file(dir.file(EVENTS_FILE)).ok();
            let limited = dir.clone().with_event_cut(1, keep);
            let mut w = EventWriter::open(&limited, 0).unwrap();
            let event = || Event::StateChanged {
                state: EngineState::Running,
            };
            w.append(event()).unwrap();
            assert!(w.append(event()).is_err());
            assert!(limited.write_file("eval/1.json", b"{}").is_err());
            let read = dir.read_events().unwrap();
            let whole = if keep == Torn::AllButNewline { 2 } else { 1 };
            assert_eq!(read.records.len(), whole, "{keep:?}");
            assert_eq!(read.torn.map(|t| t.len()), torn, "{keep:?}");
        }
    }

    #[test]
    fn lock_is_exclusive_and_visible() {
        let root = tempfile::tempdir().unwrap();
        let dir = SessionDir::create(root.path(), "t", "p", "m").unwrap();
        assert!(!dir.is_live());
        let lock = dir.lock().unwrap();
        assert!(dir.is_live());
        let err = dir.lock().err().unwrap().to_string();
        assert!(err.contains("another kforge process"), "{err}");
        drop(lock);
        assert!(!dir.is_live());
        dir.lock().unwrap();
    }

    #[test]
    fn follower_sees_only_complete_new_lines() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("f.jsonl");
        std::fs::write(&path, "old\n").unwrap();
        let mut follower = LineFollower::from_end(path.clone());
        assert!(follower.poll().is_empty());
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"one\ntw").unwrap();
        assert_eq!(follower.poll(), vec!["one"]);
        f.write_all(b"o\n").unwrap();
        assert_eq!(follower.poll(), vec!["two"]);
    }

    #[test]
    fn commands_go_to_the_control_file() {
        let root = tempfile::tempdir().unwrap();
        let dir = SessionDir::create(root.path(), "t", "p", "m").unwrap();
        let mut follower = LineFollower::new(dir.file(CONTROL_FILE), 0);
        dir.send_command(&Command::Pause).unwrap();
        dir.send_command(&Command::Stop).unwrap();
        let lines = follower.poll();
        let commands: Vec<Command> = lines
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(commands, vec![Command::Pause, Command::Stop]);
    }
}
