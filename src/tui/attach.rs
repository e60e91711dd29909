//! Following a session that another process writes: new lines of `events.jsonl` become
//! events, the growing `llm/<call>.response.md` (and `.reasoning.md`) of calls in flight
//! become live deltas, and commands go to `control.jsonl`.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use chrono::Utc;
use tokio::sync::mpsc::{self, UnboundedSender};
use tokio::task::JoinHandle;

use crate::protocol::{CallId, Command, Event, EventRecord};
use crate::session::store::{EVENTS_FILE, LineFollower, SessionDir, parse_events};

pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Reads the events so far; returns them and the byte offset after the last complete
/// line (where following starts; a torn last line is read again once completed).
pub fn read_initial(dir: &SessionDir) -> Result<(Vec<EventRecord>, u64)> {
    let path = dir.file(EVENTS_FILE);
    let bytes = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let complete = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let text = String::from_utf8_lossy(&bytes[..complete]);
    let read = parse_events(&text);
    for (line, err) in &read.invalid {
        tracing::warn!("events.jsonl line {line} skipped: {err}");
    }
    Ok((read.records, complete as u64))
}

/// Tail of one growing file, delivering whole UTF-8 characters.
struct Tail {
    path: PathBuf,
    offset: u64,
    pending: Vec<u8>,
}

impl Tail {
    fn new(path: PathBuf) -> Tail {
        Tail {
            path,
            offset: 0,
            pending: Vec::new(),
        }
    }

    fn poll(&mut self) -> String {
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return String::new();
        };
        if f.seek(SeekFrom::Start(self.offset)).is_err() {
            return String::new();
        }
        let mut buf = Vec::new();
        if let Ok(n) = f.read_to_end(&mut buf) {
            self.offset += n as u64;
        }
        self.pending.extend_from_slice(&buf);
        let valid = match std::str::from_utf8(&self.pending) {
            Ok(_) => self.pending.len(),
            Err(e) => e.valid_up_to(),
        };
        let text = String::from_utf8_lossy(&self.pending[..valid]).into_owned();
        self.pending.drain(..valid);
        text
    }
}

fn call_tails(dir: &SessionDir, prompt_file: &str, call: CallId) -> (Tail, Tail) {
    let stem = prompt_file
        .strip_suffix(".prompt.md")
        .map(str::to_string)
        .unwrap_or_else(|| format!("llm/{call}"));
    (
        Tail::new(dir.file(&format!("{stem}.response.md"))),
        Tail::new(dir.file(&format!("{stem}.reasoning.md"))),
    )
}

/// Follows `events.jsonl` from `offset` every `interval`, sending new events (and live
/// deltas of calls in flight) until the receiver is gone.
pub fn follow(
    dir: SessionDir,
    offset: u64,
    initial: &[EventRecord],
    tx: UnboundedSender<EventRecord>,
    interval: Duration,
) -> JoinHandle<()> {
    let mut tails: HashMap<CallId, (Tail, Tail)> = HashMap::new();
    for r in initial {
        match &r.event {
            Event::LlmCallStarted {
                call, prompt_file, ..
            } => {
                tails.insert(*call, call_tails(&dir, prompt_file, *call));
            }
            Event::LlmCallFinished { call, .. } => {
                tails.remove(call);
            }
            _ => {}
        }
    }
    tokio::spawn(async move {
        let mut follower = LineFollower::new(dir.file(EVENTS_FILE), offset);
        let mut iv = tokio::time::interval(interval);
        iv.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            iv.tick().await;
            for line in follower.poll() {
                let record: EventRecord = match serde_json::from_str(&line) {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::warn!("events.jsonl: skipped a line: {e}");
                        continue;
                    }
                };
                match &record.event {
                    Event::LlmCallStarted {
                        call, prompt_file, ..
                    } => {
                        tails.insert(*call, call_tails(&dir, prompt_file, *call));
                    }
                    Event::LlmCallFinished { call, .. } => {
                        // Deliver the last of the text before the call closes.
                        if let Some((mut a, mut b)) = tails.remove(call) {
                            let (text, reasoning) = (a.poll(), b.poll());
                            if (!text.is_empty() || !reasoning.is_empty())
                                && tx.send(delta(*call, text, reasoning)).is_err()
                            {
                                return;
                            }
                        }
                    }
                    _ => {}
                }
                if tx.send(record).is_err() {
                    return;
                }
            }
            for (call, (resp, reason)) in tails.iter_mut() {
                let (text, reasoning) = (resp.poll(), reason.poll());
                if (!text.is_empty() || !reasoning.is_empty())
                    && tx.send(delta(*call, text, reasoning)).is_err()
                {
                    return;
                }
            }
            if tx.is_closed() {
                return;
            }
        }
    })
}

fn delta(call: CallId, text: String, reasoning: String) -> EventRecord {
    EventRecord {
        seq: 0,
        ts: Utc::now(),
        event: Event::LlmDelta {
            call,
            text,
            reasoning,
        },
    }
}

/// A command sender whose commands are appended to the session's control file.
pub fn command_writer(dir: SessionDir) -> (UnboundedSender<Command>, JoinHandle<()>) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Command>();
    let task = tokio::spawn(async move {
        while let Some(c) = rx.recv().await {
            if let Err(e) = dir.send_command(&c) {
                tracing::error!("cannot write the command: {e:#}");
            }
        }
    });
    (tx, task)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_delivers_whole_characters() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.md");
        let bytes = "é".as_bytes();
        std::fs::write(&p, [b'a', bytes[0]]).unwrap();
        let mut t = Tail::new(p.clone());
        assert_eq!(t.poll(), "a");
        std::fs::write(&p, [b'a', bytes[0], bytes[1], b'b']).unwrap();
        assert_eq!(t.poll(), "éb");
        assert_eq!(t.poll(), "");
    }
}
