//! The prompt lint (issue 36): every call kind's prompt, as the engine writes it for the
//! golden sessions' tasks, checked for what a model must and must not be told. Each golden
//! session's task is run again through the pipeline on the fakes (three seeds, a failing seed
//! whose error is the golden session's own recorded traceback, analysis, optimization, three
//! stages one of which fails, a repair the person asks for), then every `llm/<call>.prompt.md`
//! and `.system.md` is read back and linted:
//!
//! - no path of the machine (home, Python environment, temp dirs, the harness's cache);
//! - no two seeds with the same text, each naming its own direction;
//! - the tolerance (the session's precision rule) and the sizes rule stated in every prompt
//!   that asks for code, and in the stage prompts "within the task's tolerance" with it;
//! - the stage prompts carrying the analysis, and after the first the earlier stages;
//! - a repair showing at most three frames, the kernel's line among them;
//! - one common prefix (rules, answer format, task) for every prompt that asks for code;
//! - on the CPU, "nothing is timed" and no CUDA events.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use kforge::config::pipeline::PipelineConfig;
use kforge::engine::fakes::{self, FakeEvaluator, FakeLlm, Reply};
use kforge::engine::ports::{EvalPort, LlmCall};
use kforge::engine::runner::Engine;
use kforge::eval::{Device, EvalError, EvalProgress, EvalRequest};
use kforge::prompts::PromptContext;
use kforge::prompts::sizes::size_rule;
use kforge::protocol::{CallKind, Command, EvalResult, Event, RunEnd};
use kforge::pysource::traceback::has_host_path;
use kforge::session::state::SessionState;
use kforge::session::store::SessionDir;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const GOLDEN: &[&str] = &[
    "tests/fixtures/sessions/v1_review_budget",
    "tests/fixtures/sessions/softmax",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The golden session's recorded failure of `category` (its real message, host paths and
/// all), if it has one.
fn recorded_failure(golden: &Path, category: &str) -> Option<String> {
    let dir = std::fs::read_dir(golden.join("eval")).ok()?;
    let mut files: Vec<PathBuf> = dir.flatten().map(|e| e.path()).collect();
    files.sort();
    files.into_iter().find_map(|f| {
        let result: EvalResult = serde_json::from_str(&std::fs::read_to_string(f).ok()?).ok()?;
        (result.category.map(|c| c.as_str()) == Some(category)
            && result.message.contains("Traceback"))
        .then_some(result.message)
    })
}

/// The fakes' verdicts, with each failure's message replaced by a real traceback (the
/// golden session's when it has one, else a captured one): what a prompt must clean.
struct RealMessages {
    inner: FakeEvaluator,
    traceback: String,
}

impl EvalPort for RealMessages {
    fn prepare(&self, device: Device) -> BoxFuture<'_, ()> {
        self.inner.prepare(device)
    }

    fn evaluate(
        &self,
        request: EvalRequest,
        cancel: CancellationToken,
        progress: Option<mpsc::UnboundedSender<EvalProgress>>,
    ) -> BoxFuture<'_, Result<EvalResult, EvalError>> {
        Box::pin(async move {
            let mut result = self.inner.evaluate(request, cancel, progress).await?;
            if !result.correct {
                result.message = self.traceback.clone();
                result.summary = format!(
                    "Triton compile error: {}",
                    self.traceback.lines().last().unwrap_or_default()
                );
            }
            Ok(result)
        })
    }
}

/// Every call kind: seed 1 fails to compile and is repaired, seeds 2 and 3 are correct, the
/// analyses say yes, the second stage fails (its repair fails too), the rest are correct.
fn script(call: &LlmCall) -> Reply {
    let code = |marker: &str| {
        Reply::Text(format!(
            "I change the tiling of the rows.\n\n```python\n# {marker}\nimport torch\nimport triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x_ptr, n, BLOCK: tl.constexpr):\n    pid = tl.program_id(0)\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        k[(1,)](x, x.numel(), BLOCK=128)\n        return x\n```\n"
        ))
    };
    match call.kind {
        CallKind::Seed if call.key == "seed1" => code("FAKE-FAIL:compile"),
        CallKind::Seed => code(&call.key),
        CallKind::Repair if call.key.starts_with("stage/") => code("FAKE-FAIL:compile again"),
        CallKind::Repair => code("repaired"),
        CallKind::Analysis => Reply::Text(fakes::analysis(true)),
        CallKind::Optimize => code("optimized"),
        CallKind::Stage if call.key == "stage/block_tiling" => code("FAKE-FAIL:compile stage"),
        CallKind::Stage => code(&call.key),
        CallKind::Instructed => code("instructed"),
    }
}

struct Linted {
    /// (call key, kind, system, user) of every call, in call order.
    calls: Vec<(String, CallKind, String, String)>,
    task: String,
    precision: String,
}

async fn run_golden(golden: &Path) -> Linted {
    let tmp = tempfile::tempdir().unwrap();
    let session = SessionDir::create(tmp.path(), "lint", "fake", "fake-1").unwrap();
    let task = kforge::task::TaskFile::load(&golden.join("task.py")).unwrap();
    let description: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(golden.join("session.json")).unwrap())
            .unwrap();
    let device: Device =
        serde_json::from_value(description["device"].clone()).unwrap_or(Device::Cpu);
    let traceback = recorded_failure(golden, "compile").unwrap_or_else(|| {
        std::fs::read_to_string(root().join("tests/fixtures/tracebacks/arange.txt")).unwrap()
    });
    assert!(
        has_host_path(&traceback),
        "the failure the prompts must clean"
    );
    let eval = Arc::new(RealMessages {
        inner: FakeEvaluator::default(),
        traceback,
    });
    let llm = Arc::new(FakeLlm::new(script));
    let pipeline = PipelineConfig {
        seeds: 3,
        reask_delay_s: 0.0,
        speed_calls_on_cpu: true,
        ..PipelineConfig::default()
    };
    let mut setup = fakes::setup(
        session.clone(),
        SessionState::default(),
        Arc::new(FakeEvaluator::default()),
        llm.clone(),
        pipeline,
        device,
    );
    setup.evaluator = eval;
    setup.task = task.clone();
    session
        .write_file("task.py", task.source.as_bytes())
        .unwrap();
    // The rule as the engine states it (no task check in this session: the rule's words
    // without the task's figures).
    let precision = PromptContext::for_task("", "")
        .with_precision(setup.eval.precision, setup.eval.atol, setup.eval.rtol)
        .with_tolerance(setup.eval.tolerance, None)
        .precision;
    let engine = Arc::new(Engine::new(setup).unwrap());
    // Once the first stage is done, the person asks for a repair of the first failing
    // kernel, with an instruction (later, and its kernel would be the earliest correct one:
    // the stages' base, whose lineage has no analysis).
    let mut failing = None;
    let mut asked = false;
    let steering = fakes::steer(&engine, move |event| {
        let mut commands = fakes::approve_every_gate(event);
        match event {
            Event::EvalFinished {
                candidate, summary, ..
            } if !summary.correct && failing.is_none() => failing = Some(*candidate),
            Event::StageFinished { .. } if !asked => {
                asked = true;
                commands.extend(failing.map(|candidate| Command::Repair {
                    candidate,
                    instruction: "mask the last tile".into(),
                }));
            }
            _ => {}
        }
        commands
    });
    let outcome = engine.run().await;
    assert_eq!(outcome.end, RunEnd::Complete, "{}", outcome.reason);
    for _ in 0..200 {
        if llm.calls().iter().any(|c| c.kind == CallKind::Instructed) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    engine.stop_actions();
    steering.abort();
    let state = SessionState::from_records(&session.read_events().unwrap().records);
    let calls = state
        .calls
        .values()
        .map(|c| {
            let user = session.read_file(&c.prompt_file).unwrap();
            let system = session
                .read_file(&format!("llm/{}.system.md", c.id))
                .unwrap();
            (c.key.clone(), c.kind, system, user)
        })
        .collect();
    Linted {
        calls,
        task: task.source,
        precision,
    }
}

/// What is wrong with a session's prompts, one line each (nothing: they pass).
fn lint(golden: &str, linted: &Linted) -> Vec<String> {
    let mut problems = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            problems.push(what);
        }
    };
    let kinds: std::collections::BTreeSet<CallKind> =
        linted.calls.iter().map(|(_, k, _, _)| *k).collect();
    let every = [
        CallKind::Seed,
        CallKind::Repair,
        CallKind::Analysis,
        CallKind::Optimize,
        CallKind::Stage,
        CallKind::Instructed,
    ];
    check(
        every.iter().all(|k| kinds.contains(k)),
        format!("{golden}: not every call kind was made: {kinds:?}"),
    );
    let sizes = size_rule(&linted.task);
    for (key, kind, system, user) in &linted.calls {
        let both = format!("{system}\n{user}");
        check(
            !has_host_path(&both),
            format!("{golden} {key}: a host path"),
        );
        for leak in [
            "/root",
            "/home/",
            "/tmp/",
            "/dev/shm",
            ".cache/kforge",
            "site-packages",
        ] {
            check(!both.contains(leak), format!("{golden} {key}: {leak}"));
        }
        // The CPU: nothing is timed, no word of CUDA events.
        check(
            system.contains("nothing is timed") && !system.contains("CUDA events"),
            format!("{golden} {key}: the system prompt talks of timing"),
        );
        if *kind != CallKind::Analysis {
            check(
                user.contains(&linted.precision),
                format!("{golden} {key}: no tolerance"),
            );
            check(
                user.contains(&sizes),
                format!("{golden} {key}: no sizes rule"),
            );
        }
        if matches!(kind, CallKind::Repair | CallKind::Instructed) && user.contains("```text") {
            let frames = user.matches("\n  File \"").count();
            check(frames <= 3, format!("{golden} {key}: {frames} frames"));
            check(
                user.contains("  File \"kernel.py\", line "),
                format!("{golden} {key}: no frame of the kernel"),
            );
        }
        if *kind == CallKind::Stage {
            check(
                user.contains(&format!(
                    "within the task's tolerance ({})",
                    linted.precision
                )),
                format!("{golden} {key}: no tolerance for the stage"),
            );
            check(
                user.contains("## The algorithm analysis"),
                format!("{golden} {key}: no analysis"),
            );
            let first = key == "stage/grid_and_parallel";
            check(
                user.contains("## Earlier tuning stages") != first,
                format!("{golden} {key}: the earlier stages are missing (or made up)"),
            );
        }
    }
    // The last stage knows what the failing one tried and why it was rejected.
    let last = linted
        .calls
        .iter()
        .find(|(key, ..)| key == "stage/memory_and_tuning");
    check(
        last.is_some_and(|l| l.3.contains("- `block_tiling`: it tried: \"I change the tiling of the rows.\"; not correct: the base stays (compile: ")),
        format!("{golden}: the third stage does not say why the second was rejected"),
    );
    // Seeds: different prompts, each with its own direction.
    let seeds: Vec<&String> = linted
        .calls
        .iter()
        .filter(|(_, k, _, _)| *k == CallKind::Seed)
        .map(|(_, _, _, u)| u)
        .collect();
    for (i, a) in seeds.iter().enumerate() {
        check(
            a.contains(&format!(" of {}, direction `", seeds.len())),
            format!("{golden}: a seed without its direction"),
        );
        for b in &seeds[i + 1..] {
            check(a != b, format!("{golden}: two seeds with the same text"));
        }
    }
    // One common prefix, up to the end of the task, for every prompt that asks for code.
    let code: Vec<&(String, CallKind, String, String)> = linted
        .calls
        .iter()
        .filter(|(_, k, _, _)| *k != CallKind::Analysis)
        .collect();
    let prefix_end = |u: &str| {
        u.find("**What `forward` returns:**")
            .and_then(|at| u[at..].find("\n\n## ").map(|n| at + n))
    };
    if let Some((_, _, system0, first)) = code.first() {
        match prefix_end(first) {
            Some(end) => {
                let prefix = &first[..end];
                check(
                    prefix.starts_with("## Triton rules"),
                    format!("{golden}: the prefix does not start with the rules"),
                );
                for (key, _, system, user) in &code {
                    check(
                        user.starts_with(prefix),
                        format!("{golden} {key}: another prefix"),
                    );
                    check(
                        system == system0,
                        format!("{golden} {key}: another system prompt"),
                    );
                }
            }
            None => check(false, format!("{golden}: no task section")),
        }
    }
    problems
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_prompt_of_the_golden_sessions_passes_the_lint() {
    for golden in GOLDEN {
        let linted = run_golden(&root().join(golden)).await;
        let problems = lint(golden, &linted);
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
}

/// The lint catches what it is for: a host path, two seeds alike, a stage without its
/// history, a repair showing the raw traceback.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lint_fails_on_what_it_looks_for() {
    let golden = GOLDEN[0];
    let good = run_golden(&root().join(golden)).await;
    let traceback =
        std::fs::read_to_string(root().join("tests/fixtures/tracebacks/tanhh.txt")).unwrap();
    let spoil = |what: &str, change: &dyn Fn(&mut Linted)| {
        let mut bad = Linted {
            calls: good.calls.clone(),
            task: good.task.clone(),
            precision: good.precision.clone(),
        };
        change(&mut bad);
        let problems = lint(golden, &bad);
        assert!(
            problems.iter().any(|p| p.contains(what)),
            "{what}: {problems:?}"
        );
    };
    spoil("a host path", &|l| {
        let repair = l
            .calls
            .iter_mut()
            .find(|c| c.1 == CallKind::Repair)
            .unwrap();
        // The raw tail of the error, as repair prompts carried it before.
        repair.3.push_str(&format!("\n```text\n{traceback}\n```\n"));
    });
    spoil("frames", &|l| {
        let repair = l
            .calls
            .iter_mut()
            .find(|c| c.1 == CallKind::Repair)
            .unwrap();
        repair.3.push_str(&format!(
            "\n```text\n{}\n```\n",
            kforge::pysource::traceback::scrub_paths(&traceback)
        ));
    });
    spoil("two seeds with the same text", &|l| {
        let first = l
            .calls
            .iter()
            .find(|c| c.1 == CallKind::Seed)
            .unwrap()
            .3
            .clone();
        for c in l.calls.iter_mut().filter(|c| c.1 == CallKind::Seed) {
            c.3 = first.clone();
        }
    });
    spoil("the earlier stages are missing", &|l| {
        for c in l.calls.iter_mut().filter(|c| c.1 == CallKind::Stage) {
            if let Some(at) = c.3.find("## Earlier tuning stages") {
                c.3.replace_range(at..at + 2, "");
            }
        }
    });
    spoil("no tolerance", &|l| {
        let precision = l.precision.clone();
        for c in l.calls.iter_mut() {
            c.3 = c.3.replace(&precision, "");
        }
    });
    spoil("talks of timing", &|l| {
        l.calls[0].2 = "times both with CUDA events".into();
    });
    let problems = lint(golden, &good);
    assert!(problems.is_empty(), "{problems:?}");
}
