//! What a finished (or stopped) session produced, for people and for scripts: `report.md`
//! (markdown) with its chart `score_timeline.svg`, `summary.json` and `usage.csv`
//! (docs/architecture.md, Sessions). Everything is derived
//! from the session state, itself a fold over `events.jsonl`, so a report can be written
//! again at any time (`kforge open` on an old session).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::Result;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::charts::{TimelinePoint, score_timeline_svg};
use crate::protocol::{CallKind, CandidateId, CandidateKind, Decision, ReportGroup, TokenUsage};
use crate::session::state::{
    Call, Candidate, CandidateStatus, SessionState, best_of, indistinguishable,
};
use crate::session::store::SessionDir;

pub const REPORT_FILE: &str = "report.md";
pub const SUMMARY_FILE: &str = "summary.json";
pub const USAGE_FILE: &str = "usage.csv";
pub const SCORE_TIMELINE_FILE: &str = "score_timeline.svg";

/// Writes `score_timeline.svg` and `report.md`, which shows it, into the session
/// directory: the chart first, so the report never names a file that is not there.
pub fn write_report(dir: &SessionDir, state: &SessionState) -> Result<()> {
    dir.write_file(SCORE_TIMELINE_FILE, score_timeline(state)?.as_bytes())?;
    dir.write_file(REPORT_FILE, render_report(state).as_bytes())
}

/// Writes `report.md` with `score_timeline.svg`, `summary.json` and `usage.csv`.
pub fn write_all(dir: &SessionDir, state: &SessionState) -> Result<()> {
    write_report(dir, state)?;
    let summary = serde_json::to_string_pretty(&summary_json(state))? + "\n";
    dir.write_file(SUMMARY_FILE, summary.as_bytes())?;
    dir.write_file(USAGE_FILE, usage_csv(state).as_bytes())
}

/// Every evaluated candidate on the timeline: seconds from the session's start (else from
/// the first evaluation) to the end of its last evaluation, and its score when it is
/// correct and timed. Candidates never evaluated (pending, dropped at a gate) have no
/// place on it.
pub fn timeline_points(state: &SessionState) -> Vec<TimelinePoint> {
    let evaluated: Vec<(&Candidate, DateTime<Utc>)> = state
        .candidates
        .values()
        .filter_map(|c| Some((c, c.evaluated?)))
        .collect();
    let Some(start) = state
        .started
        .or_else(|| evaluated.iter().map(|(_, at)| *at).min())
    else {
        return Vec::new();
    };
    evaluated
        .into_iter()
        .map(|(c, at)| TimelinePoint {
            seconds: (at - start).num_milliseconds() as f64 / 1000.0,
            score: c.score().filter(|_| c.is_correct()),
            label: format!("#{} {}", c.id, c.kind.label()),
        })
        .collect()
}

/// The SVG of `score_timeline.svg`.
pub fn score_timeline(state: &SessionState) -> Result<String> {
    let task = state
        .info
        .as_ref()
        .map(|i| i.task.as_str())
        .filter(|t| !t.is_empty())
        .unwrap_or("(unknown task)");
    score_timeline_svg(&timeline_points(state), &format!("{task}: score timeline"))
}

fn time(ts: &DateTime<Utc>) -> String {
    ts.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

fn duration(seconds: i64) -> String {
    let s = seconds.max(0);
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m {s:02}s"),
        (h, m, s) => format!("{h}h {m:02}m {s:02}s"),
    }
}

/// `1.52x`, or `n/a` without a score.
pub fn score_text(score: Option<f64>) -> String {
    score.map_or_else(|| "n/a".into(), |s| format!("{s:.2}x"))
}

/// A candidate's score with its 95% interval, `1.52x [1.50-1.54]` (`n/a` without a score),
/// and `, noisy` when the timing stayed noisy.
pub fn speedup_text(c: &Candidate) -> String {
    let text = crate::protocol::figures::score_text(c.score(), c.score_interval());
    if c.score().is_some() && c.noisy() {
        format!("{text}, noisy")
    } else {
        text
    }
}

/// The correct candidate ranked next after the session's best (by `best_of`), if any.
pub fn runner_up(state: &SessionState) -> Option<&Candidate> {
    let best = state.best?;
    best_of(state.candidates.values().filter(|c| c.id != best))
}

/// A sentence when the measurements cannot tell the best from the runner-up (their 95%
/// intervals overlap): either could be the faster kernel.
pub fn indistinguishable_note(state: &SessionState) -> Option<String> {
    let best = state.candidates.get(&state.best?)?;
    let second = runner_up(state)?;
    indistinguishable(best, second).then(|| {
        format!(
            "The best, #{} ({}), and the runner-up, #{} ({}), are indistinguishable: their 95% \
             intervals overlap, so the measurements cannot tell which is faster.",
            best.id,
            speedup_text(best),
            second.id,
            speedup_text(second)
        )
    })
}

fn cost_text(cost: Option<f64>) -> String {
    cost.map_or_else(|| "unknown".into(), |c| format!("${c:.4}"))
}

/// A table cell: one line, pipes escaped, at most `max` characters.
pub fn cell(text: &str, max: usize) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let cut: String = if one_line.chars().count() > max {
        let mut s: String = one_line.chars().take(max.saturating_sub(1)).collect();
        s.push('…');
        s
    } else {
        one_line
    };
    cut.replace('|', "\\|")
}

/// `correct`, `failed (compile)`, `dropped`, `pending`, `evaluating`.
pub fn status_label(c: &Candidate) -> String {
    match c.status {
        CandidateStatus::Pending => "pending".into(),
        CandidateStatus::Evaluating => "evaluating".into(),
        CandidateStatus::Correct => "correct".into(),
        CandidateStatus::Failed => match c.eval.as_ref().and_then(|e| e.category) {
            Some(category) => format!("failed ({category})"),
            None => "failed".into(),
        },
        CandidateStatus::Dropped => "dropped".into(),
    }
}

fn candidate_summary(c: &Candidate) -> String {
    let mut parts = Vec::new();
    if let CandidateKind::Instructed { instruction } = &c.kind {
        parts.push(format!("instruction: {instruction}"));
    }
    if let Some(reason) = &c.dropped_reason {
        parts.push(format!("dropped: {reason}"));
    }
    if let Some(e) = &c.eval
        && !e.summary.is_empty()
    {
        parts.push(e.summary.clone());
    }
    if let Some(e) = &c.eval {
        parts.extend(e.flags.iter().map(|f| format!("flag: {f}")));
    }
    parts.join("; ")
}

/// The first ancestor (or the candidate itself) that is not a repair: the kernel a repair
/// chain set out to fix.
fn repair_root(state: &SessionState, id: CandidateId) -> CandidateId {
    let mut current = id;
    let mut steps = 0;
    while let Some(c) = state.candidates.get(&current) {
        match (&c.kind, c.parent) {
            (CandidateKind::Repair { .. }, Some(parent)) if steps < 10_000 => {
                current = parent;
                steps += 1;
            }
            _ => break,
        }
    }
    current
}

/// The best score among a candidate and the repairs descending from it (what the step
/// that produced it finally delivered), with the candidate that reached it.
fn delivered(state: &SessionState, id: CandidateId) -> Option<&Candidate> {
    best_of(
        state
            .candidates
            .values()
            .filter(|c| repair_root(state, c.id) == id),
    )
}

/// Every gate with what the person answered (or that it was withdrawn, or still waits),
/// and the final mark: what a reader needs to know was steered by hand.
fn decisions(state: &SessionState) -> Vec<String> {
    let mut lines: Vec<String> = state
        .gates
        .values()
        .map(|g| {
            let answer = match (&g.decision, g.withdrawn) {
                (Some(Decision::Approve), _) => "approved".to_string(),
                (Some(Decision::Reject), _) => "rejected".to_string(),
                (Some(Decision::Rewrite { .. }), _) => format!(
                    "rewritten by you{}",
                    g.file
                        .as_deref()
                        .map(|f| format!(" (`{f}`)"))
                        .unwrap_or_default()
                ),
                (None, true) => "withdrawn: the run stopped before it was answered".to_string(),
                (None, false) => "still waiting".to_string(),
            };
            format!("- gate {}: {} — {answer}", g.id, cell(&g.question, 120))
        })
        .collect();
    if let Some(id) = state.final_marked {
        lines.push(format!("- candidate #{id} marked final by you"));
    }
    lines
}

/// Token usage and cost of a group of calls; the cost is unknown when any finished call
/// of the group has none.
#[derive(Debug, Clone, Default, PartialEq)]
struct UsageTotals {
    calls: u32,
    failed: u32,
    usage: TokenUsage,
    known_cost: f64,
    unpriced: u32,
}

impl UsageTotals {
    fn add(&mut self, call: &Call) {
        self.calls += 1;
        if call.ok == Some(false) {
            self.failed += 1;
        }
        self.usage.input += call.usage.input;
        self.usage.cached += call.usage.cached;
        self.usage.output += call.usage.output;
        self.usage.reasoning += call.usage.reasoning;
        match call.cost_usd {
            Some(c) => self.known_cost += c,
            None if call.ok.is_some() => self.unpriced += 1,
            None => {}
        }
    }

    fn cost(&self) -> Option<f64> {
        (self.unpriced == 0).then_some(self.known_cost)
    }

    fn cost_cell(&self) -> String {
        match (self.cost(), self.unpriced) {
            (Some(c), _) => cost_text(Some(c)),
            (None, n) if self.known_cost > 0.0 => format!(
                "unknown (${:.4} known, {n} call{} without a price)",
                self.known_cost,
                if n == 1 { "" } else { "s" }
            ),
            (None, _) => "unknown".into(),
        }
    }

    fn json(&self) -> Value {
        json!({
            "calls": self.calls,
            "failed": self.failed,
            "input": self.usage.input,
            "cached": self.usage.cached,
            "output": self.usage.output,
            "reasoning": self.usage.reasoning,
            "cost_usd": self.cost(),
        })
    }
}

/// Usage per call kind, in pipeline order (`CallKind`'s order), and in all.
fn usage_by_kind(state: &SessionState) -> (BTreeMap<CallKind, UsageTotals>, UsageTotals) {
    let mut by_kind: BTreeMap<CallKind, UsageTotals> = BTreeMap::new();
    let mut total = UsageTotals::default();
    for call in state.calls.values() {
        by_kind.entry(call.kind).or_default().add(call);
        total.add(call);
    }
    (by_kind, total)
}

fn best_line(state: &SessionState) -> String {
    let timing = state.info.as_ref().is_some_and(|i| i.timing_meaningful);
    match state.best.and_then(|id| state.candidates.get(&id)) {
        Some(c) => {
            let score = if timing {
                format!("score {}{}", speedup_text(c), c.sol_suffix())
            } else {
                "score n/a (CPU interpreter: correctness only)".into()
            };
            let marked = if state.is_final(c.id) {
                ", marked final by you"
            } else {
                ""
            };
            format!(
                "#{} ({}), {score}, `{}`{marked}",
                c.id,
                c.kind.label(),
                c.file
            )
        }
        None => "none (no correct kernel)".into(),
    }
}

/// The best's score against each baseline, where its reference was timed under
/// torch.compile too: `vs eager 1.83x [1.79-1.87], vs torch.compile 1.22x [1.18-1.26]
/// (torch.compile runs 1.50x as fast as eager); the headline is vs torch.compile`.
fn baselines_line(state: &SessionState) -> Option<String> {
    let best = state.candidates.get(&state.best?)?;
    let b = best.eval.as_ref()?.baselines.as_ref()?;
    let compile = b
        .compile_speedup
        .map(|s| format!(" (torch.compile runs {s:.2}x as fast as eager)"))
        .unwrap_or_default();
    Some(format!(
        "vs eager {}, vs torch.compile {}{compile}; the headline is {}",
        b.vs_eager.text(),
        b.vs_compile.text(),
        b.headline.label()
    ))
}

/// The best's score against the reference under PyTorch's default settings, where its
/// policy's differ: `0.43x [0.42-0.44] vs PyTorch's defaults (the reference runs 2.41x as
/// fast under them); the headline, fast_p and selection use the policy's reference`.
fn defaults_line(state: &SessionState) -> Option<String> {
    let best = state.candidates.get(&state.best?)?;
    let d = best.eval.as_ref()?.vs_defaults.as_ref()?;
    let differs = d
        .differs
        .as_ref()
        .map(|w| format!(" ({w})"))
        .unwrap_or_default();
    Some(format!(
        "{}{differs}; the headline, fast_p and selection use the policy's reference",
        d.text()
    ))
}

/// The report's markdown text.
pub fn render_report(state: &SessionState) -> String {
    let mut out = String::new();
    let info = state.info.clone().unwrap_or_default();
    let task = if info.task.is_empty() {
        "(unknown task)"
    } else {
        &info.task
    };
    let _ = writeln!(out, "# kforge report: {task}\n");
    let _ = writeln!(out, "| | |\n|---|---|");
    let _ = writeln!(out, "| Task | `{task}` (hash `{}`) |", info.task_hash);
    let _ = writeln!(
        out,
        "| Provider / model | {} / {} |",
        info.provider, info.model
    );
    let timing = if info.timing_meaningful {
        "timed"
    } else {
        "correctness only, no timing"
    };
    let _ = writeln!(out, "| Device | {} ({timing}) |", cell(&info.device, 80));
    if let Some(p) = info.precision {
        let _ = writeln!(
            out,
            "| Precision | {p} ({}; float32 tolerance {:e}) |",
            p.comparison(),
            p.float32_tolerance()
        );
    }
    let _ = writeln!(
        out,
        "| Mode | {} |",
        format!("{:?}", state.mode).to_lowercase()
    );
    let started = state.started.as_ref().map_or("unknown".into(), time);
    let _ = writeln!(out, "| Started | {started} |");
    let ended = match (&state.started, &state.last_ts) {
        (Some(s), Some(e)) => format!("{} (after {})", time(e), duration((*e - *s).num_seconds())),
        (None, Some(e)) => time(e),
        _ => "unknown".into(),
    };
    let _ = writeln!(out, "| Ended | {ended} |");
    let mut final_state = format!("{:?}", state.state).to_lowercase();
    if let Some((_, reason)) = &state.finished
        && !reason.is_empty()
    {
        let _ = write!(final_state, ": {}", cell(reason, 120));
    }
    if let Some(what) = &state.budget_exhausted {
        let _ = write!(final_state, " (budget exhausted: {})", cell(what, 60));
    }
    if state.resumes > 0 {
        let _ = write!(final_state, " (resumed {} time(s))", state.resumes);
    }
    let _ = writeln!(out, "| Final state | {final_state} |");
    let _ = writeln!(out, "| Best | {} |", best_line(state));
    if let Some(line) = baselines_line(state) {
        let _ = writeln!(out, "| Baselines | {line} |");
    }
    if let Some(line) = defaults_line(state) {
        let _ = writeln!(out, "| PyTorch defaults | {line} |");
    }
    if let Some(shapes) = state
        .best
        .and_then(|id| state.candidates.get(&id))
        .and_then(|c| c.shapes.as_ref())
    {
        // Wrong on an unseen shape, or a check that did not run: never a win.
        let mark = if shapes.verdict.passes() {
            ""
        } else {
            "**not a win**: "
        };
        let _ = writeln!(out, "| Unseen shapes | {mark}{} |", cell(&shapes.line, 300));
    }

    // Timeline.
    let _ = writeln!(out, "\n## Candidates\n");
    let _ = writeln!(out, "![score timeline]({SCORE_TIMELINE_FILE})\n");
    if state.candidates.is_empty() {
        let _ = writeln!(out, "No candidate was created.");
    } else {
        let _ = writeln!(
            out,
            "| # | kind | parent | status | score | summary |\n|---|---|---|---|---|---|"
        );
        for c in state.candidates.values() {
            let best = if state.best == Some(c.id) { " ★" } else { "" };
            let _ = writeln!(
                out,
                "| {}{best} | {} | {} | {} | {}{} | {} |",
                c.id,
                c.kind.label(),
                c.parent.map_or("-".into(), |p| p.to_string()),
                status_label(c),
                speedup_text(c),
                c.sol_suffix(),
                cell(&candidate_summary(c), 140),
            );
        }
        if let Some(note) = indistinguishable_note(state) {
            let _ = writeln!(out, "\n{note}");
        }
    }

    // Contributions.
    let _ = writeln!(out, "\n## What each step contributed\n");
    let _ = writeln!(out, "{}", contributions(state).join("\n"));

    // The person's decisions.
    let decisions = decisions(state);
    if !decisions.is_empty() {
        let _ = writeln!(out, "\n## Your decisions\n");
        let _ = writeln!(out, "{}", decisions.join("\n"));
    }

    // Usage.
    let (by_kind, total) = usage_by_kind(state);
    let _ = writeln!(out, "\n## Tokens and cost\n");
    if total.calls == 0 {
        let _ = writeln!(out, "No LLM call was made.");
    } else {
        let _ = writeln!(
            out,
            "| call kind | calls | failed | input | cached | output | reasoning | cost |\n|---|---|---|---|---|---|---|---|"
        );
        let rows = by_kind
            .iter()
            .map(|(kind, t)| (kind.word().to_string(), t))
            .chain(std::iter::once(("**total**".to_string(), &total)));
        for (label, t) in rows {
            let _ = writeln!(
                out,
                "| {label} | {} | {} | {} | {} | {} | {} | {} |",
                t.calls,
                t.failed,
                t.usage.input,
                t.usage.cached,
                t.usage.output,
                t.usage.reasoning,
                t.cost_cell()
            );
        }
    }
    out
}

fn contributions(state: &SessionState) -> Vec<String> {
    let mut lines: Vec<String> = ReportGroup::ALL
        .into_iter()
        .flat_map(|group| group_lines(state, group))
        .collect();
    if lines.is_empty() {
        lines.push("Nothing yet.".into());
    }
    lines
}

/// The contributions of one group of candidates. Exhaustive: a new group does not compile
/// until the report tells it.
fn group_lines(state: &SessionState, group: ReportGroup) -> Vec<String> {
    let members: Vec<&Candidate> = state
        .candidates
        .values()
        .filter(|c| c.kind.descriptor().report == group)
        .collect();
    match group {
        ReportGroup::Seeds => seed_lines(state, &members),
        ReportGroup::Repairs => repair_lines(state, &members),
        // The analyses decide which kernels are optimized, so they come first.
        ReportGroup::AlgorithmOptimization => {
            let mut lines = analysis_lines(state);
            lines.extend(algorithm_lines(state, &members));
            lines
        }
        // The persistent-kernel check decides whether the stages run.
        ReportGroup::Stages => {
            let mut lines = persistent_lines(state);
            lines.extend(stage_lines(state));
            lines
        }
        ReportGroup::PersonsOwn => persons_own_lines(&members),
        ReportGroup::Uncounted => Vec::new(),
    }
}

/// "Seeds": how many, how many correct as written, the best before and after repair.
fn seed_lines(state: &SessionState, seeds: &[&Candidate]) -> Vec<String> {
    let mut lines = Vec::new();
    if !seeds.is_empty() {
        let correct = seeds.iter().filter(|c| c.is_correct()).count();
        let best = best_of(seeds.iter().copied()).map_or("none correct".into(), |c| {
            format!("best seed score {} (#{})", score_text(c.score()), c.id)
        });
        let after_repair = best_of(seeds.iter().filter_map(|s| delivered(state, s.id)))
            .map(|c| {
                format!(
                    "; best seed after repair {} (#{})",
                    score_text(c.score()),
                    c.id
                )
            })
            .unwrap_or_default();
        lines.push(format!(
            "- **Seeds**: {} generated, {correct} correct as written; {best}{after_repair}.",
            seeds.len()
        ));
    }
    lines
}

/// "Repairs": attempts, and which failing kernels they fixed.
fn repair_lines(state: &SessionState, repairs: &[&Candidate]) -> Vec<String> {
    let mut lines = Vec::new();
    if !repairs.is_empty() {
        let mut roots: BTreeMap<CandidateId, bool> = BTreeMap::new();
        for r in repairs {
            let fixed = roots.entry(repair_root(state, r.id)).or_insert(false);
            *fixed |= r.is_correct();
        }
        let fixed = roots.values().filter(|f| **f).count();
        let ids: Vec<String> = roots
            .iter()
            .map(|(id, ok)| format!("#{id} {}", if *ok { "fixed" } else { "not fixed" }))
            .collect();
        lines.push(format!(
            "- **Repairs**: {} attempt(s), {} correct; {fixed} of {} failing kernel(s) fixed ({}).",
            repairs.len(),
            repairs.iter().filter(|c| c.is_correct()).count(),
            roots.len(),
            ids.join(", ")
        ));
    }
    lines
}

/// "Analysis": every analysed kernel with its verdict, bottleneck and expectation.
fn analysis_lines(state: &SessionState) -> Vec<String> {
    let mut lines = Vec::new();
    let analysed: Vec<&Candidate> = state
        .candidates
        .values()
        .filter(|c| c.analysis.is_some())
        .collect();
    if !analysed.is_empty() {
        lines.push(format!(
            "- **Analysis**: {} kernel(s) analysed.",
            analysed.len()
        ));
        for c in analysed {
            let a = c.analysis.as_ref().expect("filtered on analysis");
            let mut line = format!(
                "  - #{} ({}): worth optimizing: {}",
                c.id,
                score_text(c.score()),
                a.worth_text()
            );
            if let Some(b) = a.bottleneck.as_deref().filter(|b| !b.trim().is_empty()) {
                let _ = write!(line, "; bottleneck: {}", cell(b, 120));
            }
            if let Some(s) = a
                .expected_speedup
                .as_deref()
                .filter(|s| !s.trim().is_empty())
            {
                let _ = write!(line, "; expected: {}", cell(s, 40));
            }
            lines.push(line);
        }
    }
    lines
}

/// "Algorithm optimization": each optimized kernel, before and after.
fn algorithm_lines(state: &SessionState, algorithms: &[&Candidate]) -> Vec<String> {
    let mut lines = Vec::new();
    if !algorithms.is_empty() {
        lines.push("- **Algorithm optimization**:".into());
        for a in algorithms {
            let before = a
                .parent
                .and_then(|p| state.candidates.get(&p))
                .map_or("?".into(), |p| {
                    format!("#{} {}", p.id, score_text(p.score()))
                });
            let after = match delivered(state, a.id) {
                Some(c) if c.id == a.id => format!("#{} {}", c.id, score_text(c.score())),
                Some(c) => format!("#{} {} (after repair)", c.id, score_text(c.score())),
                None => format!("#{} {}", a.id, status_label(a)),
            };
            lines.push(format!("  - {before} -> {after}"));
        }
    }
    lines
}

/// "Persistent-kernel check": its verdict on each kernel checked.
fn persistent_lines(state: &SessionState) -> Vec<String> {
    let mut lines = Vec::new();
    for c in state.candidates.values() {
        if let Some((persistent, reasons)) = &c.persistent {
            let verdict = if *persistent {
                format!("persistent ({})", cell(&reasons.join("; "), 200))
            } else {
                "not persistent".into()
            };
            lines.push(format!(
                "- **Persistent-kernel check** on #{}: {verdict}.",
                c.id
            ));
        }
    }
    lines
}

/// "Stages": each stage record, its base, its kernel and its verdict.
fn stage_lines(state: &SessionState) -> Vec<String> {
    let mut lines = Vec::new();
    if !state.stages.is_empty() {
        lines.push("- **Stages**:".into());
        for s in &state.stages {
            let score_of = |id: CandidateId| {
                state
                    .candidates
                    .get(&id)
                    .map_or("?".into(), |c| score_text(c.score()))
            };
            let result = match s.result.and_then(|r| state.candidates.get(&r)) {
                Some(r) if r.is_correct() => format!("#{} {}", r.id, score_text(r.score())),
                Some(r) => format!("#{} {}", r.id, status_label(r)),
                None => "no kernel".into(),
            };
            let verdict = s.verdict.word();
            let reason = if s.reason.is_empty() {
                String::new()
            } else {
                format!(" ({})", cell(&s.reason, 120))
            };
            lines.push(format!(
                "  - {}: #{} {} -> {result}, {verdict}{reason}",
                s.stage,
                s.base,
                score_of(s.base)
            ));
        }
    }
    lines
}

/// "Manual and instructed": the person's own candidates.
fn persons_own_lines(manual: &[&Candidate]) -> Vec<String> {
    let mut lines = Vec::new();
    if !manual.is_empty() {
        let correct = manual.iter().filter(|c| c.is_correct()).count();
        lines.push(format!(
            "- **Manual and instructed**: {} candidate(s), {correct} correct.",
            manual.len()
        ));
    }
    lines
}

/// A candidate's unseen-shapes check in `summary.json`: the verdict's fields (`verdict`:
/// `generalizes`, `fails_on`, `not_variable`, `not_run`), the line and the check's file.
fn shapes_json(s: &crate::session::state::ShapesRecord) -> Value {
    let mut v = serde_json::to_value(&s.verdict).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.insert("line".into(), json!(s.line));
        o.insert("file".into(), json!(s.file));
    }
    v
}

/// The machine-readable summary written to `summary.json`.
pub fn summary_json(state: &SessionState) -> Value {
    let info = state.info.clone().unwrap_or_default();
    let candidate = |c: &Candidate| {
        let mut value = json!({
            "id": c.id,
            "kind": c.kind.word(),
            "label": c.kind.label(),
            "parent": c.parent,
            "status": status_label(c),
            "correct": c.is_correct(),
            "category": c.eval.as_ref().and_then(|e| e.category),
            "score": c.score(),
            "score_low": c.score_interval().map(|i| i.0),
            "score_high": c.score_interval().map(|i| i.1),
            "noisy": c.score().is_some() && c.noisy(),
            "kernel_ms": c.eval.as_ref().and_then(|e| e.kernel_ms),
            "reference_ms": c.eval.as_ref().and_then(|e| e.reference_ms),
            "sol_pct": c.sol_pct(),
            "faster_than_light": c.faster_than_light(),
            "summary": c.eval.as_ref().map(|e| e.summary.clone()),
            "flags": c.eval.as_ref().map_or(&[][..], |e| e.flags.as_slice()),
            "file": c.file,
            "shapes": c.shapes.as_ref().map(shapes_json),
        });
        if let (Some(b), Value::Object(m)) = (
            c.eval.as_ref().and_then(|e| e.baselines.as_ref()),
            &mut value,
        ) {
            m.insert("baselines".into(), json!(b));
        }
        value
    };
    let (by_kind, total) = usage_by_kind(state);
    let per_kind: serde_json::Map<String, Value> = by_kind
        .iter()
        .map(|(k, t)| (k.word().to_string(), t.json()))
        .collect();
    json!({
        "task": info.task,
        "task_hash": info.task_hash,
        "provider": info.provider,
        "model": info.model,
        "device": info.device,
        "mode": format!("{:?}", state.mode).to_lowercase(),
        "timing_meaningful": info.timing_meaningful,
        "precision": info.precision,
        "started": state.started,
        "ended": state.last_ts,
        "state": format!("{:?}", state.state).to_lowercase(),
        "finished_reason": state.finished.as_ref().map(|(_, r)| r.clone()),
        "end": state.end,
        "final_marked": state.final_marked,
        "budget_exhausted": state.budget_exhausted,
        "best": state.best.and_then(|id| state.candidates.get(&id)).map(candidate),
        "runner_up": runner_up(state).map(candidate),
        "best_indistinguishable_from_runner_up": indistinguishable_note(state).is_some(),
        "candidates": state.candidates.values().map(candidate).collect::<Vec<_>>(),
        "stages": state.stages.iter().map(|s| json!({
            "stage": s.stage,
            "base": s.base,
            "result": s.result,
            "accepted": s.accepted,
            "verdict": s.verdict,
            "reason": s.reason,
        })).collect::<Vec<_>>(),
        "usage": {
            "total": total.json(),
            "per_kind": per_kind,
        },
    })
}

fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// `usage.csv`: one row per LLM call, in call order. `cost_usd` is empty when unknown;
/// `ok` is empty for a call still in flight.
pub fn usage_csv(state: &SessionState) -> String {
    let mut out = String::from(
        "call,kind,candidate,provider,model,input,cached,output,reasoning,cost_usd,latency_s,ok\n",
    );
    for c in state.calls.values() {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{:.3},{}",
            c.id,
            c.kind.word(),
            c.candidate.map_or(String::new(), |id| id.to_string()),
            csv_field(&c.provider),
            csv_field(&c.model),
            c.usage.input,
            c.usage.cached,
            c.usage.output,
            c.usage.reasoning,
            c.cost_usd.map_or(String::new(), |x| x.to_string()),
            c.latency_s,
            c.ok.map_or(String::new(), |ok| ok.to_string()),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{
        Analysis, CallId, Category, EngineState, EvalSummary, Event, EventRecord, GateId, GateKind,
        Mode,
    };

    /// Builds records one second apart from 2026-11-21 08:00:00 UTC.
    struct Log(Vec<EventRecord>);

    impl Log {
        fn push(&mut self, event: Event) -> &mut Self {
            let seq = self.0.len() as u64 + 1;
            let ts = DateTime::parse_from_rfc3339("2026-11-21T08:00:00Z")
                .unwrap()
                .with_timezone(&Utc)
                + chrono::Duration::seconds(seq as i64 * 60);
            self.0.push(EventRecord { seq, ts, event });
            self
        }

        fn call(
            &mut self,
            call: u32,
            kind: CallKind,
            candidate: Option<u32>,
            cost: Option<f64>,
            ok: bool,
        ) -> &mut Self {
            self.push(Event::LlmCallStarted {
                call: CallId(call),
                key: format!("call{call}"),
                kind,
                candidate: candidate.map(CandidateId),
                provider: "deepseek".into(),
                model: "deepseek-reasoner".into(),
                prompt_file: format!("llm/{call}.prompt.md"),
            });
            self.push(Event::LlmCallFinished {
                call: CallId(call),
                ok,
                error: (!ok).then(|| "read timeout".to_string()),
                usage: TokenUsage {
                    input: 1000 * call as u64,
                    cached: 100,
                    output: 500,
                    reasoning: 50,
                },
                cost_usd: cost,
                latency_s: 10.0 + call as f64 / 4.0,
                response_file: ok.then(|| format!("llm/{call}.response.md")),
            })
        }

        fn candidate(
            &mut self,
            id: u32,
            parent: Option<u32>,
            kind: CandidateKind,
            call: Option<u32>,
        ) -> &mut Self {
            let file = format!("kernels/{id}-{}.py", kind.word());
            self.push(Event::CandidateCreated {
                id: CandidateId(id),
                key: format!("candidate{id}"),
                parent: parent.map(CandidateId),
                kind,
                file,
                call: call.map(CallId),
            })
        }

        fn eval(
            &mut self,
            id: u32,
            category: Option<&str>,
            summary: &str,
            score: Option<f64>,
        ) -> &mut Self {
            self.push(Event::EvalFinished {
                candidate: CandidateId(id),
                result_file: format!("eval/{id}.json"),
                summary: EvalSummary {
                    correct: category.is_none(),
                    category: category.map(|c| Category::parse(c).expect("a category")),
                    summary: summary.into(),
                    score,
                    kernel_ms: score.map(|s| 42.2 / s),
                    reference_ms: score.map(|_| 42.2),
                    ..Default::default()
                },
            })
        }
    }

    /// A correct, timed evaluation with the score's 95% interval.
    fn timed(id: u32, score: f64, low: f64, high: f64, noisy: bool) -> Event {
        Event::EvalFinished {
            candidate: CandidateId(id),
            result_file: format!("eval/{id}.json"),
            summary: EvalSummary {
                correct: true,
                summary: "correct".into(),
                score: Some(score),
                score_low: Some(low),
                score_high: Some(high),
                noisy,
                ..Default::default()
            },
        }
    }

    /// Three timed seeds: #1 1.50x [1.20-1.80] (noisy), #2 1.45x [1.43-1.47], #3 with
    /// `third`.
    fn interval_session(third: Event) -> SessionState {
        let mut log = Log(Vec::new());
        log.push(Event::SessionStarted {
            task: "softmax".into(),
            task_hash: "h".into(),
            provider: "p".into(),
            model: "m".into(),
            mode: Mode::Auto,
            device: "cuda:0".into(),
            timing_meaningful: true,
            precision: None,
        })
        .candidate(
            1,
            None,
            CandidateKind::Seed {
                index: 1,
                direction: None,
            },
            None,
        )
        .candidate(
            2,
            None,
            CandidateKind::Seed {
                index: 2,
                direction: None,
            },
            None,
        )
        .candidate(
            3,
            None,
            CandidateKind::Seed {
                index: 3,
                direction: None,
            },
            None,
        )
        .push(timed(1, 1.50, 1.20, 1.80, true))
        .push(timed(2, 1.45, 1.43, 1.47, false))
        .push(third);
        SessionState::from_records(&log.0)
    }

    /// Issue 34, item 3: a best kernel whose unseen-shapes check did not run (every variant
    /// skipped) is no more a win than one shown wrong on a shape.
    #[test]
    fn a_best_whose_shape_check_did_not_run_is_not_a_win() {
        use crate::protocol::shapes::ShapeVerdict;
        let report_with = |verdict: ShapeVerdict, line: &str| {
            let mut state = interval_session(timed(3, 1.2, 1.1, 1.3, false));
            let best = state.best.expect("a best");
            let mut log = Log(Vec::new());
            log.push(Event::ShapesChecked {
                candidate: best,
                result_file: format!("shapes/{}.json", best.0),
                verdict,
                line: line.into(),
            });
            state.apply(&log.0[0]);
            render_report(&state)
        };
        let not_run = report_with(
            ShapeVerdict::NotRun {
                why: "every variant was skipped".into(),
            },
            "not run: every variant was skipped",
        );
        assert!(
            not_run
                .contains("| Unseen shapes | **not a win**: not run: every variant was skipped |"),
            "{not_run}"
        );
        let passed = report_with(
            ShapeVerdict::Generalizes {
                passed: 5,
                checked: 5,
            },
            "correct on 5 of 5 unseen shapes",
        );
        assert!(
            passed.contains("| Unseen shapes | correct on 5 of 5 unseen shapes |"),
            "{passed}"
        );
    }

    /// A best whose reference was timed under torch.compile too: the report's header and
    /// summary.json give both scores and which is the headline.
    #[test]
    fn the_report_shows_the_best_against_both_baselines() {
        use crate::protocol::{Baseline, BaselineScores, ScoreFigure};
        let compiled = Event::EvalFinished {
            candidate: CandidateId(3),
            result_file: "eval/3.json".into(),
            summary: EvalSummary {
                correct: true,
                summary: "correct".into(),
                score: Some(1.9),
                score_low: Some(1.86),
                score_high: Some(1.94),
                baselines: Some(Box::new(BaselineScores {
                    headline: Baseline::Compile,
                    vs_eager: ScoreFigure::new(Some(2.85), Some((2.80, 2.90))),
                    vs_compile: ScoreFigure::new(Some(1.9), Some((1.86, 1.94))),
                    compile_speedup: Some(1.5),
                })),
                ..Default::default()
            },
        };
        let state = interval_session(compiled);
        let report = render_report(&state);
        assert!(
            report.contains("| Baselines | vs eager 2.85x [2.80-2.90], vs torch.compile 1.90x [1.86-1.94] (torch.compile runs 1.50x as fast as eager); the headline is vs torch.compile |"),
            "{report}"
        );
        let json = summary_json(&state);
        let best = json["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == 3)
            .unwrap();
        assert_eq!(best["baselines"]["vs_eager"]["score"], 2.85);
        assert_eq!(best["baselines"]["headline"], "compile");
        // Without compile figures there is no such row, nor key.
        let plain = interval_session(timed(3, 1.2, 1.1, 1.3, false));
        assert!(!render_report(&plain).contains("| Baselines |"));
        assert!(
            summary_json(&plain)["candidates"][0]
                .get("baselines")
                .is_none()
        );
    }

    #[test]
    fn the_report_shows_intervals_and_says_when_the_best_is_not_told_apart() {
        // #2's interval clears #1's lower end: #2 is best, #1 the runner-up, and their
        // intervals overlap.
        let state = interval_session(timed(3, 1.10, 1.05, 1.15, false));
        assert_eq!(state.best, Some(CandidateId(2)));
        let r = render_report(&state);
        for line in [
            "| Best | #2 (seed 2), score 1.45x [1.43-1.47], `kernels/2-seed.py` |",
            "| 1 | seed 1 | - | correct | 1.50x [1.20-1.80], noisy | correct |",
            "| 2 ★ | seed 2 | - | correct | 1.45x [1.43-1.47] | correct |",
            "The best, #2 (1.45x [1.43-1.47]), and the runner-up, #1 (1.50x [1.20-1.80], noisy), \
             are indistinguishable: their 95% intervals overlap, so the measurements cannot tell \
             which is faster.",
        ] {
            assert!(has_line(&r, line), "missing {line:?} in\n{r}");
        }
        let s = summary_json(&state);
        assert_eq!(s["best"]["score_low"], 1.43);
        assert_eq!(s["best"]["score_high"], 1.47);
        assert_eq!(s["runner_up"]["id"], 1);
        assert_eq!(s["runner_up"]["noisy"], true);
        assert_eq!(s["best_indistinguishable_from_runner_up"], true);

        // A runner-up told apart: no such sentence.
        let state = interval_session(timed(3, 1.60, 1.55, 1.65, false));
        assert_eq!(state.best, Some(CandidateId(3)));
        assert_eq!(runner_up(&state).map(|c| c.id), Some(CandidateId(2)));
        assert_eq!(indistinguishable_note(&state), None);
        assert!(!render_report(&state).contains("indistinguishable"));
        assert_eq!(
            summary_json(&state)["best_indistinguishable_from_runner_up"],
            false
        );
        // Sessions without intervals: none either.
        assert_eq!(indistinguishable_note(&session()), None);
        assert_eq!(summary_json(&session())["best"]["score_low"], Value::Null);
    }

    fn session() -> SessionState {
        let mut log = Log(Vec::new());
        log.push(Event::SessionStarted {
            task: "40_GRUHidden".into(),
            task_hash: "abc123".into(),
            provider: "deepseek".into(),
            model: "deepseek-reasoner".into(),
            mode: Mode::Review,
            device: "cuda:0 (NVIDIA H200)".into(),
            timing_meaningful: true,
            precision: Some(crate::protocol::PrecisionPolicy::Tf32),
        })
        .call(1, CallKind::Seed, None, Some(0.01), true)
        .candidate(
            1,
            None,
            CandidateKind::Seed {
                index: 1,
                direction: None,
            },
            Some(1),
        )
        .eval(1, Some("compile"), "Triton compile error: tanh", None)
        .call(2, CallKind::Seed, None, Some(0.02), true)
        .candidate(
            2,
            None,
            CandidateKind::Seed {
                index: 2,
                direction: None,
            },
            Some(2),
        )
        .eval(2, None, "correct", Some(0.25))
        .call(3, CallKind::Repair, Some(1), None, true)
        .candidate(3, Some(1), CandidateKind::Repair { attempt: 1 }, Some(3))
        .eval(3, None, "correct", Some(0.9))
        .push(Event::BestChanged {
            candidate: CandidateId(3),
            score: Some(0.9),
        })
        .call(4, CallKind::Analysis, Some(3), Some(0.005), true)
        .push(Event::AnalysisReady {
            candidate: CandidateId(3),
            call: CallId(4),
            analysis: Analysis {
                worth_optimizing: Some(true),
                bottleneck: Some("grid over batch only".into()),
                expected_speedup: Some("3x".into()),
                ..Default::default()
            },
        })
        .call(5, CallKind::Optimize, Some(3), Some(0.03), true)
        .candidate(4, Some(3), CandidateKind::Algorithm, Some(5))
        .eval(
            4,
            Some("mismatch"),
            "signed-input trial: output: max abs error 0.8",
            None,
        )
        .call(6, CallKind::Repair, Some(4), Some(0.005), true)
        .candidate(5, Some(4), CandidateKind::Repair { attempt: 1 }, Some(6))
        .eval(5, None, "correct", Some(1.37))
        .push(Event::BestChanged {
            candidate: CandidateId(5),
            score: Some(1.37),
        })
        .push(Event::PersistentCheck {
            candidate: CandidateId(5),
            persistent: false,
            reasons: vec![],
        })
        .call(7, CallKind::Stage, Some(5), Some(0.01), true)
        .candidate(
            6,
            Some(5),
            CandidateKind::Stage {
                name: "grid_and_parallel".into(),
                index: 1,
            },
            Some(7),
        )
        .eval(6, None, "correct", Some(1.52))
        .push(Event::StageFinished {
            stage: "grid_and_parallel".into(),
            base: CandidateId(5),
            result: Some(CandidateId(6)),
            accepted: true,
            verdict: Some(crate::protocol::StageVerdict::Replaced),
            reason: "faster".into(),
        })
        .push(Event::BestChanged {
            candidate: CandidateId(6),
            score: Some(1.52),
        })
        .call(8, CallKind::Stage, Some(6), None, false)
        .push(Event::StageFinished {
            stage: "block_tiling".into(),
            base: CandidateId(6),
            result: None,
            accepted: false,
            verdict: None,
            reason: "the LLM call failed".into(),
        })
        .candidate(
            7,
            Some(6),
            CandidateKind::Instructed {
                instruction: "try | BLOCK=64".into(),
            },
            None,
        )
        .push(Event::CandidateDropped {
            id: CandidateId(7),
            reason: "rejected at the gate".into(),
        })
        .push(Event::SessionFinished {
            best: Some(CandidateId(6)),
            reason: "all steps done".into(),
            end: None,
        })
        .push(Event::StateChanged {
            state: EngineState::Finished,
        });
        SessionState::from_records(&log.0)
    }

    fn has_line(text: &str, line: &str) -> bool {
        text.lines().any(|l| l == line)
    }

    #[test]
    fn report_header_names_the_run_and_its_best() {
        let r = render_report(&session());
        for line in [
            "# kforge report: 40_GRUHidden",
            "| Task | `40_GRUHidden` (hash `abc123`) |",
            "| Provider / model | deepseek / deepseek-reasoner |",
            "| Device | cuda:0 (NVIDIA H200) (timed) |",
            "| Mode | review |",
            "| Started | 2026-11-21 08:01:00 UTC |",
            "| Ended | 2026-11-21 08:40:00 UTC (after 39m 00s) |",
            "| Final state | finished: all steps done |",
            "| Best | #6 (stage 1 grid_and_parallel), score 1.52x, `kernels/6-stage.py` |",
            "| Precision | tf32 (TF32 vs TF32; float32 tolerance 1e-2) |",
        ] {
            assert!(has_line(&r, line), "missing {line:?} in\n{r}");
        }
        assert_eq!(summary_json(&session())["precision"], "tf32");
    }

    #[test]
    fn report_lists_the_persons_decisions() {
        let mut log = Log(Vec::new());
        let opened =
            |gate: u32, kind: GateKind, question: &str, file: Option<&str>| Event::GateOpened {
                gate: GateId(gate),
                key: format!("g{gate}"),
                kind,
                candidate: Some(CandidateId(1)),
                call: None,
                question: question.into(),
                file: file.map(String::from),
            };
        log.push(Event::SessionStarted {
            task: "relu".into(),
            task_hash: "h".into(),
            provider: "p".into(),
            model: "m".into(),
            mode: Mode::Step,
            device: "cpu".into(),
            timing_meaningful: false,
            precision: None,
        })
        .candidate(
            1,
            None,
            CandidateKind::Seed {
                index: 1,
                direction: None,
            },
            None,
        )
        .eval(1, None, "correct", None)
        .push(opened(
            1,
            GateKind::Evaluation,
            "Evaluate candidate 1 (seed 1)?",
            Some("kernels/1-seed.py"),
        ))
        .push(Event::GateResolved {
            gate: GateId(1),
            decision: Decision::Rewrite { text: "x".into() },
        })
        .push(opened(
            2,
            GateKind::AlgorithmOptimization,
            "Run algorithm analysis on 1?",
            None,
        ))
        .push(Event::GateResolved {
            gate: GateId(2),
            decision: Decision::Reject,
        })
        .push(opened(
            3,
            GateKind::FinalBest,
            "Declare candidate 1 the final best?",
            None,
        ))
        .push(Event::GateWithdrawn {
            gate: GateId(3),
            reason: "stopped".into(),
        })
        .push(Event::FinalMarked {
            candidate: CandidateId(1),
        });
        let r = render_report(&SessionState::from_records(&log.0));
        let section = r
            .split("## Your decisions")
            .nth(1)
            .expect("a decisions section");
        for line in [
            "- gate 1: Evaluate candidate 1 (seed 1)? — rewritten by you (`kernels/1-seed.py`)",
            "- gate 2: Run algorithm analysis on 1? — rejected",
            "- gate 3: Declare candidate 1 the final best? — withdrawn: the run stopped before it was answered",
            "- candidate #1 marked final by you",
        ] {
            assert!(
                section.lines().any(|l| l == line),
                "missing {line:?} in\n{section}"
            );
        }
        // A run nobody steered has no such section.
        assert!(!render_report(&session()).contains("## Your decisions"));
    }

    #[test]
    fn report_timeline_lists_every_candidate_in_order() {
        let r = render_report(&session());
        for line in [
            "| 1 | seed 1 | - | failed (compile) | n/a | Triton compile error: tanh |",
            "| 2 | seed 2 | - | correct | 0.25x | correct |",
            "| 3 | repair 1 | 1 | correct | 0.90x | correct |",
            "| 4 | algorithm | 3 | failed (mismatch) | n/a | signed-input trial: output: max abs error 0.8 |",
            "| 6 ★ | stage 1 grid_and_parallel | 5 | correct | 1.52x | correct |",
            "| 7 | instructed | 6 | dropped | n/a | instruction: try \\| BLOCK=64; dropped: rejected at the gate |",
        ] {
            assert!(has_line(&r, line), "missing {line:?} in\n{r}");
        }
        let table = r.split("## Candidates").nth(1).unwrap();
        let table = table.split("\n## ").next().unwrap();
        let ids: Vec<&str> = table
            .lines()
            .filter(|l| l.starts_with("| ") && !l.starts_with("| # "))
            .map(|l| l.split(" | ").next().unwrap())
            .collect();
        assert_eq!(ids, ["| 1", "| 2", "| 3", "| 4", "| 5", "| 6 ★", "| 7"]);
    }

    #[test]
    fn report_says_what_each_step_contributed() {
        let r = render_report(&session());
        for line in [
            "- **Seeds**: 2 generated, 1 correct as written; best seed score 0.25x (#2); best seed after repair 0.90x (#3).",
            "- **Repairs**: 2 attempt(s), 2 correct; 2 of 2 failing kernel(s) fixed (#1 fixed, #4 fixed).",
            "- **Analysis**: 1 kernel(s) analysed.",
            "  - #3 (0.90x): worth optimizing: yes; bottleneck: grid over batch only; expected: 3x",
            "- **Algorithm optimization**:",
            "  - #3 0.90x -> #5 1.37x (after repair)",
            "- **Persistent-kernel check** on #5: not persistent.",
            "  - grid_and_parallel: #5 1.37x -> #6 1.52x, accepted (faster)",
            "  - block_tiling: #6 1.52x -> no kernel, the base stays (the LLM call failed)",
            "- **Manual and instructed**: 1 candidate(s), 0 correct.",
        ] {
            assert!(has_line(&r, line), "missing {line:?} in\n{r}");
        }
    }

    #[test]
    fn unknown_costs_are_unknown_never_zero() {
        let r = render_report(&session());
        for line in [
            "| seed | 2 | 0 | 3000 | 200 | 1000 | 100 | $0.0300 |",
            "| repair | 2 | 0 | 9000 | 200 | 1000 | 100 | unknown ($0.0050 known, 1 call without a price) |",
            "| stage | 2 | 1 | 15000 | 200 | 1000 | 100 | unknown ($0.0100 known, 1 call without a price) |",
            "| **total** | 8 | 1 | 36000 | 800 | 4000 | 400 | unknown ($0.0800 known, 2 calls without a price) |",
        ] {
            assert!(has_line(&r, line), "missing {line:?} in\n{r}");
        }
        let s = summary_json(&session());
        assert_eq!(s["usage"]["total"]["cost_usd"], Value::Null);
        assert_eq!(s["usage"]["per_kind"]["seed"]["cost_usd"], json!(0.03));
        assert_eq!(s["usage"]["per_kind"]["stage"]["failed"], json!(1));
    }

    #[test]
    fn summary_json_has_the_run_the_best_and_every_candidate() {
        let s = summary_json(&session());
        assert_eq!(s["task"], "40_GRUHidden");
        assert_eq!(s["mode"], "review");
        assert_eq!(s["state"], "finished");
        assert_eq!(s["timing_meaningful"], true);
        assert_eq!(s["best"]["id"], 6);
        assert_eq!(s["best"]["score"], 1.52);
        assert_eq!(s["best"]["file"], "kernels/6-stage.py");
        assert_eq!(s["candidates"].as_array().unwrap().len(), 7);
        assert_eq!(s["candidates"][0]["category"], "compile");
        assert_eq!(s["candidates"][3]["label"], "algorithm");
        assert_eq!(s["stages"][1]["accepted"], false);
        // A record from before verdicts were kept, with no kernel: read as such.
        assert_eq!(s["stages"][1]["verdict"], "no_kernel");
        assert_eq!(s["stages"][0]["verdict"], "replaced");
        assert_eq!(s["started"], "2026-11-21T08:01:00Z");
        assert_eq!(s["finished_reason"], "all steps done");
    }

    #[test]
    fn usage_csv_has_one_row_per_call_and_empty_unknown_costs() {
        let csv = usage_csv(&session());
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines[0],
            "call,kind,candidate,provider,model,input,cached,output,reasoning,cost_usd,latency_s,ok"
        );
        assert_eq!(lines.len(), 9);
        assert_eq!(
            lines[1],
            "1,seed,,deepseek,deepseek-reasoner,1000,100,500,50,0.01,10.250,true"
        );
        assert_eq!(
            lines[3],
            "3,repair,1,deepseek,deepseek-reasoner,3000,100,500,50,,10.750,true"
        );
        assert_eq!(
            lines[8],
            "8,stage,6,deepseek,deepseek-reasoner,8000,100,500,50,,12.000,false"
        );
        assert_eq!(csv_field("a,\"b\""), "\"a,\"\"b\"\"\"");
    }

    #[test]
    fn cpu_sessions_and_empty_sessions_report_cleanly() {
        let mut log = Log(Vec::new());
        log.push(Event::SessionStarted {
            task: "relu".into(),
            task_hash: "h".into(),
            provider: "manual".into(),
            model: "you".into(),
            mode: Mode::Auto,
            device: "cpu (Triton interpreter)".into(),
            timing_meaningful: false,
            precision: None,
        })
        .candidate(1, None, CandidateKind::Manual, None)
        .eval(1, None, "correct", None)
        .push(Event::BestChanged {
            candidate: CandidateId(1),
            score: None,
        });
        let r = render_report(&SessionState::from_records(&log.0));
        assert!(
            has_line(
                &r,
                "| Best | #1 (manual), score n/a (CPU interpreter: correctness only), `kernels/1-manual.py` |"
            ),
            "{r}"
        );
        assert!(
            has_line(
                &r,
                "| Device | cpu (Triton interpreter) (correctness only, no timing) |"
            ),
            "{r}"
        );
        assert!(has_line(&r, "No LLM call was made."), "{r}");
        let empty = render_report(&SessionState::default());
        assert!(empty.contains("No candidate was created.") && empty.contains("Nothing yet."));
    }

    #[test]
    #[ignore = "prints the sample report: cargo test --lib report:: -- --ignored --nocapture"]
    fn print_sample_report() {
        println!("{}", render_report(&session()));
    }

    #[test]
    fn the_timeline_has_every_evaluated_candidate_at_its_evaluations_end() {
        let points: Vec<(f64, Option<f64>, String)> = timeline_points(&session())
            .into_iter()
            .map(|p| (p.seconds, p.score, p.label))
            .collect();
        // The session started at 08:01; records are a minute apart. #7 was dropped
        // before any evaluation.
        assert_eq!(
            points,
            [
                (240.0, None, "#1 seed 1".to_string()),
                (480.0, Some(0.25), "#2 seed 2".into()),
                (720.0, Some(0.9), "#3 repair 1".into()),
                (1200.0, None, "#4 algorithm".into()),
                (1440.0, Some(1.37), "#5 repair 1".into()),
                (1800.0, Some(1.52), "#6 stage 1 grid_and_parallel".into()),
            ]
        );
        assert!(timeline_points(&SessionState::default()).is_empty());
    }

    #[test]
    fn write_all_writes_the_four_files_and_the_report_shows_the_chart() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = SessionDir::create(tmp.path(), "t", "p", "m").unwrap();
        let state = session();
        write_all(&dir, &state).unwrap();
        let svg = dir.read_file(SCORE_TIMELINE_FILE).unwrap();
        assert_eq!(svg, score_timeline(&state).unwrap());
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        // One point per timed correct candidate, the task in the title.
        assert_eq!(svg.matches("<circle").count(), 4);
        assert!(svg.contains("40_GRUHidden: score timeline"));
        let report = dir.read_file(REPORT_FILE).unwrap();
        assert_eq!(report, render_report(&state));
        // Near the top of the results: right under the Candidates heading.
        assert!(
            report.contains("## Candidates\n\n![score timeline](score_timeline.svg)\n\n| # |"),
            "{report}"
        );
        assert_eq!(dir.read_file(USAGE_FILE).unwrap(), usage_csv(&state));
        assert_eq!(
            dir.read_file(SUMMARY_FILE).unwrap(),
            serde_json::to_string_pretty(&summary_json(&state)).unwrap() + "\n"
        );
    }

    /// Issue 25: the best line and the candidates' table show each kernel's share of the
    /// speed of light; a kernel flagged faster than light shows `FTL` and is not the best.
    #[test]
    fn the_report_shows_the_speed_of_light_and_a_faster_than_light_kernel_is_not_best() {
        let ftl = Event::EvalFinished {
            candidate: CandidateId(3),
            result_file: "eval/3.json".into(),
            summary: EvalSummary {
                correct: true,
                summary: "correct".into(),
                score: Some(40.0),
                score_low: Some(39.0),
                score_high: Some(41.0),
                sol_pct: Some(900.0),
                flags: vec![crate::protocol::sol::FASTER_THAN_LIGHT.into()],
                ..Default::default()
            },
        };
        let mut state = interval_session(ftl);
        assert_eq!(state.best, Some(CandidateId(2)));
        if let Some(e) = state
            .candidates
            .get_mut(&CandidateId(2))
            .and_then(|c| c.eval.as_mut())
        {
            e.sol_pct = Some(41.6);
        }
        let r = render_report(&state);
        for line in [
            "| Best | #2 (seed 2), score 1.45x [1.43-1.47] 42%SoL, `kernels/2-seed.py` |",
            "| 2 ★ | seed 2 | - | correct | 1.45x [1.43-1.47] 42%SoL | correct |",
            "| 3 | seed 3 | - | correct | 40.00x [39.00-41.00] FTL | correct; flag: faster_than_light |",
        ] {
            assert!(has_line(&r, line), "missing {line:?} in\n{r}");
        }
        let s = summary_json(&state);
        assert_eq!(s["best"]["sol_pct"], 41.6);
        let third = &s["candidates"].as_array().unwrap()[2];
        assert_eq!(third["faster_than_light"], true);
    }

    /// Issue 35: where the policy's reference settings differ from PyTorch's defaults, the
    /// report shows the best's score against the reference under the defaults beside the
    /// headline, and says which one selection uses.
    #[test]
    fn the_report_shows_the_score_against_pytorchs_defaults() {
        let plain = Event::EvalFinished {
            candidate: CandidateId(3),
            result_file: "eval/3.json".into(),
            summary: EvalSummary {
                correct: false,
                summary: "mismatch".into(),
                ..Default::default()
            },
        };
        let mut state = interval_session(plain);
        if let Some(e) = state
            .candidates
            .get_mut(&CandidateId(2))
            .and_then(|c| c.eval.as_mut())
        {
            e.vs_defaults = Some(Box::new(crate::protocol::DefaultsScore {
                score: crate::protocol::ScoreFigure::new(Some(0.59), Some((0.58, 0.60))),
                reference_speedup: Some(2.44),
                differs: Some("float32 convolutions: TF32 cuDNN convolutions off".into()),
            }));
        }
        let r = render_report(&state);
        let line = "| PyTorch defaults | 0.59x [0.58-0.60] vs PyTorch's defaults (the reference runs 2.44x as fast \
                    under them) (float32 convolutions: TF32 cuDNN convolutions off); the headline, fast_p and \
                    selection use the policy's reference |";
        assert!(has_line(&r, line), "missing {line:?} in\n{r}");
    }
}
