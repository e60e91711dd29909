//! Session files the screen shows (kernels, prompts, answers, evaluation results), read
//! off the UI thread and cached, as `Highlighter` does for syntax colours: a draw asks for
//! a file, gets it if loaded and otherwise starts a load and shows "loading" for a frame.
//! Evaluation JSON is parsed on the worker too. Once a second the worker checks the cached
//! files against the disk (a prompt edited, a kernel replaced) and reloads what changed.
//!
//! `Docs::sync` reads on the calling thread instead (tests and benchmarks, where a frame
//! must show everything at once).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use crate::protocol::EvalResult;

use super::job::{BackgroundJob, Done};

/// What the disk said about a file when it was read: a changed stamp means reload.
type Stamp = Option<(Option<SystemTime>, u64)>;

/// A file as read: its text (`None`: not there) and, for `eval/*.json`, its parsed result.
#[derive(Debug, Clone)]
pub struct File {
    text: Option<Arc<str>>,
    eval: Option<Arc<EvalResult>>,
    stamp: Stamp,
}

/// A file the worker read, keyed by its path in the session.
pub type Loaded = Done<String, File>;

/// Most files kept; a long browse drops the oldest.
const CACHE_FILES: usize = 96;

pub struct Docs {
    root: PathBuf,
    /// A request carries the stamp of the cached copy (`None`: read it whatever it is);
    /// the answer is the file read again, or none when the stamp still holds.
    job: BackgroundJob<String, Option<Stamp>, File>,
}

fn stamp_of(path: &Path) -> Stamp {
    std::fs::metadata(path)
        .ok()
        .map(|m| (m.modified().ok(), m.len()))
}

fn load(root: &Path, rel: &str) -> File {
    let path = root.join(rel);
    let stamp = stamp_of(&path);
    let text: Option<Arc<str>> = std::fs::read(&path)
        .ok()
        .map(|b| Arc::from(String::from_utf8_lossy(&b).as_ref()));
    let eval = (rel.starts_with("eval/") && rel.ends_with(".json"))
        .then_some(text.as_deref())
        .flatten()
        .and_then(|t| serde_json::from_str::<EvalResult>(t).ok())
        .map(Arc::new);
    File { text, eval, stamp }
}

/// Reads `rel` under `root` unless `held`, the stamp of the copy shown, still holds.
fn reader(root: &Path) -> impl FnMut(&String, Option<Stamp>) -> Option<File> + Send + 'static {
    let root = root.to_path_buf();
    move |rel, held| match held {
        Some(stamp) if stamp_of(&root.join(rel)) == stamp => None,
        _ => Some(load(&root, rel)),
    }
}

impl Docs {
    /// Reads on the calling thread (tests, benchmarks).
    pub fn sync(root: &Path) -> Docs {
        Docs {
            root: root.to_path_buf(),
            job: BackgroundJob::inline(CACHE_FILES, reader(root)),
        }
    }

    /// Reads on a worker thread; `notify` gets each file read (it feeds the app loop,
    /// which hands it back through `loaded`).
    pub fn threaded(root: &Path, notify: impl Fn(Loaded) + Send + 'static) -> Docs {
        let notify = move |loaded| {
            notify(loaded);
            true
        };
        Docs {
            root: root.to_path_buf(),
            job: BackgroundJob::spawn("kforge-docs", CACHE_FILES, reader(root), notify),
        }
    }

    /// A session file's text if loaded; otherwise its load starts and this is `None`.
    pub fn text(&self, rel: &str) -> Option<Arc<str>> {
        self.job.get(rel, || None)?.text
    }

    /// A session file's text for an action the person asked for (`A`, `e`): from the cache,
    /// else read now on this thread (one small file, once), so the action never fails
    /// because the worker has not brought it yet. `None`: it cannot be read.
    pub fn text_now(&self, rel: &str) -> Option<Arc<str>> {
        if let Some(text) = self.job.cached(rel).and_then(|f| f.text) {
            return Some(text);
        }
        let file = load(&self.root, rel);
        let text = file.text.clone();
        self.job.insert(rel.to_string(), file);
        text
    }

    /// An evaluation result file, parsed.
    pub fn eval(&self, rel: &str) -> Option<Arc<EvalResult>> {
        self.job.get(rel, || None)?.eval
    }

    /// Whether a file was asked for and has not arrived yet ("loading", not "missing").
    pub fn loading(&self, rel: &str) -> bool {
        self.job.pending(rel)
    }

    /// A file read by the worker.
    pub fn loaded(&self, l: Loaded) {
        self.job.done(l);
    }

    /// Forget a file (an event says it was rewritten): the next draw loads it again.
    pub fn forget(&self, rel: &str) {
        self.job.forget(rel);
    }

    /// Checks the cached files against the disk; returns whether any changed (sync mode;
    /// the worker reports changes as loads).
    pub fn check(&self) -> bool {
        let held = self.job.read_cached(|rel, file| (rel.clone(), file.stamp));
        let mut changed = false;
        for (rel, stamp) in held {
            changed |= self.job.request(rel, Some(stamp)).is_some();
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    #[test]
    fn the_worker_loads_and_reports_changes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.md"), "one").unwrap();
        let (tx, rx) = mpsc::channel();
        let docs = Docs::threaded(dir.path(), move |l| {
            let _ = tx.send(l);
        });
        assert!(
            docs.text("a.md").is_none(),
            "not read on the caller's thread"
        );
        assert!(docs.loading("a.md"));
        let got = rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        docs.loaded(got);
        assert_eq!(docs.text("a.md").as_deref(), Some("one"));
        assert!(!docs.loading("a.md"));
        std::fs::write(dir.path().join("a.md"), "two, longer").unwrap();
        assert!(!docs.check());
        let got = rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        docs.loaded(got);
        assert_eq!(docs.text("a.md").as_deref(), Some("two, longer"));
    }

    #[test]
    fn sync_reads_at_once_and_sees_missing_files_and_changes() {
        let dir = tempfile::tempdir().unwrap();
        let docs = Docs::sync(dir.path());
        assert!(docs.text("nope.md").is_none());
        assert!(!docs.loading("nope.md"));
        std::fs::create_dir(dir.path().join("eval")).unwrap();
        std::fs::write(dir.path().join("eval/1.json"), "{not json").unwrap();
        assert!(docs.eval("eval/1.json").is_none());
        assert!(docs.text("eval/1.json").is_some());
        std::fs::write(dir.path().join("nope.md"), "here now").unwrap();
        assert!(docs.check(), "a file that appeared counts as changed");
        assert_eq!(docs.text("nope.md").as_deref(), Some("here now"));
        assert!(!docs.check());
    }
}
