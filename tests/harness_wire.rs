//! The harness's typed records (`kforge_harness/wire.py`: `Job`, `EvalSettings`, `Result`,
//! `Timing`, `TimingStats`, `CompileFigures`) against the shapes kforge serializes
//! (`eval::wire_schema`): a field added, removed or retyped on one side only fails here, by
//! name, before a job or a result goes unread.

mod eval_common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use eval_common::interpreter;
use kforge::eval::envelope;

type Shapes = BTreeMap<String, BTreeMap<String, String>>;

fn python_schema() -> Shapes {
    python_json("wire.schema()")
}

/// What `kforge_harness.<expression>` prints as JSON, run by the harness's interpreter.
fn python_json<T: serde::de::DeserializeOwned>(expression: &str) -> T {
    let harness = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/eval/harness");
    let module = expression.split('.').next().expect("a module");
    let output = Command::new(interpreter())
        .args([
            "-c",
            &format!(
                "import json; from kforge_harness import {module}; print(json.dumps({expression}))"
            ),
        ])
        .current_dir(&harness)
        .env("PYTHONPATH", &harness)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("the interpreter runs");
    assert!(
        output.status.success(),
        "{expression} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("it prints JSON")
}

/// Every difference between the two sides, one line each, naming the record and the field.
fn differences(rust: &Shapes, python: &Shapes) -> Vec<String> {
    let records: std::collections::BTreeSet<&String> = rust.keys().chain(python.keys()).collect();
    let none = BTreeMap::new();
    records
        .into_iter()
        .flat_map(|record| {
            field_differences(
                record,
                rust.get(record).unwrap_or(&none),
                python.get(record).unwrap_or(&none),
                ("wire.py", "sent", "send"),
                only_in_python_hint(record),
            )
        })
        .collect()
}

/// The fields of `record` on one side only or of another type there, one line each: `file`
/// is the Python side, kforge `sent`/`send`s the record (or `read`s it); `hint` follows a
/// field only `file` declares.
fn field_differences(
    record: &str,
    rust: &BTreeMap<String, String>,
    python: &BTreeMap<String, String>,
    (file, done, does): (&str, &str, &str),
    hint: &str,
) -> Vec<String> {
    let mut out = Vec::new();
    for (field, ty) in rust {
        match python.get(field) {
            None => out.push(format!(
                "{record}.{field} ({ty}) is {done} by kforge but {file} does not declare it"
            )),
            Some(py) if py != ty => out.push(format!(
                "{record}.{field} is {ty} in kforge but {py} in {file}"
            )),
            Some(_) => {}
        }
    }
    for (field, ty) in python {
        if !rust.contains_key(field) {
            out.push(format!(
                "{record}.{field} ({ty}) is declared in {file} but kforge does not {does} it{hint}"
            ));
        }
    }
    out
}

/// Why a field wire.py declares may be missing from kforge's shape of `record`.
fn only_in_python_hint(record: &str) -> &'static str {
    match record {
        "Job" | "EvalSettings" => {
            " (an optional [eval] setting not set in wire_schema.rs's settings_all_set?)"
        }
        _ => {
            " (a field kforge keeps unread in its `extra` belongs in the record's PASSED_THROUGH, \
             not among its fields)"
        }
    }
}

#[test]
fn harness_records_match_what_kforge_sends_and_reads() {
    let rust: Shapes = kforge::eval::wire_schema::schema()
        .into_iter()
        .map(|(record, shape)| (record.to_string(), shape))
        .collect();
    let diff = differences(&rust, &python_schema());
    assert!(
        diff.is_empty(),
        "kforge and wire.py disagree:\n{}",
        diff.join("\n")
    );
}

/// The comparison names a field added on either side, and a changed type.
#[test]
fn a_field_on_one_side_only_is_named() {
    let shapes = |fields: &[(&str, &str)]| -> Shapes {
        BTreeMap::from([(
            "Job".to_string(),
            fields
                .iter()
                .map(|(f, t)| (f.to_string(), t.to_string()))
                .collect(),
        )])
    };
    let rust = shapes(&[("device", "string"), ("seed", "integer")]);
    let python = shapes(&[("device", "string|null"), ("trials", "integer")]);
    assert_eq!(
        differences(&rust, &python),
        [
            "Job.device is string in kforge but string|null in wire.py",
            "Job.seed (integer) is sent by kforge but wire.py does not declare it",
            "Job.trials (integer) is declared in wire.py but kforge does not send it \
             (an optional [eval] setting not set in wire_schema.rs's settings_all_set?)",
        ]
    );
    let timing = |field: &str| -> Shapes {
        BTreeMap::from([(
            "TimingStats".to_string(),
            BTreeMap::from([(field.to_string(), "number".to_string())]),
        )])
    };
    assert_eq!(
        differences(&timing("median_ms"), &timing("host_queue_ms")),
        [
            "TimingStats.median_ms (number) is sent by kforge but wire.py does not declare it",
            "TimingStats.host_queue_ms (number) is declared in wire.py but kforge does not send \
             it (a field kforge keeps unread in its `extra` belongs in the record's \
             PASSED_THROUGH, not among its fields)",
        ]
    );
}

/// `{"ops": {op: fields}, "events": {event: fields}}`, as both sides' `schema()` write it.
type Envelope = BTreeMap<String, Shapes>;

/// Every difference between kforge's envelope (`eval::envelope`) and the harness's
/// (`envelope.py`): an op or event on one side only (but for the ops kforge does not send and
/// the events it does not read, which `eval::envelope` names), a field on one side only or
/// of another type there.
fn envelope_differences(rust: &Envelope, python: &Envelope) -> Vec<String> {
    let mut out = Vec::new();
    let none = BTreeMap::new();
    for (kind, what, unused, (done, does)) in [
        ("ops", "op", envelope::OPS_NOT_SENT, ("sent", "send")),
        (
            "events",
            "event",
            envelope::EVENTS_NOT_READ,
            ("read", "read"),
        ),
    ] {
        let (r, p) = (
            rust.get(kind).unwrap_or(&none),
            python.get(kind).unwrap_or(&none),
        );
        let names: std::collections::BTreeSet<&String> = r.keys().chain(p.keys()).collect();
        for name in names {
            let unused = unused.contains(&name.as_str());
            match (r.get(name), p.get(name)) {
                (Some(r), Some(p)) => out.extend(field_differences(
                    &format!("{what} {name}"),
                    r,
                    p,
                    ("envelope.py", done, does),
                    "",
                )),
                (Some(_), None) => out.push(format!(
                    "kforge {does}s the {what} {name:?}, which envelope.py does not declare"
                )),
                (None, _) if !unused => out.push(format!(
                    "envelope.py declares the {what} {name:?}, which kforge does not type (a \
                     variant of eval::envelope's enum, or one of the names it lists as unused)"
                )),
                (None, _) => {}
            }
            if unused && r.contains_key(name) {
                out.push(format!(
                    "eval::envelope lists the {what} {name:?} as one kforge never {does}s, but \
                     it is a variant of its enum"
                ));
            }
        }
        for name in unused.iter().filter(|name| !p.contains_key(**name)) {
            out.push(format!(
                "eval::envelope lists the {what} {name:?} as one kforge never {does}s, but \
                 envelope.py does not declare it"
            ));
        }
    }
    out
}

/// The envelope (`kforge_harness/envelope.py` and `eval::envelope`): every op kforge sends
/// and every event it reads, with its fields and their JSON types, is the harness's, and the
/// harness declares nothing kforge does not type but what `eval::envelope` lists as unused.
#[test]
fn the_envelope_is_typed_alike_on_both_sides() {
    let rust: Envelope = envelope::schema()
        .into_iter()
        .map(|(kind, shapes)| (kind.to_string(), shapes))
        .collect();
    assert!(rust["ops"].contains_key("eval") && rust["events"].contains_key("result"));
    let diff = envelope_differences(&rust, &python_json("envelope.schema()"));
    assert!(
        diff.is_empty(),
        "kforge and envelope.py disagree:\n{}",
        diff.join("\n")
    );
}

/// The comparison names an op or event on one side only, a field on one side only, a
/// changed type, and a stale entry of the unused lists.
#[test]
fn an_op_event_or_field_on_one_side_only_is_named() {
    let envelope = |ops: &[(&str, &[(&str, &str)])], events: &[(&str, &[(&str, &str)])]| {
        let shapes = |records: &[(&str, &[(&str, &str)])]| -> Shapes {
            records
                .iter()
                .map(|(name, fields)| {
                    let fields = fields
                        .iter()
                        .map(|(f, t)| (f.to_string(), t.to_string()))
                        .collect();
                    (name.to_string(), fields)
                })
                .collect()
        };
        Envelope::from([
            ("ops".to_string(), shapes(ops)),
            ("events".to_string(), shapes(events)),
        ])
    };
    let rust = envelope(
        &[
            ("eval", &[("id", "string"), ("job", "object")]),
            ("reload", &[]),
            ("static_check", &[("id", "string")]),
        ],
        &[("result", &[("id", "string"), ("pid", "integer")])],
    );
    let python = envelope(
        &[
            ("eval", &[("id", "string"), ("job", "string")]),
            ("sandbox_info", &[("id", "string")]),
            ("static_check", &[("id", "string")]),
        ],
        &[
            ("result", &[("id", "string"), ("result", "object")]),
            ("warning", &[("id", "string")]),
        ],
    );
    assert_eq!(
        envelope_differences(&rust, &python),
        [
            "op eval.job is object in kforge but string in envelope.py",
            "kforge sends the op \"reload\", which envelope.py does not declare",
            "eval::envelope lists the op \"static_check\" as one kforge never sends, but it is \
             a variant of its enum",
            "event result.pid (integer) is read by kforge but envelope.py does not declare it",
            "event result.result (object) is declared in envelope.py but kforge does not read it",
            "envelope.py declares the event \"warning\", which kforge does not type (a variant \
             of eval::envelope's enum, or one of the names it lists as unused)",
            "eval::envelope lists the event \"static\" as one kforge never reads, but \
             envelope.py does not declare it",
            "eval::envelope lists the event \"sandbox_info\" as one kforge never reads, but \
             envelope.py does not declare it",
        ]
    );
}
