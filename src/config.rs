//! Configuration: built-in defaults, then `~/.config/kforge/config.toml`, then the
//! project's `kforge.toml` (current directory), then an explicit `--config FILE`; the CLI
//! flags and environment variables are applied on top by each command. Tables merge
//! deeply, so a project file can change one key of a section without restating the rest.

pub mod llm;
pub mod pipeline;
pub mod tui;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// The project file name looked up in the current directory.
pub const PROJECT_FILE: &str = "kforge.toml";

/// Everything kforge reads from its config files.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct Config {
    pub python: PythonConfig,
    pub eval: EvalConfig,
    /// `[llm]`: providers, keys, timeouts, retries and prices (see `docs/llm.md`).
    pub llm: llm::LlmConfig,
    /// `[pipeline]`: the optimization pipeline's counts, stages, budgets and mode.
    pub pipeline: pipeline::PipelineConfig,
    /// `[tui]`: theme, mouse, editor and keymap overrides (see `docs/tui.md`).
    #[serde(default)]
    pub tui: tui::TuiConfig,
    /// The files that were read, lowest precedence first (for `doctor` and error messages).
    #[serde(skip)]
    pub sources: Vec<PathBuf>,
    /// The merged table, for sections owned by other modules.
    #[serde(skip)]
    pub table: toml::Table,
}

/// `[python]`: which interpreter runs the harness.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct PythonConfig {
    /// An interpreter that imports torch and triton. `KFORGE_PYTHON` overrides it.
    pub interpreter: Option<PathBuf>,
}

/// How the kernel's process is made for each evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Executor {
    /// Forked from a sandboxed process that imported torch and triton once (fast).
    #[default]
    Fork,
    /// A fresh sandbox and interpreter per evaluation (2-3 s slower, nothing shared
    /// between evaluations).
    Spawn,
}

/// How floating-point outputs are compared (`[eval] tolerance`; docs/eval-result.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Tolerance {
    /// Against the reference run in float64 on the same inputs: each element within 128x
    /// (float16/bfloat16 outputs: 16x) the error honest float32 arithmetic makes there,
    /// measured on the reference and its sequential twin (oracle.py). Outputs without an
    /// oracle (float64 ones, a reference without a float64 path) and explicit atol/rtol
    /// fall back to `dtype`.
    #[default]
    Oracle,
    /// atol = rtol per output dtype (float32 1e-4, float16/bfloat16 1e-2, as KernelBench
    /// and torchbench), atol scaled down to 2% of an output's own magnitude where smaller.
    Dtype,
    /// KernelBench HEAD's rule exactly: `torch.allclose(ref, new, atol=tol, rtol=tol)` with
    /// the dtype's tolerance, unscaled.
    Kernelbench,
    /// kforge's rule before per-dtype tolerances: one atol = rtol = 1e-2 for every dtype,
    /// scaled as `dtype`.
    Scaled,
}

impl Tolerance {
    pub fn as_str(&self) -> &'static str {
        match self {
            Tolerance::Oracle => "oracle",
            Tolerance::Dtype => "dtype",
            Tolerance::Kernelbench => "kernelbench",
            Tolerance::Scaled => "scaled",
        }
    }
}

pub use crate::protocol::PrecisionPolicy;

/// `[eval]`: correctness and timing rules. Defaults are docs/architecture.md, Evaluation.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct EvalConfig {
    /// Absolute and relative tolerance for floating-point outputs, for every dtype. Unset
    /// (the default): each output's from its dtype (`tolerance`, `precision`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub atol: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtol: Option<f64>,
    /// Correctness trials with fresh seeded inputs.
    pub trials: u32,
    /// Extra trial on standard-normal inputs when the reference stays finite on them.
    pub signed_trial: bool,
    /// Re-check with fresh values written into the timing buffers after timing.
    pub post_timing_check: bool,
    /// Most timed runs per model: an upper bound (the precision or the time budget may
    /// end timing earlier).
    pub timing_trials: u32,
    /// Fewest timed runs, whatever the budget or the precision says.
    pub min_timing_trials: u32,
    /// Timed runs continue, up to `timing_trials` and the time budget, until each side's
    /// median has a 95% interval within +-`timing_precision` (0.01: +-1%).
    pub timing_precision: f64,
    /// What changes between two evaluations of the same kernel (where its buffers land,
    /// the GPU's clocks) and no evaluation's own runs can show: a relative 95% half-width
    /// combined with each score's bootstrap interval, so that two evaluations of one kernel
    /// have overlapping intervals and two candidates closer than this are called
    /// indistinguishable. 0.015 (+-1.5%) is the 3% repeatability measured in
    /// docs/benchmarks.md; 0 gives the timed runs' interval alone.
    pub between_evaluations: f64,
    /// Seconds of timed runs allowed per model.
    pub timing_budget_s: f64,
    /// Untimed warm-up runs per model.
    pub warmup: u32,
    /// Flush L2 before each timed run.
    pub flush_l2: bool,
    /// Seconds before an evaluation's process is killed.
    pub timeout_s: f64,
    /// Longest one call of the task's `get_inputs()` may take; a slower task gets a `task`
    /// verdict before any kernel runs (an evaluation draws inputs about a dozen times).
    pub input_draw_limit_s: f64,
    /// Base seed for parameters and inputs.
    pub seed: u64,
    /// Turn the "PyTorch compute op in forward" warning into a static-check failure.
    pub reject_torch_ops: bool,
    /// Speedups above this are flagged as suspicious.
    pub suspicious_speedup: f64,
    /// Obsolete: ignored since the judge times both sides itself (the host/event
    /// cross-check they tuned is gone). Still accepted so that an existing config loads;
    /// `kforge doctor` names them when set (`obsolete_keys`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_time_ratio: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_slack_ms: Option<f64>,
    /// `dtype` (default): atol = rtol per output dtype, atol shrinking to 2% of an output's
    /// own magnitude where that is below it, so zeros cannot pass a tiny output;
    /// `kernelbench`: KernelBench's rule exactly; `scaled`: 1e-2 for every dtype, scaled.
    pub tolerance: Tolerance,
    /// `strict` (default): the kernel keeps the task's dtype (TF32 off on both sides);
    /// `tf32`: TF32 allowed, the reference runs in TF32 too; `pytorch`: the reference under
    /// PyTorch's defaults (cuDNN TF32 on), as KernelBench runs it.
    pub precision: PrecisionPolicy,
    /// Run the static filter before a kernel runs, and the run-time guard while it runs
    /// (default true). Off, only the dynamic defenses (sandbox, judge, audit, the sealed
    /// channel) stand: for testing them, or for research on what kernels attempt.
    pub static_checks: bool,
    /// Refuse to run a kernel or a task's code (a task check too) when no sandbox can be set
    /// up (default true: generated code and task files are hostile, and running them with
    /// the user's rights must be an explicit choice).
    pub require_sandbox: bool,
    /// Reuse reference timings measured earlier under the same conditions.
    pub baseline_cache: bool,
    /// On a GPU, time the reference under `torch.compile` too (once per task and device,
    /// cached; its compile time is reported apart): every score then has a figure against
    /// it (`timing.score_vs_compile`).
    pub compile_baseline: bool,
    /// `torch.compile`'s mode for that baseline.
    pub compile_mode: crate::protocol::CompileMode,
    /// What the headline score (selection, the pipeline's gates, budgets, fast_p) is
    /// against: `eager`, `compile`, or `best` (default: torch.compile where it is faster
    /// than eager beyond the noise, else eager; eager where the task does not compile or
    /// `compile_baseline` is off).
    pub baseline: crate::protocol::BaselineChoice,
    pub executor: Executor,
    /// Re-check a session's best and final kernels on unseen shapes and seeds (variants of
    /// the task's size constants, correctness only; docs/eval-result.md, "Unseen shapes").
    pub shape_check: bool,
    /// In a session, start the next candidate's judge and worker while the model writes it:
    /// both processes and their CUDA contexts, the task loaded, the reference built and its
    /// timing process started, the buffers lent; the candidate's own evaluation then runs
    /// only the kernel's phases (the harness's `ahead.py`). Off, every candidate starts its
    /// processes when it is evaluated (nothing is held on the device between candidates).
    /// Applies to a session's candidates and `kforge mcp`'s evaluations only
    /// (`EvalRequest::session_candidate`), never to a one-off `kforge eval`.
    pub start_ahead: bool,
    /// On the CPU (Triton's interpreter): `shrink` (unset: the default) evaluates a task whose
    /// size constants are too large for the interpreter at smaller ones, saying so in the
    /// result (`interpreter_sizes`); `task` keeps the task's sizes. kforge applies it before
    /// the job is written: never sent to the harness (`for_job` leaves it out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interpreter_sizes: Option<crate::protocol::shapes::InterpreterSizePolicy>,
}

impl Default for EvalConfig {
    fn default() -> Self {
        Self {
            atol: None,
            rtol: None,
            trials: 5,
            signed_trial: true,
            post_timing_check: true,
            timing_trials: 300,
            min_timing_trials: 20,
            timing_precision: 0.01,
            between_evaluations: 0.015,
            timing_budget_s: 10.0,
            warmup: 3,
            flush_l2: true,
            timeout_s: 300.0,
            input_draw_limit_s: 20.0,
            seed: 42,
            reject_torch_ops: false,
            suspicious_speedup: 10.0,
            host_time_ratio: None,
            host_slack_ms: None,
            tolerance: Tolerance::Oracle,
            precision: PrecisionPolicy::Strict,
            static_checks: true,
            require_sandbox: true,
            baseline_cache: true,
            compile_baseline: true,
            compile_mode: crate::protocol::CompileMode::Default,
            baseline: crate::protocol::BaselineChoice::Best,
            executor: Executor::Fork,
            shape_check: true,
            start_ahead: true,
            interpreter_sizes: None,
        }
    }
}

impl EvalConfig {
    /// These settings as one evaluation job carries them to the harness (flattened into
    /// `eval::protocol::Job`): the bounds the harness relies on applied, the obsolete keys
    /// left out, and the baselines only where this job times (`timing`) or can cache them
    /// (`has_cache_dir`).
    pub fn for_job(&self, timing: bool, has_cache_dir: bool) -> EvalConfig {
        EvalConfig {
            min_timing_trials: self.min_timing_trials.min(self.timing_trials),
            between_evaluations: self.between_evaluations.max(0.0),
            host_time_ratio: None,
            host_slack_ms: None,
            baseline_cache: self.baseline_cache && has_cache_dir,
            compile_baseline: self.compile_baseline && timing,
            interpreter_sizes: None,
            ..self.clone()
        }
    }

    /// The `[eval]` keys that are set and no longer mean anything (`kforge doctor` says so).
    pub fn obsolete_keys(&self) -> Vec<&'static str> {
        [
            ("host_time_ratio", self.host_time_ratio.is_some()),
            ("host_slack_ms", self.host_slack_ms.is_some()),
        ]
        .into_iter()
        .filter_map(|(key, set)| set.then_some(key))
        .collect()
    }
}

/// What `kforge doctor` says of obsolete `[eval]` keys; None when none is set.
pub fn obsolete_keys_note(eval: &EvalConfig) -> Option<String> {
    let keys = eval.obsolete_keys();
    (!keys.is_empty()).then(|| {
        format!(
            "[eval] {} {} obsolete and ignored: the judge times the reference and the kernel itself; remove {} from the config",
            keys.join(", "),
            if keys.len() == 1 { "is" } else { "are" },
            if keys.len() == 1 { "it" } else { "them" }
        )
    })
}

impl Config {
    /// Loads user, project and explicit files (each optional except `explicit`).
    pub fn load(explicit: Option<&Path>) -> Result<Config> {
        let mut files = Vec::new();
        if let Some(user) = crate::paths::user_config_file() {
            files.push(user);
        }
        files.push(PathBuf::from(PROJECT_FILE));
        Self::load_files(&files, explicit)
    }

    /// Loads the given optional layers (missing files are skipped) and an explicit file
    /// that must exist.
    pub fn load_files(optional: &[PathBuf], explicit: Option<&Path>) -> Result<Config> {
        let mut merged = toml::Table::new();
        let mut sources = Vec::new();
        for path in optional {
            if path.is_file() {
                merge(&mut merged, read_table(path)?);
                sources.push(path.clone());
            }
        }
        if let Some(path) = explicit {
            if !path.is_file() {
                anyhow::bail!("config file {} does not exist", path.display());
            }
            merge(&mut merged, read_table(path)?);
            sources.push(path.to_path_buf());
        }
        let mut config: Config = toml::Value::Table(merged.clone())
            .try_into()
            .with_context(|| format!("invalid configuration (read from {})", describe(&sources)))?;
        tracing::info!(files = ?sources, "configuration read");
        if let Some(note) = obsolete_keys_note(&config.eval) {
            tracing::warn!("{note}");
        }
        config.sources = sources;
        config.table = merged;
        Ok(config)
    }
}

fn describe(sources: &[PathBuf]) -> String {
    if sources.is_empty() {
        return "built-in defaults".into();
    }
    sources
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The top-level sections a config file may have.
pub const SECTIONS: [&str; 6] = ["python", "eval", "llm", "pipeline", "prompts", "tui"];

fn read_table(path: &Path) -> Result<toml::Table> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let table = text
        .parse::<toml::Table>()
        .with_context(|| format!("{} is not valid TOML", path.display()))?;
    check_sections(&table).with_context(|| format!("in {}", path.display()))?;
    Ok(table)
}

/// Every top-level key must be a known section: a misspelt one (`[pipline]`) would
/// otherwise be ignored in silence, while a misspelt key inside a known section is an error.
fn check_sections(table: &toml::Table) -> Result<()> {
    for (key, value) in table {
        if SECTIONS.contains(&key.as_str()) {
            if !value.is_table() {
                anyhow::bail!("`{key}` must be a section ([{key}]), not a value");
            }
            continue;
        }
        if key == "providers" || key == "prices" {
            anyhow::bail!(
                "the config has a top-level [{key}] section: it belongs under [llm], as [llm.{key}.NAME]"
            );
        }
        let closest = closest_name(key, SECTIONS.iter().copied())
            .map(|s| format!(" (did you mean [{s}]?)"))
            .unwrap_or_default();
        let what = if value.is_table() {
            format!("[{key}]")
        } else {
            format!("`{key}`")
        };
        anyhow::bail!(
            "unknown section {what}{closest}: the sections are {}",
            SECTIONS.map(|s| format!("[{s}]")).join(", ")
        );
    }
    Ok(())
}

/// Deep merge: tables merge key by key, anything else in `over` replaces `base`.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(key, v);
            }
        }
    }
}

/// The name among `names` closest to a mistyped `word` (at most two edits away), for a
/// "did you mean" in an error.
pub fn closest_name<'a>(word: &str, names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    names
        .into_iter()
        .map(|name| (strsim::damerau_levenshtein(word, name), name))
        .min()
        .filter(|(distance, _)| *distance <= 2)
        .map(|(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_sections_are_errors_that_suggest_the_closest() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(dir.path(), "c.toml", "[pipline]\nseeds = 2\n");
        let err = format!(
            "{:#}",
            Config::load_files(std::slice::from_ref(&f), None).unwrap_err()
        );
        assert!(err.contains(&f.display().to_string()), "{err}");
        assert!(
            err.contains("unknown section [pipline] (did you mean [pipeline]?)"),
            "{err}"
        );
        let f = write(dir.path(), "d.toml", "seeds = 2\n");
        let err = format!("{:#}", Config::load_files(&[f], None).unwrap_err());
        assert!(
            err.contains("unknown section `seeds`: the sections are"),
            "{err}"
        );
        let f = write(dir.path(), "e.toml", "[zzzzzzzz]\n");
        let err = format!("{:#}", Config::load_files(&[f], None).unwrap_err());
        assert!(!err.contains("did you mean"), "{err}");
        for key in ["providers", "prices"] {
            let f = write(dir.path(), "g.toml", &format!("[{key}.x]\nmodel = \"m\"\n"));
            let err = format!("{:#}", Config::load_files(&[f], None).unwrap_err());
            assert!(
                err.contains(&format!("belongs under [llm], as [llm.{key}.NAME]")),
                "{err}"
            );
        }
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn defaults_match_design() {
        let c = Config::load_files(&[], None).unwrap();
        assert_eq!(c.eval.trials, 5);
        // Tolerances per output dtype unless set; TF32 off on both sides.
        assert_eq!(c.eval.atol, None);
        assert_eq!(c.eval.rtol, None);
        assert_eq!(c.eval.tolerance, Tolerance::Oracle);
        assert_eq!(c.eval.precision, PrecisionPolicy::Strict);
        assert_eq!(c.eval.timing_trials, 300);
        assert_eq!(c.eval.min_timing_trials, 20);
        assert_eq!(c.eval.timing_precision, 0.01);
        assert_eq!(c.eval.between_evaluations, 0.015);
        assert!(c.eval.obsolete_keys().is_empty());
        assert!(c.sources.is_empty());
    }

    /// `host_time_ratio` and `host_slack_ms` tuned the host/event cross-check, gone since
    /// the judge times both sides: a config that sets them still loads, they are ignored,
    /// and `obsolete_keys` names them for `kforge doctor`.
    #[test]
    fn obsolete_timing_keys_still_load_and_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let old = write(
            dir.path(),
            "old.toml",
            "[eval]\nhost_time_ratio = 1.2\nhost_slack_ms = 0.1\ntiming_precision = 0.02\n",
        );
        let c = Config::load_files(&[old], None).unwrap();
        assert_eq!(c.eval.obsolete_keys(), ["host_time_ratio", "host_slack_ms"]);
        assert_eq!(c.eval.timing_precision, 0.02);
        let note = obsolete_keys_note(&c.eval).unwrap();
        assert!(
            note.contains("[eval] host_time_ratio, host_slack_ms are obsolete and ignored"),
            "{note}"
        );
        let one = EvalConfig {
            host_slack_ms: Some(0.05),
            ..Default::default()
        };
        assert!(
            obsolete_keys_note(&one)
                .unwrap()
                .contains("host_slack_ms is obsolete"),
        );
        assert_eq!(obsolete_keys_note(&EvalConfig::default()), None);
        // Written settings (session.json, batch.json) leave them out unless set, and read
        // back either way.
        let written = serde_json::to_value(EvalConfig::default()).unwrap();
        assert!(written.get("host_time_ratio").is_none(), "{written}");
        let back: EvalConfig = serde_json::from_value(
            serde_json::json!({"host_time_ratio": 1.1, "host_slack_ms": 0.05, "timing_trials": 100}),
        )
        .unwrap();
        assert_eq!(back.timing_trials, 100);
        assert_eq!(
            back.timing_precision, 0.01,
            "absent in older sessions: the default"
        );
    }

    #[test]
    fn precision_policy_and_tolerance_modes_parse() {
        let dir = tempfile::tempdir().unwrap();
        let file = write(
            dir.path(),
            "k.toml",
            "[eval]\nprecision = \"tf32\"\ntolerance = \"kernelbench\"\n",
        );
        let c = Config::load_files(&[], Some(&file)).unwrap();
        assert_eq!(c.eval.precision, PrecisionPolicy::Tf32);
        assert_eq!(c.eval.tolerance, Tolerance::Kernelbench);
        let file = write(dir.path(), "p.toml", "[eval]\nprecision = \"pytorch\"\n");
        assert_eq!(
            Config::load_files(&[], Some(&file)).unwrap().eval.precision,
            PrecisionPolicy::Pytorch
        );
        let bad = write(dir.path(), "bad.toml", "[eval]\nprecision = \"fp8\"\n");
        assert!(Config::load_files(&[], Some(&bad)).is_err());
        // An older session's settings (one atol, the scaled rule) still load.
        let old: EvalConfig = serde_json::from_value(
            serde_json::json!({"atol": 0.01, "rtol": 0.01, "tolerance": "scaled"}),
        )
        .unwrap();
        assert_eq!((old.atol, old.tolerance), (Some(0.01), Tolerance::Scaled));
        assert_eq!(old.precision, PrecisionPolicy::Strict);
    }

    #[test]
    fn later_layers_override_single_keys() {
        let dir = tempfile::tempdir().unwrap();
        let user = write(dir.path(), "user.toml", "[eval]\ntrials = 7\natol = 0.5\n");
        let project = write(dir.path(), "kforge.toml", "[eval]\natol = 0.001\n");
        let c = Config::load_files(
            &[user, project.clone(), dir.path().join("missing.toml")],
            None,
        )
        .unwrap();
        assert_eq!(c.eval.trials, 7);
        assert_eq!(c.eval.atol, Some(0.001));
        assert_eq!(c.eval.rtol, None, "unset: the dtype's");
        assert_eq!(c.sources.len(), 2);
        assert_eq!(c.sources[1], project);
    }

    #[test]
    fn typo_in_section_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let bad = write(dir.path(), "bad.toml", "[eval]\ntrails = 3\n");
        let err = format!("{:#}", Config::load_files(&[], Some(&bad)).unwrap_err());
        assert!(err.contains("trails"), "{err}");
        assert!(err.contains("bad.toml"), "{err}");
    }

    #[test]
    fn llm_section_is_typed_and_layered() {
        let dir = tempfile::tempdir().unwrap();
        let user = write(
            dir.path(),
            "user.toml",
            "[llm]\ndefault = \"deepseek\"\n[llm.providers.deepseek]\nmodel = \"deepseek-reasoner\"\n",
        );
        let project = write(
            dir.path(),
            "kforge.toml",
            "[llm.providers.deepseek]\nread_timeout_s = 60\n",
        );
        let c = Config::load_files(&[user, project], None).unwrap();
        assert_eq!(c.llm.default.as_deref(), Some("deepseek"));
        let p = &c.llm.providers["deepseek"];
        assert_eq!(
            (p.model.as_deref(), p.read_timeout_s),
            (Some("deepseek-reasoner"), Some(60.0))
        );
        assert!(
            Config::load_files(&[], None)
                .unwrap()
                .llm
                .providers
                .is_empty()
        );
    }

    #[test]
    fn missing_explicit_file_is_an_error() {
        let err = Config::load_files(&[], Some(Path::new("/nonexistent/kforge.toml"))).unwrap_err();
        assert!(err.to_string().contains("does not exist"));
    }

    #[test]
    fn invalid_toml_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let bad = write(dir.path(), "broken.toml", "[eval\n");
        let err = format!("{:#}", Config::load_files(&[bad], None).unwrap_err());
        assert!(
            err.contains("broken.toml") && err.contains("not valid TOML"),
            "{err}"
        );
    }
}
