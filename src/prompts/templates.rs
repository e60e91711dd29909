//! The template files: which ones kforge ships (embedded as defaults), and the set that
//! reads a user directory's overrides and renders them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use anyhow::{Context, Result, bail};
use minijinja::syntax::SyntaxConfig;
use minijinja::{Environment, TemplateSource, UndefinedBehavior, context};

use super::context::PromptContext;
use super::markdown::RenderedPrompt;
use crate::protocol::TemplateName;
use crate::pysource::task_reader::is_recurrent;

/// Every template file kforge ships, with its embedded default. Names starting with `_`
/// are partials (included or extended by the others).
pub const DEFAULT_TEMPLATES: &[(&str, &str)] = &[
    ("system.j2", include_str!("../../prompts/system.j2")),
    ("seed.j2", include_str!("../../prompts/seed.j2")),
    ("repair.j2", include_str!("../../prompts/repair.j2")),
    ("analysis.j2", include_str!("../../prompts/analysis.j2")),
    (
        "optimize_from_analysis.j2",
        include_str!("../../prompts/optimize_from_analysis.j2"),
    ),
    (
        "stage_grid_and_parallel.j2",
        include_str!("../../prompts/stage_grid_and_parallel.j2"),
    ),
    (
        "stage_block_tiling.j2",
        include_str!("../../prompts/stage_block_tiling.j2"),
    ),
    (
        "stage_memory_and_tuning.j2",
        include_str!("../../prompts/stage_memory_and_tuning.j2"),
    ),
    ("instructed.j2", include_str!("../../prompts/instructed.j2")),
    ("followup.j2", include_str!("../../prompts/followup.j2")),
    ("_rules.j2", include_str!("../../prompts/_rules.j2")),
    ("_output.j2", include_str!("../../prompts/_output.j2")),
    ("_reference.j2", include_str!("../../prompts/_reference.j2")),
    ("_kernel.j2", include_str!("../../prompts/_kernel.j2")),
    (
        "_performance.j2",
        include_str!("../../prompts/_performance.j2"),
    ),
    ("_history.j2", include_str!("../../prompts/_history.j2")),
    ("_stage.j2", include_str!("../../prompts/_stage.j2")),
    ("_prefix.j2", include_str!("../../prompts/_prefix.j2")),
    ("_analysis.j2", include_str!("../../prompts/_analysis.j2")),
];

/// The file listing where each snapshot template came from.
pub const SNAPSHOT_SOURCES_FILE: &str = "sources.json";

/// Where the templates come from: `[prompts] dir` of the merged configuration if set,
/// else `./prompts` when it is a directory, else `<config dir>/prompts` when it is one.
/// `None`: the built-in templates only.
pub fn user_dir(config: &crate::config::Config) -> Option<PathBuf> {
    let configured = config
        .table
        .get("prompts")
        .and_then(|p| p.get("dir"))
        .and_then(|d| d.as_str())
        .map(PathBuf::from);
    configured.or_else(|| {
        let local = PathBuf::from("prompts");
        if local.is_dir() {
            return Some(local);
        }
        crate::paths::config_dir()
            .map(|d| d.join("prompts"))
            .filter(|d| d.is_dir())
    })
}

type Stamp = Option<(SystemTime, u64)>;

fn file_stamp(path: &Path) -> Stamp {
    let metadata = std::fs::metadata(path).ok()?;
    Some((metadata.modified().ok()?, metadata.len()))
}

fn default_source(name: &str) -> Option<&'static str> {
    DEFAULT_TEMPLATES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, s)| *s)
}

/// A template name that is a plain file name (no directories, no `..`).
fn safe_name(name: &str) -> bool {
    !name.is_empty() && !name.contains(['/', '\\']) && name != "." && name != ".."
}

/// The prompt templates: built-in defaults overridden per file by a user directory,
/// re-read when an override changes. Cheap to clone; usable from any thread.
#[derive(Clone)]
pub struct PromptSet {
    inner: Arc<Inner>,
}

struct Inner {
    user_dir: Option<PathBuf>,
    env: Environment<'static>,
}

impl std::fmt::Debug for PromptSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PromptSet")
            .field("user_dir", &self.inner.user_dir)
            .finish()
    }
}

impl PromptSet {
    /// A set reading overrides from `user_dir` (which must be a directory when given).
    pub fn new(user_dir: Option<PathBuf>) -> Result<PromptSet> {
        if let Some(dir) = &user_dir
            && !dir.is_dir()
        {
            bail!(
                "the prompt template directory {} does not exist (config `[prompts] dir`)",
                dir.display()
            );
        }
        let mut env = Environment::new();
        env.set_syntax(
            SyntaxConfig::builder()
                .trim_blocks(true)
                .lstrip_blocks(true)
                .keep_trailing_newline(true)
                .build()
                .context("prompt template syntax")?,
        );
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.set_auto_reload(true);
        let dir = user_dir.clone();
        env.set_loader(move |name| load(dir.as_deref(), name));
        Ok(PromptSet {
            inner: Arc::new(Inner { user_dir, env }),
        })
    }

    /// The set for a configuration (`user_dir`).
    pub fn from_config(config: &crate::config::Config) -> Result<PromptSet> {
        PromptSet::new(user_dir(config))
    }

    pub fn user_dir(&self) -> Option<&Path> {
        self.inner.user_dir.as_deref()
    }

    /// Where a template's text comes from now: the override's path, or `None` (built in).
    pub fn origin(&self, file: &str) -> Option<PathBuf> {
        self.inner
            .user_dir
            .as_ref()
            .map(|d| d.join(file))
            .filter(|p| safe_name(file) && p.is_file())
    }

    fn describe_origin(&self, file: &str) -> String {
        match self.origin(file) {
            Some(p) => format!("`{file}` ({})", p.display()),
            None => format!("`{file}` (built in)"),
        }
    }

    /// Renders `name`'s user text and the system text with `ctx`. Errors name the
    /// template file, where it comes from and the line.
    pub fn render(&self, name: TemplateName, ctx: &PromptContext) -> Result<RenderedPrompt> {
        let value = context! {
            latency => ctx.timing.describe(),
            recurrent => is_recurrent(&ctx.task_source),
            sizes => super::sizes::size_rule(&ctx.task_source),
            template => name.as_str(),
            ..minijinja::Value::from(minijinja::value::Serde(ctx))
        };
        let render = |file: &str| -> Result<String> {
            let result = self
                .inner
                .env
                .get_template(file)
                .and_then(|t| t.render(&value));
            result.map_err(|e| self.template_error(file, &e))
        };
        let system = render(&TemplateName::System.file_name())?;
        let user = if name == TemplateName::System {
            String::new()
        } else {
            render(&name.file_name())?
        };
        Ok(RenderedPrompt {
            template: name,
            system: tidy(&system),
            user: tidy(&user),
        })
    }

    fn template_error(&self, file: &str, e: &minijinja::Error) -> anyhow::Error {
        // An error inside an included or extended template is wrapped: report the innermost.
        let mut e = e;
        while let Some(inner) =
            std::error::Error::source(e).and_then(|s| s.downcast_ref::<minijinja::Error>())
        {
            e = inner;
        }
        let at = e.name().unwrap_or(file);
        let line = e.line().map(|l| format!(", line {l}")).unwrap_or_default();
        let detail = e.detail().map(|d| format!(": {d}")).unwrap_or_default();
        let via = if at == file {
            String::new()
        } else {
            format!(" (while rendering `{file}`)")
        };
        anyhow::anyhow!(
            "prompt template {}{line}{via}: {}{detail}",
            self.describe_origin(at),
            e.kind()
        )
    }

    /// Renders every template with `ctx`, to find errors in overrides early.
    pub fn check(&self, ctx: &PromptContext) -> Result<()> {
        for name in TemplateName::ALL {
            self.render(name, ctx)?;
        }
        Ok(())
    }

    /// Writes the templates in effect now (built-in or overridden, partials included, and
    /// any other `*.j2` of the user directory) into `dir`, with `sources.json` saying where
    /// each came from. The directory can later serve as a user directory to reproduce the
    /// prompts exactly.
    pub fn snapshot_into(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let mut names: Vec<String> = DEFAULT_TEMPLATES
            .iter()
            .map(|(n, _)| n.to_string())
            .collect();
        if let Some(user) = &self.inner.user_dir
            && let Ok(entries) = std::fs::read_dir(user)
        {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.ends_with(".j2") && !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        let mut sources = BTreeMap::new();
        for name in names {
            let (text, origin) = match self.origin(&name) {
                Some(path) => (
                    std::fs::read_to_string(&path)
                        .with_context(|| format!("cannot read {}", path.display()))?,
                    path.display().to_string(),
                ),
                None => match default_source(&name) {
                    Some(text) => (text.to_string(), "built-in".to_string()),
                    None => continue,
                },
            };
            let target = dir.join(&name);
            std::fs::write(&target, text)
                .with_context(|| format!("cannot write {}", target.display()))?;
            sources.insert(name, origin);
        }
        std::fs::write(
            dir.join(SNAPSHOT_SOURCES_FILE),
            serde_json::to_string_pretty(&sources)? + "\n",
        )
        .with_context(|| format!("cannot write {}", dir.display()))?;
        Ok(())
    }
}

/// The loader: the override in `dir` when present, else the built-in default. Either way
/// the source carries an up-to-date check, so an override that appears, changes or goes
/// away is seen at the next lookup.
fn load(dir: Option<&Path>, name: &str) -> Result<Option<TemplateSource>, minijinja::Error> {
    if !safe_name(name) {
        return Ok(None);
    }
    let path = dir.map(|d| d.join(name));
    if let Some(path) = path {
        let stamp = file_stamp(&path);
        if stamp.is_some() {
            let text = std::fs::read_to_string(&path).map_err(|e| {
                minijinja::Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    format!("cannot read {}: {e}", path.display()),
                )
            })?;
            return Ok(Some(
                TemplateSource::new(text).with_uptodate_check(move || file_stamp(&path) == stamp),
            ));
        }
        return Ok(default_source(name)
            .map(|text| TemplateSource::new(text).with_uptodate_check(move || !path.exists())));
    }
    Ok(default_source(name).map(TemplateSource::new))
}

/// Collapses runs of blank lines left by optional sections; one trailing newline.
fn tidy(text: &str) -> String {
    let mut out = String::new();
    let mut blank = 0;
    let mut in_fence = false;
    for line in text.trim().lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        }
        if line.trim().is_empty() && !in_fence {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_files_stages_and_calls() {
        for name in TemplateName::ALL {
            assert!(default_source(&name.file_name()).is_some(), "{name}");
        }
        for stage in TemplateName::STAGES {
            let t = TemplateName::stage(stage).unwrap();
            assert_eq!(t.file_name(), format!("stage_{stage}.j2"));
        }
        assert!(!safe_name("../x.j2") && safe_name("seed.j2"));
    }
}
