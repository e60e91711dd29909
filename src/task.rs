//! KernelBench task files: `class Model`, `get_inputs()`, `get_init_inputs()`.
//!
//! A quick textual check here gives an immediate, clear error for files that cannot be
//! tasks at all; the harness imports the file and is the authority on the rest.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use regex::Regex;

#[derive(Debug, Clone)]
pub struct TaskFile {
    pub path: PathBuf,
    /// File stem, e.g. `19_ReLU`.
    pub name: String,
    pub source: String,
    /// First 12 hex digits of the SHA-256 of the source.
    pub hash: String,
}

impl TaskFile {
    pub fn load(path: &Path) -> Result<TaskFile> {
        let bytes = std::fs::read(path)
            .with_context(|| format!("cannot read the task file {}", path.display()))?;
        let source = String::from_utf8(bytes)
            .map_err(|_| anyhow::anyhow!("the task file {} is not UTF-8 text", path.display()))?;
        check_shape(&source)
            .with_context(|| format!("{} is not a KernelBench task", path.display()))?;
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("task")
            .to_string();
        let hash = crate::eval::harness::short_hash(source.as_bytes());
        Ok(TaskFile {
            path: path.to_path_buf(),
            name,
            source,
            hash,
        })
    }
}

fn defines(source: &str, pattern: &str) -> bool {
    Regex::new(pattern)
        .expect("static pattern")
        .is_match(source)
}

fn check_shape(source: &str) -> Result<()> {
    let mut missing = Vec::new();
    if !defines(source, r"(?m)^\s*class\s+Model\b|(?m)^Model\s*=") {
        missing.push("a `class Model(nn.Module)`");
    }
    if !defines(source, r"(?m)^\s*def\s+get_inputs\s*\(|(?m)^get_inputs\s*=") {
        missing.push("a `get_inputs()` function");
    }
    if !missing.is_empty() {
        bail!("it does not define {}", missing.join(" or "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TASK: &str = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n\
                        def get_inputs():\n    return [torch.rand(4)]\ndef get_init_inputs():\n    return []\n";

    #[test]
    fn accepts_a_kernelbench_task() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("19_ReLU.py");
        std::fs::write(&path, TASK).unwrap();
        let task = TaskFile::load(&path).unwrap();
        assert_eq!(task.name, "19_ReLU");
        assert_eq!(task.hash.len(), 12);
    }

    #[test]
    fn names_what_is_missing() {
        let err = check_shape("def get_inputs():\n    return []\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("class Model") && !err.contains("get_inputs"),
            "{err}"
        );
        let err = check_shape("class Model:\n    pass\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("get_inputs()") && !err.contains("class Model"),
            "{err}"
        );
        // A model class with a longer name is not `Model`.
        assert!(check_shape("class ModelNew:\n    pass\ndef get_inputs():\n    pass\n").is_err());
    }

    #[test]
    fn missing_or_binary_files_are_clear_errors() {
        let err = format!(
            "{:#}",
            TaskFile::load(Path::new("/nonexistent/task.py")).unwrap_err()
        );
        assert!(
            err.contains("cannot read the task file /nonexistent/task.py"),
            "{err}"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bin.py");
        std::fs::write(&path, [0xff, 0xfe, 0x00]).unwrap();
        assert!(
            TaskFile::load(&path)
                .unwrap_err()
                .to_string()
                .contains("not UTF-8")
        );
    }
}
