//! What a batch shows people and scripts: per level (and over all tasks) the correctness
//! rate, KernelBench's fast_p, the geometric and arithmetic mean speedup and the cost; per
//! task its row. Written as `summary.md`, `summary.json` and `results.csv` in the batch
//! directory, always recomputed from the sessions.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use super::manifest::Manifest;
use super::results::{TaskResult, collect, cost_text};
use crate::protocol::Baseline;
use crate::report::score_text;

pub const SUMMARY_MD: &str = "summary.md";
pub const SUMMARY_JSON: &str = "summary.json";
pub const RESULTS_CSV: &str = "results.csv";
pub const SPEEDUPS_SVG: &str = "speedups.svg";

/// The thresholds of KernelBench's fast_p: the share of all tasks whose kernel is correct
/// and more than p times as fast as the reference (fast_0 = correct and timed).
pub const FAST_P: [f64; 4] = [0.0, 1.0, 1.5, 2.0];

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FastP {
    pub p: f64,
    /// Tasks correct with a speedup above p.
    pub count: usize,
    /// `count` over every task of the group (KernelBench divides by all tasks).
    pub rate: f64,
    /// Tasks correct whose speedup's 95% interval lies above p (its lower end > p): the
    /// ones measured faster than p beyond the timing noise. A task without an interval is
    /// not counted. None when no task of the group has an interval (sessions recorded
    /// before intervals): there is nothing to be confident about.
    pub confident_count: Option<usize>,
    /// `confident_count` over every task of the group.
    pub confident_rate: Option<f64>,
    /// Tasks counted in `count` whose best kernel was also correct on every unseen shape
    /// (`ShapeVerdict::Generalizes`): a task not checked, not variable or wrong on some
    /// shape is not counted. None when no task of the group was checked.
    pub generalizing_count: Option<usize>,
    /// `generalizing_count` over every task of the group.
    pub generalizing_rate: Option<f64>,
}

impl FastP {
    /// `40.0% (4)`, with `, confident 30.0% (3)` when intervals were measured.
    pub fn text(&self) -> String {
        let mut text = format!("{:.1}% ({})", 100.0 * self.rate, self.count);
        if let (Some(count), Some(rate)) = (self.confident_count, self.confident_rate) {
            text.push_str(&format!(", confident {:.1}% ({count})", 100.0 * rate));
        }
        if let (Some(count), Some(rate)) = (self.generalizing_count, self.generalizing_rate) {
            text.push_str(&format!(", generalizing {:.1}% ({count})", 100.0 * rate));
        }
        text
    }
}

/// Figures over a group of tasks (one level, or all).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupSummary {
    /// `level 1`, `other` (tasks outside KernelBench's layout) or `all`.
    pub group: String,
    pub tasks: usize,
    /// Tasks whose session has finished.
    pub finished: usize,
    pub correct: usize,
    pub correctness_rate: f64,
    /// None where nothing was timed (the CPU): there is no speedup to count.
    pub fast_p: Option<Vec<FastP>>,
    /// Correct tasks with a measured speedup: the means are over these.
    pub timed_correct: usize,
    /// Geometric mean of the speedup over the correct, timed tasks (KernelBench's
    /// `geometric_mean_speed_ratio_correct_only`).
    pub geomean_speedup: Option<f64>,
    /// Arithmetic mean over the same tasks.
    pub mean_speedup: Option<f64>,
    /// The same figures against eager PyTorch (KernelBench's) and against the reference
    /// under torch.compile, where any task's reference was timed both ways (the ones above
    /// are the headline's, `[eval] baseline`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_eager: Option<SpeedupFigures>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_compile: Option<SpeedupFigures>,
    /// The same figures against each task's reference under PyTorch's default settings,
    /// where any task's policy differs from them (fast_p above stays the headline's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_defaults: Option<SpeedupFigures>,
    pub tokens: u64,
    /// The cost of the calls whose price is known ...
    pub cost_usd: f64,
    /// ... and how many calls' cost is unknown (then the costs are lower bounds).
    pub unpriced_calls: usize,
    pub cost_per_task: Option<f64>,
    /// The tasks' times added up (task-time): tasks run side by side, so this is more than
    /// the batch's elapsed time (`results::elapsed_seconds`).
    pub wall_s: f64,
}

/// fast_p and the means of one group's scores against one baseline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpeedupFigures {
    /// None where nothing was timed (the CPU): there is no speedup to count.
    pub fast_p: Option<Vec<FastP>>,
    /// Correct tasks with a measured speedup: the means are over these.
    pub timed_correct: usize,
    pub geomean_speedup: Option<f64>,
    pub mean_speedup: Option<f64>,
}

/// fast_p (over all `results`) and the means (over the correct, timed ones) of the scores
/// `figure` reads from each task.
fn speedup_figures(
    results: &[&TaskResult],
    figure: impl Fn(&TaskResult) -> (Option<f64>, Option<(f64, f64)>),
) -> SpeedupFigures {
    let n = results.len();
    let figures: Vec<_> = results
        .iter()
        .filter(|r| r.correct)
        .map(|r| figure(r))
        .collect();
    let speedups: Vec<f64> = figures
        .iter()
        .filter_map(|(score, _)| *score)
        .filter(|s| s.is_finite() && *s > 0.0)
        .collect();
    // The lower ends of the correct tasks' intervals, where they have one.
    let lows: Vec<f64> = figures
        .iter()
        .filter(|(score, _)| score.is_some())
        .filter_map(|(_, interval)| interval.map(|(low, _)| low))
        .filter(|low| low.is_finite())
        .collect();
    // The speedups of the correct tasks whose kernel generalizes to unseen shapes.
    let any_checked = results.iter().any(|r| r.shapes.is_some());
    let generalizing: Vec<f64> = results
        .iter()
        .filter(|r| r.generalizes())
        .filter_map(|r| figure(r).0)
        .collect();
    let any_timed = results.iter().any(|r| r.timed);
    let rate = |count: usize| if n == 0 { 0.0 } else { count as f64 / n as f64 };
    let fast_p = any_timed.then(|| {
        FAST_P
            .iter()
            .map(|&p| {
                let count = speedups.iter().filter(|s| **s > p).count();
                let confident = (!lows.is_empty()).then(|| lows.iter().filter(|l| **l > p).count());
                let general = any_checked.then(|| generalizing.iter().filter(|s| **s > p).count());
                FastP {
                    p,
                    count,
                    rate: rate(count),
                    confident_count: confident,
                    confident_rate: confident.map(rate),
                    generalizing_count: general,
                    generalizing_rate: general.map(rate),
                }
            })
            .collect()
    });
    let (geomean, mean) = if speedups.is_empty() {
        (None, None)
    } else {
        let k = speedups.len() as f64;
        (
            Some((speedups.iter().map(|s| s.ln()).sum::<f64>() / k).exp()),
            Some(speedups.iter().sum::<f64>() / k),
        )
    };
    SpeedupFigures {
        fast_p,
        timed_correct: speedups.len(),
        geomean_speedup: geomean,
        mean_speedup: mean,
    }
}

/// Aggregates `results` under the name `group`.
pub fn summarize_group(group: &str, results: &[&TaskResult]) -> GroupSummary {
    let n = results.len();
    let correct = results.iter().filter(|r| r.correct).count();
    let rate = |count: usize| if n == 0 { 0.0 } else { count as f64 / n as f64 };
    let headline = speedup_figures(results, |r| (r.score, r.score_interval()));
    // Against each baseline, where any task's reference was timed under torch.compile.
    let compiled = results.iter().any(|r| r.baselines.is_some());
    let against =
        |baseline: Baseline| compiled.then(|| speedup_figures(results, |r| r.score_vs(baseline)));
    let cost_usd: f64 = results.iter().map(|r| r.cost_usd).sum();
    GroupSummary {
        group: group.to_string(),
        tasks: n,
        finished: results.iter().filter(|r| r.status.is_final()).count(),
        correct,
        correctness_rate: rate(correct),
        fast_p: headline.fast_p,
        timed_correct: headline.timed_correct,
        geomean_speedup: headline.geomean_speedup,
        mean_speedup: headline.mean_speedup,
        vs_eager: against(Baseline::Eager),
        vs_compile: against(Baseline::Compile),
        vs_defaults: results
            .iter()
            .any(|r| r.vs_defaults.is_some())
            .then(|| speedup_figures(results, TaskResult::score_vs_defaults)),
        tokens: results.iter().map(|r| r.tokens()).sum(),
        cost_usd,
        unpriced_calls: results.iter().map(|r| r.unpriced_calls).sum(),
        cost_per_task: (n > 0).then(|| cost_usd / n as f64),
        wall_s: results.iter().map(|r| r.wall_s).sum(),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatchSummary {
    pub batch: String,
    pub provider: String,
    pub model: String,
    /// One group per KernelBench level present, `other` for the rest, then `all`.
    pub groups: Vec<GroupSummary>,
    pub tasks: Vec<TaskResult>,
}

pub fn summarize(name: &str, manifest: &Manifest, tasks: Vec<TaskResult>) -> BatchSummary {
    let mut levels: Vec<Option<u32>> = tasks.iter().map(|t| t.level).collect();
    levels.sort();
    levels.dedup();
    let mut groups: Vec<GroupSummary> = levels
        .iter()
        .map(|level| {
            let members: Vec<&TaskResult> = tasks.iter().filter(|t| t.level == *level).collect();
            let group = level.map_or("other".to_string(), |l| format!("level {l}"));
            summarize_group(&group, &members)
        })
        .collect();
    // Levels sort before `other`.
    groups.sort_by_key(|g| g.group == "other");
    if groups.len() > 1 || groups.is_empty() {
        groups.push(summarize_group("all", &tasks.iter().collect::<Vec<_>>()));
    }
    BatchSummary {
        batch: name.to_string(),
        provider: manifest.provider.clone(),
        model: manifest.model.clone(),
        groups,
        tasks,
    }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(String::new, |x| format!("{x:.digits$}"))
}

/// `results.csv`: one row per task.
pub fn results_csv(summary: &BatchSummary) -> String {
    let mut out = String::from(
        "task,level,problem,status,correct,score,score_low,score_high,reference_ms,kernel_ms,device,candidates,calls,input_tokens,output_tokens,cost_usd,unpriced_calls,wall_s,best_file,precision,baseline,score_vs_eager,score_vs_compile,shapes,score_vs_defaults\n",
    );
    let quote = |s: &str| {
        if s.contains([',', '"', '\n']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    };
    for t in &summary.tasks {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.6},{},{:.1},{},{},{},{},{},{},{}",
            quote(t.key.as_str()),
            t.level.map_or(String::new(), |l| l.to_string()),
            t.problem.map_or(String::new(), |p| p.to_string()),
            t.status.word(),
            t.correct,
            opt(t.score, 4),
            opt(t.score_interval().map(|i| i.0), 4),
            opt(t.score_interval().map(|i| i.1), 4),
            opt(t.reference_ms, 5),
            opt(t.kernel_ms, 5),
            quote(t.device.as_deref().unwrap_or("")),
            t.candidates,
            t.calls,
            t.input_tokens,
            t.output_tokens,
            t.cost_usd,
            t.unpriced_calls,
            t.wall_s,
            quote(
                &t.best_file
                    .as_ref()
                    .map_or(String::new(), |f| f.display().to_string())
            ),
            t.precision.map_or("", |p| p.as_str()),
            t.baselines.as_ref().map_or("", |b| b.headline.as_str()),
            opt(t.score_vs(Baseline::Eager).0, 4),
            opt(t.score_vs(Baseline::Compile).0, 4),
            t.shapes.as_ref().map_or(String::new(), |s| s.mark()),
            opt(t.score_vs_defaults().0, 4),
        );
    }
    out
}

/// `summary.md`.
pub fn summary_md(summary: &BatchSummary) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# Batch {}\n", summary.batch);
    let _ = writeln!(
        md,
        "{} tasks, {} / {}. Figures are recomputed from the task sessions by `kforge batch report`.\n",
        summary.tasks.len(),
        summary.provider,
        summary.model
    );
    let mut policies: Vec<String> = summary
        .tasks
        .iter()
        .filter_map(|t| t.precision)
        .map(|p| format!("{p} ({})", p.comparison()))
        .collect();
    policies.sort();
    policies.dedup();
    if !policies.is_empty() {
        let _ = writeln!(md, "Precision policy: {}.\n", policies.join(", "));
    }
    let _ = writeln!(md, "![speedup distribution]({SPEEDUPS_SVG})\n");
    md.push_str("## Results\n\n");
    md.push_str("| group | tasks | finished | correct | fast_0 | fast_1 | fast_1.5 | fast_2 | geomean | mean | tokens | cost | cost/task |\n");
    md.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for g in &summary.groups {
        let fast: Vec<String> = match &g.fast_p {
            Some(f) => f.iter().map(FastP::text).collect(),
            None => vec!["n/a".into(); FAST_P.len()],
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} ({:.1}%) | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            g.group,
            g.tasks,
            g.finished,
            g.correct,
            100.0 * g.correctness_rate,
            fast[0],
            fast[1],
            fast[2],
            fast[3],
            score_text(g.geomean_speedup),
            score_text(g.mean_speedup),
            g.tokens,
            cost_text(g.cost_usd, g.unpriced_calls),
            g.cost_per_task
                .map_or_else(|| "n/a".into(), |c| format!("${c:.4}")),
        );
    }
    md.push_str(
        "\nfast_p: tasks whose best kernel is correct and more than p times as fast as the \
         PyTorch reference, over all tasks of the group (KernelBench's definition). confident: \
         the same count, but only tasks whose speedup's 95% interval lies above p (its lower \
         end > p: faster than p beyond the timing noise; a task without an interval is not \
         counted), over all tasks of the group; shown where the group has intervals. generalizing: \
         the same count, but only tasks whose best kernel was also correct on every unseen \
         shape (`shapes` below; a task not checked or whose sizes cannot be varied is not \
         counted); shown where a task of the group was checked. geomean and \
         mean: the geometric and arithmetic mean speedup over the correct tasks with a timing \
         (their number: ",
    );
    let timed: Vec<String> = summary
        .groups
        .iter()
        .map(|g| format!("{} {}", g.group, g.timed_correct))
        .collect();
    let _ = writeln!(
        md,
        "{}). n/a: nothing was timed (the CPU interpreter checks correctness only).\n",
        timed.join(", ")
    );
    baselines_md(&mut md, summary);
    md.push_str("## Tasks\n\n| task | status | best | speedup | reference ms | kernel ms | device | tokens | cost | wall | shapes |\n");
    md.push_str("|---|---|---|---:|---:|---:|---|---:|---:|---:|---|\n");
    for t in &summary.tasks {
        let best = match (&t.best_file, t.correct) {
            (Some(f), true) => format!("[#{}]({})", t.best.map_or(0, |b| b.0), f.display()),
            _ => t.refused.clone().unwrap_or_else(|| "-".into()),
        };
        let _ = writeln!(
            md,
            "| [{}]({}) | {} | {} | {}{}{} | {} | {} | {} | {} | {} | {} | {} |",
            t.key,
            Path::new(super::manifest::TASKS_DIR)
                .join(t.key.as_str())
                .join("report.md")
                .display(),
            t.status.word(),
            best.replace('|', "\\|"),
            crate::protocol::figures::score_text(t.score, t.score_interval()),
            crate::protocol::sol::pct_suffix(t.sol_pct, t.faster_than_light),
            defaults_suffix(t),
            opt(t.reference_ms, 4),
            opt(t.kernel_ms, 4),
            t.device.as_deref().unwrap_or(""),
            t.tokens(),
            cost_text(t.cost_usd, t.unpriced_calls),
            crate::protocol::figures::duration_text(t.wall_s),
            shapes_cell(t),
        );
    }
    md
}

/// ` (0.43x vs PyTorch's defaults)` beside a task's headline speedup, where its reference was
/// timed under PyTorch's default settings too.
fn defaults_suffix(t: &TaskResult) -> String {
    match t.score_vs_defaults() {
        (Some(score), _) => format!(" ({score:.2}x vs PyTorch's defaults)"),
        _ => String::new(),
    }
}

/// The table of fast_p and geomean against each baseline, where any task's reference was
/// timed under torch.compile too.
fn baselines_md(md: &mut String, summary: &BatchSummary) {
    if summary
        .groups
        .iter()
        .all(|g| g.vs_compile.is_none() && g.vs_defaults.is_none())
    {
        return;
    }
    md.push_str("### Against each baseline\n\n");
    md.push_str("| group | against | fast_0 | fast_1 | fast_1.5 | fast_2 | geomean | mean |\n");
    md.push_str("|---|---|---:|---:|---:|---:|---:|---:|\n");
    for g in &summary.groups {
        for (name, figures) in [
            ("eager (KernelBench)", &g.vs_eager),
            ("torch.compile", &g.vs_compile),
            ("PyTorch's default settings", &g.vs_defaults),
        ] {
            let Some(f) = figures else { continue };
            let fast: Vec<String> = match &f.fast_p {
                Some(f) => f.iter().map(FastP::text).collect(),
                None => vec!["n/a".into(); FAST_P.len()],
            };
            let _ = writeln!(
                md,
                "| {} | {name} | {} | {} | {} | {} | {} | {} |",
                g.group,
                fast[0],
                fast[1],
                fast[2],
                fast[3],
                score_text(f.geomean_speedup),
                score_text(f.mean_speedup),
            );
        }
    }
    md.push_str(
        "\nThe table above is against each task's headline baseline (`[eval] baseline`; \
         `best`: torch.compile where faster beyond the noise, else eager). Against torch.compile, a task whose \
         reference did not compile has no score and counts as not faster. Against PyTorch's default settings \
         (where a task's precision policy differs from them, e.g. cuDNN TF32 off under `strict`): the same \
         kernels against the reference as PyTorch runs it by default; fast_p above and the sessions' selection \
         use the headline.\n\n",
    );
}

/// A task's `shapes` cell: `5/5`, or `FAIL 4/5: <the line>` so the failing shape shows.
fn shapes_cell(t: &TaskResult) -> String {
    match (&t.shapes, &t.shapes_line) {
        (Some(v), Some(line)) if v.fails() => {
            format!("{}: {}", v.mark(), crate::report::cell(line, 160))
        }
        (Some(v), _) => v.mark(),
        (None, _) => "-".into(),
    }
}

/// Recomputes the summary from the sessions and writes `summary.md`, `summary.json`,
/// `results.csv` and `speedups.svg` (`export::write_all` adds the KernelBench export).
pub fn write_summary(dir: &Path, manifest: &Manifest) -> Result<BatchSummary> {
    let name = dir
        .file_name()
        .map_or("batch".into(), |n| n.to_string_lossy().into_owned());
    let summary = summarize(&name, manifest, collect(dir, manifest));
    let write = |file: &str, text: &str| {
        std::fs::write(dir.join(file), text)
            .with_context(|| format!("cannot write {}", dir.join(file).display()))
    };
    // The chart before the markdown that links it. A task without a correct kernel is
    // its own bar; a correct one never timed (the CPU) has no speedup to draw either.
    let speedups: Vec<Option<f64>> = summary
        .tasks
        .iter()
        .map(|t| t.score.filter(|_| t.correct))
        .collect();
    let title = format!(
        "{name}: speedup of each task's best kernel ({} tasks)",
        speedups.len()
    );
    write(
        SPEEDUPS_SVG,
        &crate::charts::speedup_distribution_svg(&speedups, &title)?,
    )?;
    write(SUMMARY_MD, &summary_md(&summary))?;
    write(
        SUMMARY_JSON,
        &(serde_json::to_string_pretty(&summary)? + "\n"),
    )?;
    write(RESULTS_CSV, &results_csv(&summary))?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::results::TaskStatus;
    use crate::protocol::{RunEnd, TaskKey};

    fn task(key: &str, level: Option<u32>, correct: bool, score: Option<f64>) -> TaskResult {
        TaskResult {
            key: TaskKey(key.into()),
            name: key.into(),
            level,
            problem: Some(1),
            status: TaskStatus::Ended(if correct {
                RunEnd::Complete
            } else {
                RunEnd::NoCorrectKernel
            }),
            refused: None,
            correct,
            best: None,
            best_file: None,
            score,
            score_low: None,
            score_high: None,
            reference_ms: None,
            kernel_ms: None,
            device: None,
            baselines: None,
            sol_pct: None,
            faster_than_light: false,
            vs_defaults: None,
            timed: true,
            precision: Some(crate::protocol::PrecisionPolicy::Strict),
            candidates: 1,
            calls: 2,
            input_tokens: 100,
            output_tokens: 10,
            cost_usd: 0.5,
            unpriced_calls: 0,
            wall_s: 2.0,
            last_event_at: None,
            runs: Vec::new(),
            shapes: None,
            shapes_line: None,
        }
    }

    #[test]
    fn fast_p_counts_correct_tasks_above_p_over_all_tasks() {
        let tasks = [
            task("a", Some(1), true, Some(0.5)),
            task("b", Some(1), true, Some(1.2)),
            task("c", Some(1), true, Some(2.5)),
            task("d", Some(1), false, None),
            // Incorrect with a (stale) score: never counted.
            task("e", Some(1), false, Some(9.0)),
        ];
        let g = summarize_group("level 1", &tasks.iter().collect::<Vec<_>>());
        let fast = g.fast_p.unwrap();
        let counts: Vec<usize> = fast.iter().map(|f| f.count).collect();
        assert_eq!(counts, vec![3, 2, 1, 1]);
        assert_eq!(fast[1].rate, 2.0 / 5.0);
        assert_eq!(g.correct, 3);
        assert_eq!(g.correctness_rate, 0.6);
        let geomean = (0.5f64 * 1.2 * 2.5).powf(1.0 / 3.0);
        assert!((g.geomean_speedup.unwrap() - geomean).abs() < 1e-12);
        assert!((g.mean_speedup.unwrap() - 4.2 / 3.0).abs() < 1e-12);
        assert_eq!(g.timed_correct, 3);
        assert_eq!(g.tokens, 550);
        assert_eq!(g.cost_usd, 2.5);
        assert_eq!(g.cost_per_task, Some(0.5));
    }

    /// The confident variant counts only tasks whose interval lies above p, over all tasks;
    /// KernelBench's own count stays as it was.
    /// Tasks whose reference was timed under torch.compile too: fast_p and geomean against
    /// each baseline beside the headline's; a task that did not compile counts as not
    /// faster than compile; the markdown and the CSV say both.
    #[test]
    fn fast_p_and_geomean_against_each_baseline() {
        use crate::protocol::{BaselineScores, ScoreFigure};
        let both = |key: &str, eager: f64, compile: Option<f64>| {
            let headline = if compile.is_some_and(|c| c < eager) {
                Baseline::Compile
            } else {
                Baseline::Eager
            };
            let score = if headline == Baseline::Compile {
                compile
            } else {
                Some(eager)
            };
            TaskResult {
                baselines: Some(Box::new(BaselineScores {
                    headline,
                    vs_eager: ScoreFigure::new(Some(eager), Some((eager * 0.98, eager * 1.02))),
                    vs_compile: ScoreFigure::new(compile, compile.map(|c| (c * 0.97, c * 1.03))),
                    compile_speedup: compile.map(|c| eager / c),
                })),
                ..task(key, Some(2), true, score)
            }
        };
        let tasks = [
            both("a", 2.4, Some(1.2)),
            both("b", 1.3, Some(0.9)),
            // The reference did not compile: against eager only.
            both("c", 1.6, None),
            task("d", Some(2), false, None),
        ];
        let g = summarize_group("level 2", &tasks.iter().collect::<Vec<_>>());
        let counts = |f: &SpeedupFigures| -> Vec<usize> {
            f.fast_p.as_ref().unwrap().iter().map(|f| f.count).collect()
        };
        let eager = g.vs_eager.as_ref().unwrap();
        let compile = g.vs_compile.as_ref().unwrap();
        assert_eq!(counts(eager), [3, 3, 2, 1]);
        assert_eq!(counts(compile), [2, 1, 0, 0]);
        assert_eq!(compile.timed_correct, 2);
        let geomean = (1.2f64 * 0.9).sqrt();
        assert!((compile.geomean_speedup.unwrap() - geomean).abs() < 1e-12);
        // The headline: compile where it was faster (a, b), eager where it did not compile (c).
        assert_eq!(g.fast_p.as_ref().map(|f| f[1].count), Some(2));
        let summary = BatchSummary {
            batch: "b".into(),
            provider: "p".into(),
            model: "m".into(),
            groups: vec![g],
            tasks: tasks.to_vec(),
        };
        let md = summary_md(&summary);
        assert!(md.contains("### Against each baseline"), "{md}");
        assert!(
            md.contains("| level 2 | eager (KernelBench) | 75.0% (3), confident 75.0% (3) | 75.0% (3), confident 75.0% (3) |"),
            "{md}"
        );
        assert!(md.contains("| level 2 | torch.compile | 50.0% (2)"), "{md}");
        let csv = results_csv(&summary);
        assert!(
            csv.lines()
                .next()
                .unwrap()
                .contains(",baseline,score_vs_eager,score_vs_compile,")
        );
        assert!(csv.contains(",compile,2.4000,1.2000,"), "{csv}");
        assert!(csv.contains(",eager,1.6000,,"), "{csv}");
        // Without any compile figures the summary reads as before.
        let plain = [task("a", Some(1), true, Some(1.5))];
        let g = summarize_group("level 1", &plain.iter().collect::<Vec<_>>());
        assert!(g.vs_eager.is_none() && g.vs_compile.is_none() && g.vs_defaults.is_none());
    }

    /// Issue 35: a task whose policy's settings differ from PyTorch's defaults carries its
    /// score against the reference under the defaults; the summary counts fast_p against
    /// them beside the headline's (which stays fast_p) and the CSV has the column.
    #[test]
    fn the_score_against_pytorchs_defaults_beside_the_headline() {
        use crate::protocol::{DefaultsScore, ScoreFigure};
        let conv = TaskResult {
            vs_defaults: Some(DefaultsScore {
                score: ScoreFigure::new(Some(0.43), Some((0.42, 0.44))),
                reference_speedup: Some(2.44),
                differs: Some("float32 convolutions".into()),
            }),
            ..task("conv", Some(2), true, Some(1.05))
        };
        let tasks = [conv, task("relu", Some(2), true, Some(1.5))];
        let g = summarize_group("level 2", &tasks.iter().collect::<Vec<_>>());
        let d = g.vs_defaults.as_ref().unwrap();
        assert_eq!(d.timed_correct, 1);
        assert_eq!(d.fast_p.as_ref().unwrap()[1].count, 0);
        assert_eq!(
            g.fast_p.as_ref().unwrap()[1].count,
            2,
            "the headline's fast_p"
        );
        let summary = BatchSummary {
            batch: "b".into(),
            provider: "p".into(),
            model: "m".into(),
            groups: vec![g],
            tasks: tasks.to_vec(),
        };
        let md = summary_md(&summary);
        assert!(
            md.contains("| level 2 | PyTorch's default settings |"),
            "{md}"
        );
        assert!(
            md.contains("fast_p above and the sessions' selection use the headline"),
            "{md}"
        );
        assert!(md.contains(" (0.43x vs PyTorch's defaults) |"), "{md}");
        let csv = results_csv(&summary);
        assert!(
            csv.lines()
                .next()
                .unwrap()
                .ends_with(",shapes,score_vs_defaults")
        );
        assert!(csv.lines().nth(1).unwrap().ends_with(",0.4300"), "{csv}");
    }

    #[test]
    fn confident_fast_p_counts_tasks_whose_interval_clears_p() {
        let with = |key: &str, score: f64, low: f64, high: f64| TaskResult {
            score_low: Some(low),
            score_high: Some(high),
            ..task(key, Some(1), true, Some(score))
        };
        let tasks = [
            with("a", 1.05, 0.98, 1.12),
            with("b", 1.60, 1.55, 1.65),
            with("c", 2.10, 1.90, 2.30),
            // A correct task without an interval: in fast_p, never confident.
            task("d", Some(1), true, Some(1.2)),
            task("e", Some(1), false, None),
        ];
        let g = summarize_group("level 1", &tasks.iter().collect::<Vec<_>>());
        let fast = g.fast_p.unwrap();
        let counts: Vec<(usize, Option<usize>)> =
            fast.iter().map(|f| (f.count, f.confident_count)).collect();
        assert_eq!(
            counts,
            [(4, Some(3)), (4, Some(2)), (2, Some(2)), (1, Some(0))]
        );
        assert_eq!(fast[1].rate, 0.8);
        assert_eq!(fast[1].confident_rate, Some(0.4));
        assert_eq!(fast[1].text(), "80.0% (4), confident 40.0% (2)");
        // No interval anywhere (sessions recorded before them): no confident figure.
        let old = [task("a", Some(1), true, Some(1.5))];
        let g = summarize_group("level 1", &old.iter().collect::<Vec<_>>());
        let fast = g.fast_p.unwrap();
        assert_eq!(fast[1].confident_count, None);
        assert_eq!(fast[1].text(), "100.0% (1)");
    }

    #[test]
    fn untimed_groups_have_no_fast_p_and_unknown_prices_are_counted() {
        let mut a = task("a", None, true, None);
        a.timed = false;
        let mut b = a.clone();
        b.unpriced_calls = 2;
        let g = summarize_group("other", &[&a, &b]);
        assert_eq!(g.fast_p, None);
        assert_eq!(g.geomean_speedup, None);
        assert_eq!((g.cost_usd, g.unpriced_calls), (1.0, 2));
        assert_eq!(
            cost_text(g.cost_usd, g.unpriced_calls),
            "$1.0000 + 2 unpriced calls"
        );
        assert_eq!(g.correctness_rate, 1.0);
        let empty = summarize_group("all", &[]);
        assert_eq!(empty.correctness_rate, 0.0);
        assert_eq!(empty.cost_per_task, None);
    }

    /// A manifest of one CPU task, for the tables.
    fn manifest() -> Manifest {
        crate::batch::manifest::Manifest::new(
            "p".into(),
            "m".into(),
            None,
            crate::eval::devices::DeviceChoice::Cpu,
            crate::batch::manifest::BatchLimits {
                tasks_at_once: 1,
                llm_calls_at_once: 1,
                max_tokens: None,
                max_cost_usd: None,
                max_wall_s: None,
            },
            Default::default(),
            Default::default(),
            vec![],
        )
    }

    #[test]
    fn groups_are_levels_then_other_then_all_and_the_tables_show_them() {
        let m = manifest();
        let tasks = vec![
            task("x", None, true, Some(1.0)),
            TaskResult {
                score_low: Some(2.9),
                score_high: Some(3.1),
                ..task("L2", Some(2), true, Some(3.0))
            },
            task("L1", Some(1), false, None),
        ];
        let s = summarize("b", &m, tasks);
        let names: Vec<&str> = s.groups.iter().map(|g| g.group.as_str()).collect();
        assert_eq!(names, ["level 1", "level 2", "other", "all"]);
        let md = summary_md(&s);
        assert!(md.contains("| level 2 | 1 | 1 | 1 (100.0%) | 100.0% (1), confident 100.0% (1) | 100.0% (1), confident 100.0% (1) | 100.0% (1), confident 100.0% (1) | 100.0% (1), confident 100.0% (1) | 3.00x |"), "{md}");
        assert!(
            md.contains("| other | 1 | 1 | 1 (100.0%) | 100.0% (1) | 0.0% (0) |"),
            "no interval in the group: no confident figure: {md}"
        );
        assert!(md.contains("confident: the same count, but only tasks whose speedup's 95% interval lies above p"), "{md}");
        assert!(md.contains(" | 3.00x [2.90-3.10] | "), "{md}");
        assert!(
            md.contains("(their number: level 1 0, level 2 1, other 1, all 2)"),
            "{md}"
        );
        let csv = results_csv(&s);
        assert_eq!(csv.lines().count(), 4);
        assert!(
            csv.lines()
                .nth(2)
                .unwrap()
                .starts_with("L2,2,1,complete,true,3.0000,2.9000,3.1000,"),
            "{csv}"
        );
        assert!(
            csv.lines()
                .next()
                .unwrap()
                .contains(",best_file,precision,")
        );
        assert!(csv.lines().nth(2).unwrap().contains(",strict,"), "{csv}");
        assert!(
            md.contains("Precision policy: strict (fp32 vs fp32).\n"),
            "{md}"
        );
    }

    #[test]
    fn generalizing_fast_p_counts_only_kernels_correct_on_every_unseen_shape() {
        use crate::protocol::shapes::ShapeVerdict;
        let checked = |key: &str, score: f64, verdict: ShapeVerdict, line: &str| TaskResult {
            shapes: Some(verdict),
            shapes_line: Some(line.into()),
            ..task(key, Some(1), true, Some(score))
        };
        let tasks = vec![
            checked(
                "general",
                2.5,
                ShapeVerdict::Generalizes {
                    passed: 5,
                    checked: 5,
                },
                "correct on 5 of 5 unseen shapes",
            ),
            checked(
                "hardcoded",
                3.0,
                ShapeVerdict::FailsOn {
                    failed: 1,
                    checked: 5,
                },
                "wrong on batch_size=81, dim=1281: mismatch: max abs err 1 (wrong on 1 of 5 unseen shapes)",
            ),
            checked(
                "literal",
                1.2,
                ShapeVerdict::NotVariable {
                    why: "no constants".into(),
                },
                "shapes not varied: no constants",
            ),
            // Not checked (shape_check off, or a session from before it).
            task("unchecked", Some(1), true, Some(1.7)),
        ];
        let g = summarize_group("level 1", &tasks.iter().collect::<Vec<_>>());
        let fast = g.fast_p.clone().unwrap();
        // KernelBench's figure is unchanged; beside it, only the kernel that generalizes.
        let counts: Vec<usize> = fast.iter().map(|f| f.count).collect();
        assert_eq!(counts, vec![4, 4, 3, 2]);
        let general: Vec<Option<usize>> = fast.iter().map(|f| f.generalizing_count).collect();
        assert_eq!(general, vec![Some(1); 4]);
        assert_eq!(fast[3].generalizing_rate, Some(0.25));
        assert_eq!(fast[3].text(), "50.0% (2), generalizing 25.0% (1)");
        // No task checked: no generalizing figure at all.
        let unchecked = summarize_group("other", &[&tasks[3]]);
        assert_eq!(unchecked.fast_p.unwrap()[0].generalizing_count, None);

        let s = BatchSummary {
            batch: "b".into(),
            provider: "p".into(),
            model: "m".into(),
            groups: vec![g],
            tasks,
        };
        let md = summary_md(&s);
        assert!(md.contains(" | shapes |\n"), "{md}");
        assert!(md.contains(" | 5/5 |\n"), "{md}");
        assert!(
            md.contains(" | FAIL 4/5: wrong on batch_size=81, dim=1281: mismatch: max abs err 1 (wrong on 1 of 5 unseen shapes) |\n"),
            "{md}"
        );
        assert!(md.contains(" | n/a |\n"), "{md}");
        assert!(md.contains(" | - |\n"), "{md}");
        assert!(
            md.contains("generalizing: the same count, but only tasks whose best kernel"),
            "{md}"
        );
        let csv = results_csv(&s);
        let marks: Vec<&str> = csv
            .lines()
            .skip(1)
            // `shapes`, before the last column (`score_vs_defaults`).
            .map(|l| l.rsplit(',').nth(1).unwrap())
            .collect();
        assert_eq!(marks, ["5/5", "FAIL 4/5", "n/a", ""]);
    }

    /// Issue 34, item 3: a kernel whose unseen-shapes check did not run (every variant
    /// skipped: a kernel that forged "out of memory, not loaded" on each used to get here) is
    /// never counted as generalizing; KernelBench's own fast_p, on the task's sizes, keeps it.
    #[test]
    fn a_shape_check_that_did_not_run_never_counts_as_generalizing() {
        use crate::protocol::shapes::ShapeVerdict;
        let not_run = TaskResult {
            shapes: Some(ShapeVerdict::NotRun {
                why: "every variant was skipped".into(),
            }),
            shapes_line: Some("not run: every variant was skipped".into()),
            ..task("forged", Some(1), true, Some(3.0))
        };
        assert!(!not_run.generalizes());
        let g = summarize_group("level 1", &[&not_run]);
        let fast = g.fast_p.unwrap();
        assert!(fast.iter().all(|f| f.count == 1), "{fast:?}");
        assert!(
            fast.iter().all(|f| f.generalizing_count == Some(0)),
            "{fast:?}"
        );
    }

    /// Issue 25: the tasks table shows the best kernel's share of the speed of light beside
    /// its speedup, and `FTL` where it was flagged faster than light.
    #[test]
    fn the_tasks_table_shows_the_speed_of_light_beside_the_speedup() {
        let tasks = vec![
            TaskResult {
                sol_pct: Some(38.2),
                ..task("a", Some(1), true, Some(1.5))
            },
            TaskResult {
                sol_pct: Some(250.0),
                faster_than_light: true,
                ..task("b", Some(1), true, Some(30.0))
            },
            task("c", Some(1), true, Some(1.1)),
        ];
        let md = summary_md(&summarize("b", &manifest(), tasks));
        assert!(md.contains("| 1.50x 38%SoL |"), "{md}");
        assert!(md.contains("| 30.00x FTL |"), "{md}");
        assert!(md.contains("| 1.10x |"), "{md}");
    }
}
