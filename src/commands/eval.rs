use std::path::Path;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct EvalArgs {}

pub async fn run(_args: EvalArgs, _config: Option<&Path>) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not yet available")
}
