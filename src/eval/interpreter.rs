//! What an evaluation on the CPU (Triton's interpreter) does beyond the harness's job
//! (issue 38): the task's sizes shrunk for the interpreter before the job is written
//! (`crate::shapes::interpreter`), recorded in the result, and a timeout that names its
//! cause and its fix.

use std::path::Path;

use tempfile::TempDir;

use super::protocol::{Device, EvalRequest};
use crate::config::EvalConfig;
use crate::protocol::shapes::{InterpreterSizePolicy, InterpreterSizes};
use crate::protocol::{Category, EvalResult};
use crate::shapes::interpreter::{BUDGET, shrink};

/// A request as the CPU runs it: the task file it points to may be a shrunk copy, kept in
/// `_dir` until the evaluation ends.
pub struct Prepared {
    pub request: EvalRequest,
    pub sizes: Option<InterpreterSizes>,
    _dir: Option<TempDir>,
}

/// Whether an evaluation on `device` under `settings` runs a task at the interpreter's sizes
/// (where the task has sizes to shrink): on the CPU, unless `interpreter_sizes = "task"`.
pub fn at_interpreter_sizes(device: Device, settings: &EvalConfig) -> bool {
    device == Device::Cpu && settings.interpreter_sizes != Some(InterpreterSizePolicy::Task)
}

/// `request` with its task's sizes shrunk where it runs on the CPU, evaluates a kernel (a
/// task check keeps the task's sizes: it runs no Triton code) and the settings allow it. A
/// task that cannot be read or written is left as it is: the harness then says what is
/// wrong with it.
pub fn prepare(request: EvalRequest) -> Prepared {
    let keep = |request| Prepared {
        request,
        sizes: None,
        _dir: None,
    };
    if request.reference_only || !at_interpreter_sizes(request.device, &request.settings) {
        return keep(request);
    }
    let Ok(source) = std::fs::read_to_string(&request.task) else {
        return keep(request);
    };
    let Some(shrunk) = shrink(&source, BUDGET) else {
        return keep(request);
    };
    match write_task(&request.task, &shrunk.source) {
        Ok((dir, path)) => {
            let mut request = request;
            request.task = path;
            Prepared {
                request,
                sizes: Some(shrunk.sizes),
                _dir: Some(dir),
            }
        }
        Err(e) => {
            tracing::warn!("cannot write the task with the interpreter's sizes: {e}");
            keep(request)
        }
    }
}

/// The shrunk task in a fresh directory, under the task file's own name.
fn write_task(task: &Path, source: &str) -> std::io::Result<(TempDir, std::path::PathBuf)> {
    let dir = tempfile::Builder::new()
        .prefix("kforge-interpreter-sizes-")
        .tempdir()?;
    let name = task
        .file_name()
        .map_or_else(|| "task.py".into(), |n| n.to_owned());
    let path = dir.path().join(name);
    std::fs::write(&path, source)?;
    Ok((dir, path))
}

/// The result of a CPU evaluation as kforge reports it: the sizes it ran at recorded, and a
/// timeout's message naming the interpreter's speed as the cause and the ways out.
pub fn finish(result: &mut EvalResult, device: Device, sizes: Option<InterpreterSizes>) {
    if device != Device::Cpu {
        return;
    }
    if let Some(sizes) = &sizes {
        result.notes.push(sizes.describe());
    }
    if result.category == Some(Category::Timeout) {
        let cause = timeout_cause(sizes.as_ref());
        result.summary = format!("{} ({cause})", result.summary.trim_end());
        result.message = format!("{}\n{}", result.message.trim_end(), cause);
    }
    result.interpreter_sizes = sizes;
}

/// Why a CPU evaluation ran out of time, and what to do about it.
pub fn timeout_cause(sizes: Option<&InterpreterSizes>) -> String {
    let at = match sizes {
        Some(s) => format!("even at the shrunk sizes {}", s.changes_text()),
        None => "at the task's sizes".to_string(),
    };
    format!(
        "on the CPU, Triton's interpreter runs every program of the kernel one after another \
         in Python, too slow {at}: evaluate on a GPU, give the task smaller size constants, \
         or raise `[eval] timeout_s`{}",
        if sizes.is_none() {
            " (with `[eval] interpreter_sizes = \"shrink\"`, the default, kforge shrinks the \
             module-level size constants it can vary)"
        } else {
            ""
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::EvalConfig;

    fn request(task: &Path, device: Device) -> EvalRequest {
        EvalRequest::new(task, "kernel.py", device, EvalConfig::default())
    }

    fn task_file(dir: &Path, source: &str) -> std::path::PathBuf {
        let path = dir.join("relu.py");
        std::fs::write(&path, source).unwrap();
        path
    }

    const LARGE: &str = "batch_size = 4096\ndim = 5120\n";

    #[test]
    fn a_cpu_evaluation_of_a_large_task_runs_a_shrunk_copy_and_the_task_stays() {
        let dir = tempfile::tempdir().unwrap();
        let task = task_file(dir.path(), LARGE);
        let prepared = prepare(request(&task, Device::Cpu));
        let sizes = prepared.sizes.clone().expect("shrunk");
        assert_ne!(prepared.request.task, task);
        assert_eq!(prepared.request.task.file_name(), task.file_name());
        let written = std::fs::read_to_string(&prepared.request.task).unwrap();
        assert!(written.contains(&format!("dim = {}\n", sizes.evaluated["dim"])));
        assert_eq!(std::fs::read_to_string(&task).unwrap(), LARGE);
        let copy = prepared.request.task.clone();
        drop(prepared);
        assert!(!copy.exists(), "the copy lives as long as the evaluation");
    }

    #[test]
    fn a_gpu_a_task_check_and_the_task_policy_keep_the_task_sizes() {
        let dir = tempfile::tempdir().unwrap();
        let task = task_file(dir.path(), LARGE);
        let on_gpu = prepare(request(&task, Device::Cuda(0)));
        assert!(on_gpu.sizes.is_none() && on_gpu.request.task == task);
        let check = prepare(EvalRequest::task_check(
            &task,
            Device::Cpu,
            EvalConfig::default(),
        ));
        assert!(check.sizes.is_none() && check.request.task == task);
        let mut kept = request(&task, Device::Cpu);
        kept.settings.interpreter_sizes = Some(InterpreterSizePolicy::Task);
        let kept = prepare(kept);
        assert!(kept.sizes.is_none() && kept.request.task == task);
    }

    #[test]
    fn the_policy_is_an_eval_setting_that_never_reaches_the_harness() {
        let config: crate::config::Config =
            toml::from_str("[eval]\ninterpreter_sizes = \"task\"\n").unwrap();
        assert_eq!(
            config.eval.interpreter_sizes,
            Some(InterpreterSizePolicy::Task)
        );
        let request = EvalRequest::new("t.py", "k.py", Device::Cpu, config.eval);
        let job = serde_json::to_value(super::super::protocol::Job::new(&request, None)).unwrap();
        assert!(job.get("interpreter_sizes").is_none(), "{job}");
        assert!(
            toml::from_str::<crate::config::Config>("[eval]\ninterpreter_sizes = \"tiny\"\n")
                .is_err()
        );
    }

    #[test]
    fn the_result_records_the_sizes_and_a_timeout_names_its_cause_and_fix() {
        let sizes = InterpreterSizes {
            task: [("dim".to_string(), 5120)].into(),
            evaluated: [("dim".to_string(), 1088)].into(),
            budget: BUDGET,
        };
        let mut result = EvalResult {
            category: Some(Category::Timeout),
            summary: "timed out after 300s (during correctness)".into(),
            ..EvalResult::default()
        };
        finish(&mut result, Device::Cpu, Some(sizes.clone()));
        assert_eq!(result.interpreter_sizes, Some(sizes));
        assert!(
            result.summary.contains("Triton's interpreter"),
            "{}",
            result.summary
        );
        assert!(
            result.summary.contains("dim 5120 -> 1088"),
            "{}",
            result.summary
        );
        assert!(result.message.contains("GPU"), "{}", result.message);
        assert!(result.notes.iter().any(|n| n.contains("--task-sizes")));

        let mut full = EvalResult {
            category: Some(Category::Timeout),
            summary: "timed out after 300s (during correctness)".into(),
            ..EvalResult::default()
        };
        finish(&mut full, Device::Cpu, None);
        assert!(
            full.summary.contains("at the task's sizes"),
            "{}",
            full.summary
        );
        assert!(
            full.summary.contains("interpreter_sizes"),
            "{}",
            full.summary
        );
        assert!(full.interpreter_sizes.is_none());

        let mut gpu = EvalResult {
            category: Some(Category::Timeout),
            summary: "timed out".into(),
            ..EvalResult::default()
        };
        finish(&mut gpu, Device::Cuda(0), None);
        assert_eq!(gpu.summary, "timed out");
    }
}
