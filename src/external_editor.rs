//! Editing text in the person's editor (`$VISUAL`, `$EDITOR`, `[tui] editor`): the TUI's
//! rewrites and manual edits, and `kforge ask --provider manual`.

use anyhow::{Context, Result};

/// What came back from the editor.
#[derive(Debug)]
pub enum Edited {
    /// The file as the editor left it.
    Text(String),
    /// The editor exited unsuccessfully (aborted): nothing is taken from it.
    Failed(std::process::ExitStatus),
}

/// The editor to run: `$VISUAL`, else `$EDITOR`, else `vi`.
pub fn editor_from_env() -> String {
    ["VISUAL", "EDITOR"]
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .find(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "vi".into())
}

/// Writes `text` to a temporary file named `kforge-*{suffix}`, runs `editor FILE` through
/// the shell (so an editor with arguments works), and reads the file back.
pub fn edit(editor: &str, text: &str, suffix: &str) -> Result<Edited> {
    let file = tempfile::Builder::new()
        .prefix("kforge-edit-")
        .suffix(suffix)
        .tempfile()
        .context("cannot create a file to edit")?;
    std::fs::write(file.path(), text)
        .with_context(|| format!("cannot write {}", file.path().display()))?;
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("sh")
        .arg(file.path())
        .status()
        .with_context(|| format!("cannot run the editor `{editor}` (set $VISUAL or $EDITOR)"))?;
    if !status.success() {
        return Ok(Edited::Failed(status));
    }
    let edited = std::fs::read_to_string(file.path())
        .with_context(|| format!("cannot read {}", file.path().display()))?;
    Ok(Edited::Text(edited))
}
