//! Options several subcommands share, and what they mean.

use anyhow::{Result, bail};

use crate::config::EvalConfig;
use crate::eval::devices::DeviceSet;
use crate::eval::{Device, Evaluator};

/// Which device evaluates kernels.
#[derive(clap::Args, Debug, Default, Clone)]
pub struct DeviceArgs {
    /// CUDA device index (default: the first GPU, or the CPU when there is none).
    #[arg(long, value_name = "N", conflicts_with = "cpu")]
    pub device: Option<u32>,
    /// Run on the CPU through Triton's interpreter: correctness only.
    #[arg(long)]
    pub cpu: bool,
}

/// How many CUDA devices this process sees (CUDA_VISIBLE_DEVICES applies).
async fn visible_gpus(evaluator: &Evaluator) -> Result<u32> {
    let info = evaluator.device_info().await?;
    if let Some(error) = info.get("error").and_then(|e| e.as_str()) {
        bail!("cannot query CUDA devices: {error}");
    }
    Ok(info
        .get("devices")
        .and_then(|d| d.as_array())
        .map_or(0, |d| d.len()) as u32)
}

fn check_visible(n: u32, count: u32) -> Result<()> {
    if n >= count {
        bail!(
            "cuda:{n} was requested but {count} CUDA device(s) are visible (see `kforge doctor`)"
        );
    }
    Ok(())
}

fn no_gpu_note() {
    eprintln!(
        "kforge: no CUDA device found: evaluating on the CPU through Triton's interpreter (correctness only)"
    );
}

impl DeviceArgs {
    /// The device asked for, checked against the visible GPUs; without a choice the first
    /// GPU, else the CPU (said on stderr, since timing is then not meaningful).
    pub async fn pick(&self, evaluator: &Evaluator) -> Result<Device> {
        Ok(match (self.cpu, self.device) {
            (true, _) => Device::Cpu,
            (false, Some(n)) => {
                check_visible(n, visible_gpus(evaluator).await?)?;
                Device::Cuda(n)
            }
            (false, None) => {
                let device = evaluator.default_device().await?;
                if device == Device::Cpu {
                    no_gpu_note();
                }
                device
            }
        })
    }
}

/// Which devices a session or a batch evaluates on.
#[derive(clap::Args, Debug, Default, Clone)]
pub struct DeviceSetArgs {
    /// Evaluate on this CUDA device only.
    #[arg(long, value_name = "N", conflicts_with_all = ["cpu", "devices"])]
    pub device: Option<u32>,
    /// Spread evaluations over these CUDA devices, e.g. `0,1` (default: every visible GPU;
    /// never two timed runs on one GPU at once).
    #[arg(long, value_name = "LIST", conflicts_with = "cpu")]
    pub devices: Option<String>,
    /// Run on the CPU through Triton's interpreter: correctness only.
    #[arg(long)]
    pub cpu: bool,
}

/// What `DeviceSetArgs` asked for, before the visible GPUs are known (a batch keeps this,
/// so that a Slurm job resolves it on the node it lands on).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceChoice {
    /// Every GPU visible to the process, else the CPU.
    AllVisible,
    Cpu,
    Listed(DeviceSet),
}

impl DeviceSetArgs {
    pub fn choice(&self) -> Result<DeviceChoice> {
        Ok(match (self.cpu, self.device, &self.devices) {
            (true, _, _) => DeviceChoice::Cpu,
            (false, Some(n), _) => DeviceChoice::Listed(DeviceSet::one(Device::Cuda(n))),
            (false, None, Some(list)) => DeviceChoice::Listed(DeviceSet::parse_list(list)?),
            (false, None, None) => DeviceChoice::AllVisible,
        })
    }
}

impl DeviceChoice {
    /// The devices, checked against the GPUs visible now; with no GPU at all the CPU (said
    /// on stderr, since timing is then not meaningful).
    pub async fn resolve(&self, evaluator: &Evaluator) -> Result<DeviceSet> {
        Ok(match self {
            DeviceChoice::Cpu => DeviceSet::one(Device::Cpu),
            DeviceChoice::Listed(set) => {
                if set.is_gpu() {
                    let count = visible_gpus(evaluator).await?;
                    for d in set.devices() {
                        if let Device::Cuda(n) = d {
                            check_visible(*n, count)?;
                        }
                    }
                }
                set.clone()
            }
            DeviceChoice::AllVisible => {
                let count = visible_gpus(evaluator).await?;
                if count == 0 {
                    no_gpu_note();
                    DeviceSet::one(Device::Cpu)
                } else {
                    DeviceSet::new((0..count).map(Device::Cuda).collect())?
                }
            }
        })
    }
}

/// Correctness options shared by `eval` and `run`.
#[derive(clap::Args, Debug, Default, Clone)]
pub struct CheckArgs {
    /// Absolute tolerance of the output comparison for every dtype (`[eval] atol`; default:
    /// each output's dtype's, 1e-4 for float32 and 1e-2 for float16/bfloat16; it shrinks to
    /// 2% of an output's own magnitude where smaller, except under `tolerance = "kernelbench"`).
    #[arg(long)]
    pub atol: Option<f64>,
    /// Relative tolerance of the output comparison for every dtype (`[eval] rtol`; default:
    /// the dtype's).
    #[arg(long)]
    pub rtol: Option<f64>,
    /// Precision policy (`[eval] precision`): `strict` (the task's dtype, TF32 off on both
    /// sides), `tf32` (TF32 allowed, the reference in TF32 too), `pytorch` (the reference
    /// under PyTorch's defaults, as KernelBench).
    #[arg(long, value_parser = parse_precision)]
    pub precision: Option<crate::protocol::PrecisionPolicy>,
    /// Correctness trials with fresh seeded inputs.
    #[arg(long)]
    pub trials: Option<u32>,
    /// Seconds before the evaluation process is killed.
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
}

/// A precision policy by name, or why not (the `--precision` parser, and the MCP tools').
pub fn parse_precision(s: &str) -> Result<crate::protocol::PrecisionPolicy, String> {
    crate::protocol::PrecisionPolicy::parse(s)
        .ok_or_else(|| format!("unknown precision policy `{s}` (strict, tf32 or pytorch)"))
}

impl CheckArgs {
    pub fn apply(&self, eval: &mut EvalConfig) {
        if let Some(v) = self.atol {
            eval.atol = Some(v);
        }
        if let Some(v) = self.rtol {
            eval.rtol = Some(v);
        }
        if let Some(v) = self.precision {
            eval.precision = v;
        }
        if let Some(v) = self.trials {
            eval.trials = v;
        }
        if let Some(v) = self.timeout {
            eval.timeout_s = v;
        }
    }
}
