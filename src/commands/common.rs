//! Options several subcommands share, and what they mean.

use anyhow::{Result, bail};

use crate::config::EvalConfig;
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
                let info = evaluator.device_info().await?;
                let count = info
                    .get("devices")
                    .and_then(|d| d.as_array())
                    .map_or(0, |d| d.len());
                if n as usize >= count {
                    bail!(
                        "cuda:{n} was requested but {count} CUDA device(s) are visible (see `kforge doctor`)"
                    );
                }
                Device::Cuda(n)
            }
            (false, None) => {
                let device = evaluator.default_device().await?;
                if device == Device::Cpu {
                    eprintln!(
                        "kforge: no CUDA device found: evaluating on the CPU through Triton's interpreter (correctness only)"
                    );
                }
                device
            }
        })
    }
}

/// Correctness options shared by `eval` and `run`.
#[derive(clap::Args, Debug, Default, Clone)]
pub struct CheckArgs {
    /// Absolute tolerance of the output comparison (default 1e-2, `[eval] atol`; with the
    /// default `scaled` rule it shrinks to 2% of an output's own magnitude where smaller).
    #[arg(long)]
    pub atol: Option<f64>,
    /// Relative tolerance of the output comparison (default 1e-2, `[eval] rtol`).
    #[arg(long)]
    pub rtol: Option<f64>,
    /// Correctness trials with fresh seeded inputs.
    #[arg(long)]
    pub trials: Option<u32>,
    /// Seconds before the evaluation process is killed.
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
}

impl CheckArgs {
    pub fn apply(&self, eval: &mut EvalConfig) {
        if let Some(v) = self.atol {
            eval.atol = v;
        }
        if let Some(v) = self.rtol {
            eval.rtol = v;
        }
        if let Some(v) = self.trials {
            eval.trials = v;
        }
        if let Some(v) = self.timeout {
            eval.timeout_s = v;
        }
    }
}
