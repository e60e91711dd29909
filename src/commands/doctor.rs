use std::path::Path;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct DoctorArgs {}

pub async fn run(_args: DoctorArgs, _config: Option<&Path>) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not yet available")
}
