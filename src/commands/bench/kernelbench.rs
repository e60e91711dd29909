//! `kforge bench kernelbench TASKS_DIR`: fidelity and scale against KernelBench (issue 9).
//!
//! Every task of a directory (a KernelBench level) gets a task check with its reference
//! timed twice in the same judge: kforge's protocol (fresh inputs per run, median) and
//! KernelBench's published one (kbprotocol.py). A row per task is printed as soon as it
//! is done, then a summary; `--json` keeps every figure. Where `--kernels DIR` holds a
//! kernel of the same file name, that kernel is evaluated too.
//!
//! The table and the summary are pure functions of the records, tested below.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, EvalConfig};
use crate::eval::{Device, EvalError, EvalRequest, Evaluator};
use crate::launch::options::DeviceArgs;
use crate::protocol::{CompileFigures, EvalResult, KernelBenchTiming, ProtocolRound, TimingStats};
use crate::task::TaskFile;

#[derive(clap::Args, Debug)]
pub struct KernelBenchArgs {
    /// A directory of KernelBench task files, e.g. KernelBench/level1.
    pub tasks_dir: PathBuf,
    /// A directory of kernels named like the tasks (19_ReLU.py): each is evaluated too.
    #[arg(long, value_name = "DIR")]
    pub kernels: Option<PathBuf>,
    /// Check at most N tasks (after sorting and filtering).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Only tasks whose file name contains this.
    #[arg(long, value_name = "SUBSTRING")]
    pub filter: Option<String>,
    /// Write every figure and the summary to this JSON file (rewritten atomically after
    /// each task).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Time the reference N times with each protocol, alternating which goes first, and
    /// report each protocol's spread over the rounds: a difference within it is noise.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub rounds: u32,
    /// Time each reference under torch.compile too (issue 25's baseline): its median,
    /// its speedup over eager and its compile time per task.
    #[arg(long)]
    pub compile: bool,
    #[command(flatten)]
    pub device: DeviceArgs,
}

/// One task's outcome: its task check, and the evaluation of its kernel when there is one.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TaskRecord {
    /// The file stem, e.g. `19_ReLU`.
    pub task: String,
    pub file: PathBuf,
    /// `ok`, or the failure category (`task` for an unusable task file).
    pub verdict: String,
    /// One line saying what failed; empty when the check passed.
    pub summary: String,
    /// Seconds around the evaluation, measured here (queueing and start-up included).
    pub wall_s: f64,
    /// Largest of the judge's peak device memory figures (None on the CPU).
    pub peak_memory_bytes: Option<u64>,
    /// The device as the judge described it (e.g. `NVIDIA H100 80GB HBM3`).
    pub device_name: Option<String>,
    /// kforge's reference timing, and the reference timed with KernelBench's protocol.
    pub reference: Option<TimingStats>,
    pub kernelbench: Option<KernelBenchTiming>,
    /// (KernelBench median - kforge median) / kforge median, in percent; with rounds, of
    /// the medians of each protocol's round medians.
    pub difference_pct: Option<f64>,
    /// With `--rounds N`: both protocols' medians per round, and their spread.
    pub rounds: Vec<ProtocolRound>,
    pub spread: Option<RoundSpread>,
    pub notes: Vec<String>,
    pub kernel: Option<KernelRecord>,
    /// With `--compile`: the reference under torch.compile, or why there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compile: Option<CompileFigures>,
    /// The reference's work and its speed-of-light bound (issue 25).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speed_of_light: Option<crate::protocol::sol::SpeedOfLight>,
}

impl TaskRecord {
    /// The (kforge, KernelBench) reference medians the task's row compares: the medians of
    /// the round medians with `--rounds`, round one's figures otherwise.
    fn compared_medians(&self) -> (Option<f64>, Option<f64>) {
        match &self.spread {
            Some(s) => (Some(s.kforge_ms), Some(s.kernelbench_ms)),
            None => (
                self.reference.as_ref().map(|r| r.median_ms),
                self.kernelbench.as_ref().map(|k| k.median_ms),
            ),
        }
    }

    fn compared_difference_pct(&self) -> Option<f64> {
        match self.compared_medians() {
            (Some(kforge), Some(kernelbench)) => difference_pct(kforge, kernelbench),
            _ => None,
        }
    }
}

/// How far each protocol's median moved over the rounds: (max - min) / median of the round
/// medians, in percent.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct RoundSpread {
    pub kforge_pct: f64,
    pub kernelbench_pct: f64,
    /// The median over the rounds of each protocol's median, in ms.
    pub kforge_ms: f64,
    pub kernelbench_ms: f64,
}

impl RoundSpread {
    /// The spread of the given rounds, or None with fewer than two.
    fn of(rounds: &[ProtocolRound]) -> Option<RoundSpread> {
        if rounds.len() < 2 {
            return None;
        }
        let kforge: Vec<f64> = rounds.iter().map(|r| r.kforge_ms).collect();
        let kernelbench: Vec<f64> = rounds.iter().map(|r| r.kernelbench_ms).collect();
        Some(RoundSpread {
            kforge_pct: super::stats::spread(&kforge),
            kernelbench_pct: super::stats::spread(&kernelbench),
            kforge_ms: super::stats::median(&kforge),
            kernelbench_ms: super::stats::median(&kernelbench),
        })
    }

    /// The larger of the two spreads: the noise a difference between the protocols is
    /// measured against.
    fn noise_pct(&self) -> f64 {
        self.kforge_pct.max(self.kernelbench_pct)
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct KernelRecord {
    pub file: PathBuf,
    /// `correct` or the failure category.
    pub verdict: String,
    pub summary: String,
    pub wall_s: f64,
    pub peak_memory_bytes: Option<u64>,
    pub score: Option<f64>,
    /// The judge's phase times, and the wall time beyond the kernel's own work
    /// (`kernel_work_seconds`: correctness trials with the compile, timed runs, re-check).
    pub phases_s: std::collections::BTreeMap<String, f64>,
    pub server_phases_s: std::collections::BTreeMap<String, f64>,
    pub overhead_s: Option<f64>,
}

/// The figures the summary lines show, kept in the JSON file too.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Summary {
    pub tasks: usize,
    pub ok: usize,
    /// Task checks that failed, by category (categories in name order).
    pub failures: Vec<FailureGroup>,
    pub kernels: usize,
    pub kernels_correct: usize,
    pub kernel_failures: Vec<FailureGroup>,
    pub total_wall_s: f64,
    /// The task whose task check or kernel evaluation peaked highest (value in bytes).
    pub worst_memory: Option<TaskFigure>,
    /// The largest |difference| in percent, the median of them, and how many tasks had both
    /// timings.
    pub largest_abs_difference_pct: Option<TaskFigure>,
    pub median_abs_difference_pct: Option<f64>,
    pub compared: usize,
    /// With rounds: the tasks timed in two rounds or more, and those whose |difference|
    /// was larger than the larger of the two spreads (value: the difference in percent).
    pub compared_in_rounds: usize,
    pub beyond_noise: Vec<TaskFigure>,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct FailureGroup {
    pub category: String,
    pub failures: Vec<Failure>,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Failure {
    pub task: String,
    pub summary: String,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct TaskFigure {
    pub task: String,
    pub value: f64,
}

pub async fn run(
    args: KernelBenchArgs,
    config: &Config,
    evaluator: &Evaluator,
) -> Result<ExitCode> {
    let tasks = list_tasks(&args.tasks_dir, args.filter.as_deref(), args.limit)?;
    if tasks.is_empty() {
        bail!(
            "no task files (*.py) in {}{}",
            args.tasks_dir.display(),
            args.filter
                .as_deref()
                .map(|f| format!(" whose name contains {f:?}"))
                .unwrap_or_default()
        );
    }
    let device = args.device.pick(evaluator).await?;
    // The reference must really be measured each time, never read from the cache.
    let mut settings = config.eval.clone();
    settings.baseline_cache = false;
    // The eager reference against KernelBench's protocol; torch.compile's when asked.
    settings.compile_baseline = args.compile;
    // KernelBench's precision settings (PyTorch's defaults: cuDNN TF32 on), for both
    // protocols: under `strict` a float32 convolution's reference runs ~2.4x slower than the
    // one KernelBench times, which no protocol could then agree with (issue 35).
    settings.precision = crate::protocol::PrecisionPolicy::Pytorch;

    let cancel = CancellationToken::new();
    let on_interrupt = cancel.clone();
    let ctrl_c = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!(
                "\nkforge: stopping; the summary of what ran follows (Ctrl-C again to quit at once)"
            );
            on_interrupt.cancel();
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        }
    });

    println!(
        "kernelbench: {} task(s) from {} on {device}, under PyTorch's default precision settings (as \
         KernelBench){}",
        tasks.len(),
        args.tasks_dir.display(),
        if device.is_gpu() {
            ""
        } else {
            "; no timing on the CPU"
        }
    );
    println!("{}", header());
    // Versions of Python, torch and Triton for the JSON file (the server is running by now).
    let versions = evaluator
        .hello()
        .await
        .ok()
        .map(|h| serde_json::json!({"python": h.python, "torch": h.torch, "triton": h.triton}));
    let started = Instant::now();
    let mut records = Vec::new();
    for path in &tasks {
        if cancel.is_cancelled() {
            break;
        }
        let Some(mut record) =
            check_task(evaluator, path, device, &settings, args.rounds, &cancel).await
        else {
            break;
        };
        if record.verdict == "ok"
            && let Some(kernel) = args.kernels.as_ref().map(|d| d.join(file_name(path)))
            && kernel.is_file()
        {
            match evaluate_kernel(evaluator, path, &kernel, device, &settings, &cancel).await {
                Some(k) => record.kernel = Some(k),
                None => {
                    print_lines(&record_lines(&record));
                    records.push(record);
                    break;
                }
            }
        }
        print_lines(&record_lines(&record));
        records.push(record);
        if let Some(json) = &args.json {
            let summary = summarize(&records, started.elapsed().as_secs_f64());
            let run = RunInfo {
                tasks_dir: &args.tasks_dir,
                device,
                versions: versions.as_ref(),
                interrupted: false,
            };
            write_json(json, &run, &records, &summary)?;
        }
    }
    ctrl_c.abort();
    let interrupted = cancel.is_cancelled();
    let summary = summarize(&records, started.elapsed().as_secs_f64());
    println!();
    if interrupted {
        println!(
            "interrupted: {} of {} task(s) ran",
            records.len(),
            tasks.len()
        );
    }
    print_lines(&summary_lines(&summary, device.is_gpu()));
    if let Some(json) = &args.json {
        let run = RunInfo {
            tasks_dir: &args.tasks_dir,
            device,
            versions: versions.as_ref(),
            interrupted,
        };
        write_json(json, &run, &records, &summary)?;
        println!("figures written to {}", json.display());
    }
    Ok(if interrupted {
        ExitCode::from(130)
    } else if summary.ok < summary.tasks {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The `*.py` files of `dir` whose name contains `filter`, in KernelBench's order (see
/// `task_order`), at most `limit` of them.
fn list_tasks(dir: &Path, filter: Option<&str>, limit: Option<usize>) -> Result<Vec<PathBuf>> {
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot read {}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".py")
            && entry.path().is_file()
            && filter.is_none_or(|f| name.contains(f))
        {
            names.push(name);
        }
    }
    let mut names = task_order(names);
    names.truncate(limit.unwrap_or(usize::MAX));
    Ok(names.into_iter().map(|n| dir.join(n)).collect())
}

/// KernelBench numbers its tasks (`19_ReLU.py`): by that number, then by name; files
/// without a number come last, by name.
fn task_order(mut names: Vec<String>) -> Vec<String> {
    names.sort_by(|a, b| {
        let key = |n: &String| (numeric_prefix(n).unwrap_or(u64::MAX), n.clone());
        key(a).cmp(&key(b))
    });
    names
}

fn numeric_prefix(name: &str) -> Option<u64> {
    let digits: String = name.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The task check of one task, or None when it was cancelled.
async fn check_task(
    evaluator: &Evaluator,
    path: &Path,
    device: Device,
    settings: &EvalConfig,
    rounds: u32,
    cancel: &CancellationToken,
) -> Option<TaskRecord> {
    let mut record = TaskRecord {
        task: stem(path),
        file: path.to_path_buf(),
        ..Default::default()
    };
    // The same quick check `kforge eval` makes: a file that cannot be a task at all is a
    // `task` row without starting the judge.
    if let Err(e) = TaskFile::load(path) {
        record.verdict = "task".into();
        record.summary = one_line(&format!("{e:#}"));
        return Some(record);
    }
    let mut request = EvalRequest::task_check(path, device, settings.clone());
    request.kernelbench_protocol = true;
    request.kernelbench_rounds = rounds;
    let started = Instant::now();
    let outcome = evaluator.evaluate(request, cancel.clone(), None).await;
    record.wall_s = started.elapsed().as_secs_f64();
    match outcome {
        Ok(result) => {
            record.verdict = if result.correct {
                "ok".into()
            } else {
                verdict_of(&result)
            };
            if !result.correct {
                record.summary = one_line(&result.summary);
            }
            record.peak_memory_bytes = result.peak_memory_bytes();
            record.speed_of_light = result.speed_of_light.clone();
            record.device_name = result.device.name.clone();
            if let Some(timing) = result.timing.filter(|t| t.meaningful) {
                record.kernelbench = timing.kernelbench;
                record.reference = Some(timing.reference);
                record.spread = RoundSpread::of(&timing.rounds);
                record.rounds = timing.rounds;
                record.difference_pct = record.compared_difference_pct();
                record.compile = timing.compile;
            }
            record.notes = result.notes;
        }
        Err(EvalError::Cancelled) => return None,
        Err(e @ EvalError::Unavailable(_)) => {
            record.verdict = "harness".into();
            record.summary = one_line(&e.to_string());
        }
    }
    Some(record)
}

/// The full evaluation of a task's kernel, or None when it was cancelled.
async fn evaluate_kernel(
    evaluator: &Evaluator,
    task: &Path,
    kernel: &Path,
    device: Device,
    settings: &EvalConfig,
    cancel: &CancellationToken,
) -> Option<KernelRecord> {
    let request = EvalRequest::new(task, kernel, device, settings.clone());
    let started = Instant::now();
    let outcome = evaluator.evaluate(request, cancel.clone(), None).await;
    let wall_s = started.elapsed().as_secs_f64();
    let mut record = KernelRecord {
        file: kernel.to_path_buf(),
        wall_s,
        ..Default::default()
    };
    match outcome {
        Ok(result) => {
            record.verdict = verdict_of(&result);
            if !result.correct {
                record.summary = one_line(&result.summary);
            }
            record.peak_memory_bytes = result.peak_memory_bytes();
            record.score = result.score();
            record.overhead_s =
                super::stats::kernel_work_seconds(&result.phases_s).map(|work| wall_s - work);
            record.phases_s = result.phases_s;
            record.server_phases_s = result.server_phases_s;
        }
        Err(EvalError::Cancelled) => return None,
        Err(e @ EvalError::Unavailable(_)) => {
            record.verdict = "harness".into();
            record.summary = one_line(&e.to_string());
        }
    }
    Some(record)
}

fn verdict_of(result: &EvalResult) -> String {
    crate::eval::suite::verdict_of(result)
}

fn difference_pct(kforge_ms: f64, kernelbench_ms: f64) -> Option<f64> {
    (kforge_ms > 0.0).then(|| 100.0 * (kernelbench_ms - kforge_ms) / kforge_ms)
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn print_lines(lines: &[String]) {
    let mut out = std::io::stdout().lock();
    for line in lines {
        let _ = writeln!(out, "{line}");
    }
    let _ = out.flush();
}

// -- the table and the summary (pure) ------------------------------------------------------

const GIB: f64 = (1u64 << 30) as f64;

fn gib(bytes: Option<u64>) -> String {
    bytes.map_or("-".into(), |b| format!("{:.2}", b as f64 / GIB))
}

fn ms(value: Option<f64>) -> String {
    value.map_or("-".into(), |v| format!("{v:.4}"))
}

fn header() -> String {
    format!(
        "{:<10} {:>8} {:>8} {:>10} {:>10} {:>8}  {}",
        "verdict", "wall s", "peak GiB", "kforge ms", "KB ms", "diff %", "task"
    )
}

/// A task's row, its failure summary and, when its kernel was evaluated, the kernel's line.
fn record_lines(record: &TaskRecord) -> Vec<String> {
    let mut lines = vec![format!(
        "{:<10} {:>8.2} {:>8} {:>10} {:>10} {:>8}  {}",
        record.verdict,
        record.wall_s,
        gib(record.peak_memory_bytes),
        ms(record.compared_medians().0),
        ms(record.compared_medians().1),
        record
            .difference_pct
            .map_or("-".into(), |d| format!("{d:+.2}")),
        record.task
    )];
    if !record.summary.is_empty() {
        lines.push(format!("    {}", record.summary));
    }
    if let (Some(spread), Some(difference)) = (&record.spread, record.difference_pct) {
        lines.push(format!(
            "    {} rounds (medians of round medians): spread kforge {:.2}%, KB {:.2}%; difference {}",
            record.rounds.len(),
            spread.kforge_pct,
            spread.kernelbench_pct,
            if difference.abs() <= spread.noise_pct() {
                "within the noise"
            } else {
                "beyond the noise"
            }
        ));
    }
    if let Some(compile) = &record.compile {
        lines.push(format!("    {}", compile.describe()));
    }
    if let Some(sol) = record
        .speed_of_light
        .as_ref()
        .filter(|s| s.bound_ms.is_some())
    {
        lines.push(format!("    {}", sol.describe()));
    }
    // On a GPU with kforge's figure but not KernelBench's, the note says why.
    if record.reference.is_some() && record.kernelbench.is_none() {
        for note in record.notes.iter().filter(|n| n.contains("KernelBench")) {
            lines.push(format!("    note: {note}"));
        }
    }
    if let Some(k) = &record.kernel {
        let mut line = format!(
            "    kernel {}: {}, {:.2} s{}, peak {}, score {}",
            file_name(&k.file),
            k.verdict,
            k.wall_s,
            k.overhead_s
                .map_or(String::new(), |o| format!(" (overhead {o:.2} s)")),
            k.peak_memory_bytes
                .map_or("-".into(), |b| format!("{} GiB", gib(Some(b)))),
            k.score.map_or("-".into(), |s| format!("{s:.3}x"))
        );
        if !k.summary.is_empty() {
            line.push_str(": ");
            line.push_str(&k.summary);
        }
        lines.push(line);
    }
    lines
}

/// (category, task, summary) triples grouped by category, in name order; tasks keep
/// their order within a category.
fn group_failures<'a>(
    items: impl Iterator<Item = (&'a str, &'a str, &'a str)>,
) -> Vec<FailureGroup> {
    let mut groups: std::collections::BTreeMap<&str, Vec<Failure>> = Default::default();
    for (category, task, summary) in items {
        groups.entry(category).or_default().push(Failure {
            task: task.to_string(),
            summary: summary.to_string(),
        });
    }
    groups
        .into_iter()
        .map(|(category, failures)| FailureGroup {
            category: category.to_string(),
            failures,
        })
        .collect()
}

fn summarize(records: &[TaskRecord], total_wall_s: f64) -> Summary {
    let failures = group_failures(
        records
            .iter()
            .filter(|r| r.verdict != "ok")
            .map(|r| (r.verdict.as_str(), r.task.as_str(), r.summary.as_str())),
    );
    let kernels: Vec<(&TaskRecord, &KernelRecord)> = records
        .iter()
        .filter_map(|r| r.kernel.as_ref().map(|k| (r, k)))
        .collect();
    let kernel_failures = group_failures(
        kernels
            .iter()
            .filter(|(_, k)| k.verdict != "correct")
            .map(|(r, k)| (k.verdict.as_str(), r.task.as_str(), k.summary.as_str())),
    );
    let worst_memory = records
        .iter()
        .flat_map(|r| {
            let kernel = r.kernel.as_ref().and_then(|k| k.peak_memory_bytes);
            [r.peak_memory_bytes, kernel]
                .into_iter()
                .flatten()
                .map(move |b| (r.task.as_str(), b))
        })
        .max_by_key(|(_, b)| *b)
        .map(|(task, b)| TaskFigure {
            task: task.to_string(),
            value: b as f64,
        });
    let differences: Vec<(&str, f64)> = records
        .iter()
        .filter_map(|r| r.difference_pct.map(|d| (r.task.as_str(), d.abs())))
        .collect();
    let largest_abs_difference_pct =
        differences
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(task, d)| TaskFigure {
                task: task.to_string(),
                value: *d,
            });
    let abs: Vec<f64> = differences.iter().map(|(_, d)| *d).collect();
    let in_rounds: Vec<(&TaskRecord, &RoundSpread, f64)> = records
        .iter()
        .filter_map(|r| Some((r, r.spread.as_ref()?, r.difference_pct?)))
        .collect();
    let beyond_noise = in_rounds
        .iter()
        .filter(|(_, spread, d)| d.abs() > spread.noise_pct())
        .map(|(r, _, d)| TaskFigure {
            task: r.task.clone(),
            value: *d,
        })
        .collect();
    Summary {
        tasks: records.len(),
        ok: records.iter().filter(|r| r.verdict == "ok").count(),
        failures,
        kernels: kernels.len(),
        kernels_correct: kernels
            .iter()
            .filter(|(_, k)| k.verdict == "correct")
            .count(),
        kernel_failures,
        total_wall_s,
        worst_memory,
        largest_abs_difference_pct,
        median_abs_difference_pct: (!abs.is_empty()).then(|| super::stats::median(&abs)),
        compared: abs.len(),
        compared_in_rounds: in_rounds.len(),
        beyond_noise,
    }
}

fn failure_lines(title: &str, groups: &[FailureGroup]) -> Vec<String> {
    let mut lines = vec![format!("{title}:")];
    for group in groups {
        lines.push(format!("  {}: {}", group.category, group.failures.len()));
        for f in &group.failures {
            lines.push(format!("    {}: {}", f.task, f.summary));
        }
    }
    lines
}

fn summary_lines(s: &Summary, gpu: bool) -> Vec<String> {
    let mut lines = vec![format!(
        "tasks checked: {} ({} ok, {} failed)",
        s.tasks,
        s.ok,
        s.tasks - s.ok
    )];
    if s.failures.is_empty() {
        lines.push("failures: none".into());
    } else {
        lines.extend(failure_lines("failures by category", &s.failures));
    }
    if s.kernels > 0 {
        lines.push(format!(
            "kernels evaluated: {} ({} correct)",
            s.kernels, s.kernels_correct
        ));
        if !s.kernel_failures.is_empty() {
            lines.extend(failure_lines(
                "kernel failures by category",
                &s.kernel_failures,
            ));
        }
    }
    lines.push(format!("total wall time: {:.1} s", s.total_wall_s));
    lines.push(match &s.worst_memory {
        Some(worst) => format!(
            "worst-case memory: {} GiB ({})",
            gib(Some(worst.value as u64)),
            worst.task
        ),
        None if gpu => "worst-case memory: - (none measured)".into(),
        None => "worst-case memory: - (not measured on the CPU)".into(),
    });
    lines.push(match (&s.largest_abs_difference_pct, s.median_abs_difference_pct) {
        (Some(largest), Some(median)) => format!(
            "KernelBench vs kforge reference median over {} task(s): largest |difference| {:.2}% ({}), median |difference| {median:.2}%",
            s.compared, largest.value, largest.task
        ),
        _ if gpu => "KernelBench vs kforge reference median: no task was timed both ways".into(),
        _ => "KernelBench vs kforge reference median: - (no timing on the CPU)".into(),
    });
    if s.compared_in_rounds > 0 {
        let mut line = format!(
            "beyond the noise of the rounds: {} of {} task(s)",
            s.beyond_noise.len(),
            s.compared_in_rounds
        );
        if !s.beyond_noise.is_empty() {
            let listed: Vec<String> = s
                .beyond_noise
                .iter()
                .map(|t| format!("{} {:+.2}%", t.task, t.value))
                .collect();
            line.push_str(&format!(" ({})", listed.join(", ")));
        }
        lines.push(line);
    }
    lines
}

/// What the JSON file says about the run as a whole.
struct RunInfo<'a> {
    tasks_dir: &'a Path,
    device: Device,
    versions: Option<&'a serde_json::Value>,
    interrupted: bool,
}

/// The JSON file: every record and the summary, written to a temporary file beside it
/// and renamed over it, so a reader never sees half a file.
fn write_json(path: &Path, run: &RunInfo, records: &[TaskRecord], summary: &Summary) -> Result<()> {
    let document = serde_json::json!({
        "kforge": env!("CARGO_PKG_VERSION"),
        "tasks_dir": run.tasks_dir,
        "device": run.device.torch_name(),
        "versions": run.versions,
        "interrupted": run.interrupted,
        "tasks": records,
        "summary": summary,
    });
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut file = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot write {}", path.display()))?;
    serde_json::to_writer_pretty(&mut file, &document)?;
    file.write_all(b"\n")?;
    file.persist(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timed(task: &str, wall: f64, peak: u64, kforge: f64, kb: f64) -> TaskRecord {
        TaskRecord {
            task: task.into(),
            file: PathBuf::from(format!("/l1/{task}.py")),
            verdict: "ok".into(),
            wall_s: wall,
            peak_memory_bytes: Some(peak),
            reference: Some(TimingStats {
                median_ms: kforge,
                ..Default::default()
            }),
            kernelbench: Some(KernelBenchTiming {
                median_ms: kb,
                ..Default::default()
            }),
            difference_pct: difference_pct(kforge, kb),
            ..Default::default()
        }
    }

    fn failed(task: &str, category: &str, summary: &str) -> TaskRecord {
        TaskRecord {
            task: task.into(),
            verdict: category.into(),
            summary: summary.into(),
            wall_s: 0.5,
            ..Default::default()
        }
    }

    #[test]
    fn tasks_sort_by_kernelbench_number_then_name() {
        let names = [
            "100_HingeLoss.py",
            "19_ReLU.py",
            "2_Standard.py",
            "notes.py",
            "19_Alpha.py",
            "1_Square.py",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            task_order(names),
            [
                "1_Square.py",
                "2_Standard.py",
                "19_Alpha.py",
                "19_ReLU.py",
                "100_HingeLoss.py",
                "notes.py"
            ]
        );
        assert_eq!(numeric_prefix("42_x.py"), Some(42));
        assert_eq!(numeric_prefix("x_42.py"), None);
    }

    #[test]
    fn listing_filters_sorts_and_limits() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["10_b.py", "9_a.py", "2_c.py", "readme.md", "11_bb.py"] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        std::fs::create_dir(dir.path().join("3_dir.py")).unwrap();
        let names = |filter, limit| {
            list_tasks(dir.path(), filter, limit)
                .unwrap()
                .iter()
                .map(|p| file_name(p))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(None, None),
            ["2_c.py", "9_a.py", "10_b.py", "11_bb.py"]
        );
        assert_eq!(names(Some("b"), None), ["10_b.py", "11_bb.py"]);
        assert_eq!(names(None, Some(2)), ["2_c.py", "9_a.py"]);
    }

    #[test]
    fn rows_show_figures_or_dashes_and_failure_summaries() {
        let mut ok = timed("19_ReLU", 3.214, 3 << 30, 3.0, 3.06);
        ok.kernel = Some(KernelRecord {
            file: PathBuf::from("/k/19_ReLU.py"),
            verdict: "correct".into(),
            wall_s: 5.5,
            peak_memory_bytes: Some(1 << 31),
            score: Some(1.2345),
            overhead_s: Some(0.75),
            ..Default::default()
        });
        assert_eq!(
            header(),
            "verdict      wall s peak GiB  kforge ms      KB ms   diff %  task"
        );
        assert_eq!(
            record_lines(&ok),
            [
                "ok             3.21     3.00     3.0000     3.0600    +2.00  19_ReLU",
                "    kernel 19_ReLU.py: correct, 5.50 s (overhead 0.75 s), peak 2.00 GiB, score 1.234x",
            ]
        );
        // With --compile: the compiled reference's line, or why there is none.
        let mut compiled = timed("19_ReLU", 3.214, 3 << 30, 3.0, 3.06);
        compiled.compile = Some(CompileFigures {
            mode: "default".into(),
            compile_s: Some(4.21),
            median_ms: Some(2.5),
            speedup_over_eager: Some(1.2),
            speedup_low: Some(1.18),
            speedup_high: Some(1.22),
            ..Default::default()
        });
        assert_eq!(
            record_lines(&compiled)[1],
            "    torch.compile (default) 2.5000 ms, 1.20x [1.18-1.22] eager, compiled in 4.2 s"
        );
        let cpu = TaskRecord {
            task: "1_good".into(),
            verdict: "ok".into(),
            wall_s: 12.0,
            ..Default::default()
        };
        assert_eq!(
            record_lines(&cpu),
            ["ok            12.00        -          -          -        -  1_good"]
        );
        let bad = failed(
            "2_raises",
            "task",
            "the task's get_inputs() raised ValueError: no",
        );
        assert_eq!(
            record_lines(&bad),
            [
                "task           0.50        -          -          -        -  2_raises",
                "    the task's get_inputs() raised ValueError: no",
            ]
        );
    }

    #[test]
    fn a_missing_kernelbench_figure_on_a_gpu_shows_its_note() {
        let mut r = timed("5_x", 1.0, 1 << 30, 2.0, 2.0);
        r.kernelbench = None;
        r.difference_pct = None;
        r.notes = vec![
            "reference check only: no kernel was evaluated".into(),
            "timing with KernelBench's protocol failed: OutOfMemoryError: CUDA out of memory"
                .into(),
        ];
        assert_eq!(
            record_lines(&r)[1..],
            [
                "    note: timing with KernelBench's protocol failed: OutOfMemoryError: CUDA out of memory"
            ]
        );
    }

    #[test]
    fn summary_groups_failures_and_finds_the_extremes() {
        let mut with_kernel = timed("3_c", 2.0, 1 << 30, 1.0, 0.97);
        with_kernel.kernel = Some(KernelRecord {
            file: PathBuf::from("/k/3_c.py"),
            verdict: "mismatch".into(),
            summary: "trial 1: out differs".into(),
            wall_s: 4.0,
            peak_memory_bytes: Some(5 << 30),
            score: None,
            ..Default::default()
        });
        let records = [
            timed("1_a", 1.0, 2 << 30, 2.0, 2.1),
            failed(
                "2_b",
                "task",
                "the task file has a syntax error at line 3: invalid syntax",
            ),
            with_kernel,
            timed("4_d", 1.0, 1 << 29, 4.0, 4.04),
            failed(
                "5_e",
                "task",
                "the task's get_inputs() raised ValueError: no",
            ),
            failed("6_f", "timeout", "killed after 300 s"),
        ];
        let s = summarize(&records, 42.04);
        assert_eq!(
            (s.tasks, s.ok, s.kernels, s.kernels_correct, s.compared),
            (6, 3, 1, 0, 3)
        );
        let worst = s.worst_memory.clone().unwrap();
        assert_eq!(
            (worst.task.as_str(), worst.value),
            ("3_c", (5u64 << 30) as f64)
        );
        let largest = s.largest_abs_difference_pct.clone().unwrap();
        assert_eq!(largest.task, "1_a");
        assert!((largest.value - 5.0).abs() < 1e-9);
        assert!((s.median_abs_difference_pct.unwrap() - 3.0).abs() < 1e-9);
        assert_eq!(
            summary_lines(&s, true),
            [
                "tasks checked: 6 (3 ok, 3 failed)",
                "failures by category:",
                "  task: 2",
                "    2_b: the task file has a syntax error at line 3: invalid syntax",
                "    5_e: the task's get_inputs() raised ValueError: no",
                "  timeout: 1",
                "    6_f: killed after 300 s",
                "kernels evaluated: 1 (0 correct)",
                "kernel failures by category:",
                "  mismatch: 1",
                "    3_c: trial 1: out differs",
                "total wall time: 42.0 s",
                "worst-case memory: 5.00 GiB (3_c)",
                "KernelBench vs kforge reference median over 3 task(s): largest |difference| 5.00% (1_a), median |difference| 3.00%",
            ]
        );
    }

    #[test]
    fn summary_on_the_cpu_says_what_was_not_measured() {
        let ok = TaskRecord {
            task: "1_a".into(),
            verdict: "ok".into(),
            wall_s: 3.0,
            ..Default::default()
        };
        let s = summarize(&[ok], 3.0);
        assert_eq!(
            summary_lines(&s, false),
            [
                "tasks checked: 1 (1 ok, 0 failed)",
                "failures: none",
                "total wall time: 3.0 s",
                "worst-case memory: - (not measured on the CPU)",
                "KernelBench vs kforge reference median: - (no timing on the CPU)",
            ]
        );
    }

    fn round(kforge_ms: f64, kernelbench_ms: f64) -> ProtocolRound {
        ProtocolRound {
            kforge_ms,
            kernelbench_ms,
            ..Default::default()
        }
    }

    /// Spread is (max - min) / median of each protocol's round medians; the difference is
    /// taken between the medians over the rounds.
    #[test]
    fn rounds_give_each_protocol_its_spread() {
        assert_eq!(
            RoundSpread::of(&[round(2.0, 2.0)]),
            None,
            "one round: no spread"
        );
        let s = RoundSpread::of(&[round(2.0, 2.2), round(2.1, 2.0), round(1.9, 2.1)]).unwrap();
        assert!((s.kforge_ms - 2.0).abs() < 1e-9);
        assert!((s.kernelbench_ms - 2.1).abs() < 1e-9);
        assert!((s.kforge_pct - 10.0).abs() < 1e-9);
        assert!((s.kernelbench_pct - 100.0 * 0.2 / 2.1).abs() < 1e-9);
        assert!((s.noise_pct() - 10.0).abs() < 1e-9);
    }

    fn in_rounds(task: &str, rounds: &[ProtocolRound]) -> TaskRecord {
        let mut r = timed(
            task,
            1.0,
            1 << 30,
            rounds[0].kforge_ms,
            rounds[0].kernelbench_ms,
        );
        r.rounds = rounds.to_vec();
        r.spread = RoundSpread::of(rounds);
        r.difference_pct = r.compared_difference_pct();
        r
    }

    /// A task whose protocols differ by less than their spread is noise; one whose
    /// difference exceeds both spreads is listed, with its sign.
    #[test]
    fn rounds_tell_noise_from_a_difference_between_protocols() {
        // 1 ms +-5% both ways: +2% apart.
        let noisy = in_rounds(
            "1_noisy",
            &[round(1.0, 1.07), round(1.05, 1.02), round(0.98, 1.0)],
        );
        // Steady within 1%, 10% apart.
        let apart = in_rounds(
            "2_apart",
            &[round(2.0, 2.2), round(2.01, 2.21), round(1.99, 2.2)],
        );
        assert_eq!(
            record_lines(&noisy)[1],
            "    3 rounds (medians of round medians): spread kforge 7.00%, KB 6.86%; difference within the noise"
        );
        assert_eq!(
            record_lines(&apart)[0],
            "ok             1.00     1.00     2.0000     2.2000   +10.00  2_apart"
        );
        assert!(record_lines(&apart)[1].ends_with("difference beyond the noise"));
        let s = summarize(
            &[noisy, apart, timed("3_once", 1.0, 1 << 30, 1.0, 1.5)],
            3.0,
        );
        assert_eq!(s.compared_in_rounds, 2);
        assert_eq!(s.beyond_noise.len(), 1);
        assert_eq!(
            summary_lines(&s, true).last().unwrap(),
            "beyond the noise of the rounds: 1 of 2 task(s) (2_apart +10.00%)"
        );
    }

    #[test]
    fn difference_is_relative_to_kforges_median() {
        assert!((difference_pct(2.0, 2.1).unwrap() - 5.0).abs() < 1e-9);
        assert!((difference_pct(2.0, 1.9).unwrap() + 5.0).abs() < 1e-9);
        assert_eq!(difference_pct(0.0, 1.0), None);
    }

    #[test]
    fn json_file_is_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kb.json");
        std::fs::write(&path, "old").unwrap();
        let records = [failed("2_b", "task", "bad")];
        let summary = summarize(&records, 1.0);
        let run = RunInfo {
            tasks_dir: Path::new("/l1"),
            device: Device::Cpu,
            versions: None,
            interrupted: true,
        };
        write_json(&path, &run, &records, &summary).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["tasks"][0]["verdict"], "task");
        assert_eq!(v["summary"]["failures"][0]["category"], "task");
        assert_eq!(v["summary"]["failures"][0]["failures"][0]["task"], "2_b");
        assert_eq!(v["interrupted"], true);
        assert_eq!(v["device"], "cpu");
        let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(leftovers, 1, "no temporary file is left beside it");
    }
}
