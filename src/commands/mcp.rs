//! `kforge mcp`: the Model Context Protocol server on stdin/stdout (docs/mcp.md).

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;

use crate::config::Config;
use crate::mcp::{self, tools::Tools};

#[derive(clap::Args, Debug)]
pub struct McpArgs {}

pub async fn run(_args: McpArgs, config_file: Option<&Path>) -> Result<ExitCode> {
    let config = Config::load(config_file)?;
    eprintln!(
        "kforge: MCP server on stdio (tools: eval, task_check, session_summary, candidate_code)"
    );
    let stdin = tokio::io::BufReader::new(tokio::io::stdin());
    mcp::serve(stdin, tokio::io::stdout(), Tools::new(config)).await?;
    Ok(ExitCode::SUCCESS)
}
