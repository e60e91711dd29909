//! Types spoken with the harness over JSON lines. The evaluation result the harness answers
//! with is `crate::protocol::EvalResult` (docs/eval-result.md), shared with every layer that
//! shows or stores one.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::config::EvalConfig;
use crate::protocol::{CompileSource, SandboxInfo};
pub use crate::protocol::{MathKind, PrecisionPolicy};

/// Where an evaluation runs. Written as torch names it (`cpu`, `cuda:0`), as everywhere
/// else; sessions written before read too (`"Cpu"`, `{"Cuda": 0}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Device {
    /// Triton's interpreter on the CPU: correctness only.
    Cpu,
    /// CUDA device by index.
    Cuda(u32),
}

impl Device {
    /// The device string the harness and torch understand.
    pub fn torch_name(&self) -> String {
        match self {
            Device::Cpu => "cpu".into(),
            Device::Cuda(i) => format!("cuda:{i}"),
        }
    }

    pub fn is_gpu(&self) -> bool {
        matches!(self, Device::Cuda(_))
    }

    /// A device as torch names it (`cpu`, `cuda`, `cuda:1`).
    pub fn parse(name: &str) -> Option<Device> {
        match name.trim().to_ascii_lowercase().as_str() {
            "cpu" => Some(Device::Cpu),
            "cuda" => Some(Device::Cuda(0)),
            other => other
                .strip_prefix("cuda:")
                .and_then(|i| i.parse().ok())
                .map(Device::Cuda),
        }
    }
}

impl Serialize for Device {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.torch_name())
    }
}

impl<'de> Deserialize<'de> for Device {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        enum Old {
            Cuda(u32),
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Name(String),
            Old(Old),
        }
        match Written::deserialize(d)? {
            Written::Name(n) => Device::parse(&n)
                .ok_or_else(|| serde::de::Error::custom(format!("unknown device `{n}`"))),
            Written::Old(Old::Cuda(i)) => Ok(Device::Cuda(i)),
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu (Triton interpreter)"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
        }
    }
}

/// One evaluation job as the harness reads it (`kforge_harness/wire.py`, `Job`): the paths
/// and what this request asks for, and the `[eval]` settings flattened beside them, so that
/// a new `[eval]` key reaches the harness without being copied here.
#[derive(Debug, Clone, Serialize)]
pub struct Job {
    pub task_path: PathBuf,
    pub kernel_path: PathBuf,
    pub device: String,
    pub timing: bool,
    pub baseline_cache_dir: Option<PathBuf>,
    pub profile: bool,
    /// Check the task alone (build, forward, time the reference): no kernel involved.
    pub reference_only: bool,
    /// In a task check with timing, also time the reference with KernelBench's own
    /// protocol (`timing.kernelbench` in the result).
    pub kernelbench_protocol: bool,
    /// With `kernelbench_protocol`: how many times both protocols time the reference, in
    /// alternating order (`timing.rounds`); 1 times each once.
    pub kernelbench_rounds: u32,
    /// Where the compile figure may come from: the cache only, for a one-shot `kforge
    /// eval` that measures it after the verdict (`EvalRequest::compile_source`).
    pub compile_source: CompileSource,
    /// The request's `[eval]` settings as this job applies them (`EvalConfig::for_job`).
    #[serde(flatten)]
    pub settings: EvalConfig,
}

impl Job {
    pub fn new(request: &EvalRequest, baseline_cache_dir: Option<PathBuf>) -> Job {
        let timing = request.timing && request.device.is_gpu();
        let mut settings = request
            .settings
            .for_job(timing, baseline_cache_dir.is_some());
        settings.start_ahead &= request.session_candidate;
        Job {
            task_path: absolute(&request.task),
            kernel_path: absolute(&request.kernel),
            device: request.device.torch_name(),
            timing,
            settings,
            baseline_cache_dir,
            profile: request.profile,
            reference_only: request.reference_only,
            kernelbench_protocol: request.kernelbench_protocol,
            kernelbench_rounds: request.kernelbench_rounds.max(1),
            compile_source: request.compile_source,
        }
    }
}

fn absolute(path: &std::path::Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// What the engine or the CLI asks the evaluator for.
#[derive(Debug, Clone)]
pub struct EvalRequest {
    pub task: PathBuf,
    pub kernel: PathBuf,
    pub device: Device,
    pub settings: EvalConfig,
    /// Measure timing (GPU only; ignored on the CPU).
    pub timing: bool,
    /// Run Nsight Compute on a correct kernel (GPU only).
    pub profile: bool,
    /// Check the task alone; `kernel` is ignored.
    pub reference_only: bool,
    /// With `reference_only` on a GPU: time the reference with KernelBench's protocol too.
    pub kernelbench_protocol: bool,
    /// With `kernelbench_protocol`: rounds of both protocols in alternating order.
    pub kernelbench_rounds: u32,
    /// One of a session's candidates (or the task check right before its first), so
    /// candidates like it follow: with `[eval] start_ahead`, the harness starts the next one's
    /// judge after it (`Job`'s `start_ahead`).
    pub session_candidate: bool,
    /// Where the compile figure may come from (`CacheOrMeasure` unless a one-shot `kforge
    /// eval` defers it: `launch::evaluate::defers_compile`).
    pub compile_source: CompileSource,
}

impl EvalRequest {
    pub fn new(
        task: impl Into<PathBuf>,
        kernel: impl Into<PathBuf>,
        device: Device,
        settings: EvalConfig,
    ) -> Self {
        EvalRequest {
            task: task.into(),
            kernel: kernel.into(),
            device,
            settings,
            timing: true,
            profile: false,
            reference_only: false,
            kernelbench_protocol: false,
            kernelbench_rounds: 1,
            session_candidate: false,
            compile_source: CompileSource::CacheOrMeasure,
        }
    }

    /// A task check: the task's Model built, run, its memory planned and (GPU) timed; no
    /// kernel (the task file stands in where a kernel path is expected).
    pub fn task_check(task: impl Into<PathBuf>, device: Device, settings: EvalConfig) -> Self {
        let task = task.into();
        EvalRequest {
            reference_only: true,
            ..EvalRequest::new(task.clone(), task, device, settings)
        }
    }
}

/// Versions and capabilities the server reports when it starts.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Hello {
    pub ok: bool,
    pub protocol: u32,
    pub pid: Option<u32>,
    pub executable: Option<String>,
    pub import_s: Option<f64>,
    pub python: Option<String>,
    pub torch: Option<String>,
    pub triton: Option<String>,
    pub fork: bool,
    pub error: Option<String>,
    pub sandbox: Option<SandboxInfo>,
    /// Package directories (torch's, triton's) with no byte code on disk: every process
    /// kforge starts compiles their sources at import (`kforge doctor` says how to fix it).
    pub no_bytecode: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Category;

    #[test]
    fn devices_are_written_as_torch_names_and_old_sessions_still_read() {
        assert_eq!(serde_json::to_string(&Device::Cpu).unwrap(), "\"cpu\"");
        assert_eq!(
            serde_json::to_string(&Device::Cuda(1)).unwrap(),
            "\"cuda:1\""
        );
        for (written, device) in [
            ("\"cpu\"", Device::Cpu),
            ("\"cuda:1\"", Device::Cuda(1)),
            ("\"Cpu\"", Device::Cpu),
            ("{\"Cuda\":2}", Device::Cuda(2)),
        ] {
            assert_eq!(
                serde_json::from_str::<Device>(written).unwrap(),
                device,
                "{written}"
            );
        }
        assert!(serde_json::from_str::<Device>("\"tpu\"").is_err());
    }
    #[test]
    fn categories_round_trip_their_wire_names() {
        for c in [
            Category::StaticCheck,
            Category::OutOfResources,
            Category::CudaError,
            Category::Task,
        ] {
            assert_eq!(Category::parse(c.as_str()), Some(c));
            assert_eq!(
                serde_json::to_value(c).unwrap(),
                serde_json::json!(c.as_str())
            );
        }
        assert_eq!(Category::parse("nope"), None);
    }

    /// The harness's `protocol.CATEGORIES` and this enum list the same categories in the
    /// same order: a category added on one side only would reach kforge as a parse error.
    #[test]
    fn failure_categories_agree_with_the_harness() {
        let source = crate::eval::harness::PACKAGE
            .iter()
            .find(|(name, _)| *name == "protocol.py")
            .map(|(_, source)| *source)
            .expect("protocol.py is embedded");
        let start = source.find("CATEGORIES = (").expect("CATEGORIES tuple");
        let body = &source[start..source[start..].find("\n)").expect("tuple end") + start];
        let python: Vec<&str> = body.split('"').skip(1).step_by(2).collect();
        let rust: Vec<&str> = Category::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(python, rust);
        for c in Category::ALL {
            assert_eq!(Category::parse(c.as_str()), Some(c));
        }
    }
    /// The harness reads `kernelbench_protocol` from the job JSON; it is off unless asked.
    #[test]
    fn kernelbench_protocol_reaches_the_job_json() {
        let mut req = EvalRequest::new("t.py", "t.py", Device::Cuda(0), EvalConfig::default());
        let off = serde_json::to_value(Job::new(&req, None)).unwrap();
        assert_eq!(off["kernelbench_protocol"], false);
        req.reference_only = true;
        req.kernelbench_protocol = true;
        let on = serde_json::to_value(Job::new(&req, None)).unwrap();
        assert_eq!(on["kernelbench_protocol"], true);
        assert_eq!(on["reference_only"], true);
        assert_eq!(on["kernelbench_rounds"], 1);
        req.kernelbench_rounds = 0;
        let at_least_one = serde_json::to_value(Job::new(&req, None)).unwrap();
        assert_eq!(
            at_least_one["kernelbench_rounds"], 1,
            "a round count of 0 times once"
        );
    }
    /// The harness reads `job["timing_precision"]`; the old cross-check's keys are gone.
    #[test]
    fn timing_precision_reaches_the_job_json() {
        let settings = EvalConfig {
            timing_precision: 0.02,
            between_evaluations: 0.03,
            host_time_ratio: Some(1.1),
            ..Default::default()
        };
        let req = EvalRequest::new("t.py", "k.py", Device::Cuda(0), settings);
        let job = serde_json::to_value(Job::new(&req, None)).unwrap();
        assert_eq!(job["timing_precision"], 0.02);
        assert_eq!(job["between_evaluations"], 0.03);
        assert_eq!(job["timing_trials"], 300);
        assert_eq!(job["min_timing_trials"], 20);
        assert!(job.get("host_time_ratio").is_none(), "{job}");
        assert!(job.get("host_slack_ms").is_none(), "{job}");
    }

    /// The judge reads `compile_source` to take a cached compile figure only.
    #[test]
    fn the_compile_source_reaches_the_job_json() {
        let mut req = EvalRequest::new("t.py", "k.py", Device::Cuda(0), EvalConfig::default());
        let job = serde_json::to_value(Job::new(&req, None)).unwrap();
        assert_eq!(job["compile_source"], "cache_or_measure");
        req.compile_source = CompileSource::CacheOnly;
        let job = serde_json::to_value(Job::new(&req, None)).unwrap();
        assert_eq!(job["compile_source"], "cache_only");
        assert_eq!(job["compile_baseline"], true, "the setting itself stays on");
    }

    #[test]
    fn cpu_requests_never_ask_for_timing() {
        let req = EvalRequest::new("t.py", "k.py", Device::Cpu, EvalConfig::default());
        let job = Job::new(&req, None);
        assert!(!job.timing);
        assert!(!job.settings.baseline_cache);
        assert!(job.task_path.is_absolute());
        let gpu = Job::new(
            &EvalRequest::new("t.py", "k.py", Device::Cuda(1), EvalConfig::default()),
            None,
        );
        assert!(gpu.timing);
        assert_eq!(gpu.device, "cuda:1");
    }

    #[test]
    fn only_a_sessions_requests_ask_for_the_next_judge_ahead_and_only_where_the_config_allows() {
        let mut req = EvalRequest::new("t.py", "k.py", Device::Cuda(0), EvalConfig::default());
        assert!(!Job::new(&req, None).settings.start_ahead, "a one-off eval");
        req.session_candidate = true;
        assert!(Job::new(&req, None).settings.start_ahead);
        req.settings.start_ahead = false;
        assert!(
            !Job::new(&req, None).settings.start_ahead,
            "[eval] start_ahead = false"
        );
    }
}
