//! What `tools/list` says of each tool: its name, title, description, behaviour hints
//! (`annotations`), the arguments it takes (`inputSchema`) and the shape of the
//! `structuredContent` it returns (`outputSchema`). Schemas are plain JSON Schema 2020-12
//! (MCP's default dialect since 2025-11-25) with one type per property: no `oneOf`, which
//! some clients cannot turn into a form or a function signature.

use serde_json::{Value, json};

/// The tools, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Eval,
    TaskCheck,
    SessionSummary,
    CandidateCode,
}

/// A device argument, as a string: `cpu`, `cuda`, `cuda:N` or a bare index `N` (an integer
/// is accepted too, and means `cuda:N`).
pub const DEVICE_PATTERN: &str = "^(cpu|cuda|cuda:[0-9]+|[0-9]+)$";

impl Tool {
    pub const ALL: [Tool; 4] = [
        Tool::Eval,
        Tool::TaskCheck,
        Tool::SessionSummary,
        Tool::CandidateCode,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Tool::Eval => "eval",
            Tool::TaskCheck => "task_check",
            Tool::SessionSummary => "session_summary",
            Tool::CandidateCode => "candidate_code",
        }
    }

    pub fn from_name(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.name() == name)
    }

    /// A name for people (clients show it in place of `name`).
    fn title(self) -> &'static str {
        match self {
            Tool::Eval => "Evaluate a Triton kernel",
            Tool::TaskCheck => "Check a KernelBench task",
            Tool::SessionSummary => "Summarize a kforge session",
            Tool::CandidateCode => "Read a session candidate's kernel",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Tool::Eval => {
                "Evaluate a Triton kernel (`class ModelNew`) against a KernelBench task (`class Model`, \
                 `get_inputs()`, `get_init_inputs()`) in kforge's sandboxed evaluator, as `kforge eval` \
                 does: correctness over seeded trials, then (on a GPU) timing. Returns the verdict, the \
                 speedup score with its interval when timed, flags, and the audit line; the full result \
                 as structured content. A failing kernel is a verdict, not a tool error."
            }
            Tool::TaskCheck => {
                "Check that a KernelBench task runs in kforge's evaluator: its Model built, run on its \
                 inputs, its memory planned and (on a GPU) the reference timed."
            }
            Tool::SessionSummary => {
                "Read a kforge session directory (read-only): its task, state, candidates with status, \
                 score and interval (or why there is none) and flags, the best, and the LLM usage spent."
            }
            Tool::CandidateCode => {
                "Read the kernel source of one candidate of a kforge session (read-only)."
            }
        }
    }

    /// The behaviour hints of MCP's `ToolAnnotations`. `eval` and `task_check` run code (in
    /// the evaluator's sandbox) and write under kforge's own cache and logs directories,
    /// never elsewhere: not read-only, not destructive. Each `eval` saves one more result
    /// file, so it is not idempotent; a task check rewrites the same cached reference
    /// timing. No tool reaches anything outside this machine's files and evaluator.
    fn annotations(self) -> Value {
        let (read_only, idempotent) = match self {
            Tool::Eval => (false, false),
            Tool::TaskCheck => (false, true),
            Tool::SessionSummary | Tool::CandidateCode => (true, true),
        };
        json!({
            "title": self.title(),
            "readOnlyHint": read_only,
            "destructiveHint": false,
            "idempotentHint": idempotent,
            "openWorldHint": false,
        })
    }

    fn input_schema(self) -> Value {
        let task = json!({
            "task": {"type": "string", "description": "Path of the task file (relative to the server's working directory)."},
            "task_source": {"type": "string", "description": "The task file's text, instead of `task`."},
        });
        let device = json!({
            "device": {
                "type": "string",
                "pattern": DEVICE_PATTERN,
                "description": "\"cpu\" (Triton's interpreter, correctness only), \"cuda\" or \"cuda:N\", or a CUDA device index as a string (\"0\"); default the first GPU, else the CPU.",
            },
            "precision": {"type": "string", "enum": ["strict", "tf32", "pytorch"], "description": "Precision policy (default: the config's)."},
        });
        let session =
            json!({"session": {"type": "string", "description": "Path of the session directory."}});
        let mut properties = serde_json::Map::new();
        let mut add = |v: Value| {
            if let Value::Object(m) = v {
                properties.extend(m);
            }
        };
        match self {
            Tool::Eval => {
                add(task);
                add(json!({
                    "kernel": {"type": "string", "description": "Path of the kernel file."},
                    "kernel_source": {"type": "string", "description": "The kernel file's text, instead of `kernel`."},
                    "trials": {"type": "integer", "minimum": 1, "description": "Correctness trials (default: the config's)."},
                    "timing": {"type": "boolean", "description": "Time a correct kernel (default true; never on the CPU)."},
                    "seed": {"type": "integer", "minimum": 0, "description": "Base seed of parameters and inputs (default: the config's)."},
                    "task_sizes": {"type": "boolean", "description": "On the CPU, run the task at its own sizes (default false: size constants too large for Triton's interpreter are shrunk, the result's `interpreter_sizes` says to what)."},
                }));
                add(device);
            }
            Tool::TaskCheck => {
                add(task);
                add(device);
            }
            Tool::SessionSummary => add(session),
            Tool::CandidateCode => {
                add(session);
                add(json!({"candidate": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "The candidate's id: 3 for #3.",
                }}));
            }
        }
        let required: &[&str] = match self {
            Tool::Eval | Tool::TaskCheck => &[],
            Tool::SessionSummary => &["session"],
            Tool::CandidateCode => &["session", "candidate"],
        };
        json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        })
    }

    /// The shape of the tool's `structuredContent`. The fields listed are always there;
    /// others may be (docs/eval-result.md, the session's `summary.json`).
    fn output_schema(self) -> Value {
        let nullable = |t: &str| json!({"type": [t, "null"]});
        let strings = json!({"type": "array", "items": {"type": "string"}});
        match self {
            Tool::Eval => json!({
                "type": "object",
                "description": "The evaluation's full result, the JSON of `kforge eval --json` (kforge's docs/eval-result.md).",
                "properties": {
                    "schema": {"type": "integer"},
                    "id": nullable("string"),
                    "status": {"type": "string", "enum": ["correct", "failed", "cancelled"]},
                    "correct": {"type": "boolean"},
                    "category": {"type": ["string", "null"], "description": "Why it failed (mismatch, compile, runtime, timeout, forbidden...); null when correct."},
                    "summary": {"type": "string", "description": "One line: what failed, where."},
                    "message": {"type": "string", "description": "The cleaned error text."},
                    "log": {"type": "string"},
                    "device": {"type": "object"},
                    "trials": {"type": "array", "items": {"type": "object"}},
                    "timing": {
                        "type": ["object", "null"],
                        "description": "Null without a GPU or with timing off.",
                        "properties": {
                            "meaningful": {"type": "boolean"},
                            "score": {"type": ["number", "null"], "description": "Reference median / kernel median."},
                            "score_low": nullable("number"),
                            "score_high": nullable("number"),
                        },
                    },
                    "flags": strings,
                    "notes": strings,
                    "sandbox": nullable("object"),
                    "audit": nullable("object"),
                    "tolerance": nullable("object"),
                    "precision": nullable("object"),
                    "speed_of_light": nullable("object"),
                    "interpreter_sizes": {"type": "object", "description": "Present on the CPU when the task's sizes were shrunk for Triton's interpreter: `task` and `evaluated` sizes by name."},
                    "phase": nullable("string"),
                    "duration_s": {"type": "number"},
                },
                "required": ["schema", "status", "correct", "category", "summary", "message", "device", "trials", "timing", "flags", "notes"],
            }),
            Tool::TaskCheck => json!({
                "type": "object",
                "properties": {
                    "task": {"type": "string"},
                    "device": {"type": "string", "description": "Where it ran: cpu, cuda:N."},
                    "status": {"type": "string", "enum": ["ready", "refused", "evaluator_failed"]},
                    "ready": {"type": "boolean"},
                    "line": {"type": "string"},
                },
                "required": ["task", "device", "status", "ready", "line"],
            }),
            Tool::SessionSummary => {
                let candidate = json!({
                    "type": "object",
                    "properties": {
                        "id": {"type": "integer"},
                        "kind": {"type": "string"},
                        "status": {"type": "string"},
                        "correct": {"type": "boolean"},
                        "score": nullable("number"),
                        "score_low": nullable("number"),
                        "score_high": nullable("number"),
                        "flags": strings,
                        "file": {"type": "string"},
                    },
                    "required": ["id", "kind", "status", "correct", "score", "flags", "file"],
                });
                json!({
                    "type": "object",
                    "description": "The session's summary.json, as `kforge report` writes it.",
                    "properties": {
                        "task": {"type": "string"},
                        "provider": {"type": "string"},
                        "model": {"type": "string"},
                        "device": {"type": "string"},
                        "timing_meaningful": {"type": "boolean"},
                        "state": {"type": "string"},
                        "best": {"anyOf": [candidate.clone(), {"type": "null"}]},
                        "candidates": {"type": "array", "items": candidate},
                        "usage": {"type": "object"},
                    },
                    "required": ["task", "state", "timing_meaningful", "best", "candidates", "usage"],
                })
            }
            Tool::CandidateCode => json!({
                "type": "object",
                "properties": {
                    "candidate": {"type": "integer"},
                    "file": {"type": "string", "description": "The file's path inside the session."},
                    "status": {"type": "string"},
                    "code": {"type": "string"},
                },
                "required": ["candidate", "file", "status", "code"],
            }),
        }
    }

    /// The tool as `tools/list` describes it.
    pub fn describe(self) -> Value {
        json!({
            "name": self.name(),
            "title": self.title(),
            "description": self.description(),
            "inputSchema": self.input_schema(),
            "outputSchema": self.output_schema(),
            "annotations": self.annotations(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `oneOf`/`anyOf`/`allOf` in a schema, by path.
    fn combinators(schema: &Value, path: &str, out: &mut Vec<String>) {
        match schema {
            Value::Object(m) => {
                for (k, v) in m {
                    if ["oneOf", "anyOf", "allOf"].contains(&k.as_str()) {
                        out.push(format!("{path}/{k}"));
                    }
                    combinators(v, &format!("{path}/{k}"), out);
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    combinators(v, &format!("{path}/{i}"), out);
                }
            }
            _ => {}
        }
    }

    #[test]
    fn every_tool_has_a_title_hints_and_both_schemas() {
        for tool in Tool::ALL {
            assert_eq!(Tool::from_name(tool.name()), Some(tool));
            let d = tool.describe();
            assert!(!d["title"].as_str().unwrap().is_empty(), "{d}");
            for hint in [
                "readOnlyHint",
                "destructiveHint",
                "idempotentHint",
                "openWorldHint",
            ] {
                assert!(d["annotations"][hint].is_boolean(), "{hint}: {d}");
            }
            assert_eq!(d["inputSchema"]["type"], "object", "{d}");
            assert!(d["inputSchema"]["properties"].is_object(), "{d}");
            assert_eq!(d["outputSchema"]["type"], "object", "{d}");
            // Every input property has one plain type: nothing a client must choose between.
            let mut found = Vec::new();
            combinators(&d["inputSchema"], "", &mut found);
            assert!(found.is_empty(), "{}: {found:?}", tool.name());
            for (name, p) in d["inputSchema"]["properties"].as_object().unwrap() {
                assert!(p["type"].is_string(), "{}.{name}: {p}", tool.name());
            }
        }
        assert_eq!(Tool::from_name("nope"), None);
    }

    #[test]
    fn only_the_session_readers_are_read_only() {
        let read_only = |t: Tool| t.describe()["annotations"]["readOnlyHint"] == true;
        assert!(read_only(Tool::SessionSummary) && read_only(Tool::CandidateCode));
        assert!(!read_only(Tool::Eval) && !read_only(Tool::TaskCheck));
        for tool in Tool::ALL {
            assert_eq!(tool.describe()["annotations"]["destructiveHint"], false);
            assert_eq!(tool.describe()["annotations"]["openWorldHint"], false);
        }
    }

    #[test]
    fn the_device_pattern_takes_what_the_parser_takes() {
        let re = regex::Regex::new(DEVICE_PATTERN).unwrap();
        for ok in ["cpu", "cuda", "cuda:0", "cuda:12", "0", "3"] {
            assert!(re.is_match(ok), "{ok}");
        }
        for bad in ["tpu", "cuda:", "gpu0", "-1", " cpu", "cuda:x"] {
            assert!(!re.is_match(bad), "{bad}");
        }
    }
}
