//! `kforge providers` (being written: see issue 3).

use std::path::Path;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct ProvidersArgs {}

pub async fn run(_args: ProvidersArgs, _config: Option<&Path>) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not yet available")
}
