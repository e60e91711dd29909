//! Session files the screen shows (kernels, prompts, answers, evaluation results), read
//! off the UI thread and cached, as `Highlighter` does for syntax colours: a draw asks for
//! a file, gets it if loaded and otherwise starts a load and shows "loading" for a frame.
//! Evaluation JSON is parsed on the worker too. Once a second the worker checks the cached
//! files against the disk (a prompt edited, a kernel replaced) and reloads what changed.
//!
//! `Docs::sync` reads on the calling thread instead (tests and benchmarks, where a frame
//! must show everything at once).

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::time::SystemTime;

use crate::protocol::EvalResult;

/// What the disk said about a file when it was read: a changed stamp means reload.
type Stamp = Option<(Option<SystemTime>, u64)>;

/// A file as loaded: its text (`None`: not there) and, for `eval/*.json`, its parsed
/// result.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub rel: String,
    text: Option<Arc<str>>,
    eval: Option<Arc<EvalResult>>,
    stamp: Stamp,
}

enum Job {
    Load(String),
    /// Check these files against their stamps; reload the changed ones.
    Check(Vec<(String, Stamp)>),
}

/// Most files kept; a long browse drops the oldest.
const CACHE_FILES: usize = 96;

#[derive(Default)]
struct Cache {
    files: HashMap<String, Loaded>,
    order: Vec<String>,
    pending: HashSet<String>,
}

pub struct Docs {
    root: PathBuf,
    cache: RefCell<Cache>,
    worker: Option<mpsc::Sender<Job>>,
}

fn stamp_of(path: &Path) -> Stamp {
    std::fs::metadata(path)
        .ok()
        .map(|m| (m.modified().ok(), m.len()))
}

fn load(root: &Path, rel: &str) -> Loaded {
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
    Loaded {
        rel: rel.to_string(),
        text,
        eval,
        stamp,
    }
}

impl Docs {
    /// Reads on the calling thread (tests, benchmarks).
    pub fn sync(root: &Path) -> Docs {
        Docs {
            root: root.to_path_buf(),
            cache: RefCell::default(),
            worker: None,
        }
    }

    /// Reads on a worker thread; `notify` gets each file read (it feeds the app loop,
    /// which hands it back through `loaded`).
    pub fn threaded(root: &Path, notify: impl Fn(Loaded) + Send + 'static) -> Docs {
        let (tx, rx) = mpsc::channel::<Job>();
        let dir = root.to_path_buf();
        std::thread::Builder::new()
            .name("kforge-docs".into())
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    match job {
                        Job::Load(rel) => notify(load(&dir, &rel)),
                        Job::Check(files) => {
                            for (rel, stamp) in files {
                                if stamp_of(&dir.join(&rel)) != stamp {
                                    notify(load(&dir, &rel));
                                }
                            }
                        }
                    }
                }
            })
            .ok();
        Docs {
            root: root.to_path_buf(),
            cache: RefCell::default(),
            worker: Some(tx),
        }
    }

    fn get<T>(&self, rel: &str, pick: impl Fn(&Loaded) -> Option<T>) -> Option<T> {
        if let Some(l) = self.cache.borrow().files.get(rel) {
            return pick(l);
        }
        match &self.worker {
            None => {
                let l = load(&self.root, rel);
                let out = pick(&l);
                self.insert(l);
                out
            }
            Some(tx) => {
                if self.cache.borrow_mut().pending.insert(rel.to_string()) {
                    let _ = tx.send(Job::Load(rel.to_string()));
                }
                None
            }
        }
    }

    /// A session file's text if loaded; otherwise its load starts and this is `None`.
    pub fn text(&self, rel: &str) -> Option<Arc<str>> {
        self.get(rel, |l| l.text.clone())
    }

    /// A session file's text for an action the person asked for (`A`, `e`): from the cache,
    /// else read now on this thread (one small file, once), so the action never fails
    /// because the worker has not brought it yet. `None`: it cannot be read.
    pub fn text_now(&self, rel: &str) -> Option<Arc<str>> {
        if let Some(text) = self
            .cache
            .borrow()
            .files
            .get(rel)
            .and_then(|l| l.text.clone())
        {
            return Some(text);
        }
        let l = load(&self.root, rel);
        let text = l.text.clone();
        self.insert(l);
        text
    }

    /// An evaluation result file, parsed.
    pub fn eval(&self, rel: &str) -> Option<Arc<EvalResult>> {
        self.get(rel, |l| l.eval.clone())
    }

    /// Whether a file was asked for and has not arrived yet ("loading", not "missing").
    pub fn loading(&self, rel: &str) -> bool {
        self.cache.borrow().pending.contains(rel)
    }

    fn insert(&self, l: Loaded) {
        let mut c = self.cache.borrow_mut();
        c.pending.remove(&l.rel);
        if !c.files.contains_key(&l.rel) {
            c.order.push(l.rel.clone());
        }
        c.files.insert(l.rel.clone(), l);
        while c.order.len() > CACHE_FILES {
            let old = c.order.remove(0);
            c.files.remove(&old);
        }
    }

    /// A file read by the worker.
    pub fn loaded(&self, l: Loaded) {
        self.insert(l);
    }

    /// Forget a file (an event says it was rewritten): the next draw loads it again.
    pub fn forget(&self, rel: &str) {
        let mut c = self.cache.borrow_mut();
        c.files.remove(rel);
        c.order.retain(|r| r != rel);
    }

    /// Checks the cached files against the disk; returns whether any changed (sync mode;
    /// the worker reports changes as loads).
    pub fn check(&self) -> bool {
        let files: Vec<(String, Stamp)> = self
            .cache
            .borrow()
            .files
            .values()
            .map(|l| (l.rel.clone(), l.stamp))
            .collect();
        match &self.worker {
            Some(tx) => {
                let _ = tx.send(Job::Check(files));
                false
            }
            None => {
                let mut changed = false;
                for (rel, stamp) in files {
                    if stamp_of(&self.root.join(&rel)) != stamp {
                        self.insert(load(&self.root, &rel));
                        changed = true;
                    }
                }
                changed
            }
        }
    }
}

#[cfg(test)]
mod tests {
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
