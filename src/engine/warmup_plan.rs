//! What of a task's baselines a session's run measures as it starts, rather than its task
//! check (issue 38; the run's side is `warmup.rs`): on a GPU, the torch.compile baseline.

use crate::config::EvalConfig;
use crate::eval::Device;

/// What of the task's baselines the run measures as it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BaselineWarmup {
    /// Nothing: the task check measured every baseline (or there is none: the CPU, the
    /// compile baseline off, no cache to keep it in).
    Nothing,
    /// The reference under torch.compile, measured on `device` by a task check of its own.
    Compile { device: Device },
}

/// The settings a session's task check runs with, and what the run then measures itself:
/// on a GPU, with the compile baseline asked for and a cache to keep it in, the check leaves
/// torch.compile out.
pub fn plan(settings: &EvalConfig, device: Device) -> (EvalConfig, BaselineWarmup) {
    if device == Device::Cpu || !settings.compile_baseline || !settings.baseline_cache {
        return (settings.clone(), BaselineWarmup::Nothing);
    }
    let check = EvalConfig {
        compile_baseline: false,
        ..settings.clone()
    };
    (check, BaselineWarmup::Compile { device })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_task_check_leaves_torch_compile_to_the_run_on_a_gpu_only() {
        let settings = EvalConfig::default();
        assert!(settings.compile_baseline && settings.baseline_cache);
        let (check, warmup) = plan(&settings, Device::Cuda(1));
        assert!(!check.compile_baseline);
        assert_eq!(
            warmup,
            BaselineWarmup::Compile {
                device: Device::Cuda(1)
            }
        );
        let (check, warmup) = plan(&settings, Device::Cpu);
        assert!(
            check.compile_baseline,
            "the CPU times nothing: left as it is"
        );
        assert_eq!(warmup, BaselineWarmup::Nothing);
        for off in [
            EvalConfig {
                compile_baseline: false,
                ..EvalConfig::default()
            },
            // Without a cache the run's figure would not reach the evaluations.
            EvalConfig {
                baseline_cache: false,
                ..EvalConfig::default()
            },
        ] {
            let (check, warmup) = plan(&off, Device::Cuda(0));
            assert_eq!(check.compile_baseline, off.compile_baseline);
            assert_eq!(warmup, BaselineWarmup::Nothing);
        }
    }
}
