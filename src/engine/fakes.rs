//! Test doubles for the engine's ports, so the pipeline runs in milliseconds without
//! Python or HTTP: the unit tests in `engine/tests.rs` and the golden-session test use
//! them. Production never does.
//!
//! `FakeEvaluator` judges a kernel by markers in its text: `FAKE-FAIL:<category>` fails
//! it with that category, `FAKE-SCORE:<x>` makes it correct with speedup x (GPU-like
//! timing), anything else is correct without timing (CPU-like); `FAKE-FLAG:<flag>` adds
//! that flag to a correct result. `FakeLlm` answers each
//! call with what its script returns.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::ports::{Answer, CallFailure, CallProgress, EvalPort, LlmCall, LlmPort};
use super::runner::{Engine, EngineSetup};
use crate::config::EvalConfig;
use crate::config::pipeline::PipelineConfig;
use crate::eval::{Device, EvalError, EvalProgress, EvalRequest};
use crate::prompts::PromptSet;
use crate::protocol::{Category, Command, Decision, Event, TokenUsage};
use crate::protocol::{EvalResult, Status};
use crate::protocol::{Timing, TimingStats};
use crate::session::state::SessionState;
use crate::session::store::SessionDir;
use crate::task::TaskFile;

/// A fenced answer holding a small kernel file marked with `marker`.
pub fn kernel(marker: &str) -> String {
    format!(
        "Here it is.\n\n```python\n# {marker}\nimport torch\nimport triton\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n```\n"
    )
}

/// A fenced analysis answer.
pub fn analysis(worth: bool) -> String {
    format!(
        "```json\n{{\"worth_optimizing\": \"{}\", \"reason\": \"memory bound\", \"bottleneck\": \"DRAM\", \"optimisation method\": \"vectorize\", \"modification_plan\": \"wider blocks\", \"expected_speedup\": \"1.3x\"}}\n```",
        if worth { "yes" } else { "no" }
    )
}

/// The ReLU task the fakes are run on.
pub fn task() -> TaskFile {
    TaskFile {
        path: "relu.py".into(),
        name: "relu".into(),
        source: "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n\
                 def get_inputs():\n    return [torch.rand(8)]\ndef get_init_inputs():\n    return []\n"
            .into(),
        hash: "fake".into(),
    }
}

/// An engine setup over the fakes, writing into `session`.
pub fn setup(
    session: SessionDir,
    prior: SessionState,
    evaluator: Arc<FakeEvaluator>,
    llm: Arc<FakeLlm>,
    pipeline: PipelineConfig,
    device: Device,
) -> EngineSetup {
    let task = task();
    session
        .write_file("task.py", task.source.as_bytes())
        .expect("task.py");
    EngineSetup {
        session,
        prior,
        task,
        evaluator,
        devices: crate::eval::devices::DeviceSet::one(device),
        eval: EvalConfig::default(),
        pipeline,
        llm,
        prompts: PromptSet::new(None).expect("built-in prompts"),
        warmup: super::warmup_plan::BaselineWarmup::Nothing,
    }
}

/// Plays the person beside a running engine: every event goes to `person`, and the
/// commands it returns go to the engine. Abort the handle when the run is over.
pub fn steer(
    engine: &Arc<Engine>,
    mut person: impl FnMut(&Event) -> Vec<Command> + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    let mut events = engine.subscribe();
    let engine = engine.clone();
    tokio::spawn(async move {
        while let Some(record) = events.recv().await {
            for command in person(&record.event) {
                engine.command(command);
            }
        }
    })
}

/// A person who approves every gate as it opens.
pub fn approve_every_gate(event: &Event) -> Vec<Command> {
    match event {
        Event::GateOpened { gate, .. } => vec![Command::Resolve {
            gate: *gate,
            decision: Decision::Approve,
        }],
        _ => vec![],
    }
}

/// Evaluates by markers in the kernel text; remembers what it evaluated.
#[derive(Default)]
pub struct FakeEvaluator {
    evaluated: Mutex<Vec<String>>,
    /// Every request, in order.
    requests: Mutex<Vec<EvalRequest>>,
    /// When set, every evaluation fails this way (the evaluator itself broke).
    pub broken: Mutex<Option<String>>,
}

impl FakeEvaluator {
    /// The kernel files' text, in the order they were evaluated.
    pub fn evaluated(&self) -> Vec<String> {
        self.evaluated.lock().expect("evaluated").clone()
    }

    /// The task files evaluated against, in order.
    pub fn tasks(&self) -> Vec<std::path::PathBuf> {
        self.requests().into_iter().map(|r| r.task).collect()
    }

    /// Every request, in the order it came.
    pub fn requests(&self) -> Vec<EvalRequest> {
        self.requests.lock().expect("requests").clone()
    }

    pub fn judge(code: &str) -> EvalResult {
        let marker = |name: &str| {
            code.split(name)
                .nth(1)
                .map(|rest| rest.split_whitespace().next().unwrap_or("").to_string())
        };
        let mut result = EvalResult {
            schema: 2,
            ..Default::default()
        };
        if let Some(category) = marker("FAKE-FAIL:") {
            result.status = Status::Failed;
            result.category = Some(Category::parse(&category).unwrap_or(Category::Runtime));
            result.summary = format!("fake {category} failure");
            result.message = format!("Traceback...\nFakeError: {category} in the kernel");
            return result;
        }
        result.status = Status::Correct;
        result.correct = true;
        result.summary = "correct".into();
        result.timing = Some(
            match marker("FAKE-SCORE:").and_then(|s| s.parse::<f64>().ok()) {
                Some(score) => Timing {
                    meaningful: true,
                    score: Some(score),
                    reference: TimingStats {
                        median_ms: 1.0,
                        ..Default::default()
                    },
                    kernel: TimingStats {
                        median_ms: 1.0 / score,
                        ..Default::default()
                    },
                    ..Default::default()
                },
                None => Timing::default(),
            },
        );
        result.flags.extend(marker("FAKE-FLAG:"));
        result
    }
}

impl EvalPort for FakeEvaluator {
    fn prepare(&self, _device: Device) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    fn evaluate(
        &self,
        request: EvalRequest,
        cancel: CancellationToken,
        _progress: Option<mpsc::UnboundedSender<EvalProgress>>,
    ) -> BoxFuture<'_, Result<EvalResult, EvalError>> {
        Box::pin(async move {
            if cancel.is_cancelled() {
                return Err(EvalError::Cancelled);
            }
            if let Some(why) = self.broken.lock().expect("broken").clone() {
                return Err(EvalError::Unavailable(why));
            }
            self.requests
                .lock()
                .expect("requests")
                .push(request.clone());
            let code = std::fs::read_to_string(&request.kernel).unwrap_or_default();
            self.evaluated.lock().expect("evaluated").push(code.clone());
            // `FAKE-HARDCODED:dim=64`: a kernel right only where the task reads `dim = 64`.
            let task = std::fs::read_to_string(&request.task).unwrap_or_default();
            let hardcoded = code
                .split("FAKE-HARDCODED:")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|size| size.split_once('='));
            if let Some((name, value)) = hardcoded
                && !task.contains(&format!("\n{name} = {value}\n"))
            {
                return Ok(FakeEvaluator::judge("FAKE-FAIL:mismatch"));
            }
            Ok(FakeEvaluator::judge(&code))
        })
    }
}

/// What the fake LLM does for one call.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Text(String),
    /// The call fails after the client's retries (a 503 that never ends).
    Failed(String),
    /// The provider refuses the run (a bad key).
    Fatal(String),
    /// The client retried for these causes, then this happened.
    Retried {
        causes: Vec<String>,
        then: Box<Reply>,
    },
}

pub type Script = Box<dyn Fn(&LlmCall) -> Reply + Send + Sync>;

/// Answers by script; remembers every call it got.
pub struct FakeLlm {
    script: Script,
    calls: Mutex<Vec<LlmCall>>,
}

impl FakeLlm {
    pub fn new(script: impl Fn(&LlmCall) -> Reply + Send + Sync + 'static) -> FakeLlm {
        FakeLlm {
            script: Box::new(script),
            calls: Mutex::new(Vec::new()),
        }
    }

    pub fn calls(&self) -> Vec<LlmCall> {
        self.calls.lock().expect("calls").clone()
    }

    /// The last user message of a call.
    pub fn prompt(call: &LlmCall) -> &str {
        call.request
            .messages
            .last()
            .map(|m| m.content.as_str())
            .unwrap_or_default()
    }
}

impl LlmPort for FakeLlm {
    fn label(&self) -> (String, String) {
        ("fake".into(), "fake-1".into())
    }

    fn complete<'a>(
        &'a self,
        call: &'a LlmCall,
        cancel: &'a CancellationToken,
        progress: &'a mut (dyn FnMut(CallProgress) + Send),
    ) -> BoxFuture<'a, Result<Answer, CallFailure>> {
        Box::pin(async move {
            if cancel.is_cancelled() {
                return Err(CallFailure::Cancelled);
            }
            self.calls.lock().expect("calls").push(call.clone());
            let mut reply = (self.script)(call);
            let mut attempt = 1;
            loop {
                match reply {
                    Reply::Retried { causes, then } => {
                        for reason in causes {
                            attempt += 1;
                            progress(CallProgress::Retrying {
                                attempt,
                                delay_s: 0.0,
                                reason,
                            });
                        }
                        reply = *then;
                    }
                    Reply::Text(text) => {
                        progress(CallProgress::Text(text.clone()));
                        return Ok(Answer {
                            text,
                            usage: TokenUsage {
                                input: 1000,
                                output: 200,
                                ..Default::default()
                            },
                            cost_usd: Some(0.01),
                            warning: None,
                        });
                    }
                    Reply::Failed(message) => {
                        return Err(CallFailure::Failed {
                            message,
                            usage: TokenUsage::default(),
                            cost_usd: Some(0.0),
                        });
                    }
                    Reply::Fatal(message) => {
                        return Err(CallFailure::Fatal {
                            message,
                            usage: TokenUsage::default(),
                            cost_usd: Some(0.0),
                        });
                    }
                }
            }
        })
    }
}
