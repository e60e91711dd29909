//! Each task's figures, read from its session (the sessions are the truth; nothing here
//! is stored twice): its status, best kernel, score, medians, tokens, cost and wall time.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::manifest::{BatchTask, Manifest, REFUSED_FILE};
use crate::protocol::{CandidateId, EngineState, Event, EventRecord, RunEnd, TaskKey};
use crate::session::state::SessionState;
use crate::session::store::SessionDir;

/// Where a task of a batch stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    /// Not started yet.
    Waiting,
    /// The task check refused it (a broken task, or one that does not fit): no session.
    Refused,
    /// A process is running its session now.
    Running,
    /// A process is running its session and it waits for you: `gates` gates are open.
    AwaitingYou { gates: usize },
    /// Its session was started and its process died (kill -9, a node lost): resumable.
    Interrupted,
    /// Its last run ended this way.
    Ended(RunEnd),
}

/// Written as its word (`complete`, `interrupted`): one column of results.csv.
impl Serialize for TaskStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.word())
    }
}

impl TaskStatus {
    /// One word for tables: `waiting`, `complete`, `no_correct_kernel`...
    pub fn word(&self) -> &'static str {
        match self {
            TaskStatus::Waiting => "waiting",
            TaskStatus::Refused => "refused",
            TaskStatus::Running => "running",
            TaskStatus::AwaitingYou { .. } => "waiting_for_you",
            TaskStatus::Interrupted => "interrupted",
            TaskStatus::Ended(end) => end.word(),
        }
    }

    /// A process runs its session now (whether or not it waits for you).
    pub fn is_live(&self) -> bool {
        matches!(self, TaskStatus::Running | TaskStatus::AwaitingYou { .. })
    }

    /// Nothing more will happen to it on resume: its session finished (a correct kernel,
    /// or candidates judged and none correct).
    pub fn is_final(&self) -> bool {
        matches!(self, TaskStatus::Ended(end) if end.state() == EngineState::Finished)
    }
}

/// One task's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskResult {
    pub key: TaskKey,
    pub name: String,
    pub level: Option<u32>,
    pub problem: Option<u32>,
    pub status: TaskStatus,
    /// The task check's verdict, for a refused task.
    pub refused: Option<String>,
    /// Whether the session holds a correct kernel.
    pub correct: bool,
    pub best: Option<CandidateId>,
    /// The best kernel's file, relative to the batch directory.
    pub best_file: Option<PathBuf>,
    /// Speedup of the best kernel over the reference (None: no timing, or none correct).
    pub score: Option<f64>,
    /// The 95% interval of `score` (None: no score, or a session recorded before intervals).
    pub score_low: Option<f64>,
    pub score_high: Option<f64>,
    pub reference_ms: Option<f64>,
    pub kernel_ms: Option<f64>,
    /// The device the best kernel was timed on.
    pub device: Option<String>,
    /// The best kernel's score against each baseline, where the reference was timed under
    /// torch.compile too (`score` is the one it names as the headline).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baselines: Option<Box<crate::protocol::BaselineScores>>,
    /// The best kernel's % of the speed of light, and whether it was flagged faster than
    /// light (then it is the best only because the person marked it final).
    pub sol_pct: Option<f64>,
    pub faster_than_light: bool,
    /// The best kernel's score against the reference under PyTorch's default settings,
    /// where the policy's differ for the task (beside the headline, which fast_p uses).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_defaults: Option<crate::protocol::DefaultsScore>,
    /// Whether scores are real (GPU) speedups.
    pub timed: bool,
    /// The precision policy its evaluations ran under (None: a session from before it).
    pub precision: Option<crate::protocol::PrecisionPolicy>,
    pub candidates: usize,
    pub calls: usize,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The cost of the calls whose price is known.
    pub cost_usd: f64,
    /// Finished calls whose cost is unknown (no price, or cut off by a crash before the
    /// provider's bill was read): `cost_usd` is then a lower bound.
    pub unpriced_calls: usize,
    /// Seconds the session's runs took (time between runs not counted).
    pub wall_s: f64,
    /// When its session wrote its last event (a live run's time goes on after it).
    #[serde(skip)]
    pub last_event_at: Option<DateTime<Utc>>,
    /// When each of its session's runs went (`run_spans`): what the batch's elapsed time
    /// is made of, where tasks ran side by side.
    #[serde(skip)]
    pub runs: Vec<(DateTime<Utc>, DateTime<Utc>)>,
    /// The best kernel's re-check on unseen shapes (None: not checked).
    pub shapes: Option<crate::protocol::shapes::ShapeVerdict>,
    /// Its one line: `correct on 5 of 5 unseen shapes`, or the shape that fails and how.
    pub shapes_line: Option<String>,
}

impl TaskResult {
    pub fn tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    /// The score's 95% interval, when there is one.
    pub fn score_interval(&self) -> Option<(f64, f64)> {
        self.score?;
        Some((self.score_low?, self.score_high?))
    }

    /// The best kernel's score against `baseline` with its interval: from both baselines'
    /// figures where the reference was timed under torch.compile, else the score itself
    /// against eager (it is against eager then) and nothing against compile.
    pub fn score_vs(
        &self,
        baseline: crate::protocol::Baseline,
    ) -> (Option<f64>, Option<(f64, f64)>) {
        if !self.correct {
            return (None, None);
        }
        match (&self.baselines, baseline) {
            (Some(b), _) => {
                let figure = b.against(baseline);
                (figure.score, figure.interval())
            }
            (None, crate::protocol::Baseline::Eager) => (self.score, self.score_interval()),
            (None, crate::protocol::Baseline::Compile) => (None, None),
        }
    }

    /// The best kernel's score against the reference under PyTorch's defaults, with its
    /// interval (None: not measured, or not correct).
    pub fn score_vs_defaults(&self) -> (Option<f64>, Option<(f64, f64)>) {
        match (&self.vs_defaults, self.correct) {
            (Some(d), true) => (d.score.score, d.score.interval()),
            _ => (None, None),
        }
    }

    /// Whether the best kernel is correct and was shown correct on every unseen shape.
    pub fn generalizes(&self) -> bool {
        self.correct && self.shapes.as_ref().is_some_and(|s| s.generalizes())
    }

    /// The best kernel's speedup as tables show it: `1.52x`, `correct` when it was not
    /// timed (the CPU), `-` when no kernel is correct.
    pub fn speedup_text(&self) -> String {
        match (self.correct, self.score) {
            (true, Some(s)) => format!("{s:.2}x"),
            (true, None) => "correct".into(),
            _ => "-".into(),
        }
    }
}

/// How many tasks stand where: what `kforge batch status` and the batch view count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatusCounts {
    pub tasks: usize,
    /// Nothing more will happen to them (`TaskStatus::is_final`).
    pub finished: usize,
    pub running: usize,
    pub waiting: usize,
    /// Running tasks with a gate open: they wait for you.
    pub awaiting: usize,
    pub refused: usize,
    /// Interrupted, or ended in a way `kforge batch resume` continues.
    pub resumable: usize,
}

impl StatusCounts {
    pub fn of(results: &[TaskResult]) -> StatusCounts {
        let count = |f: fn(&TaskStatus) -> bool| results.iter().filter(|r| f(&r.status)).count();
        StatusCounts {
            tasks: results.len(),
            finished: count(TaskStatus::is_final),
            running: count(TaskStatus::is_live),
            awaiting: count(|s| matches!(s, TaskStatus::AwaitingYou { .. })),
            waiting: count(|s| *s == TaskStatus::Waiting),
            refused: count(|s| *s == TaskStatus::Refused),
            resumable: count(|s| {
                matches!(s, TaskStatus::Interrupted)
                    || matches!(s, TaskStatus::Ended(_)) && !s.is_final()
            }),
        }
    }

    /// `2 finished, 1 running, 1 waiting, 1 refused, 1 resumable`.
    pub fn text(&self) -> String {
        let awaiting = match self.awaiting {
            0 => String::new(),
            n => format!(" ({n} waiting for you)"),
        };
        format!(
            "{} finished, {} running{awaiting}, {} waiting, {} refused, {} resumable",
            self.finished, self.running, self.waiting, self.refused, self.resumable
        )
    }
}

/// `$0.0123`, or `$0.0123 + 2 unpriced calls` when some costs are unknown.
pub fn cost_text(cost_usd: f64, unpriced_calls: usize) -> String {
    match unpriced_calls {
        0 => format!("${cost_usd:.4}"),
        1 => format!("${cost_usd:.4} + 1 unpriced call"),
        n => format!("${cost_usd:.4} + {n} unpriced calls"),
    }
}

/// The runs recorded in `records`: each from its start (or resume) to its last event, so
/// the hours between a kill and a resume are in none of them.
pub fn run_spans(records: &[EventRecord]) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
    let mut spans = Vec::new();
    let mut segment: Option<(DateTime<Utc>, DateTime<Utc>)> = None;
    for r in records {
        let starts = matches!(
            r.event,
            Event::SessionStarted { .. } | Event::SessionResumed { .. }
        );
        segment = match segment {
            Some(done) if starts => {
                spans.push(done);
                Some((r.ts, r.ts))
            }
            Some((from, _)) => Some((from, r.ts)),
            None => Some((r.ts, r.ts)),
        };
    }
    spans.extend(segment);
    spans
}

fn seconds(from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    (to - from).num_milliseconds() as f64 / 1000.0
}

/// Seconds of the runs recorded in `records` (`run_spans`, added up).
pub fn run_seconds(records: &[EventRecord]) -> f64 {
    let total: f64 = run_spans(records)
        .into_iter()
        .map(|(from, to)| seconds(from, to))
        .sum();
    total.max(0.0)
}

/// The batch's elapsed time as of `now`: how long any of its tasks was running (the union
/// of their runs; a live task's run goes on to `now`). Tasks run side by side, so this is
/// less than their times added up (`task_seconds`), and the gaps when nothing ran (a batch
/// killed and resumed later) are not counted.
pub fn elapsed_seconds(results: &[TaskResult], now: DateTime<Utc>) -> f64 {
    let mut spans: Vec<(DateTime<Utc>, DateTime<Utc>)> = results
        .iter()
        .flat_map(|r| {
            let live = r.status.is_live();
            let last = r.runs.len().saturating_sub(1);
            r.runs.iter().enumerate().map(move |(i, (from, to))| {
                let to = if live && i == last && now > *to {
                    now
                } else {
                    *to
                };
                (*from, to)
            })
        })
        .collect();
    spans.sort();
    let mut total = 0.0;
    let mut current: Option<(DateTime<Utc>, DateTime<Utc>)> = None;
    for (from, to) in spans {
        current = match current {
            Some((a, b)) if from <= b => Some((a, b.max(to))),
            Some((a, b)) => {
                total += seconds(a, b);
                Some((from, to))
            }
            None => Some((from, to)),
        };
    }
    if let Some((a, b)) = current {
        total += seconds(a, b);
    }
    total
}

/// The tasks' times added up as of `now` (each task's `wall_now`): the task-time.
pub fn task_seconds(results: &[TaskResult], now: DateTime<Utc>) -> f64 {
    results.iter().map(|r| r.wall_now(now)).sum()
}

/// The figures of one task, read from `batch/tasks/<key>`.
pub fn task_result(batch: &Path, task: &BatchTask) -> TaskResult {
    let dir = batch.join(task.session());
    let mut result = TaskResult {
        key: task.key.clone(),
        name: task.name.clone(),
        level: task.level,
        problem: task.problem,
        status: TaskStatus::Waiting,
        refused: None,
        correct: false,
        best: None,
        best_file: None,
        score: None,
        score_low: None,
        score_high: None,
        reference_ms: None,
        kernel_ms: None,
        device: None,
        baselines: None,
        sol_pct: None,
        faster_than_light: false,
        vs_defaults: None,
        timed: false,
        precision: None,
        candidates: 0,
        calls: 0,
        input_tokens: 0,
        output_tokens: 0,
        cost_usd: 0.0,
        unpriced_calls: 0,
        wall_s: 0.0,
        last_event_at: None,
        runs: Vec::new(),
        shapes: None,
        shapes_line: None,
    };
    let Ok(session) = SessionDir::open(&dir) else {
        if let Ok(text) = std::fs::read_to_string(dir.join(REFUSED_FILE)) {
            result.status = TaskStatus::Refused;
            result.refused = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v["summary"].as_str().map(String::from));
        }
        return result;
    };
    let records = session.read_events().map(|r| r.records).unwrap_or_default();
    let state = SessionState::from_records(&records);
    let live = session.is_live();
    result.status = if live {
        match state.waiting_gates().len() {
            0 => TaskStatus::Running,
            gates => TaskStatus::AwaitingYou { gates },
        }
    } else if state.state.is_over() {
        TaskStatus::Ended(state.end.unwrap_or(match state.state {
            EngineState::Finished => RunEnd::Complete,
            EngineState::Stopped => RunEnd::Stopped,
            _ => RunEnd::Failed,
        }))
    } else {
        TaskStatus::Interrupted
    };
    result.timed = state.info.as_ref().is_some_and(|i| i.timing_meaningful);
    result.precision = state.info.as_ref().and_then(|i| i.precision);
    result.candidates = state.candidates.len();
    result.calls = state.calls.len();
    let usage = state.total_usage();
    result.input_tokens = usage.input;
    result.output_tokens = usage.output;
    let finished = state.calls.values().filter(|c| c.ok.is_some());
    // `+ 0.0`: an empty f64 sum is -0.0, which prints as `-0.0000`.
    result.cost_usd = finished.clone().filter_map(|c| c.cost_usd).sum::<f64>() + 0.0;
    result.unpriced_calls = finished.filter(|c| c.cost_unknown()).count();
    result.runs = run_spans(&records);
    result.wall_s = run_seconds(&records);
    result.last_event_at = records.last().map(|r| r.ts);
    if let Some(best) = state
        .best_candidate()
        .and_then(|id| state.candidates.get(&id))
    {
        result.correct = best.is_correct();
        result.best = Some(best.id);
        result.best_file = Some(task.session().join(&best.file));
        result.shapes = best.shapes.as_ref().map(|s| s.verdict.clone());
        result.shapes_line = best.shapes.as_ref().map(|s| s.line.clone());
        if let Some((low, high)) = best.score_interval() {
            result.score_low = Some(low);
            result.score_high = Some(high);
        }
        if let Some(eval) = &best.eval {
            result.score = eval.score;
            result.reference_ms = eval.reference_ms;
            result.kernel_ms = eval.kernel_ms;
            result.device = eval.device.clone();
            result.baselines = eval.baselines.clone();
            result.vs_defaults = eval.vs_defaults.as_deref().cloned();
        }
        result.sol_pct = best.sol_pct();
        result.faster_than_light = best.faster_than_light();
    }
    result
}

/// Every task's figures, in the manifest's order.
pub fn collect(batch: &Path, manifest: &Manifest) -> Vec<TaskResult> {
    manifest
        .tasks
        .iter()
        .map(|t| task_result(batch, t))
        .collect()
}

impl TaskResult {
    /// Its wall time as of `now`: a live run's goes on between its events (a gate waiting
    /// for you writes none), a finished or interrupted one's is what its events say.
    pub fn wall_now(&self, now: DateTime<Utc>) -> f64 {
        match self.last_event_at {
            Some(last) if self.status.is_live() && now > last => {
                self.wall_s + (now - last).num_milliseconds() as f64 / 1000.0
            }
            _ => self.wall_s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn record(seq: u64, secs: i64, event: Event) -> EventRecord {
        EventRecord {
            seq,
            ts: Utc.timestamp_opt(1_700_000_000 + secs, 0).unwrap(),
            event,
        }
    }

    #[test]
    fn wall_time_counts_each_run_and_not_the_gap_between_them() {
        let log = |m: &str| Event::Log {
            level: crate::protocol::LogLevel::Info,
            tag: "t".into(),
            message: m.into(),
        };
        let records = vec![
            record(1, 0, Event::SessionResumed { previous_seq: 0 }),
            record(2, 10, log("a")),
            record(3, 30, log("b")),
            // Killed; resumed an hour later.
            record(4, 3630, Event::SessionResumed { previous_seq: 3 }),
            record(5, 3635, log("c")),
        ];
        assert_eq!(run_seconds(&records), 35.0);
        assert_eq!(run_seconds(&[]), 0.0);
    }

    /// Issue 39, item 3: two tasks that ran side by side took the batch as long as the
    /// longer one plus what did not overlap, not the sum of the two.
    #[test]
    fn the_batch_elapsed_time_is_the_union_of_its_tasks_runs_not_their_sum() {
        let at = |secs: i64| Utc.timestamp_opt(1_700_000_000 + secs, 0).unwrap();
        let task = |runs: Vec<(i64, i64)>, status: TaskStatus| {
            let mut r = task_result(
                std::path::Path::new("/nonexistent"),
                &BatchTask {
                    key: TaskKey("t".into()),
                    name: "t".into(),
                    level: None,
                    problem: None,
                    origin: "/t.py".into(),
                },
            );
            r.runs = runs.iter().map(|(a, b)| (at(*a), at(*b))).collect();
            r.wall_s = runs.iter().map(|(a, b)| (b - a) as f64).sum();
            r.last_event_at = r.runs.last().map(|s| s.1);
            r.status = status;
            r
        };
        let done = TaskStatus::Ended(RunEnd::Complete);
        // 0-300 and 100-500 overlap: 500 s elapsed, 700 s of task-time; a second run of
        // the first task an hour later adds its own 60 s, not the hour between.
        let tasks = vec![
            task(vec![(0, 300), (3600, 3660)], done),
            task(vec![(100, 500)], done),
        ];
        assert_eq!(elapsed_seconds(&tasks, at(4000)), 560.0);
        assert_eq!(task_seconds(&tasks, at(4000)), 760.0);
        // A running task's time goes on to now.
        let live = vec![task(vec![(0, 100)], TaskStatus::Running)];
        assert_eq!(elapsed_seconds(&live, at(160)), 160.0);
        assert_eq!(task_seconds(&live, at(160)), 160.0);
        assert_eq!(elapsed_seconds(&[], at(0)), 0.0);
    }

    #[test]
    fn a_task_without_a_session_is_waiting_or_refused() {
        let dir = tempfile::tempdir().unwrap();
        let task = BatchTask {
            key: TaskKey("t".into()),
            name: "t".into(),
            level: None,
            problem: None,
            origin: "/t.py".into(),
        };
        assert_eq!(task_result(dir.path(), &task).status, TaskStatus::Waiting);
        let session = dir.path().join(task.session());
        std::fs::create_dir_all(&session).unwrap();
        std::fs::write(
            session.join(REFUSED_FILE),
            r#"{"summary": "task: no Model"}"#,
        )
        .unwrap();
        let r = task_result(dir.path(), &task);
        assert_eq!(r.status, TaskStatus::Refused);
        assert_eq!(r.refused.as_deref(), Some("task: no Model"));
        assert!(!r.status.is_final());
    }
}
