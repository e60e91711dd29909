//! Options several front ends share (the CLI's subcommands, the MCP server's tools), and
//! what they mean.

use anyhow::Result;

use crate::config::EvalConfig;
use crate::eval::devices::{DeviceChoice, DeviceSet, check_visible, no_gpu_note, visible_gpus};
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
