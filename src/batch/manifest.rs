//! `batch.json`: what a batch is (its tasks, who answers, the settings every task's
//! session starts with, the limits) and what happened to it (each run of the batch, each
//! Slurm submission). Each task's own progress lives in its session (`tasks/<key>/`),
//! never here: the sessions are the truth, this file only names them.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::select::FoundTask;
use crate::config::EvalConfig;
use crate::config::pipeline::PipelineConfig;
use crate::eval::devices::DeviceChoice;
use crate::protocol::TaskKey;

pub const MANIFEST_FILE: &str = "batch.json";
/// Where the task files are copied: the batch holds everything its sessions start from
/// (a Slurm node may not see the checkout the tasks came from).
pub const SOURCES_DIR: &str = "sources";
/// Where each task's session lives (`tasks/<key>`).
pub const TASKS_DIR: &str = "tasks";
/// A task refused by the task check has no session; its verdict is kept here.
pub const REFUSED_FILE: &str = "refused.json";
const SCHEMA: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub schema: u32,
    pub created: DateTime<Utc>,
    pub kforge: String,
    pub provider: String,
    pub model: String,
    /// The `--config` file given when the batch was made (absolute), read again by every
    /// later run and by Slurm jobs.
    pub config_file: Option<PathBuf>,
    pub devices: DeviceChoice,
    pub limits: BatchLimits,
    /// Every task's session starts with these (the per-task budgets included).
    pub pipeline: PipelineConfig,
    pub eval: EvalConfig,
    pub tasks: Vec<BatchTask>,
    #[serde(default)]
    pub runs: Vec<BatchRun>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<SlurmRecord>,
}

/// How much of the machine and the budget the whole batch may use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchLimits {
    /// Tasks running at once.
    pub tasks_at_once: usize,
    /// LLM calls in flight at once, over all tasks.
    pub llm_calls_at_once: usize,
    /// Tokens (input + output) over all tasks' calls.
    pub max_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
    /// Seconds of one run of the batch (counted from its start).
    pub max_wall_s: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchTask {
    pub key: TaskKey,
    /// The task file's name without `.py`.
    pub name: String,
    pub level: Option<u32>,
    pub problem: Option<u32>,
    /// Where the task file came from (absolute), for people.
    pub origin: PathBuf,
}

impl From<&FoundTask> for BatchTask {
    fn from(t: &FoundTask) -> BatchTask {
        BatchTask {
            key: t.key.clone(),
            name: t.name.clone(),
            level: t.level,
            problem: t.problem,
            origin: std::path::absolute(&t.file).unwrap_or(t.file.clone()),
        }
    }
}

impl BatchTask {
    /// The copy the session starts from, relative to the batch directory.
    pub fn source(&self) -> PathBuf {
        Path::new(SOURCES_DIR).join(format!("{}.py", self.key))
    }

    /// The task's session directory, relative to the batch directory.
    pub fn session(&self) -> PathBuf {
        Path::new(TASKS_DIR).join(self.key.as_str())
    }
}

/// How one run of the batch (a `kforge batch`, `resume` or one Slurm element) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchEnd {
    /// Every task it ran reached its end.
    Done,
    /// Ctrl-C or a stop.
    Interrupted,
    /// The batch's token, cost or wall budget.
    BudgetReached,
    /// Something outside the tasks broke (the evaluator, the disk).
    Failed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchRun {
    pub started: DateTime<Utc>,
    pub ended: Option<DateTime<Utc>>,
    pub end: Option<BatchEnd>,
    pub reason: Option<String>,
    /// `batch`, `resume`, or `slurm <job>_<index>`.
    pub how: String,
    pub host: String,
    pub pid: u32,
}

/// Jobs submitted to Slurm for this batch, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlurmRecord {
    pub options: crate::batch::slurm::SlurmOptions,
    pub submissions: Vec<Submission>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Submission {
    pub job_id: u64,
    pub submitted: DateTime<Utc>,
    /// The task indices (array indices) this job runs.
    pub indices: Vec<usize>,
}

impl SlurmRecord {
    /// The latest job that ran task `index`, if any.
    pub fn job_for(&self, index: usize) -> Option<u64> {
        self.submissions
            .iter()
            .rev()
            .find(|s| s.indices.contains(&index))
            .map(|s| s.job_id)
    }
}

impl Manifest {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        provider: String,
        model: String,
        config_file: Option<PathBuf>,
        devices: DeviceChoice,
        limits: BatchLimits,
        pipeline: PipelineConfig,
        eval: EvalConfig,
        tasks: Vec<BatchTask>,
    ) -> Manifest {
        Manifest {
            schema: SCHEMA,
            created: Utc::now(),
            kforge: env!("CARGO_PKG_VERSION").into(),
            provider,
            model,
            config_file,
            devices,
            limits,
            pipeline,
            eval,
            tasks,
            runs: Vec::new(),
            slurm: None,
        }
    }

    /// Makes the batch directory: a copy of every task file (`files`, in the order of
    /// `tasks`), then batch.json. A directory that is a batch already is refused: it is
    /// resumed, never made again.
    pub fn create(&self, dir: &Path, files: &[PathBuf]) -> Result<()> {
        if Manifest::is_batch(dir) {
            bail!(
                "{} is a batch already: continue it with `kforge batch resume {}`",
                dir.display(),
                dir.display()
            );
        }
        for sub in [SOURCES_DIR, TASKS_DIR] {
            std::fs::create_dir_all(dir.join(sub))
                .with_context(|| format!("cannot create {}", dir.join(sub).display()))?;
        }
        for (task, file) in self.tasks.iter().zip(files) {
            let copy = dir.join(task.source());
            std::fs::copy(file, &copy)
                .with_context(|| format!("cannot copy {} to {}", file.display(), copy.display()))?;
        }
        // batch.json last: a directory with it is a complete batch.
        self.save(dir)
    }

    /// Whether `dir` is a batch directory.
    pub fn is_batch(dir: &Path) -> bool {
        dir.join(MANIFEST_FILE).is_file()
    }

    pub fn load(dir: &Path) -> Result<Manifest> {
        let path = dir.join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "{} is not a batch (cannot read {MANIFEST_FILE})",
                dir.display()
            )
        })?;
        let manifest: Manifest = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a valid batch manifest", path.display()))?;
        if manifest.schema > SCHEMA {
            bail!(
                "{} was written by a newer kforge (schema {}); this one reads {SCHEMA}",
                path.display(),
                manifest.schema
            );
        }
        Ok(manifest)
    }

    /// Writes batch.json whole or not at all (a temporary file, synced, then renamed), so
    /// a crash or a full disk never leaves half a manifest.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let path = dir.join(MANIFEST_FILE);
        let tmp = dir.join(format!(".{MANIFEST_FILE}.{}.tmp", std::process::id()));
        let text = serde_json::to_string_pretty(self)? + "\n";
        let write = || -> std::io::Result<()> {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        };
        write().with_context(|| {
            let _ = std::fs::remove_file(&tmp);
            format!("cannot write {}", path.display())
        })
    }

    pub fn task(&self, key: &TaskKey) -> Option<&BatchTask> {
        self.tasks.iter().find(|t| &t.key == key)
    }
}

/// Runs `f` holding the batch's exclusive lock (`batch.lock`): Slurm elements running at
/// once each record their run and write the summary, and none may lose another's work.
pub fn with_lock<T>(dir: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let lock_path = dir.join("batch.lock");
    let lock = crate::paths::open_lock_file(&lock_path)?;
    lock.lock()
        .with_context(|| format!("cannot lock {}", lock_path.display()))?;
    f()
}

/// Changes batch.json under the batch's lock.
pub fn update(dir: &Path, change: impl FnOnce(&mut Manifest)) -> Result<Manifest> {
    with_lock(dir, || {
        let mut manifest = Manifest::load(dir)?;
        change(&mut manifest);
        manifest.save(dir)?;
        Ok(manifest)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        Manifest::new(
            "openai".into(),
            "gpt-x".into(),
            None,
            DeviceChoice::AllVisible,
            BatchLimits {
                tasks_at_once: 2,
                llm_calls_at_once: 4,
                max_tokens: Some(1000),
                max_cost_usd: None,
                max_wall_s: None,
            },
            PipelineConfig::default(),
            EvalConfig::default(),
            vec![BatchTask {
                key: TaskKey("L1_019_ReLU".into()),
                name: "19_ReLU".into(),
                level: Some(1),
                problem: Some(19),
                origin: "/kb/KernelBench/level1/19_ReLU.py".into(),
            }],
        )
    }

    #[test]
    fn a_manifest_reads_back_as_written_and_names_its_task_files() {
        let dir = tempfile::tempdir().unwrap();
        let m = sample();
        m.save(dir.path()).unwrap();
        assert!(Manifest::is_batch(dir.path()));
        assert_eq!(Manifest::load(dir.path()).unwrap(), m);
        let t = &m.tasks[0];
        assert_eq!(t.session(), Path::new("tasks/L1_019_ReLU"));
        assert_eq!(t.source(), Path::new("sources/L1_019_ReLU.py"));
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(MANIFEST_FILE)]);
    }

    #[test]
    fn a_batch_is_made_once_with_a_copy_of_each_task() {
        let dir = tempfile::tempdir().unwrap();
        let task = dir.path().join("19_ReLU.py");
        std::fs::write(&task, "# the task\n").unwrap();
        let batch = dir.path().join("b");
        let m = sample();
        m.create(&batch, std::slice::from_ref(&task)).unwrap();
        assert_eq!(
            std::fs::read_to_string(batch.join(m.tasks[0].source())).unwrap(),
            "# the task\n"
        );
        assert!(batch.join(TASKS_DIR).is_dir());
        assert_eq!(Manifest::load(&batch).unwrap(), m);
        let err = m.create(&batch, &[task]).unwrap_err().to_string();
        assert!(err.contains("is a batch already"), "{err}");
    }

    #[test]
    fn updates_keep_every_change_and_newer_schemas_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        sample().save(dir.path()).unwrap();
        std::thread::scope(|s| {
            for i in 0..8 {
                let dir = dir.path();
                s.spawn(move || {
                    update(dir, |m| {
                        m.runs.push(BatchRun {
                            started: Utc::now(),
                            ended: None,
                            end: None,
                            reason: None,
                            how: format!("slurm 1_{i}"),
                            host: "h".into(),
                            pid: i,
                        })
                    })
                    .unwrap();
                });
            }
        });
        assert_eq!(Manifest::load(dir.path()).unwrap().runs.len(), 8);
        let mut newer = sample();
        newer.schema = 99;
        newer.save(dir.path()).unwrap();
        let err = Manifest::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("newer kforge"), "{err}");
        assert!(!Manifest::is_batch(&dir.path().join("nope")));
    }
}
