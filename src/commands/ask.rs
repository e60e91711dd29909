//! `kforge ask` (being written: see issue 3).

use std::path::Path;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct AskArgs {}

pub async fn run(_args: AskArgs, _config: Option<&Path>) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not yet available")
}
