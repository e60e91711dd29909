//! The harness's typed records (`kforge_harness/wire.py`: `Job`, `EvalSettings`, `Result`,
//! `Timing`, `TimingStats`, `CompileFigures`) against the shapes kforge serializes
//! (`eval::wire_schema`): a field added, removed or retyped on one side only fails here, by
//! name, before a job or a result goes unread.

mod eval_common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use eval_common::interpreter;

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
    let mut out = Vec::new();
    let records: std::collections::BTreeSet<&String> = rust.keys().chain(python.keys()).collect();
    let none = BTreeMap::new();
    for record in records {
        let (r, p) = (
            rust.get(record).unwrap_or(&none),
            python.get(record).unwrap_or(&none),
        );
        for (field, ty) in r {
            match p.get(field) {
                None => out.push(format!(
                    "{record}.{field} ({ty}) is sent by kforge but wire.py does not declare it"
                )),
                Some(py) if py != ty => out.push(format!(
                    "{record}.{field} is {ty} in kforge but {py} in wire.py"
                )),
                Some(_) => {}
            }
        }
        for (field, ty) in p {
            if !r.contains_key(field) {
                out.push(format!(
                    "{record}.{field} ({ty}) is declared in wire.py but kforge does not send it {}",
                    only_in_python_hint(record)
                ));
            }
        }
    }
    out
}

/// Why a field wire.py declares may be missing from kforge's shape of `record`.
fn only_in_python_hint(record: &str) -> &'static str {
    match record {
        "Job" | "EvalSettings" => {
            "(an optional [eval] setting not set in wire_schema.rs's settings_all_set?)"
        }
        _ => {
            "(a field kforge keeps unread in its `extra` belongs in the record's PASSED_THROUGH, \
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

/// The quoted names in `source` that follow `marker` (`"op": "eval"` -> `eval` for the
/// marker `"op": "`).
fn names_after(source: &str, marker: &str) -> std::collections::BTreeSet<String> {
    source
        .match_indices(marker)
        .filter_map(|(at, _)| {
            let rest = &source[at + marker.len()..];
            rest.find('"').map(|end| rest[..end].to_string())
        })
        .collect()
}

/// The envelope (`kforge_harness/envelope.py`): every op kforge sends the server is a request
/// the server declares, and every event kforge reads is one it declares. (The server also
/// answers ops kforge does not send yet: `static_check`, `sandbox_info`.)
#[test]
fn the_envelopes_ops_and_events_are_declared_on_both_sides() {
    let declared: BTreeMap<String, Vec<String>> = python_json("envelope.schema()");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/eval");
    let rust: String = ["evaluator.rs", "server.rs"]
        .iter()
        .map(|f| std::fs::read_to_string(root.join(f)).unwrap())
        .collect();
    let sent = names_after(&rust, "\"op\": \"");
    assert!(sent.contains("eval") && sent.contains("cancel"), "{sent:?}");
    for op in &sent {
        assert!(
            declared["ops"].contains(op),
            "kforge sends the op {op:?}, which envelope.py does not declare"
        );
    }
    // The events kforge matches on (`Some("progress") =>`, `== Some("error")`).
    let read: std::collections::BTreeSet<String> = names_after(&rust, "Some(\"")
        .into_iter()
        .filter(|name| {
            rust.contains(&format!("Some(\"{name}\") =>"))
                || rust.contains(&format!("== Some(\"{name}\")"))
        })
        .collect();
    assert!(
        read.contains("result") && read.contains("progress"),
        "{read:?}"
    );
    for event in &read {
        assert!(
            declared["events"].contains(event),
            "kforge reads the event {event:?}, which envelope.py does not declare"
        );
    }
}
