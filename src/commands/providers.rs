//! `kforge providers`: the known providers (presets and configured ones), which one is
//! the default and why, and whether each key is present. Keys are never printed.

use std::path::Path;
use std::process::ExitCode;

use crate::config::Config;
use crate::llm::ProviderKind;
use crate::llm::config::process_env;

#[derive(clap::Args, Debug)]
pub struct ProvidersArgs {}

pub async fn run(_args: ProvidersArgs, config_file: Option<&Path>) -> anyhow::Result<ExitCode> {
    let config = Config::load(config_file)?;
    print!("{}", render(&config, &process_env));
    Ok(ExitCode::SUCCESS)
}

/// The whole listing, as printed.
pub fn render(config: &Config, env: crate::llm::config::EnvLookup) -> String {
    let rows = config.llm.summaries(env);
    let mut table = vec![[
        "".to_string(),
        "PROVIDER".into(),
        "PROTOCOL".into(),
        "MODEL".into(),
        "KEY".into(),
        "BASE URL / COMMAND".into(),
        "FROM".into(),
    ]];
    for r in &rows {
        table.push([
            if r.is_default { "*".into() } else { "".into() },
            r.name.clone(),
            r.kind.to_string(),
            r.model.clone().unwrap_or_else(|| "(set --model)".into()),
            r.key.to_string(),
            match (&r.command, &r.base_url) {
                (Some(argv), _) if r.kind == ProviderKind::Command => {
                    format!("$ {}", argv.join(" "))
                }
                (_, Some(url)) => url.clone(),
                _ => "(no base_url)".into(),
            },
            r.origin.to_string(),
        ]);
    }
    // Not a server: the person answers (the TUI's `A`, or $EDITOR for `kforge ask`).
    table.push([
        "".into(),
        "manual".into(),
        "you".into(),
        "-".into(),
        "no key".into(),
        "(you write the answers)".into(),
        "built in".into(),
    ]);
    let widths: Vec<usize> = (0..7)
        .map(|i| {
            table
                .iter()
                .map(|row| row[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in &table {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out.push('\n');
    match config.llm.default_provider(env) {
        Ok((name, reason)) => out.push_str(&format!("default: {name} ({reason})\n")),
        Err(e) => out.push_str(&format!("default: none. {e}\n")),
    }
    let sources = if config.sources.is_empty() {
        "none (built-in presets only)".to_string()
    } else {
        config
            .sources
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    out.push_str(&format!("config files: {sources}\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listing_marks_the_default_and_never_prints_keys() {
        let config = Config::load_files(&[], None).unwrap();
        let env = |name: &str| (name == "DEEPSEEK_API_KEY").then(|| "sk-very-secret".to_string());
        let text = render(&config, &env);
        assert!(!text.contains("sk-very-secret"), "{text}");
        let line = text.lines().find(|l| l.contains("deepseek")).unwrap();
        assert!(
            line.starts_with('*') && line.contains("DEEPSEEK_API_KEY set"),
            "{text}"
        );
        assert!(text.contains("OPENAI_API_KEY MISSING"), "{text}");
        assert!(
            text.lines()
                .any(|l| l.starts_with("   manual") || l.contains(" manual ")),
            "{text}"
        );
        assert!(
            text.contains("default: deepseek (DEEPSEEK_API_KEY is set)"),
            "{text}"
        );
        let none = render(&config, &|_: &str| None);
        let mut config = config;
        config.llm.providers.insert(
            "cli".into(),
            crate::llm::ProviderConfig {
                protocol: Some(ProviderKind::Command),
                command: Some(vec!["claude".into(), "-p".into()]),
                ..Default::default()
            },
        );
        let with_command = render(&config, &|_: &str| None);
        let line = with_command.lines().find(|l| l.contains(" cli ")).unwrap();
        assert!(
            line.contains("command") && line.contains("$ claude -p"),
            "{with_command}"
        );
        assert!(
            none.contains("default: none. no LLM provider configured"),
            "{none}"
        );
    }

    #[test]
    fn the_address_and_model_from_the_environment_are_the_ones_listed() {
        let config = Config::default();
        let env = |name: &str| match name {
            "KFORGE_BASE_URL" => Some("http://tok_abc@127.0.0.1:9/v1".to_string()),
            "KFORGE_MODEL" => Some("m-env".to_string()),
            _ => None,
        };
        let text = render(&config, &env);
        let line = text.lines().find(|l| l.contains("openai")).unwrap();
        assert!(
            line.contains("http://***@127.0.0.1:9/v1 (KFORGE_BASE_URL)")
                && line.contains("m-env (KFORGE_MODEL)"),
            "{text}"
        );
        assert!(!text.contains("tok_abc"), "{text}");
    }
}
