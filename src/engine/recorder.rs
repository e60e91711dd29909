//! Where every engine event goes: appended to `events.jsonl` (the source of truth),
//! folded into the live state, mirrored into `console.log` when it is a log line, and
//! sent to every live subscriber (headless printer, TUI). The engine writes the session's
//! other files here too, so that a file an event names is on disk before the event.

use anyhow::Result;
use chrono::Utc;
use tokio::sync::mpsc;

use crate::protocol::{Event, EventRecord, LogLevel};
use crate::session::state::SessionState;
use crate::session::store::{AppendFile, EventWriter, SessionDir};

pub struct Recorder {
    dir: SessionDir,
    writer: EventWriter,
    state: SessionState,
    console: AppendFile,
    subscribers: Vec<mpsc::UnboundedSender<EventRecord>>,
    /// First write error (a full disk, say): reported once, then the run stops.
    pub write_error: Option<String>,
}

impl Recorder {
    /// Continues `dir`'s events after `state` (the fold of what is already on disk).
    pub fn open(dir: &SessionDir, state: SessionState) -> Result<Recorder> {
        let writer = EventWriter::open(dir, state.last_seq)?;
        let console = dir.append_file("console.log", false)?;
        Ok(Recorder {
            dir: dir.clone(),
            writer,
            state,
            console,
            subscribers: Vec::new(),
            write_error: None,
        })
    }

    pub fn state(&self) -> &SessionState {
        &self.state
    }

    /// A live feed of every event from now on (transient ones included).
    pub fn subscribe(&mut self) -> mpsc::UnboundedReceiver<EventRecord> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.subscribers.push(tx);
        rx
    }

    pub fn emit(&mut self, event: Event) -> EventRecord {
        let record = if event.is_transient() {
            EventRecord {
                seq: self.state.last_seq,
                ts: Utc::now(),
                event,
            }
        } else {
            match self.writer.append(event.clone()) {
                Ok(r) => r,
                Err(e) => {
                    // Keep the run's state consistent in memory; the caller stops the run.
                    if self.write_error.is_none() {
                        self.write_error = Some(format!("{e:#}"));
                    }
                    EventRecord {
                        seq: self.state.last_seq + 1,
                        ts: Utc::now(),
                        event,
                    }
                }
            }
        };
        if let Event::Log {
            level,
            tag,
            message,
        } = &record.event
        {
            let marker = match level {
                LogLevel::Info => "",
                LogLevel::Warn => "warning: ",
                LogLevel::Error => "error: ",
            };
            let line = format!(
                "{} [{tag}] {marker}{message}\n",
                record.ts.format("%H:%M:%S")
            );
            if let Err(e) = self.console.write_all(line.as_bytes())
                && self.write_error.is_none()
            {
                self.write_error = Some(format!("cannot write console.log: {e}"));
            }
        }
        self.state.apply(&record);
        self.subscribers.retain(|s| s.send(record.clone()).is_ok());
        record
    }

    /// Writes a session file (a prompt, a kernel, a result), before the event that will
    /// name it.
    pub fn write_file(&self, file: &str, contents: &[u8]) -> Result<()> {
        self.dir.write_file(file, contents)
    }

    /// Opens a session file that grows as its content arrives (an answer streaming in),
    /// truncated first.
    pub fn stream_file(&self, file: &str) -> Result<AppendFile> {
        self.dir.append_file(file, true)
    }

    /// Writes the report files (`report.md`, `summary.json`, `usage.csv`) from the state
    /// of the events recorded so far.
    pub fn write_report(&self) -> Result<()> {
        crate::report::write_all(&self.dir, &self.state)
    }

    pub fn log(&mut self, level: LogLevel, tag: &str, message: impl Into<String>) {
        self.emit(Event::Log {
            level,
            tag: tag.to_string(),
            message: message.into(),
        });
    }

    /// Forces everything written so far to disk (step boundaries).
    pub fn sync(&mut self) {
        if let Err(e) = self.writer.sync()
            && self.write_error.is_none()
        {
            self.write_error = Some(format!("{e:#}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::EngineState;

    #[test]
    fn emits_to_disk_state_console_and_subscribers() {
        let root = tempfile::tempdir().unwrap();
        let dir = SessionDir::create(root.path(), "t", "p", "m").unwrap();
        let mut r = Recorder::open(&dir, SessionState::default()).unwrap();
        let mut rx = r.subscribe();
        r.emit(Event::StateChanged {
            state: EngineState::Running,
        });
        r.log(LogLevel::Warn, "seed 1", "compile error");
        r.emit(Event::LlmDelta {
            call: crate::protocol::CallId(1),
            text: "x".into(),
            reasoning: String::new(),
        });
        r.sync();
        assert_eq!(r.state().state, EngineState::Running);
        assert_eq!(
            dir.read_events().unwrap().records.len(),
            2,
            "transient events stay off disk"
        );
        assert_eq!(std::iter::from_fn(|| rx.try_recv().ok()).count(), 3);
        let console = std::fs::read_to_string(dir.file("console.log")).unwrap();
        assert!(
            console.contains("[seed 1] warning: compile error"),
            "{console}"
        );
    }
}
