//! Which Python runs the harness. In order: `KFORGE_PYTHON`; `[python] interpreter` from
//! the config; a `python3` on PATH that has torch and triton; else a managed virtual
//! environment in the cache dir, keyed by the pinned requirement ranges and created on
//! first use (with visible progress) through the same code path every user gets.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use super::harness::{REQUIREMENTS, short_hash};
use crate::config::PythonConfig;

/// Where the interpreter came from (shown by `doctor` and in errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PythonSource {
    EnvVar,
    Config,
    Path,
    Managed,
}

impl PythonSource {
    pub fn describe(&self) -> &'static str {
        match self {
            PythonSource::EnvVar => "KFORGE_PYTHON",
            PythonSource::Config => "[python] interpreter in the config",
            PythonSource::Path => "python3 on PATH",
            PythonSource::Managed => "managed environment",
        }
    }
}

#[derive(Debug, Clone)]
pub struct PythonEnv {
    pub executable: PathBuf,
    pub source: PythonSource,
}

/// The managed environment's directory for the current requirements.
pub fn managed_env_dir(cache_dir: &Path) -> PathBuf {
    cache_dir.join(format!("pyenv-{}", short_hash(REQUIREMENTS.as_bytes())))
}

fn venv_python(dir: &Path) -> PathBuf {
    if cfg!(windows) {
        dir.join("Scripts").join("python.exe")
    } else {
        dir.join("bin").join("python")
    }
}

const READY_MARKER: &str = ".kforge-ready";

/// Finds the interpreter, creating the managed environment when nothing else fits.
/// `report` receives human-readable progress lines (environment creation can take minutes).
pub fn resolve(
    config: &PythonConfig,
    cache_dir: &Path,
    report: &mut dyn FnMut(&str),
) -> Result<PythonEnv> {
    if let Some(value) = std::env::var_os("KFORGE_PYTHON").filter(|v| !v.is_empty()) {
        let executable = locate(Path::new(&value)).with_context(|| {
            format!(
                "KFORGE_PYTHON={} is not an executable file",
                Path::new(&value).display()
            )
        })?;
        return Ok(PythonEnv {
            executable,
            source: PythonSource::EnvVar,
        });
    }
    if let Some(path) = &config.interpreter {
        let executable = locate(path).with_context(|| {
            format!(
                "[python] interpreter = {} is not an executable file",
                path.display()
            )
        })?;
        return Ok(PythonEnv {
            executable,
            source: PythonSource::Config,
        });
    }
    if let Some(python) = find_on_path("python3")
        && has_torch_and_triton(&python)
    {
        return Ok(PythonEnv {
            executable: python,
            source: PythonSource::Path,
        });
    }
    let executable = ensure_managed(cache_dir, report)?;
    Ok(PythonEnv {
        executable,
        source: PythonSource::Managed,
    })
}

/// An explicit path, or a bare name looked up on PATH.
fn locate(path: &Path) -> Option<PathBuf> {
    if path.components().count() == 1 && !path.is_file() {
        return find_on_path(path.to_str()?);
    }
    path.is_file().then(|| path.to_path_buf())
}

pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        path.metadata()
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

/// Cheap check (no import): are torch and triton installed for this interpreter?
fn has_torch_and_triton(python: &Path) -> bool {
    Command::new(python)
        .args([
            "-c",
            "import importlib.util as u, sys; sys.exit(0 if u.find_spec('torch') and u.find_spec('triton') else 1)",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Returns the managed environment's interpreter, creating the environment if needed.
/// A lock file keeps two kforge processes from building it at once.
pub fn ensure_managed(cache_dir: &Path, report: &mut dyn FnMut(&str)) -> Result<PathBuf> {
    let dir = managed_env_dir(cache_dir);
    let python = venv_python(&dir);
    if dir.join(READY_MARKER).is_file() && python.is_file() {
        return Ok(python);
    }
    std::fs::create_dir_all(cache_dir)
        .with_context(|| format!("cannot create the cache dir {}", cache_dir.display()))?;
    let lock_path = cache_dir.join("pyenv.lock");
    let lock = crate::paths::open_lock_file(&lock_path)?;
    if lock.try_lock().is_err() {
        report("another kforge process is creating the Python environment; waiting for it");
        lock.lock()
            .with_context(|| format!("cannot lock {}", lock_path.display()))?;
    }
    if dir.join(READY_MARKER).is_file() && python.is_file() {
        return Ok(python);
    }
    let base = find_on_path("python3").or_else(|| find_on_path("python")).with_context(|| {
        "no Python 3 interpreter found on PATH. Install Python 3.9 or newer (Debian/Ubuntu: \
         `apt install python3 python3-venv`), or set KFORGE_PYTHON to an interpreter that imports torch and triton"
    })?;
    create_venv(&base, &dir, report)?;
    Ok(python)
}

fn create_venv(base: &Path, dir: &Path, report: &mut dyn FnMut(&str)) -> Result<()> {
    let partial = dir.with_extension("partial");
    if partial.exists() {
        std::fs::remove_dir_all(&partial)
            .with_context(|| format!("cannot remove {}", partial.display()))?;
    }
    report(&format!(
        "creating the Python environment for kernel evaluation in {} (torch + triton: several GB, a few minutes the first time)",
        dir.display()
    ));
    let out = Command::new(base)
        .args(["-m", "venv"])
        .arg(&partial)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", base.display()))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let hint = if stderr.contains("ensurepip") || stderr.contains("venv") {
            " Install the venv module (Debian/Ubuntu: `apt install python3-venv`)."
        } else {
            ""
        };
        bail!(
            "`{} -m venv` failed:{hint}\n{}",
            base.display(),
            stderr.trim()
        );
    }
    let python = venv_python(&partial);
    let pip_ok = Command::new(&python)
        .args(["-m", "pip", "--version"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !pip_ok {
        bail!(
            "pip is not available in the new environment {}: install pip for {} (Debian/Ubuntu: `apt install python3-pip python3-venv`)",
            partial.display(),
            base.display()
        );
    }
    let requirements = partial.join("kforge-requirements.txt");
    std::fs::write(&requirements, REQUIREMENTS)?;
    report("installing torch, triton and numpy with pip");
    let mut child = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--progress-bar",
            "off",
            "-r",
        ])
        .arg(&requirements)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run pip in {}", partial.display()))?;
    let stderr = child.stderr.take().expect("piped stderr");
    let stderr_lines = std::thread::spawn(move || {
        BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<_>>()
    });
    let mut tail = std::collections::VecDeque::new();
    for line in BufReader::new(child.stdout.take().expect("piped stdout"))
        .lines()
        .map_while(Result::ok)
    {
        let trimmed = line.trim();
        if [
            "Collecting",
            "Downloading",
            "Installing",
            "Successfully",
            "Using cached",
        ]
        .iter()
        .any(|p| trimmed.starts_with(p))
        {
            // "(from -r .../requirements.txt (line 3))" only repeats where it came from.
            let short = trimmed.split(" (from ").next().unwrap_or(trimmed);
            report(&format!("pip: {short}"));
        }
        tail.push_back(line);
        if tail.len() > 30 {
            tail.pop_front();
        }
    }
    let status = child.wait()?;
    let errors = stderr_lines.join().unwrap_or_default();
    if !status.success() {
        let mut text: Vec<String> = tail.into_iter().collect();
        text.extend(
            errors
                .into_iter()
                .rev()
                .take(30)
                .collect::<Vec<_>>()
                .into_iter()
                .rev(),
        );
        bail!(
            "pip could not install the evaluation requirements into {} (is PyPI reachable? a full disk?):\n{}",
            partial.display(),
            text.join("\n")
        );
    }
    if dir.exists() {
        std::fs::remove_dir_all(dir)
            .with_context(|| format!("cannot replace {}", dir.display()))?;
    }
    std::fs::rename(&partial, dir)
        .with_context(|| format!("cannot move the environment to {}", dir.display()))?;
    std::fs::write(dir.join(READY_MARKER), REQUIREMENTS)?;
    report(&format!("Python environment ready: {}", dir.display()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managed_dir_is_keyed_by_requirements() {
        let d = managed_env_dir(Path::new("/cache"));
        assert_eq!(
            d,
            Path::new("/cache").join(format!("pyenv-{}", short_hash(REQUIREMENTS.as_bytes())))
        );
    }

    #[test]
    fn explicit_interpreter_that_does_not_exist_is_a_clear_error() {
        let config = PythonConfig {
            interpreter: Some(PathBuf::from("/nonexistent/python3")),
        };
        // KFORGE_PYTHON would take precedence; tests never set it.
        if std::env::var_os("KFORGE_PYTHON").is_some() {
            return;
        }
        let err = resolve(&config, Path::new("/tmp"), &mut |_| {}).unwrap_err();
        assert!(
            err.to_string()
                .contains("[python] interpreter = /nonexistent/python3"),
            "{err}"
        );
    }

    #[test]
    fn ready_environment_is_reused_without_running_anything() {
        let cache = tempfile::tempdir().unwrap();
        let dir = managed_env_dir(cache.path());
        let python = venv_python(&dir);
        std::fs::create_dir_all(python.parent().unwrap()).unwrap();
        std::fs::write(&python, "").unwrap();
        std::fs::write(dir.join(READY_MARKER), "").unwrap();
        let mut lines = Vec::new();
        let found = ensure_managed(cache.path(), &mut |l| lines.push(l.to_string())).unwrap();
        assert_eq!(found, python);
        assert!(lines.is_empty());
    }
}
