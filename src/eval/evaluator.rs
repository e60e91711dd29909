//! The async evaluator the engine and the CLI use: one worker per device, each owning a
//! harness server and running its queue one job at a time (never two timed runs on one
//! GPU), with cancellation of queued and running jobs. A server that dies or stops
//! answering is killed and restarted for the next job; the job gets a `harness` result.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Result, bail};
use serde_json::Value;
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::envelope::{
    ErrorEvent, EvalJob, Event, PeaksQuery, Progress, Query, Request, RequestId, RescoreQuery,
    ResultEvent, Started,
};
use super::protocol::{Device, EvalRequest, Hello, Job};

use super::python_env::PythonEnv;
use super::server::HarnessServer;
use crate::protocol::{BaselineChoice, CompileFigures, EvalResult, Status, Timing};

/// Extra seconds the Rust side waits beyond a job's own timeout before it declares the
/// server unresponsive (the server enforces the timeout itself; this catches the server).
const WATCHDOG_GRACE: Duration = Duration::from_secs(60);
/// How long a cancelled job may take to report back before its server is killed.
const CANCEL_GRACE: Duration = Duration::from_secs(10);

/// Progress of one evaluation, for live displays.
#[derive(Debug, Clone, PartialEq)]
pub enum EvalProgress {
    /// Waiting behind `ahead` other jobs for the device.
    Queued { ahead: usize },
    /// The evaluation's processes started (the server's `started` event).
    Started,
    /// A phase such as "correctness trial 2/5" or "timing kernel: 100 runs".
    Phase(String),
}

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("evaluation cancelled")]
    Cancelled,
    #[error("the evaluator is not available: {0}")]
    Unavailable(String),
}

struct QueuedJob {
    id: RequestId,
    job: Job,
    cancel: CancellationToken,
    progress: Option<mpsc::UnboundedSender<EvalProgress>>,
    reply: oneshot::Sender<Result<EvalResult, EvalError>>,
}

struct Shared {
    python: PythonEnv,
    harness: PathBuf,
    cache_dir: PathBuf,
    queued: Mutex<HashMap<Device, usize>>,
}

/// Cheap to clone; all clones share the workers.
#[derive(Clone)]
pub struct Evaluator {
    shared: Arc<Shared>,
    workers: Arc<Mutex<HashMap<Device, mpsc::UnboundedSender<QueuedJob>>>>,
    spare: Arc<Mutex<Option<HarnessServer>>>,
    next_id: Arc<AtomicU64>,
}

impl Evaluator {
    /// An evaluator using `python` to run the harness at `harness`. Servers start lazily.
    pub fn new(python: PythonEnv, harness: PathBuf, cache_dir: PathBuf) -> Evaluator {
        Evaluator {
            shared: Arc::new(Shared {
                python,
                harness,
                cache_dir,
                queued: Mutex::new(HashMap::new()),
            }),
            workers: Arc::new(Mutex::new(HashMap::new())),
            spare: Arc::new(Mutex::new(None)),
            next_id: Arc::new(AtomicU64::new(1)),
        }
    }

    pub fn python(&self) -> &PythonEnv {
        &self.shared.python
    }

    /// `interpret`: a CPU server (Triton's interpreter); otherwise a GPU server.
    async fn start_server(&self, interpret: bool) -> Result<HarnessServer> {
        let shared = &self.shared;
        HarnessServer::start(
            &shared.python.executable,
            &shared.harness,
            &shared.cache_dir,
            interpret,
        )
        .await
    }

    /// A GPU-mode server not bound to a device yet (for queries); it becomes the first
    /// GPU worker's server.
    async fn with_spare<T>(
        &self,
        f: impl AsyncFnOnce(&mut HarnessServer) -> Result<T>,
    ) -> Result<T> {
        let mut spare = self.spare.lock().await;
        if spare.as_mut().is_none_or(|s| !s.is_running()) {
            *spare = Some(self.start_server(false).await?);
        }
        f(spare.as_mut().expect("spare server")).await
    }

    /// Versions the harness reports (starts a server if none runs).
    pub async fn hello(&self) -> Result<Hello> {
        self.with_spare(async |s| Ok(s.hello.clone())).await
    }

    /// CUDA availability and devices, queried in a child so no server initializes CUDA.
    pub async fn device_info(&self) -> Result<Value> {
        let id = self.new_id("devices");
        self.query(Request::DeviceInfo(Query { id }), 180).await
    }

    /// Nsight Compute presence, version and permission to read counters.
    pub async fn ncu_check(&self) -> Result<Value> {
        let id = self.new_id("ncu");
        self.query(Request::NcuCheck(Query { id }), 400).await
    }

    /// Each CUDA device's measured peaks (bandwidth, matmul per math) for the
    /// speed-of-light bound: from the cache (`cache_dir/peaks`, where the judge keeps
    /// them), else measured now and cached. `{"devices": []}` without a GPU.
    pub async fn device_peaks(&self) -> Result<Value> {
        let cache_dir = self.shared.cache_dir.join("peaks");
        let id = self.new_id("peaks");
        self.query(Request::DevicePeaks(PeaksQuery { id, cache_dir }), 400)
            .await
    }

    /// `timing` (an evaluation's, its compile figure deferred) scored against `compiled`,
    /// the figure measured after its verdict, with the `[eval] baseline` choice: the
    /// harness's own scoring (`baselines.rescored`), on the spare server (started if none
    /// runs; `hello` starts it ahead). Its `compile_deferred` then says `after_verdict`.
    pub async fn rescore(
        &self,
        timing: &Timing,
        compiled: Option<&CompileFigures>,
        choice: BaselineChoice,
    ) -> Result<Timing> {
        let request = Request::Rescore(RescoreQuery {
            id: self.new_id("rescore"),
            timing: Box::new(timing.clone()),
            compiled: compiled.cloned(),
            choice,
        });
        self.with_spare(
            async |s| match s.call(request, Duration::from_secs(60)).await? {
                Event::Rescored(answer) => Ok(*answer.timing),
                other => bail!("the harness answered a rescore with {other:?}"),
            },
        )
        .await
    }

    /// A query the spare server answers with its `info`.
    async fn query(&self, request: Request, timeout_s: u64) -> Result<Value> {
        self.with_spare(
            async |s| match s.call(request, Duration::from_secs(timeout_s)).await? {
                Event::DeviceInfo(answer)
                | Event::NcuCheck(answer)
                | Event::DevicePeaks(answer) => Ok(answer.info),
                other => bail!("the harness answered a query with {other:?}"),
            },
        )
        .await
    }

    /// The first CUDA device if there is one, else the CPU interpreter.
    pub async fn default_device(&self) -> Result<Device> {
        let info = self.device_info().await?;
        if let Some(error) = info.get("error").and_then(Value::as_str) {
            bail!("cannot query CUDA devices: {error}");
        }
        let count = info
            .get("devices")
            .and_then(Value::as_array)
            .map_or(0, |d| d.len());
        Ok(if count > 0 {
            Device::Cuda(0)
        } else {
            Device::Cpu
        })
    }

    fn new_id(&self, prefix: &str) -> RequestId {
        RequestId(format!(
            "{prefix}-{}",
            self.next_id.fetch_add(1, Ordering::Relaxed)
        ))
    }

    /// Queues an evaluation on its device and waits for the result. Failures of the
    /// candidate are results (`correct == false`); `Err` means no result could be made.
    pub async fn evaluate(
        &self,
        request: EvalRequest,
        cancel: CancellationToken,
        progress: Option<mpsc::UnboundedSender<EvalProgress>>,
    ) -> Result<EvalResult, EvalError> {
        let prepared = super::interpreter::prepare(request);
        let request = &prepared.request;
        let baseline_dir = Some(self.shared.cache_dir.join("baselines"));
        let job = Job::new(request, baseline_dir);
        let id = self.new_id("eval");
        let started = std::time::Instant::now();
        tracing::info!(
            %id,
            task = %request.task.display(),
            kernel = %request.kernel.display(),
            device = %request.device.torch_name(),
            timing = request.timing,
            "evaluation requested"
        );
        let log_id = id.clone();
        let (reply, answer) = oneshot::channel();
        let sender = self.worker(request.device).await;
        let ahead = {
            let mut queued = self.shared.queued.lock().await;
            let n = queued.entry(request.device).or_default();
            *n += 1;
            *n - 1
        };
        if let Some(p) = &progress {
            let _ = p.send(EvalProgress::Queued { ahead });
        }
        let queued = QueuedJob {
            id,
            job,
            cancel: cancel.clone(),
            progress,
            reply,
        };
        if sender.send(queued).is_err() {
            return Err(EvalError::Unavailable(
                "the device worker has stopped".into(),
            ));
        }
        let outcome = answer.await.unwrap_or_else(|_| {
            Err(EvalError::Unavailable(
                "the device worker has stopped".into(),
            ))
        });
        let outcome = outcome.map(|mut result| {
            super::interpreter::finish(&mut result, request.device, prepared.sizes.clone());
            result
        });
        let secs = format!("{:.2}", started.elapsed().as_secs_f64());
        match &outcome {
            Ok(r) => tracing::info!(
                id = %log_id,
                correct = r.correct,
                category = r.category.map(|c| c.as_str()).unwrap_or("-"),
                score = r.timing.as_ref().and_then(|t| t.score),
                flags = ?r.flags,
                secs,
                "evaluation finished"
            ),
            Err(e) => tracing::warn!(id = %log_id, error = %e, secs, "evaluation gave no result"),
        }
        outcome
    }

    async fn worker(&self, device: Device) -> mpsc::UnboundedSender<QueuedJob> {
        let mut workers = self.workers.lock().await;
        if let Some(tx) = workers.get(&device).filter(|tx| !tx.is_closed()) {
            return tx.clone();
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let server = if device.is_gpu() {
            self.spare.lock().await.take()
        } else {
            None
        };
        tokio::spawn(run_worker(self.clone(), device, server, rx));
        workers.insert(device, tx.clone());
        tx
    }

    /// Starts the device's worker and its server ahead of the first evaluation.
    pub async fn prepare(&self, device: Device) {
        self.worker(device).await;
    }

    /// Stops all servers (workers end when their queues are dropped).
    pub async fn shutdown(&self) {
        self.workers.lock().await.clear();
        if let Some(server) = self.spare.lock().await.take() {
            server.shutdown().await;
        }
    }
}

async fn run_worker(
    evaluator: Evaluator,
    device: Device,
    mut server: Option<HarnessServer>,
    mut jobs: mpsc::UnboundedReceiver<QueuedJob>,
) {
    // Start the server now, while the first job is still being written (an LLM call,
    // say): the import of torch and triton then costs the first evaluation nothing.
    if server.is_none() {
        server = evaluator.start_server(!device.is_gpu()).await.ok();
    }
    while let Some(job) = jobs.recv().await {
        {
            let mut queued = evaluator.shared.queued.lock().await;
            if let Some(n) = queued.get_mut(&device) {
                *n = n.saturating_sub(1);
            }
        }
        if job.cancel.is_cancelled() {
            let _ = job.reply.send(Err(EvalError::Cancelled));
            continue;
        }
        if server.as_mut().is_none_or(|s| !s.is_running()) {
            server = match evaluator.start_server(!device.is_gpu()).await {
                Ok(s) => Some(s),
                Err(e) => {
                    let _ = job
                        .reply
                        .send(Err(EvalError::Unavailable(format!("{e:#}"))));
                    continue;
                }
            };
        }
        let running = server.as_mut().expect("server started above");
        let outcome = run_job(running, &job).await;
        if outcome.restart_server
            && let Some(mut dead) = server.take()
        {
            dead.kill().await;
        }
        let _ = job.reply.send(outcome.result);
    }
    if let Some(s) = server {
        s.shutdown().await;
    }
}

struct JobOutcome {
    result: Result<EvalResult, EvalError>,
    restart_server: bool,
}

async fn run_job(server: &mut HarnessServer, queued: &QueuedJob) -> JobOutcome {
    let id = &queued.id;
    let request = Request::Eval(EvalJob {
        id: id.clone(),
        job: Box::new(queued.job.clone()),
    });
    if let Err(e) = server.send(&request).await {
        let result =
            EvalResult::harness_failure(id.as_str(), format!("{e:#}"), server.stderr_text());
        return JobOutcome {
            result: Ok(result),
            restart_server: true,
        };
    }
    let limit = Duration::from_secs_f64(queued.job.settings.timeout_s.max(0.0)) + WATCHDOG_GRACE;
    let watchdog = tokio::time::sleep(limit);
    tokio::pin!(watchdog);
    let mut cancel_sent: Option<tokio::time::Instant> = None;
    loop {
        let cancel_deadline = async {
            match cancel_sent {
                Some(at) => tokio::time::sleep_until(at + CANCEL_GRACE).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            event = server.next_event() => {
                let Some(event) = event else {
                    let text = server.stderr_text();
                    let result = EvalResult::harness_failure(id.as_str(), "the harness server exited during the evaluation", text);
                    return JobOutcome { result: Ok(result), restart_server: true };
                };
                if event.id() != Some(id) {
                    continue;
                }
                if let Some(outcome) = job_event(queued, event, || server.stderr_text()) {
                    return outcome;
                }
            }
            _ = queued.cancel.cancelled(), if cancel_sent.is_none() => {
                cancel_sent = Some(tokio::time::Instant::now());
                if server.send(&Request::Cancel(Query { id: id.clone() })).await.is_err() {
                    return JobOutcome { result: Err(EvalError::Cancelled), restart_server: true };
                }
            }
            _ = cancel_deadline => {
                return JobOutcome { result: Err(EvalError::Cancelled), restart_server: true };
            }
            _ = &mut watchdog => {
                let result = EvalResult::harness_failure(
                    id.as_str(),
                    format!("the harness server did not answer within {}s; it was restarted", limit.as_secs()),
                    server.stderr_text(),
                );
                return JobOutcome { result: Ok(result), restart_server: true };
            }
        }
    }
}

/// What an event answering the running job does: a progress report, or the job's end
/// (`stderr`: the server's last lines, for a log).
fn job_event(
    queued: &QueuedJob,
    event: Event,
    stderr: impl FnOnce() -> String,
) -> Option<JobOutcome> {
    let id = queued.id.as_str();
    let (result, restart_server) = match event {
        Event::Progress(Progress { phase, .. }) => {
            send_progress(queued, EvalProgress::Phase(phase));
            return None;
        }
        Event::Started(Started {
            executor, sandbox, ..
        }) => {
            tracing::debug!(%id, executor, sandbox, "evaluation started");
            send_progress(queued, EvalProgress::Started);
            return None;
        }
        Event::Result(ResultEvent { result, .. }) if result.status == Status::Cancelled => {
            (Err(EvalError::Cancelled), false)
        }
        Event::Result(ResultEvent { result, .. }) => (Ok(*result), false),
        Event::Error(ErrorEvent {
            error, traceback, ..
        }) => (
            Ok(EvalResult::harness_failure(
                id,
                error,
                traceback.unwrap_or_default(),
            )),
            false,
        ),
        // The server does not speak this kforge's envelope: restarted, the job failed.
        Event::Malformed { event, error, .. } => (
            Ok(EvalResult::harness_failure(
                id,
                format!("malformed {event} event from the harness: {error}"),
                stderr(),
            )),
            true,
        ),
        Event::DeviceInfo(_)
        | Event::NcuCheck(_)
        | Event::DevicePeaks(_)
        | Event::Rescored(_)
        | Event::Unknown => {
            return None;
        }
    };
    Some(JobOutcome {
        result,
        restart_server,
    })
}

fn send_progress(job: &QueuedJob, progress: EvalProgress) {
    if let Some(p) = &job.progress {
        let _ = p.send(progress);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::EvalConfig;
    use serde_json::json;

    fn queued() -> (
        QueuedJob,
        mpsc::UnboundedReceiver<EvalProgress>,
        oneshot::Receiver<Result<EvalResult, EvalError>>,
    ) {
        let request = EvalRequest::new("t.py", "k.py", Device::Cpu, EvalConfig::default());
        let (progress, shown) = mpsc::unbounded_channel();
        let (reply, answer) = oneshot::channel();
        let job = QueuedJob {
            id: RequestId("eval-1".into()),
            job: Job::new(&request, None),
            cancel: CancellationToken::new(),
            progress: Some(progress),
            reply,
        };
        (job, shown, answer)
    }

    /// Progress and started are shown, an unknown event is ignored, and none ends the job.
    #[test]
    fn progress_is_shown_and_unknown_events_ignored() {
        let (job, mut shown, _answer) = queued();
        for line in [
            json!({"event": "progress", "id": "eval-1", "phase": "loading task"}),
            json!({"event": "started", "id": "eval-1", "executor": "fork", "sandbox": "bwrap"}),
            json!({"event": "from_a_newer_harness", "id": "eval-1"}),
        ] {
            assert!(job_event(&job, Event::read(line), String::new).is_none());
        }
        assert_eq!(
            shown.try_recv().unwrap(),
            EvalProgress::Phase("loading task".into())
        );
        assert_eq!(shown.try_recv().unwrap(), EvalProgress::Started);
        assert!(shown.try_recv().is_err());
    }

    /// A result ends the job (a cancelled one as `Cancelled`), an error is a `harness`
    /// result with its traceback, and an event that does not parse is a `harness` result
    /// naming it, with the server restarted.
    #[test]
    fn results_errors_and_malformed_events_end_the_job() {
        let (job, _shown, _answer) = queued();
        let result =
            |r: EvalResult| Event::read(json!({"event": "result", "id": "eval-1", "result": r}));
        let correct = EvalResult {
            correct: true,
            status: Status::Correct,
            ..EvalResult::default()
        };
        let outcome = job_event(&job, result(correct), String::new).unwrap();
        assert!(outcome.result.unwrap().correct && !outcome.restart_server);
        let cancelled = EvalResult {
            status: Status::Cancelled,
            ..EvalResult::default()
        };
        let outcome = job_event(&job, result(cancelled), String::new).unwrap();
        assert!(matches!(outcome.result, Err(EvalError::Cancelled)));

        let error = json!({"event": "error", "id": "eval-1", "error": "KeyError: x", "traceback": "Traceback"});
        let outcome = job_event(&job, Event::read(error), String::new).unwrap();
        let failed = outcome.result.unwrap();
        assert_eq!(
            (failed.summary.as_str(), failed.log.as_str()),
            ("KeyError: x", "Traceback")
        );
        assert!(!outcome.restart_server);

        let malformed = json!({"event": "result", "id": "eval-1", "result": {"status": 3}});
        let outcome = job_event(&job, Event::read(malformed), || "stderr tail".into()).unwrap();
        let failed = outcome.result.unwrap();
        assert_eq!(failed.category, Some(crate::protocol::Category::Harness));
        assert!(
            failed
                .summary
                .starts_with("malformed result event from the harness: "),
            "{}",
            failed.summary
        );
        assert_eq!(failed.log, "stderr tail");
        assert!(outcome.restart_server);
    }
}
