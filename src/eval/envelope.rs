//! The envelope between kforge and the harness's server, typed: the requests kforge sends
//! (`{"op": ...}`, one JSON line each) and the events it reads back (`{"event": ...}`).
//! The harness's side is `kforge_harness/envelope.py`; `schema()` lists this side's ops and
//! events with their fields' JSON types, read off one example of each variant, and
//! tests/harness_wire.rs compares it with `envelope.schema()` there, both ways.
//!
//! An event kforge does not read (an op's answer it never asks for, a newer harness's) is
//! `Event::Unknown` and is ignored; an event of a kind kforge reads whose fields do not
//! parse is `Event::Malformed`, which ends the request it answers with an error naming it.
//! The server's first line, its hello, is read before any request into `protocol::Hello`
//! and is not part of the envelope.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::protocol::{Device, EvalRequest, Job};
use super::wire_schema::{json_type, to_object};
use crate::config::EvalConfig;
use crate::protocol::{BaselineChoice, CompileFigures, EvalResult, Timing};

/// Names a request; the events answering it carry it back.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RequestId(pub String);

impl RequestId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A request kforge sends the server (envelope.py's request records).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Evaluate a job; answered by progress, started, then one result (or error).
    Eval(EvalJob),
    /// Cancel the evaluation `id` (its result then says cancelled).
    Cancel(Query),
    /// CUDA availability and devices.
    DeviceInfo(Query),
    /// Nsight Compute presence, version and permission.
    NcuCheck(Query),
    /// Each CUDA device's measured peaks.
    DevicePeaks(PeaksQuery),
    /// An evaluation's timing scored again against a compile figure measured after its
    /// verdict (the judge's own scoring, `baselines.rescored`); answered by `rescored`.
    Rescore(RescoreQuery),
    /// Exit; nothing answers it.
    Shutdown,
}

#[derive(Debug, Clone, Serialize)]
pub struct EvalJob {
    pub id: RequestId,
    pub job: Box<Job>,
}

/// A request that is its id alone.
#[derive(Debug, Clone, Serialize)]
pub struct Query {
    pub id: RequestId,
}

#[derive(Debug, Clone, Serialize)]
pub struct PeaksQuery {
    pub id: RequestId,
    /// Where the judge keeps the measured peaks (`<cache>/peaks`).
    pub cache_dir: PathBuf,
}

#[derive(Debug, Clone, Serialize)]
pub struct RescoreQuery {
    pub id: RequestId,
    /// The evaluation's timing (its compile figure deferred).
    pub timing: Box<Timing>,
    /// The figure measured since (a task check's `timing.compile`).
    pub compiled: Option<CompileFigures>,
    /// `[eval] baseline`.
    pub choice: BaselineChoice,
}

impl Request {
    /// The id the answering events carry; none for `shutdown`, which has no answer.
    pub fn id(&self) -> Option<&RequestId> {
        match self {
            Request::Eval(EvalJob { id, .. })
            | Request::Cancel(Query { id })
            | Request::DeviceInfo(Query { id })
            | Request::NcuCheck(Query { id })
            | Request::DevicePeaks(PeaksQuery { id, .. })
            | Request::Rescore(RescoreQuery { id, .. }) => Some(id),
            Request::Shutdown => None,
        }
    }
}

/// An event of the server's that kforge reads (envelope.py's event records).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A phase of an evaluation ("correctness trial 2/5").
    Progress(Progress),
    /// The evaluation's processes started.
    Started(Started),
    /// The evaluation's result.
    Result(ResultEvent),
    /// The answer to `rescore`.
    Rescored(Rescored),
    /// A request failed (an unknown op, a field of the wrong type, an exception).
    Error(ErrorEvent),
    /// The answers to the queries, each under its op's name.
    DeviceInfo(Info),
    NcuCheck(Info),
    DevicePeaks(Info),
    /// An event of a kind kforge reads that does not parse (made by `Event::read`, never
    /// on the wire): `event` and `id` as far as they could be read, `error` what is wrong.
    #[serde(skip)]
    Malformed {
        event: String,
        id: Option<RequestId>,
        error: String,
    },
    /// An event kforge does not read: ignored.
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Progress {
    pub id: Option<RequestId>,
    pub phase: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Started {
    pub id: Option<RequestId>,
    /// How the worker was made: `fork` (from the zygote) or `spawn`.
    pub executor: String,
    /// The sandbox's mechanism (`bwrap`, `none`, ...).
    pub sandbox: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResultEvent {
    pub id: Option<RequestId>,
    pub result: Box<EvalResult>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Rescored {
    pub id: Option<RequestId>,
    pub timing: Box<Timing>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorEvent {
    /// Absent where the request's line could not be read at all.
    pub id: Option<RequestId>,
    pub error: String,
    pub traceback: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Info {
    pub id: Option<RequestId>,
    /// The query's answer (`{"error": why}` where it failed).
    #[serde(default)]
    pub info: Value,
}

impl Event {
    /// The event a decoded line holds.
    pub fn read(line: Value) -> Event {
        Event::deserialize(&line).unwrap_or_else(|e| Event::Malformed {
            event: line
                .get("event")
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_string(),
            id: line
                .get("id")
                .and_then(Value::as_str)
                .map(|id| RequestId(id.to_string())),
            error: e.to_string(),
        })
    }

    /// The request it answers; none for an unknown event.
    pub fn id(&self) -> Option<&RequestId> {
        match self {
            Event::Progress(Progress { id, .. })
            | Event::Started(Started { id, .. })
            | Event::Result(ResultEvent { id, .. })
            | Event::Rescored(Rescored { id, .. })
            | Event::Error(ErrorEvent { id, .. })
            | Event::DeviceInfo(Info { id, .. })
            | Event::NcuCheck(Info { id, .. })
            | Event::DevicePeaks(Info { id, .. })
            | Event::Malformed { id, .. } => id.as_ref(),
            Event::Unknown => None,
        }
    }
}

/// Ops the server answers that kforge never sends (envelope.py declares them; kforge has
/// no use for them yet), and the events only they are answered with.
pub const OPS_NOT_SENT: &[&str] = &["static_check", "sandbox_info"];
pub const EVENTS_NOT_READ: &[&str] = &["static", "sandbox_info"];

/// Field name to JSON type (`string`, `integer`, `number`, `boolean`, `object`, `array`).
pub type Fields = BTreeMap<String, String>;

/// `{"ops": {op: fields}, "events": {event: fields}}`: each request kforge sends and each
/// event it reads with its fields and their JSON types, as envelope.py's `schema()` writes
/// them. Null and absence are not part of it: the server takes a request's field left out
/// or null as its default, and kforge reads what an event may leave out as an `Option`.
pub fn schema() -> BTreeMap<&'static str, BTreeMap<String, Fields>> {
    BTreeMap::from([
        ("ops", shapes("op", request_examples())),
        ("events", shapes("event", event_examples())),
    ])
}

/// The values of `examples` (every variant) listed, and a match over the same names, which
/// does not compile while a variant of `$enum` is missing from the list.
macro_rules! every_variant {
    ($enum:ident: $($variant:ident $(($example:expr))?),* ; not on the wire: $($skipped:ident),*) => {{
        let _exhaustive = |e: &$enum| match e {
            $($enum::$variant { .. } => (),)*
            $($enum::$skipped { .. } => (),)*
        };
        vec![$($enum::$variant $(($example))?),*]
    }};
}

/// One request of each kind kforge sends, every optional field set (a struct literal each,
/// so that a new field does not compile until it is listed).
fn request_examples() -> Vec<Request> {
    let id = || RequestId("r1".into());
    let request = EvalRequest::new("t.py", "k.py", Device::Cpu, EvalConfig::default());
    every_variant!(Request:
        Eval(EvalJob { id: id(), job: Box::new(Job::new(&request, None)) }),
        Cancel(Query { id: id() }),
        DeviceInfo(Query { id: id() }),
        NcuCheck(Query { id: id() }),
        DevicePeaks(PeaksQuery { id: id(), cache_dir: "/cache/peaks".into() }),
        Rescore(RescoreQuery {
            id: id(),
            timing: Box::default(),
            compiled: Some(CompileFigures::default()),
            choice: BaselineChoice::Best,
        }),
        Shutdown
        ; not on the wire:
    )
}

/// One event of each kind kforge reads, every optional field set.
fn event_examples() -> Vec<Event> {
    let id = || Some(RequestId("r1".into()));
    let info = || Info {
        id: id(),
        info: serde_json::json!({}),
    };
    every_variant!(Event:
        Progress(Progress { id: id(), phase: "loading task".into() }),
        Started(Started { id: id(), executor: "fork".into(), sandbox: "bwrap".into() }),
        Result(ResultEvent { id: id(), result: Box::default() }),
        Rescored(Rescored { id: id(), timing: Box::default() }),
        Error(ErrorEvent { id: id(), error: "why".into(), traceback: Some("Traceback".into()) }),
        DeviceInfo(info()),
        NcuCheck(info()),
        DevicePeaks(info())
        ; not on the wire: Unknown, Malformed
    )
}

/// `{tag: {field: JSON type}}` of the serialized examples, the tag (`op`, `event`) apart.
fn shapes(tag: &str, examples: Vec<impl Serialize>) -> BTreeMap<String, Fields> {
    examples
        .into_iter()
        .map(|example| {
            let mut object = to_object(example);
            let name = match object.remove(tag) {
                Some(Value::String(name)) => name,
                other => panic!("an envelope record has its `{tag}`, not {other:?}"),
            };
            let fields = object
                .iter()
                .map(|(field, value)| (field.clone(), json_type(value).to_string()))
                .collect();
            (name, fields)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The typed requests are the objects kforge sent as `json!` literals before (the
    /// server's parse_request reads those), key for key.
    #[test]
    fn requests_are_the_objects_the_server_reads() {
        let id = || RequestId("eval-1".into());
        let request = EvalRequest::new("t.py", "k.py", Device::Cpu, EvalConfig::default());
        let job = Job::new(&request, None);
        let sent = |r: Request| serde_json::to_value(r).unwrap();
        assert_eq!(
            sent(Request::Eval(EvalJob {
                id: id(),
                job: Box::new(job.clone())
            })),
            json!({"op": "eval", "id": "eval-1", "job": job})
        );
        assert_eq!(
            sent(Request::Cancel(Query { id: id() })),
            json!({"op": "cancel", "id": "eval-1"})
        );
        assert_eq!(
            sent(Request::DeviceInfo(Query { id: id() })),
            json!({"op": "device_info", "id": "eval-1"})
        );
        assert_eq!(
            sent(Request::NcuCheck(Query { id: id() })),
            json!({"op": "ncu_check", "id": "eval-1"})
        );
        assert_eq!(
            sent(Request::DevicePeaks(PeaksQuery {
                id: id(),
                cache_dir: "/c/peaks".into()
            })),
            json!({"op": "device_peaks", "id": "eval-1", "cache_dir": "/c/peaks"})
        );
        let timing = Timing {
            score: Some(1.2),
            ..Timing::default()
        };
        assert_eq!(
            sent(Request::Rescore(RescoreQuery {
                id: id(),
                timing: Box::new(timing.clone()),
                compiled: None,
                choice: BaselineChoice::Compile,
            })),
            json!({"op": "rescore", "id": "eval-1", "timing": timing, "compiled": null,
                   "choice": "compile"})
        );
        assert_eq!(sent(Request::Shutdown), json!({"op": "shutdown"}));
        assert_eq!(Request::Shutdown.id(), None);
    }

    /// The events as envelope.py's `message()` writes them (test_envelope.py's objects).
    #[test]
    fn events_read_as_the_server_writes_them() {
        let read = |v: Value| Event::read(v);
        let Event::Progress(p) =
            read(json!({"event": "progress", "id": "e1", "phase": "loading task"}))
        else {
            panic!("a progress event")
        };
        assert_eq!(
            (p.id.unwrap().as_str(), p.phase.as_str()),
            ("e1", "loading task")
        );
        let Event::Started(s) =
            read(json!({"event": "started", "id": "e1", "executor": "fork", "sandbox": "bwrap"}))
        else {
            panic!("a started event")
        };
        assert_eq!((s.executor.as_str(), s.sandbox.as_str()), ("fork", "bwrap"));
        let Event::Result(r) = read(json!({"event": "result", "id": "e1",
            "result": serde_json::to_value(EvalResult::harness_failure("e1", "boom", "")).unwrap()}))
        else {
            panic!("a result event")
        };
        assert_eq!(r.result.summary, "boom");
        let Event::Error(e) = read(json!({"event": "error", "error": "malformed request line"}))
        else {
            panic!("an error event")
        };
        assert_eq!(
            (e.id, e.error.as_str(), e.traceback),
            (None, "malformed request line", None)
        );
        let Event::DevicePeaks(i) =
            read(json!({"event": "device_peaks", "id": "p1", "info": {"devices": []}}))
        else {
            panic!("a device_peaks answer")
        };
        assert_eq!(i.info, json!({"devices": []}));
        assert_eq!(i.id, Some(RequestId("p1".into())));
    }

    /// An event kforge does not read is ignored whatever it holds; one it reads that does
    /// not parse keeps its name and id, for the error that ends its request.
    #[test]
    fn unknown_events_are_ignored_and_malformed_ones_named() {
        for line in [
            json!({"event": "static", "id": "s1", "category": null, "report": {}}),
            json!({"event": "from_a_newer_harness", "id": "e1", "anything": [1]}),
        ] {
            assert!(matches!(Event::read(line), Event::Unknown));
        }
        let malformed =
            Event::read(json!({"event": "result", "id": "e1", "result": "not an object"}));
        let Event::Malformed { event, id, error } = malformed else {
            panic!("{malformed:?}")
        };
        assert_eq!(
            (event.as_str(), id),
            ("result", Some(RequestId("e1".into())))
        );
        assert!(error.contains("invalid type"), "{error}");
        assert!(matches!(
            Event::read(json!({"event": "progress", "id": "e1"})),
            Event::Malformed { .. }
        ));
        let untagged = Event::read(json!({"id": "e1", "phase": "p"}));
        assert!(
            matches!(&untagged, Event::Malformed { event, id: Some(_), .. } if event == "?"),
            "{untagged:?}"
        );
        // serde reads an array's first element as the tag: no id, nothing it answers.
        assert!(matches!(Event::read(json!(["no object"])), Event::Unknown));
    }

    #[test]
    fn the_schema_lists_each_op_and_event_with_its_fields() {
        let schema = schema();
        assert_eq!(
            schema["ops"]["eval"],
            Fields::from([
                ("id".into(), "string".into()),
                ("job".into(), "object".into())
            ])
        );
        assert_eq!(schema["ops"]["shutdown"], Fields::new());
        assert_eq!(schema["ops"]["device_peaks"]["cache_dir"], "string");
        assert_eq!(schema["events"]["error"]["traceback"], "string");
        assert_eq!(schema["events"]["result"]["result"], "object");
        assert_eq!(schema["events"]["ncu_check"]["info"], "object");
        assert!(!schema["events"].contains_key("unknown"));
        assert!(!schema["events"].contains_key("malformed"));
    }
}
