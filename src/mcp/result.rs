//! What a tool call returns: a result (text, structured content, `isError`) or nothing
//! for a call the client cancelled; and the arguments every tool parses.

use anyhow::{Result, anyhow};
use serde::Deserialize;
use serde_json::{Value, json};

/// What a tool call gave: a result for the client (`isError` for a tool that could not do
/// its work), or nothing because the client cancelled it.
#[derive(Debug)]
pub enum ToolOutcome {
    Done(ToolResult),
    Cancelled,
}

/// A `tools/call` result.
#[derive(Debug)]
pub struct ToolResult {
    pub text: String,
    pub structured: Option<Value>,
    pub is_error: bool,
}

impl ToolResult {
    pub(super) fn ok(text: String, structured: Value) -> ToolResult {
        ToolResult {
            text,
            structured: Some(structured),
            is_error: false,
        }
    }

    pub fn error(error: &anyhow::Error) -> ToolResult {
        ToolResult {
            text: format!("error: {error:#}"),
            structured: None,
            is_error: true,
        }
    }

    pub fn to_json(&self) -> Value {
        let mut result = json!({
            "content": [{"type": "text", "text": self.text}],
            "isError": self.is_error,
        });
        if let Some(s) = &self.structured {
            result["structuredContent"] = s.clone();
        }
        result
    }
}

/// A tool's arguments (an object; none at all is `{}`), unknown ones refused by the type.
pub(super) fn params<T: for<'de> Deserialize<'de>>(arguments: Value) -> Result<T> {
    let arguments = if arguments.is_null() {
        json!({})
    } else {
        arguments
    };
    serde_json::from_value(arguments).map_err(|e| anyhow!("invalid arguments: {e}"))
}
