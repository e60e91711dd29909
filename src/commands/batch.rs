//! `kforge batch TASKS...` and its subcommands: make a batch of tasks (files, directories,
//! a KernelBench checkout with `--level` and `--tasks`), run it here or submit it to
//! Slurm, follow it (`status`), continue it (`resume`), summarize it (`report`), and run
//! one of its tasks (`task`, what each Slurm array element runs).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use serde_json::json;

use super::session_args::{BudgetArgs, EvalFlags, PlanArgs, check_stages};
use crate::batch::manifest::{
    self, BatchEnd, BatchLimits, BatchTask, Manifest, SlurmRecord, Submission,
};
use crate::batch::results::{StatusCounts, TaskStatus, collect, elapsed_seconds, task_seconds};
use crate::batch::runner::{BatchContext, BatchOutcome, TaskTurn, run_batch};
use crate::batch::select::{NumberSet, find_tasks};
use crate::batch::slurm::{self, SlurmOptions, SlurmState};
use crate::config::Config;
use crate::eval;
use crate::launch::Provider;
use crate::protocol::figures::duration_text;

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct BatchArgs {
    #[command(subcommand)]
    pub action: Option<BatchAction>,
    #[command(flatten)]
    pub new: NewBatchArgs,
}

#[derive(clap::Subcommand, Debug)]
pub enum BatchAction {
    /// Each task's status, best score and cost (and Slurm's state of its job).
    Status(BatchDirArgs),
    /// Continue a batch: resume stopped or interrupted sessions, start those not started.
    Resume(ResumeBatchArgs),
    /// (Re)write summary.md, summary.json, results.csv and the KernelBench export.
    Report(BatchDirArgs),
    /// Run one task of a batch (what each Slurm array element runs).
    Task(TaskArgs),
}

#[derive(clap::Args, Debug)]
pub struct BatchDirArgs {
    /// The batch directory (it holds batch.json).
    pub batch: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct TaskArgs {
    /// The batch directory.
    pub batch: PathBuf,
    /// The task's index in batch.json (Slurm's $SLURM_ARRAY_TASK_ID).
    #[arg(long)]
    pub index: usize,
}

#[derive(clap::Args, Debug, Default)]
pub struct ResumeBatchArgs {
    /// The batch directory.
    pub batch: PathBuf,
    #[command(flatten)]
    pub limits: LimitArgs,
    /// New per-task budgets, kept in batch.json and each session.
    #[command(flatten)]
    pub budgets: BudgetArgs,
    /// A Slurm batch: run what is left here instead of re-submitting it.
    #[arg(long)]
    pub here: bool,
}

/// How much of the machine and of the budget the whole batch uses.
#[derive(clap::Args, Debug, Default, Clone)]
pub struct LimitArgs {
    /// Tasks running at once (default 4).
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// LLM calls in flight at once over all tasks (default 8).
    #[arg(long, value_name = "N")]
    pub llm_calls: Option<usize>,
    /// Batch budget: stop every task cleanly once all tasks' calls used this many tokens.
    #[arg(long, value_name = "TOKENS")]
    pub batch_max_tokens: Option<u64>,
    /// Batch budget: stop every task cleanly once all tasks' calls cost this many USD.
    #[arg(long, value_name = "USD")]
    pub batch_max_cost: Option<f64>,
    /// Batch budget: stop every task cleanly after this many seconds of this run.
    #[arg(long, value_name = "SECONDS")]
    pub batch_max_wall: Option<f64>,
}

impl LimitArgs {
    fn apply(&self, limits: &mut BatchLimits) {
        if let Some(n) = self.jobs {
            limits.tasks_at_once = n.max(1);
        }
        if let Some(n) = self.llm_calls {
            limits.llm_calls_at_once = n.max(1);
        }
        limits.max_tokens = self.batch_max_tokens.or(limits.max_tokens);
        limits.max_cost_usd = self.batch_max_cost.or(limits.max_cost_usd);
        limits.max_wall_s = self.batch_max_wall.or(limits.max_wall_s);
    }
}

#[derive(clap::Args, Debug, Default)]
pub struct NewBatchArgs {
    /// Task files, directories of task files, or a KernelBench checkout.
    #[arg(required = true)]
    pub tasks: Vec<PathBuf>,
    /// KernelBench levels, e.g. `1,2` (needed for a checkout).
    #[arg(long, value_name = "LIST")]
    pub level: Option<String>,
    /// KernelBench problem numbers, e.g. `1-20,42`.
    #[arg(long = "tasks", value_name = "LIST")]
    pub problems: Option<String>,
    /// The batch directory to create (default ./batches/<date>_<time>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub plan: PlanArgs,
    /// Per-task budgets (each task's session).
    #[command(flatten)]
    pub budgets: BudgetArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub eval: EvalFlags,
    #[command(flatten)]
    pub slurm: SlurmArgs,
}

/// Submitting the batch to Slurm as one job array instead of running it here.
#[derive(clap::Args, Debug, Default, Clone)]
pub struct SlurmArgs {
    /// Submit one job array to Slurm (element i runs task i) instead of running here.
    #[arg(long)]
    pub slurm: bool,
    /// Slurm partition.
    #[arg(long, requires = "slurm")]
    pub partition: Option<String>,
    /// Generic resources per element, e.g. `gpu:1`.
    #[arg(long, requires = "slurm")]
    pub gres: Option<String>,
    /// Time limit per element (`HH:MM:SS`).
    #[arg(long, requires = "slurm")]
    pub time: Option<String>,
    /// CPUs per element.
    #[arg(long, requires = "slurm")]
    pub cpus_per_task: Option<u32>,
    /// Memory per element, e.g. `16G`.
    #[arg(long, requires = "slurm")]
    pub mem: Option<String>,
    /// A further sbatch argument (repeat for more), e.g. `--sbatch-arg=--account=lab`.
    #[arg(long, requires = "slurm", value_name = "ARG")]
    pub sbatch_arg: Vec<String>,
}

impl SlurmArgs {
    fn options(&self) -> SlurmOptions {
        SlurmOptions {
            partition: self.partition.clone(),
            gres: self.gres.clone(),
            time: self.time.clone(),
            cpus_per_task: self.cpus_per_task,
            mem: self.mem.clone(),
            extra: self.sbatch_arg.clone(),
        }
    }
}

pub async fn run(args: BatchArgs, config_file: Option<&Path>) -> Result<ExitCode> {
    match args.action {
        Some(BatchAction::Status(a)) => status(&a.batch).await,
        Some(BatchAction::Report(a)) => report(&a.batch),
        Some(BatchAction::Resume(a)) => resume(a, config_file).await,
        Some(BatchAction::Task(a)) => task(a, config_file).await,
        None => create(args.new, config_file).await,
    }
}

fn default_dir() -> PathBuf {
    Path::new("batches").join(chrono::Local::now().format("%Y%m%d_%H%M%S").to_string())
}

async fn create(args: NewBatchArgs, config_file: Option<&Path>) -> Result<ExitCode> {
    let config = Config::load(config_file)?;
    let levels = args.level.as_deref().map(NumberSet::parse).transpose()?;
    let problems = args.problems.as_deref().map(NumberSet::parse).transpose()?;
    let found = find_tasks(&args.tasks, levels.as_ref(), problems.as_ref())?;
    let mut pipeline = config.pipeline.clone();
    let mut eval_settings = config.eval.clone();
    args.plan.apply(&mut pipeline);
    args.budgets.apply(&mut pipeline);
    args.eval.apply(&mut eval_settings, &mut pipeline);
    check_stages(&pipeline)?;
    let devices = args.eval.devices.choice()?;
    // Who answers must work before anything is made: a batch is many sessions.
    let provider = match Provider::resolve(
        &config,
        args.plan.provider.as_deref(),
        args.plan.model.as_deref(),
    ) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("kforge cannot start the batch: {e:#}");
            eprintln!("kforge: no batch was made and no LLM call was made");
            return Ok(ExitCode::from(2));
        }
    };
    let (provider_name, model) = provider.label();
    let mut limits = BatchLimits {
        tasks_at_once: 4,
        llm_calls_at_once: 8,
        max_tokens: None,
        max_cost_usd: None,
        max_wall_s: None,
    };
    args.limits.apply(&mut limits);
    let tasks: Vec<BatchTask> = found.iter().map(BatchTask::from).collect();
    let files: Vec<PathBuf> = found.iter().map(|t| t.file.clone()).collect();
    let config_file = config_file.map(|c| std::path::absolute(c).unwrap_or(c.to_path_buf()));
    let mut manifest = Manifest::new(
        provider_name,
        model,
        config_file,
        devices,
        limits,
        pipeline,
        eval_settings,
        tasks,
    );
    let dir = args.out.clone().unwrap_or_else(default_dir);
    if args.slurm.slurm {
        manifest.slurm = Some(SlurmRecord {
            options: args.slurm.options(),
            submissions: Vec::new(),
        });
    }
    manifest.create(&dir, &files)?;
    if args.slurm.slurm {
        let all: Vec<usize> = (0..manifest.tasks.len()).collect();
        return submit(&dir, &manifest, &all).await;
    }
    eprintln!(
        "kforge: batch {} with {} task(s); follow it with `kforge open {}`",
        dir.display(),
        manifest.tasks.len(),
        dir.display()
    );
    tracing::info!(batch = %dir.display(), tasks = manifest.tasks.len(), "batch created");
    run_here(&dir, manifest, config, provider, "batch".into(), None).await
}

/// Builds the run's context (the evaluator, the devices) and runs the tasks `only`.
async fn run_here(
    dir: &Path,
    manifest: Manifest,
    config: Config,
    provider: Provider,
    how: String,
    only: Option<Vec<usize>>,
) -> Result<ExitCode> {
    Ok(ExitCode::from(
        run_context(dir, manifest, config, provider, how, only)
            .await?
            .1,
    ))
}

async fn run_context(
    dir: &Path,
    manifest: Manifest,
    config: Config,
    provider: Provider,
    how: String,
    only: Option<Vec<usize>>,
) -> Result<(BatchOutcome, u8)> {
    let prompts = crate::prompts::PromptSet::from_config(&config)?;
    let cache = crate::paths::cache_dir();
    let evaluator =
        eval::evaluator_from_config(&config, &cache, &mut |line| eprintln!("kforge: {line}"))?;
    let devices = manifest.devices.resolve(&evaluator).await?;
    let versions = evaluator
        .hello()
        .await
        .ok()
        .map(|h| json!({"python": h.python, "torch": h.torch, "triton": h.triton}));
    let ctx = BatchContext {
        dir: dir.to_path_buf(),
        manifest,
        config,
        evaluator,
        devices,
        prompts,
        provider,
        versions,
        how,
    };
    let outcome = run_batch(ctx, only).await?;
    let code = finish(dir, &outcome);
    Ok((outcome, code))
}

/// Says how the run ended and where the summary is; the exit code.
fn finish(dir: &Path, outcome: &BatchOutcome) -> u8 {
    let finished = outcome
        .results
        .iter()
        .filter(|r| r.status.is_final())
        .count();
    let correct = outcome.results.iter().filter(|r| r.correct).count();
    eprintln!(
        "kforge: batch {}: {} ({}); {finished} of {} task(s) finished, {correct} with a correct kernel",
        dir.display(),
        match outcome.end {
            BatchEnd::Done => "done",
            BatchEnd::Interrupted => "interrupted",
            BatchEnd::BudgetReached => "budget reached",
            BatchEnd::Failed => "failed",
        },
        outcome.reason,
        outcome.results.len()
    );
    eprintln!(
        "kforge: summary {}",
        dir.join(crate::batch::summary::SUMMARY_MD).display()
    );
    let open = outcome
        .results
        .iter()
        .filter(|r| !r.status.is_final() && r.status != TaskStatus::Refused)
        .count();
    if open > 0 {
        eprintln!(
            "kforge: {open} task(s) can go on: `kforge batch resume {}`",
            dir.display()
        );
    }
    match outcome.end {
        BatchEnd::Done | BatchEnd::BudgetReached => 0,
        BatchEnd::Interrupted => 130,
        BatchEnd::Failed => 1,
    }
}

/// Writes `slurm/job.sh` for the tasks `indices`, submits it, and records the job.
async fn submit(dir: &Path, manifest: &Manifest, indices: &[usize]) -> Result<ExitCode> {
    let Some(record) = &manifest.slurm else {
        bail!("{} is not a Slurm batch", dir.display());
    };
    let dir = std::path::absolute(dir)?;
    let logs = dir.join("slurm");
    std::fs::create_dir_all(&logs).with_context(|| format!("cannot create {}", logs.display()))?;
    let exe = std::env::current_exe().context("cannot find the kforge executable")?;
    let script = slurm::job_script(
        &record.options,
        &exe,
        &dir,
        manifest.config_file.as_deref(),
        indices,
        &logs,
    );
    let script_path = logs.join("job.sh");
    std::fs::write(&script_path, &script)
        .with_context(|| format!("cannot write {}", script_path.display()))?;
    let job = tokio::task::spawn_blocking(move || slurm::submit(&script_path)).await??;
    let submission = Submission {
        job_id: job,
        submitted: chrono::Utc::now(),
        indices: indices.to_vec(),
    };
    manifest::update(&dir, |m| {
        if let Some(s) = &mut m.slurm {
            s.submissions.push(submission);
        }
    })?;
    tracing::info!(batch = %dir.display(), job, elements = indices.len(), "batch submitted to Slurm");
    eprintln!(
        "kforge: submitted job array {job} ({} element(s)); logs in {}",
        indices.len(),
        logs.display()
    );
    eprintln!(
        "kforge: follow it with `kforge batch status {0}` or `kforge open {0}`; `kforge batch resume {0}` re-submits what fails",
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Each task's element state in its latest job (None: never submitted, or Slurm no
/// longer knows it).
async fn slurm_states(manifest: &Manifest) -> Result<BTreeMap<usize, SlurmState>> {
    let Some(record) = manifest.slurm.clone() else {
        return Ok(BTreeMap::new());
    };
    tokio::task::spawn_blocking(move || {
        let mut jobs: BTreeMap<u64, BTreeMap<usize, SlurmState>> = BTreeMap::new();
        let mut states = BTreeMap::new();
        let submitted: std::collections::BTreeSet<usize> = record
            .submissions
            .iter()
            .flat_map(|s| s.indices.iter().copied())
            .collect();
        for index in submitted {
            let Some(job) = record.job_for(index) else {
                continue;
            };
            if let std::collections::btree_map::Entry::Vacant(e) = jobs.entry(job) {
                e.insert(slurm::query(job)?);
            }
            if let Some(state) = jobs[&job].get(&index) {
                states.insert(index, state.clone());
            }
        }
        Ok(states)
    })
    .await?
}

/// Re-submits, as one new job array, the tasks that have not reached their end and whose
/// element is neither pending nor running.
async fn resubmit(dir: &Path, manifest: &Manifest) -> Result<ExitCode> {
    let states = slurm_states(manifest).await?;
    let results = collect(dir, manifest);
    let again: Vec<usize> = results
        .iter()
        .enumerate()
        .filter(|(i, r)| {
            !r.status.is_final()
                && !r.status.is_live()
                && !states.get(i).is_some_and(SlurmState::is_active)
        })
        .map(|(i, _)| i)
        .collect();
    let active = states.values().filter(|s| s.is_active()).count();
    if again.is_empty() {
        eprintln!(
            "kforge: nothing to re-submit: {} task(s) finished, {active} element(s) pending or running",
            results.iter().filter(|r| r.status.is_final()).count()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let keys: Vec<&str> = again.iter().map(|i| results[*i].key.as_str()).collect();
    eprintln!("kforge: re-submitting {}: {}", again.len(), keys.join(", "));
    submit(dir, manifest, &again).await
}

/// Who answers a batch's new sessions: the provider and model it was made with.
fn batch_provider(config: &Config, manifest: &Manifest) -> Result<Provider> {
    Provider::resolve(config, Some(&manifest.provider), Some(&manifest.model))
        .with_context(|| format!("the batch uses provider `{}`", manifest.provider))
}

/// The config a batch was made with (its `--config` file), unless one is named now.
fn batch_config(manifest: &Manifest, config_file: Option<&Path>) -> Result<Config> {
    Config::load(config_file.or(manifest.config_file.as_deref()))
}

async fn resume(args: ResumeBatchArgs, config_file: Option<&Path>) -> Result<ExitCode> {
    let mut manifest = Manifest::load(&args.batch)?;
    let config = batch_config(&manifest, config_file)?;
    let mut changed = args.budgets.apply(&mut manifest.pipeline);
    let before = manifest.limits.clone();
    args.limits.apply(&mut manifest.limits);
    changed |= before != manifest.limits;
    if changed {
        let (pipeline, limits) = (manifest.pipeline.clone(), manifest.limits.clone());
        manifest = manifest::update(&args.batch, |m| {
            m.pipeline = pipeline;
            m.limits = limits;
        })?;
    }
    if manifest.slurm.is_some() && !args.here {
        return resubmit(&args.batch, &manifest).await;
    }
    let provider = batch_provider(&config, &manifest)?;
    run_here(
        &args.batch,
        manifest,
        config,
        provider,
        "resume".into(),
        None,
    )
    .await
}

/// `kforge resume BATCH`: the same as `kforge batch resume BATCH` with per-task budgets.
pub async fn resume_dir(
    dir: &Path,
    budgets: &BudgetArgs,
    config_file: Option<&Path>,
) -> Result<ExitCode> {
    resume(
        ResumeBatchArgs {
            batch: dir.to_path_buf(),
            budgets: budgets.clone(),
            ..Default::default()
        },
        config_file,
    )
    .await
}

async fn task(args: TaskArgs, config_file: Option<&Path>) -> Result<ExitCode> {
    let mut manifest = Manifest::load(&args.batch)?;
    if args.index >= manifest.tasks.len() {
        bail!(
            "the batch has {} task(s); index {} is not one of them",
            manifest.tasks.len(),
            args.index
        );
    }
    let config = batch_config(&manifest, config_file)?;
    let provider = batch_provider(&config, &manifest)?;
    // One task per element: the element is the unit Slurm schedules.
    manifest.limits.tasks_at_once = 1;
    let how = match std::env::var("SLURM_ARRAY_JOB_ID") {
        Ok(job) => format!("slurm {job}_{}", args.index),
        Err(_) => format!("task {}", args.index),
    };
    let key = manifest.tasks[args.index].key.clone();
    let (outcome, code) = run_context(
        &args.batch,
        manifest,
        config,
        provider,
        how,
        Some(vec![args.index]),
    )
    .await?;
    if code == 130 {
        return Ok(ExitCode::from(130));
    }
    // The element's exit status is its task's: Slurm then shows a task that did not reach
    // its end as FAILED.
    Ok(ExitCode::from(match outcome.turns.get(&key) {
        Some(TaskTurn::Ran(end)) => end.exit_code(),
        Some(TaskTurn::AlreadyFinished) | None => 0,
        Some(TaskTurn::Refused(_)) => 2,
        Some(TaskTurn::NotStarted) => 130,
        Some(TaskTurn::RunningElsewhere) | Some(TaskTurn::Failed(_)) => 1,
    }))
}

fn report(dir: &Path) -> Result<ExitCode> {
    let manifest = Manifest::load(dir)?;
    manifest::with_lock(dir, || crate::batch::export::write_all(dir, &manifest))?;
    println!("{}", dir.join(crate::batch::summary::SUMMARY_MD).display());
    Ok(ExitCode::SUCCESS)
}

async fn status(dir: &Path) -> Result<ExitCode> {
    let manifest = Manifest::load(dir)?;
    let results = collect(dir, &manifest);
    let now = chrono::Utc::now();
    let slurm = match slurm_states(&manifest).await {
        Ok(states) => Some(states).filter(|_| manifest.slurm.is_some()),
        Err(e) => {
            eprintln!("kforge: cannot read Slurm's state: {e:#}");
            None
        }
    };
    println!(
        "{:<28} {:<18} {:>9} {:>8} {:>10} {:>7}{}",
        "task",
        "status",
        "speedup",
        "tokens",
        "cost",
        "wall",
        if slurm.is_some() { "  slurm" } else { "" }
    );
    for (i, r) in results.iter().enumerate() {
        let element = slurm.as_ref().map_or(String::new(), |states| {
            let job = manifest.slurm.as_ref().and_then(|s| s.job_for(i));
            match (job, states.get(&i)) {
                (Some(job), Some(state)) => format!("  {job}_{i} {state}"),
                (Some(job), None) => format!("  {job}_{i} (gone)"),
                (None, _) => "  not submitted".into(),
            }
        });
        println!(
            "{:<28} {:<18} {:>9} {:>8} {:>10} {:>7}{element}",
            r.key.as_str(),
            r.status.word(),
            r.speedup_text(),
            r.tokens(),
            crate::batch::results::cost_text(r.cost_usd, r.unpriced_calls),
            duration_text(r.wall_now(now))
        );
    }
    let counts = StatusCounts::of(&results);
    println!("{} task(s): {}", counts.tasks, counts.text());
    // As the batch view's header says it: how long the batch ran, and apart from it the
    // tasks' times added up (they run side by side).
    println!(
        "elapsed {}, task-time {}",
        duration_text(elapsed_seconds(&results, now)),
        duration_text(task_seconds(&results, now))
    );
    Ok(ExitCode::SUCCESS)
}
