//! `kforge doctor`: what kforge will use, and each problem with its fix.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use serde_json::{Value, json};

use crate::config::Config;
use crate::eval;

#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Skip the Nsight Compute permission probe (it profiles a tiny kernel).
    #[arg(long)]
    pub no_ncu: bool,
}

struct Report {
    lines: Vec<(String, String)>,
    problems: Vec<(String, String)>,
    data: serde_json::Map<String, Value>,
}

impl Report {
    fn line(&mut self, key: &str, value: impl Into<String>) {
        self.lines.push((key.to_string(), value.into()));
    }
    fn problem(&mut self, what: impl Into<String>, fix: impl Into<String>) {
        self.problems.push((what.into(), fix.into()));
    }
}

pub async fn run(args: DoctorArgs, config_file: Option<&Path>) -> Result<ExitCode> {
    let mut r = Report {
        lines: Vec::new(),
        problems: Vec::new(),
        data: serde_json::Map::new(),
    };
    r.line("kforge", env!("CARGO_PKG_VERSION"));
    let config = match Config::load(config_file) {
        Ok(c) => {
            let files: Vec<String> = c.sources.iter().map(|p| p.display().to_string()).collect();
            r.line(
                "config",
                if files.is_empty() {
                    "built-in defaults (no config file)".into()
                } else {
                    files.join(", ")
                },
            );
            r.data.insert("config_files".into(), json!(files));
            // Not a problem (nothing breaks), but worth saying once: they do nothing now.
            if let Some(note) = crate::config::obsolete_keys_note(&c.eval) {
                r.line("", note);
                r.data
                    .insert("obsolete_config_keys".into(), json!(c.eval.obsolete_keys()));
            }
            c
        }
        Err(e) => {
            r.problem(
                format!("configuration: {e:#}"),
                "fix the file named above, or move it aside",
            );
            Config::default()
        }
    };

    // Nothing breaks without an LLM (eval, bench and open work), but a run stops at its
    // first call: say what would be used, or what to set.
    match crate::llm::config::resolve(&config, None, None) {
        Ok(p) => {
            r.line("llm", format!("{} · {}", p.name, p.model));
            r.data
                .insert("llm".into(), json!({"provider": p.name, "model": p.model}));
        }
        Err(e) => r.problem(
            format!("LLM: {e}"),
            "kforge eval, bench and open work without one; kforge run needs one",
        ),
    }

    command_checks(&config, &mut r);

    let cache = crate::paths::cache_dir();
    r.data.insert("cache_dir".into(), json!(cache));
    match std::fs::create_dir_all(&cache).and_then(|_| tempfile::tempfile_in(&cache)) {
        Ok(_) => r.line("cache", cache.display().to_string()),
        Err(e) => {
            r.line("cache", format!("{} (not writable)", cache.display()));
            r.problem(
                format!("the cache dir {} is not writable: {e}", cache.display()),
                "set KFORGE_CACHE_DIR to a writable directory",
            );
        }
    }

    let evaluator =
        eval::evaluator_from_config(&config, &cache, &mut |line| eprintln!("kforge: {line}"));
    match evaluator {
        Err(e) => r.problem(
            format!("Python: {e:#}"),
            "set KFORGE_PYTHON to an interpreter that imports torch and triton, or let kforge create its environment (needs python3 with venv and pip)",
        ),
        Ok(evaluator) => {
            let python = evaluator.python().clone();
            r.line("python", format!("{} ({})", python.executable.display(), python.source.describe()));
            r.data.insert("python".into(), json!({"executable": python.executable, "source": python.source.describe()}));
            match evaluator.hello().await {
                Err(e) => r.problem(format!("the harness cannot start: {e:#}"), "install torch and triton for that interpreter, or unset KFORGE_PYTHON to use the managed environment"),
                Ok(hello) => {
                    r.line("versions", format!(
                        "python {} · torch {} · triton {}",
                        hello.python.as_deref().unwrap_or("?"),
                        hello.torch.as_deref().unwrap_or("?"),
                        hello.triton.as_deref().unwrap_or("?")
                    ));
                    r.line("executor", if hello.fork { "fork server (fast)" } else { "fresh process per evaluation (no fork on this platform)" });
                    r.data.insert("versions".into(), json!({"python": hello.python, "torch": hello.torch, "triton": hello.triton, "import_s": hello.import_s}));
                    if let Some(line) = bytecode_line(&hello.no_bytecode, &python.executable) {
                        r.line("bytecode", line);
                        r.data.insert("no_bytecode".into(), json!(hello.no_bytecode));
                    }
                    sandbox_check(&hello, &config, &mut r);
                    gpu_checks(&evaluator, &mut r, !args.no_ncu).await;
                }
            }
            evaluator.shutdown().await;
        }
    }

    if args.json {
        r.data.insert(
            "problems".into(),
            json!(
                r.problems
                    .iter()
                    .map(|(w, f)| json!({"problem": w, "fix": f}))
                    .collect::<Vec<_>>()
            ),
        );
        println!("{}", serde_json::to_string_pretty(&Value::Object(r.data))?);
    } else {
        for (k, v) in &r.lines {
            println!("{k:<10} {v}");
        }
        if r.problems.is_empty() {
            println!("\nno problems found");
        } else {
            println!("\n{} problem(s):", r.problems.len());
            for (what, fix) in &r.problems {
                println!("  - {what}\n    fix: {fix}");
            }
        }
    }
    Ok(if r.problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// What doctor says of packages with no byte code on disk (`Hello::no_bytecode`): not a
/// problem (nothing breaks), but every harness process start compiles their sources again.
fn bytecode_line(dirs: &[String], python: &Path) -> Option<String> {
    if dirs.is_empty() {
        return None;
    }
    Some(format!(
        "none on disk for {}: each process kforge starts compiles them from source (on an H200 host `import torch` took 3.5 s instead of 2.2 s, and a one-shot's verdict came ~2.5 s later); byte-compile them once: {} -m compileall -q {}",
        dirs.join(", "),
        python.display(),
        dirs.join(" ")
    ))
}

/// Each command provider's program: found, or a problem.
fn command_checks(config: &Config, r: &mut Report) {
    use crate::llm::ProviderKind;
    use crate::llm::command::find_program;
    let commands = config
        .llm
        .providers
        .iter()
        .filter(|(_, p)| p.protocol == Some(ProviderKind::Command));
    for (name, p) in commands {
        let Some(program) = p.command.as_deref().and_then(<[String]>::first) else {
            r.problem(
                format!("provider `{name}` has protocol = \"command\" but no command"),
                format!("set [llm.providers.{name}] command = [\"prog\", \"arg\", ...]"),
            );
            continue;
        };
        match find_program(program) {
            Some(path) => r.line("command", format!("{name}: {}", path.display())),
            None => r.problem(
                format!(
                    "provider `{name}`: the program `{program}` is not found (or not executable)"
                ),
                "install it, put it on PATH, or give its full path in `command`",
            ),
        }
    }
}

/// Which sandbox generated kernels run in, and what happens without one.
fn sandbox_check(hello: &eval::protocol::Hello, config: &Config, r: &mut Report) {
    let Some(sandbox) = &hello.sandbox else {
        r.problem(
            "the harness did not say which sandbox it uses",
            "reinstall kforge: the harness is older than this binary",
        );
        return;
    };
    r.data.insert("sandbox".into(), json!(sandbox));
    if sandbox.enforced {
        r.line("sandbox", sandbox.detail.clone());
        if !sandbox.reason.is_empty() {
            r.line("", sandbox.reason.clone());
        }
        match &sandbox.task {
            Some(task) => r.line("task sandbox", task.detail.clone()),
            None => r.problem(
                "the harness runs tasks outside the sandbox",
                "reinstall kforge: the harness is older than this binary",
            ),
        }
        return;
    }
    r.line("sandbox", format!("NONE: {}", sandbox.reason));
    if let Some(task) = &sandbox.task {
        r.line("task sandbox", task.detail.clone());
    }
    let fix = "install bubblewrap (Debian/Ubuntu: `apt install bubblewrap`) or enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu 24.04)";
    if config.eval.require_sandbox {
        r.problem(
            "no sandbox can be set up, so every evaluation and task check is refused ([eval] require_sandbox = true)",
            fix,
        );
    } else {
        r.problem(
            "no sandbox: generated kernels and tasks run with your rights ([eval] require_sandbox = false)",
            fix,
        );
    }
}

async fn gpu_checks(evaluator: &eval::Evaluator, r: &mut Report, probe_ncu: bool) {
    let info = match evaluator.device_info().await {
        Ok(info) => info,
        Err(e) => {
            r.problem(
                format!("cannot query CUDA devices: {e:#}"),
                "check the NVIDIA driver with nvidia-smi",
            );
            return;
        }
    };
    r.data.insert("cuda".into(), info.clone());
    if let Some(error) = info.get("error").and_then(Value::as_str) {
        r.problem(
            format!("CUDA query failed: {error}"),
            "check the NVIDIA driver with nvidia-smi and that torch was built with CUDA",
        );
        return;
    }
    let devices = info
        .get("devices")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if devices.is_empty() {
        r.line("cuda", "no CUDA device: kernels run on the CPU through Triton's interpreter (correctness only, no timing)");
        r.line("peaks", "not measured (no GPU): evaluations count the task's work, the speed-of-light bound needs a GPU");
        r.line("ncu", "not checked (no GPU)");
        return;
    }
    for (i, d) in devices.iter().enumerate() {
        let gib =
            d.get("memory_bytes").and_then(Value::as_f64).unwrap_or(0.0) / (1u64 << 30) as f64;
        r.line(
            &format!("cuda:{i}"),
            format!(
                "{} · compute capability {} · {:.0} GiB · {} SMs",
                d.get("name").and_then(Value::as_str).unwrap_or("?"),
                d.get("capability").and_then(Value::as_str).unwrap_or("?"),
                gib,
                d.get("multiprocessors")
                    .and_then(Value::as_u64)
                    .unwrap_or(0)
            ),
        );
    }
    peak_lines(evaluator, r).await;
    if !probe_ncu {
        r.line("ncu", "not checked (--no-ncu)");
        return;
    }
    match evaluator.ncu_check().await {
        Err(e) => r.problem(
            format!("Nsight Compute check failed: {e:#}"),
            "run `ncu --version` by hand",
        ),
        Ok(ncu) => {
            r.data.insert("ncu".into(), ncu.clone());
            let message = ncu
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if ncu.get("found").and_then(Value::as_bool) != Some(true) {
                r.line(
                    "ncu",
                    "not found: --profile will report that metrics are unavailable",
                );
                r.problem(message, "install Nsight Compute (it ships with the CUDA toolkit) or set KFORGE_NCU to its ncu binary");
                return;
            }
            let version = ncu.get("version").and_then(Value::as_str).unwrap_or("?");
            match ncu.get("permitted").and_then(Value::as_bool) {
                Some(true) => r.line("ncu", format!("{version} · hardware counters permitted")),
                Some(false) => {
                    r.line(
                        "ncu",
                        format!("{version} · hardware counters NOT permitted"),
                    );
                    r.problem(
                        "Nsight Compute cannot read GPU performance counters",
                        message,
                    );
                }
                None => {
                    r.line("ncu", format!("{version} · permission unknown"));
                    r.problem(
                        format!("Nsight Compute probe inconclusive: {message}"),
                        "run `kforge eval --profile` on a small kernel to check",
                    );
                }
            }
        }
    }
}

/// Each GPU's measured peaks (the speed-of-light bound's), cached or measured now.
async fn peak_lines(evaluator: &eval::Evaluator, r: &mut Report) {
    let info = match evaluator.device_peaks().await {
        Ok(info) => info,
        Err(e) => {
            r.line("peaks", format!("not measured: {e:#}"));
            return;
        }
    };
    r.data.insert("peaks".into(), info.clone());
    if let Some(error) = info.get("error").and_then(Value::as_str) {
        r.line("peaks", format!("not measured: {error}"));
        return;
    }
    for d in info
        .get("devices")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let peaks: crate::protocol::sol::DevicePeaks =
            serde_json::from_value(d.clone()).unwrap_or_default();
        let how = match peaks.cached {
            Some(true) => " (cached)",
            Some(false) => " (measured now)",
            None => "",
        };
        let device = d.get("device").and_then(Value::as_str).unwrap_or("?");
        r.line(
            &format!("peaks {device}"),
            format!("{}{how}", peaks.describe()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packages_without_byte_code_get_the_command_that_compiles_them() {
        assert_eq!(bytecode_line(&[], Path::new("/usr/bin/python3")), None);
        let dirs = [
            "/env/site/torch".to_string(),
            "/env/site/triton".to_string(),
        ];
        let line = bytecode_line(&dirs, Path::new("/env/bin/python")).unwrap();
        assert!(line.contains("/env/site/torch, /env/site/triton"), "{line}");
        assert!(
            line.ends_with("/env/bin/python -m compileall -q /env/site/torch /env/site/triton"),
            "{line}"
        );
    }
}
