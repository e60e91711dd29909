//! Why a candidate failed: the evaluator's categories (docs/architecture.md, Evaluation), the one
//! type every layer matches on.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Why a candidate failed. `Task` is the task file's fault, not the kernel's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    StaticCheck,
    Syntax,
    Import,
    Compile,
    OutOfResources,
    Runtime,
    CudaError,
    Oom,
    Mismatch,
    /// The output was produced by PyTorch (or the reference), not the kernel's Triton code.
    TorchFallback,
    Timeout,
    Crash,
    Harness,
    Task,
    Cancelled,
}

impl Category {
    pub fn as_str(&self) -> &'static str {
        match self {
            Category::StaticCheck => "static_check",
            Category::Syntax => "syntax",
            Category::Import => "import",
            Category::Compile => "compile",
            Category::OutOfResources => "out_of_resources",
            Category::Runtime => "runtime",
            Category::CudaError => "cuda_error",
            Category::Oom => "oom",
            Category::Mismatch => "mismatch",
            Category::TorchFallback => "torch_fallback",
            Category::Timeout => "timeout",
            Category::Crash => "crash",
            Category::Harness => "harness",
            Category::Task => "task",
            Category::Cancelled => "cancelled",
        }
    }

    /// Every category, in the order the harness's `protocol.CATEGORIES` lists them.
    pub const ALL: [Category; 15] = [
        Category::StaticCheck,
        Category::Syntax,
        Category::Import,
        Category::Compile,
        Category::OutOfResources,
        Category::Runtime,
        Category::CudaError,
        Category::Oom,
        Category::Mismatch,
        Category::TorchFallback,
        Category::Timeout,
        Category::Crash,
        Category::Harness,
        Category::Task,
        Category::Cancelled,
    ];

    pub fn parse(s: &str) -> Option<Category> {
        serde_json::from_value(serde_json::Value::String(s.to_string())).ok()
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
