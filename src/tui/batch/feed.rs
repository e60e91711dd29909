//! The batch as the view shows it, read off the UI thread as `Docs` reads session files: a
//! worker re-reads batch.json and every task's figures (`batch::results::task_result`, what
//! `collect` does) once a second and sends what it read when it changed. A task whose
//! session did not change since the last read (its events.jsonl, its lock, its
//! refused.json) is not read again, so a big batch costs little between changes.
//!
//! `BatchFeed::sync` reads on the calling thread instead (tests).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::batch::manifest::{BatchTask, Manifest, REFUSED_FILE};
use crate::batch::results::{TaskResult, task_result};
use crate::protocol::TaskKey;
use crate::session::store::{EVENTS_FILE, SessionDir};
use crate::tui::job::BackgroundJob;

/// How often the worker reads the batch.
pub const INTERVAL: Duration = Duration::from_secs(1);

/// batch.json and every task's figures, in the manifest's order.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub manifest: Manifest,
    pub results: Vec<TaskResult>,
}

type FileStamp = Option<(u64, Option<SystemTime>)>;

/// What the disk said about a task's session when it was read: a change means read again.
#[derive(Debug, Clone, PartialEq)]
struct Stamp {
    events: FileStamp,
    refused: FileStamp,
    live: bool,
}

fn file_stamp(path: &Path) -> FileStamp {
    std::fs::metadata(path)
        .ok()
        .map(|m| (m.len(), m.modified().ok()))
}

fn stamp(batch: &Path, task: &BatchTask) -> Stamp {
    let dir = batch.join(task.session());
    Stamp {
        events: file_stamp(&dir.join(EVENTS_FILE)),
        refused: file_stamp(&dir.join(REFUSED_FILE)),
        live: SessionDir::open(&dir).is_ok_and(|d| d.is_live()),
    }
}

/// Reads a batch, keeping each task's figures until its session changes.
struct Reader {
    dir: PathBuf,
    cache: HashMap<TaskKey, (Stamp, TaskResult)>,
}

impl Reader {
    fn new(dir: &Path) -> Reader {
        Reader {
            dir: dir.to_path_buf(),
            cache: HashMap::new(),
        }
    }

    fn read(&mut self) -> Result<Snapshot, String> {
        let manifest = Manifest::load(&self.dir).map_err(|e| format!("{e:#}"))?;
        let mut cache = std::mem::take(&mut self.cache);
        let results = manifest
            .tasks
            .iter()
            .map(|task| {
                let now = stamp(&self.dir, task);
                let result = match cache.remove(&task.key) {
                    Some((was, r)) if was == now => r,
                    _ => task_result(&self.dir, task),
                };
                self.cache.insert(task.key.clone(), (now, result.clone()));
                result
            })
            .collect();
        Ok(Snapshot { manifest, results })
    }
}

/// Reads the whole batch now, as the worker does (no cache).
pub fn read_batch(dir: &Path) -> Result<Snapshot, String> {
    Reader::new(dir).read()
}

/// A read of the batch, or why it failed.
type Read = Result<Snapshot, String>;

pub struct BatchFeed {
    /// One request, "read now", under the one key `()`; the view keeps the snapshot, so
    /// the job caches nothing.
    job: BackgroundJob<(), (), Read>,
}

impl BatchFeed {
    /// Reads on the calling thread, when asked (`refresh`).
    pub fn sync(dir: &Path) -> BatchFeed {
        let mut reader = Reader::new(dir);
        BatchFeed {
            job: BackgroundJob::inline(0, move |_, ()| Some(reader.read())),
        }
    }

    /// Reads on a worker thread every `interval` (and when asked), handing each read that
    /// differs from the last to `notify`; it stops when `notify` says no one listens or the
    /// feed is dropped.
    pub fn threaded(
        dir: &Path,
        interval: Duration,
        notify: impl Fn(Read) -> bool + Send + 'static,
    ) -> BatchFeed {
        let mut reader = Reader::new(dir);
        let mut last: Option<Read> = None;
        let read_news = move |_: &(), ()| {
            let read = reader.read();
            if last.as_ref() == Some(&read) {
                return None;
            }
            last = Some(read.clone());
            Some(read)
        };
        BatchFeed {
            job: BackgroundJob::spawn_periodic(
                "kforge-batch",
                0,
                interval,
                || ((), ()),
                read_news,
                move |done| notify(done.output),
            ),
        }
    }

    /// Asks for a read now: in sync mode it is done here and returned; the worker sends
    /// its read as usual (if it changed).
    pub fn refresh(&mut self) -> Option<Read> {
        self.job.request((), ())
    }
}
