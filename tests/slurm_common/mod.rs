//! A real single-node Slurm cluster for the tests of `kforge batch --slurm`, from
//! scripts/slurm-single-node.sh: installed when missing (root with apt-get only), started in a
//! temporary directory on free ports, stopped when dropped.

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A running cluster of this test process. Dropping it stops its daemons (and cancels its jobs).
pub struct SlurmCluster {
    dir: tempfile::TempDir,
    conf: PathBuf,
}

impl SlurmCluster {
    /// What a child process needs to talk to this cluster (`SLURM_CONF`); sbatch hands it on
    /// to the jobs.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![("SLURM_CONF".to_string(), self.conf.display().to_string())]
    }

    /// The cluster's directory: slurm.conf, logs (log/), state, spool.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The tail of the daemons' logs, for a failing test's message.
    pub fn log_tail(&self) -> String {
        let mut tail = String::new();
        for name in ["slurmctld.log", "slurmd.log"] {
            let path = self.dir().join("log").join(name);
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            tail.push_str(&format!("----- {}\n", path.display()));
            for line in &lines[lines.len().saturating_sub(20)..] {
                tail.push_str(line);
                tail.push('\n');
            }
        }
        tail
    }
}

impl Drop for SlurmCluster {
    fn drop(&mut self) {
        match Command::new(script())
            .arg("stop")
            .arg(self.dir.path())
            .output()
        {
            Ok(out) if out.status.success() => {}
            Ok(out) => eprintln!(
                "slurm-single-node.sh stop {} failed: {}",
                self.dir.path().display(),
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(err) => eprintln!("cannot run slurm-single-node.sh stop: {err}"),
        }
    }
}

pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/slurm-single-node.sh")
}

/// A cluster of this process's own, or `None` (after printing `SKIPPED: ...`) where Slurm is
/// not installed and cannot be (not root, no apt-get, apt-get failed), or where it cannot run
/// (not root). Slurm installed but not starting is a failure, not a skip.
pub fn slurm_cluster() -> Option<SlurmCluster> {
    if let Err(reason) = ensure_installed() {
        eprintln!("SKIPPED: Slurm cannot be installed here ({reason})");
        return None;
    }
    if !is_root() {
        eprintln!("SKIPPED: Slurm cannot be started here (slurmd runs jobs as root: not root)");
        return None;
    }
    // In /tmp, not the target dir: the daemons' unix sockets live under it (a short path).
    let dir = tempfile::Builder::new()
        .prefix("kforge-slurm-")
        .tempdir()
        .expect("a temporary directory for the cluster");
    let (ctld_port, slurmd_port) = free_ports();
    let out = Command::new(script())
        .arg("start")
        .arg(dir.path())
        .args(["--ctld-port", &ctld_port.to_string()])
        .args(["--slurmd-port", &slurmd_port.to_string()])
        .output()
        .expect("run scripts/slurm-single-node.sh start");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "slurm-single-node.sh start {} failed ({}):\n{stderr}",
        dir.path().display(),
        out.status
    );
    let conf = stdout
        .lines()
        .find_map(|line| line.strip_prefix("export SLURM_CONF="))
        .unwrap_or_else(|| panic!("no `export SLURM_CONF=` from start:\n{stdout}\n{stderr}"));
    eprintln!("{}", stderr.trim_end());
    Some(SlurmCluster {
        conf: PathBuf::from(conf.trim()),
        dir,
    })
}

const COMMANDS: [&str; 4] = ["sbatch", "slurmctld", "slurmd", "munged"];

/// Slurm's commands are there, or were installed just now; else why not.
fn ensure_installed() -> Result<(), String> {
    let missing: Vec<&str> = COMMANDS.into_iter().filter(|c| !on_path(c)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !is_root() {
        return Err(format!("{} missing, and not root", missing.join(", ")));
    }
    if !on_path("apt-get") {
        return Err(format!("{} missing, and no apt-get", missing.join(", ")));
    }
    eprintln!(
        "{} missing: running scripts/slurm-single-node.sh install",
        missing.join(", ")
    );
    let status = Command::new(script())
        .arg("install")
        .status()
        .map_err(|e| format!("cannot run slurm-single-node.sh install: {e}"))?;
    if !status.success() {
        return Err(format!("slurm-single-node.sh install failed ({status})"));
    }
    match COMMANDS.into_iter().find(|c| !on_path(c)) {
        Some(c) => Err(format!("{c} still missing after the install")),
        None => Ok(()),
    }
}

/// On `PATH`, or in the sbin directories (the daemons live there, off many users' PATH).
fn on_path(command: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .any(|dir| dir.join(command).is_file())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
        .unwrap_or(false)
}

/// Two TCP ports free on every interface right now (slurmctld and slurmd listen on all of
/// them), both held until both are picked so that they differ.
fn free_ports() -> (u16, u16) {
    let bind = || TcpListener::bind("0.0.0.0:0").expect("a free TCP port");
    let (a, b) = (bind(), bind());
    let port = |l: &TcpListener| l.local_addr().expect("a bound port").port();
    (port(&a), port(&b))
}
