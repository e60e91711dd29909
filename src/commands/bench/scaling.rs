//! `kforge bench batch-scaling`: the same batch run through the real batch runner on each
//! device set (`--sets 0 0,1`), with a stand-in LLM that answers every seed at once with
//! one given kernel, so the batch's time is evaluation time. Prints per set the wall time,
//! evaluations per second, the ratio to the first set, and per device the share of the
//! wall time it spent evaluating (from the evaluations' own durations) and the mean GPU
//! utilisation nvidia-smi reported while it ran.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::batch::manifest::{BatchLimits, BatchTask, Manifest};
use crate::batch::runner::{BatchContext, run_batch};
use crate::batch::select::{NumberSet, find_tasks};
use crate::config::Config;
use crate::engine::ports::{Answer, CallFailure, CallProgress, LlmCall, LlmPort};
use crate::eval::Evaluator;
use crate::eval::devices::DeviceChoice;
use crate::eval::devices::DeviceSet;
use crate::launch::Provider;
use crate::protocol::{CallKind, TokenUsage};

#[derive(clap::Args, Debug)]
pub struct ScalingArgs {
    /// Task files or directories (every task must be solved by `--kernel`).
    #[arg(required = true)]
    pub tasks: Vec<PathBuf>,
    /// The kernel every seed answer holds.
    #[arg(long)]
    pub kernel: PathBuf,
    /// Device sets to compare, each a list of CUDA indices (default: `0` and `0,1`).
    #[arg(long, num_args = 1.., default_values_t = ["0".to_string(), "0,1".to_string()])]
    pub sets: Vec<String>,
    /// Seeds per task (evaluations per task, besides its check).
    #[arg(long, default_value_t = 2)]
    pub seeds: u32,
    /// Tasks at once.
    #[arg(long, default_value_t = 8)]
    pub jobs: usize,
    /// KernelBench levels, when TASKS is a checkout.
    #[arg(long, value_name = "LIST")]
    pub level: Option<String>,
    /// Where the batches are written (default: a temporary directory).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// The stand-in LLM: every seed gets the kernel, every analysis says "not worth it".
struct OneKernel {
    answer: String,
}

impl LlmPort for OneKernel {
    fn label(&self) -> (String, String) {
        ("bench".into(), "one-kernel".into())
    }

    fn complete<'a>(
        &'a self,
        call: &'a LlmCall,
        _cancel: &'a CancellationToken,
        _progress: &'a mut (dyn FnMut(CallProgress) + Send),
    ) -> BoxFuture<'a, Result<Answer, CallFailure>> {
        Box::pin(async move {
            let text = match call.kind {
                CallKind::Analysis => "```json\n{\"worth_optimizing\": \"no\", \"reason\": \"bench\", \"bottleneck\": \"-\", \"optimisation method\": \"-\", \"modification_plan\": \"-\", \"expected_speedup\": \"1.0x\"}\n```".to_string(),
                _ => self.answer.clone(),
            };
            Ok(Answer {
                text,
                usage: TokenUsage::default(),
                cost_usd: Some(0.0),
                warning: None,
            })
        })
    }
}

/// Mean utilisation per GPU index from nvidia-smi, sampled until `stop`.
async fn sample_utilisation(stop: CancellationToken) -> BTreeMap<u32, (f64, u32)> {
    let mut samples: BTreeMap<u32, (f64, u32)> = BTreeMap::new();
    loop {
        let out = tokio::process::Command::new("nvidia-smi")
            .args([
                "--query-gpu=index,utilization.gpu",
                "--format=csv,noheader,nounits",
            ])
            .output()
            .await;
        let Ok(out) = out else { return samples };
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if let Some((i, u)) = line.split_once(',')
                && let (Ok(i), Ok(u)) = (i.trim().parse::<u32>(), u.trim().parse::<f64>())
            {
                let e = samples.entry(i).or_default();
                e.0 += u;
                e.1 += 1;
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return samples,
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
        }
    }
}

/// (evaluations, seconds evaluating per device) from the batch's sessions.
fn evaluation_time(batch: &Path) -> Result<(usize, BTreeMap<String, f64>)> {
    let mut count = 0;
    let mut busy: BTreeMap<String, f64> = BTreeMap::new();
    for task in std::fs::read_dir(batch.join("tasks"))?.flatten() {
        let Ok(evals) = std::fs::read_dir(task.path().join("eval")) else {
            continue;
        };
        for file in evals.flatten() {
            let text = std::fs::read_to_string(file.path())?;
            let result: crate::protocol::EvalResult = serde_json::from_str(&text)
                .with_context(|| format!("{}", file.path().display()))?;
            count += 1;
            let device = result.device.torch_name.unwrap_or_else(|| "?".into());
            *busy.entry(device).or_default() += result.duration_s;
        }
    }
    Ok((count, busy))
}

pub async fn run(args: ScalingArgs, config: &Config, evaluator: &Evaluator) -> Result<()> {
    let found = find_tasks(
        &args.tasks,
        args.level
            .as_deref()
            .map(NumberSet::parse)
            .transpose()?
            .as_ref(),
        None,
    )?;
    let kernel = std::fs::read_to_string(&args.kernel)
        .with_context(|| format!("cannot read {}", args.kernel.display()))?;
    let answer = format!("```python\n{kernel}\n```\n");
    let sets: Vec<DeviceSet> = args
        .sets
        .iter()
        .map(|s| DeviceSet::parse_list(s))
        .collect::<Result<_>>()?;
    if sets.iter().any(|s| !s.is_gpu()) {
        bail!("batch-scaling compares GPU sets");
    }
    let scratch = tempfile::tempdir()?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| scratch.path().to_path_buf());
    println!(
        "batch-scaling: {} tasks x ({} seeds + check), {} at once, kernel {}",
        found.len(),
        args.seeds,
        args.jobs,
        args.kernel.display()
    );
    let mut pipeline = config.pipeline.clone();
    pipeline.seeds = args.seeds;
    pipeline.stages.clear();
    let mut eval_settings = config.eval.clone();
    // Every set times its references itself: a baseline cached by the first set would
    // make the second's work smaller.
    eval_settings.baseline_cache = false;
    // Evaluations a second, as the first scaling figures were measured: no compile baseline.
    eval_settings.compile_baseline = false;
    println!(
        "{:<10} {:>7} {:>8} {:>11} {:>7}  per device: busy share, mean GPU util",
        "devices", "evals", "wall s", "evals/s", "ratio"
    );
    let mut first_rate = None;
    for (n, set) in sets.iter().enumerate() {
        let dir = out.join(format!(
            "set{n}_{}",
            set.to_string().replace([',', ':'], "_")
        ));
        let tasks: Vec<BatchTask> = found.iter().map(BatchTask::from).collect();
        let manifest = Manifest::new(
            "bench".into(),
            "one-kernel".into(),
            None,
            DeviceChoice::Listed(set.clone()),
            BatchLimits {
                tasks_at_once: args.jobs,
                llm_calls_at_once: 64,
                max_tokens: None,
                max_cost_usd: None,
                max_wall_s: None,
            },
            pipeline.clone(),
            eval_settings.clone(),
            tasks,
        );
        let files: Vec<PathBuf> = found.iter().map(|t| t.file.clone()).collect();
        manifest.create(&dir, &files)?;
        // Start every device's server first: the import of torch is not the batch's work.
        for d in set.devices() {
            crate::engine::ports::EvalPort::prepare(evaluator, *d).await;
        }
        let stop = CancellationToken::new();
        let sampler = tokio::spawn(sample_utilisation(stop.clone()));
        let port = Arc::new(OneKernel {
            answer: answer.clone(),
        });
        let ctx = BatchContext {
            dir: dir.clone(),
            manifest,
            config: config.clone(),
            evaluator: evaluator.clone(),
            devices: set.clone(),
            prompts: crate::prompts::PromptSet::from_config(config)?,
            provider: Provider::Port(port),
            versions: None,
            how: "bench".into(),
        };
        let started = Instant::now();
        let outcome = run_batch(ctx, None).await?;
        let wall = started.elapsed().as_secs_f64();
        stop.cancel();
        let util = sampler.await.unwrap_or_default();
        let correct = outcome.results.iter().filter(|r| r.correct).count();
        if correct < outcome.results.len() {
            eprintln!(
                "kforge: {} of {} tasks have no correct kernel on {set}: the kernel does not fit every task",
                outcome.results.len() - correct,
                outcome.results.len()
            );
        }
        let (evals, busy) = evaluation_time(&dir)?;
        let rate = evals as f64 / wall;
        let ratio = rate / *first_rate.get_or_insert(rate);
        let per_device: Vec<String> = set
            .devices()
            .iter()
            .map(|d| {
                let name = d.torch_name();
                let share = busy.get(&name).copied().unwrap_or(0.0) / wall;
                let gpu = match d {
                    crate::eval::Device::Cuda(i) => util
                        .get(i)
                        .filter(|(_, k)| *k > 0)
                        .map_or("n/a".into(), |(sum, k)| format!("{:.0}%", sum / *k as f64)),
                    crate::eval::Device::Cpu => "n/a".into(),
                };
                format!("{name} {:.0}% {gpu}", 100.0 * share)
            })
            .collect();
        println!(
            "{:<10} {:>7} {:>8.1} {:>11.3} {:>6.2}x  {}",
            set.to_string(),
            evals,
            wall,
            rate,
            ratio,
            per_device.join(", ")
        );
    }
    Ok(())
}
