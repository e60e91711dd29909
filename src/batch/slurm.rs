//! Slurm for `kforge batch --slurm`: a batch of tasks goes to Slurm as one job array, and array
//! element `i` runs task `i` (`kforge batch task BATCH --index i`). Here: the job script, the
//! `sbatch` call, and reading the array's state back from `squeue`, `sacct` and `scontrol`.
//!
//! What each command prints was captured from Slurm 22.05 (Debian 12) on the single-node cluster
//! of scripts/slurm-single-node.sh; the captures are in tests/fixtures/slurm and the parsers are
//! tested on them. docs/slurm.md has the setup.
//!
//! The functions that run Slurm's commands block (`std::process`): from async code, call them
//! through `tokio::task::spawn_blocking`.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fmt::{self, Write as _};
use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Command, Output};

use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};

/// What a batch asks of Slurm beyond the array itself; each `Some` becomes one `#SBATCH` line.
#[derive(Serialize, Deserialize, Default, Clone, Debug, PartialEq, Eq)]
#[serde(default)]
pub struct SlurmOptions {
    /// `--partition`
    pub partition: Option<String>,
    /// `--gres`, e.g. `gpu:1`
    pub gres: Option<String>,
    /// `--time`, e.g. `01:00:00`
    pub time: Option<String>,
    /// `--cpus-per-task`
    pub cpus_per_task: Option<u32>,
    /// `--mem`, e.g. `16G`
    pub mem: Option<String>,
    /// Further sbatch arguments as they are (`--account=proj`, `--qos=high`, `--exclusive`), all
    /// on one `#SBATCH` line, one word each.
    pub extra: Vec<String>,
}

/// The sbatch script of a batch: one job array over `indices` (an element per task), element `i`
/// running `kforge [--config C] batch task BATCH --index i`, its output in
/// `LOG_DIR/<array job id>_<index>.out`.
///
/// `kforge_exe`, `batch_dir`, `config` and `log_dir` should be absolute: the job starts in the
/// directory sbatch was called from. `indices` must not be empty (sbatch refuses an empty
/// array). Every path is quoted for bash, whatever it holds; `#SBATCH` lines have a syntax of
/// their own (sbatch's: double quotes, backslash escapes, `#` starts a comment, `%` is a
/// placeholder in `--output`), and a log dir that cannot be written in one (a backslash, which
/// turns off Slurm's `%A`/`%a` placeholders, or a control character, or bytes that are not UTF-8)
/// is written to by the script itself instead (`exec >>FILE 2>&1`): Slurm's own messages about
/// the element (time limit, cancellation) are then lost. An extra argument with a control
/// character in it is left out, with a comment saying so.
pub fn job_script(
    opts: &SlurmOptions,
    kforge_exe: &Path,
    batch_dir: &Path,
    config: Option<&Path>,
    indices: &[usize],
    log_dir: &Path,
) -> String {
    let mut s = String::new();
    s.push_str("#!/bin/bash\n");
    s.push_str(
        "# Written by `kforge batch --slurm`: one job array, element i runs task i of the batch.\n",
    );
    let name = batch_dir
        .file_name()
        .map(|n| job_name_part(&n.to_string_lossy()))
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "batch".to_string());
    let _ = writeln!(s, "#SBATCH --job-name=kforge-{name}");
    let _ = writeln!(s, "#SBATCH --array={}", array_spec(indices));
    let output = log_dir
        .to_str()
        .filter(|dir| !dir.contains('\\'))
        .and_then(|dir| sbatch_quote(&format!("{}/%A_%a.out", dir.replace('%', "%%"))));
    match &output {
        Some(pattern) => {
            let _ = writeln!(s, "#SBATCH --output={pattern}");
        }
        None => s.push_str("#SBATCH --output=/dev/null\n"),
    }
    let quoted = |value: &str| sbatch_quote(value).unwrap_or_else(|| sbatch_quote_lossy(value));
    if let Some(partition) = &opts.partition {
        let _ = writeln!(s, "#SBATCH --partition={}", quoted(partition));
    }
    if let Some(gres) = &opts.gres {
        let _ = writeln!(s, "#SBATCH --gres={}", quoted(gres));
    }
    if let Some(time) = &opts.time {
        let _ = writeln!(s, "#SBATCH --time={}", quoted(time));
    }
    if let Some(cpus) = opts.cpus_per_task {
        let _ = writeln!(s, "#SBATCH --cpus-per-task={cpus}");
    }
    if let Some(mem) = &opts.mem {
        let _ = writeln!(s, "#SBATCH --mem={}", quoted(mem));
    }
    let (extra, left_out): (Vec<_>, Vec<_>) = opts
        .extra
        .iter()
        .partition(|arg| sbatch_quote(arg).is_some());
    if !extra.is_empty() {
        let words: Vec<String> = extra.iter().filter_map(|arg| sbatch_quote(arg)).collect();
        let _ = writeln!(s, "#SBATCH {}", words.join(" "));
    }
    for _ in left_out {
        s.push_str(
            "# kforge: an extra sbatch argument with a control character in it was left out\n",
        );
    }
    s.push_str(
        "#\n\
         # No secrets are written here. API keys stay in the environment of whoever runs sbatch,\n\
         # and sbatch hands that environment to the job (--export=ALL is its default): an\n\
         # --export=NONE among the extra arguments leaves the job without them.\n",
    );
    s.push_str("set -euo pipefail\n");
    if output.is_none() {
        let _ = writeln!(
            s,
            "exec >>{}/\"${{SLURM_ARRAY_JOB_ID}}_${{SLURM_ARRAY_TASK_ID}}.out\" 2>&1",
            shell_quote(log_dir.as_os_str())
        );
    }
    let _ = write!(s, "exec {}", shell_quote(kforge_exe.as_os_str()));
    if let Some(config) = config {
        let _ = write!(s, " --config {}", shell_quote(config.as_os_str()));
    }
    let _ = writeln!(
        s,
        " batch task {} --index \"$SLURM_ARRAY_TASK_ID\"",
        shell_quote(batch_dir.as_os_str())
    );
    s
}

/// The batch dir's name as part of a job name: letters, digits and `._+-`, anything else `_`
/// (a job name with spaces would split `scontrol show job -o`'s words).
fn job_name_part(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._+-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `value` as one word of an `#SBATCH` line: in double quotes, with `\`, `"` and `#` escaped by a
/// backslash (sbatch 22.05 reads the line that way; `#` ends the line even inside quotes).
/// `None` when it holds a control character (a newline would end the line).
fn sbatch_quote(value: &str) -> Option<String> {
    if value.chars().any(char::is_control) {
        return None;
    }
    let mut quoted = String::with_capacity(value.len() + 2);
    quoted.push('"');
    for c in value.chars() {
        if matches!(c, '\\' | '"' | '#') {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('"');
    Some(quoted)
}

/// For the options of [`SlurmOptions`] only: control characters become spaces (sbatch then
/// refuses the odd value, rather than the line being cut).
fn sbatch_quote_lossy(value: &str) -> String {
    let cleaned: String = value
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    sbatch_quote(&cleaned).unwrap_or_default()
}

/// `word` as one word for bash: as it is when it holds only `A-Za-z0-9_./,:+=@%-`, else in
/// single quotes (`'` as `'\''`), or as `$'...'` with `\xHH` escapes when it has control
/// characters or bytes that are not UTF-8.
pub fn shell_quote(word: &OsStr) -> String {
    let bytes = word.as_bytes();
    if bytes.is_empty() {
        return "''".to_string();
    }
    let plain = |b: &u8| b.is_ascii_alphanumeric() || b"_./,:+=@%-".contains(b);
    if bytes.iter().all(plain) {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    if let Some(text) = word.to_str()
        && !text.chars().any(char::is_control)
    {
        return format!("'{}'", text.replace('\'', r"'\''"));
    }
    let mut quoted = String::from("$'");
    for &b in bytes {
        match b {
            b'\'' => quoted.push_str(r"\'"),
            b'\\' => quoted.push_str(r"\\"),
            0x20..=0x7e => quoted.push(b as char),
            _ => {
                let _ = write!(quoted, "\\x{b:02x}");
            }
        }
    }
    quoted.push('\'');
    quoted
}

/// `indices` as sbatch's `--array` wants them: sorted, duplicates dropped, runs as ranges
/// (`[0, 1, 2, 3, 7, 9, 10]` → `0-3,7,9-10`).
pub fn array_spec(indices: &[usize]) -> String {
    let mut sorted = indices.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut iter = sorted.into_iter().peekable();
    while let Some(first) = iter.next() {
        let mut last = first;
        while iter.peek() == Some(&(last + 1)) {
            last += 1;
            iter.next();
        }
        parts.push(if last == first {
            first.to_string()
        } else {
            format!("{first}-{last}")
        });
    }
    parts.join(",")
}

/// The job id in what `sbatch --parsable` printed: `12345`, or `12345;cluster` on a cluster of a
/// federation.
pub fn parse_sbatch_parsable(stdout: &str) -> Result<u64> {
    let line = stdout
        .lines()
        .map(str::trim)
        .rfind(|line| !line.is_empty())
        .ok_or_else(|| anyhow!("sbatch --parsable printed no job id"))?;
    let id = line.split(';').next().unwrap_or(line).trim();
    id.parse()
        .map_err(|_| anyhow!("sbatch --parsable printed {line:?}, not a job id"))
}

/// The state of one array element, as Slurm's commands name it (`JobState=` of scontrol, `%T` of
/// squeue, `State` of sacct).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash)]
pub enum SlurmState {
    /// Waiting: `PENDING`, and requeued or held on the way back to it (`REQUEUED`,
    /// `REQUEUE_HOLD`, `REQUEUE_FED`, `RESV_DEL_HOLD`).
    Pending,
    /// Holding its allocation: `RUNNING`, `CONFIGURING`, `COMPLETING`, `RESIZING`, `SIGNALING`,
    /// `STAGE_OUT`, and `SUSPENDED`/`STOPPED` (paused, not over).
    Running,
    /// `COMPLETED`: the script exited 0.
    Completed,
    /// `FAILED` (non-zero exit, or a launch failure) and `SPECIAL_EXIT`.
    Failed,
    /// `CANCELLED` (sacct says `CANCELLED by <uid>`).
    Cancelled,
    /// `TIMEOUT`, and `DEADLINE` (cut at its `--deadline`).
    Timeout,
    /// `OUT_OF_MEMORY`
    OutOfMemory,
    /// `NODE_FAIL`, and `BOOT_FAIL` (its node never came up).
    NodeFail,
    /// `PREEMPTED`
    Preempted,
    /// A word this module does not know (`REVOKED`, a newer Slurm's), as Slurm wrote it.
    Unknown(String),
}

impl SlurmState {
    /// The state in a word of Slurm's: the first word (`CANCELLED by 0`), a trailing `+` dropped
    /// (sacct's mark of a cut word), long names or squeue's short codes (`PD`, `R`, `CG`, ...).
    pub fn from_slurm(word: &str) -> SlurmState {
        let word = word.split_whitespace().next().unwrap_or("");
        let word = word.trim_end_matches('+');
        match word.to_ascii_uppercase().as_str() {
            "PENDING" | "PD" | "REQUEUED" | "RQ" | "REQUEUE_HOLD" | "RH" | "REQUEUE_FED" | "RF"
            | "RESV_DEL_HOLD" | "RD" => SlurmState::Pending,
            "RUNNING" | "R" | "CONFIGURING" | "CF" | "COMPLETING" | "CG" | "RESIZING" | "RS"
            | "SIGNALING" | "SI" | "STAGE_OUT" | "SO" | "SUSPENDED" | "S" | "STOPPED" | "ST" => {
                SlurmState::Running
            }
            "COMPLETED" | "CD" => SlurmState::Completed,
            "FAILED" | "F" | "SPECIAL_EXIT" | "SE" => SlurmState::Failed,
            "CANCELLED" | "CA" => SlurmState::Cancelled,
            "TIMEOUT" | "TO" | "DEADLINE" | "DL" => SlurmState::Timeout,
            "OUT_OF_MEMORY" | "OOM" => SlurmState::OutOfMemory,
            "NODE_FAIL" | "NF" | "BOOT_FAIL" | "BF" => SlurmState::NodeFail,
            "PREEMPTED" | "PR" => SlurmState::Preempted,
            _ => SlurmState::Unknown(word.to_string()),
        }
    }

    /// Not over yet: pending or running (an active element must not be submitted again).
    pub fn is_active(&self) -> bool {
        matches!(self, SlurmState::Pending | SlurmState::Running)
    }

    /// Over without completing: failed, cancelled, timed out, out of memory, node failure,
    /// preempted. `Unknown` is neither active nor a failure.
    pub fn is_failure(&self) -> bool {
        matches!(
            self,
            SlurmState::Failed
                | SlurmState::Cancelled
                | SlurmState::Timeout
                | SlurmState::OutOfMemory
                | SlurmState::NodeFail
                | SlurmState::Preempted
        )
    }

    /// Slurm's word for the state (`PENDING`, `OUT_OF_MEMORY`, ...).
    pub fn as_str(&self) -> &str {
        match self {
            SlurmState::Pending => "PENDING",
            SlurmState::Running => "RUNNING",
            SlurmState::Completed => "COMPLETED",
            SlurmState::Failed => "FAILED",
            SlurmState::Cancelled => "CANCELLED",
            SlurmState::Timeout => "TIMEOUT",
            SlurmState::OutOfMemory => "OUT_OF_MEMORY",
            SlurmState::NodeFail => "NODE_FAIL",
            SlurmState::Preempted => "PREEMPTED",
            SlurmState::Unknown(word) => word,
        }
    }
}

impl fmt::Display for SlurmState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The highest array index believed: Slurm's MaxArraySize is at most 4000001. A range beyond it
/// in a command's output is taken as garbage rather than expanded.
const MAX_ARRAY_INDEX: usize = 4_000_000;

/// The indices of an array task id as Slurm prints them: `4`, `0-2`, `3,7,9-10%2`,
/// `[0-3,7,9-10%2]` (squeue and sacct bracket a pending rest), `0-15:4` (a step).
/// `None` when it is not one.
fn expand_array_ids(spec: &str) -> Option<Vec<usize>> {
    let spec = spec.trim();
    let spec = spec
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .unwrap_or(spec);
    let spec = spec.split('%').next().unwrap_or(spec);
    let mut ids = Vec::new();
    for part in spec.split(',') {
        let (range, step) = match part.split_once(':') {
            Some((range, step)) => (range, step.parse::<usize>().ok().filter(|s| *s > 0)?),
            None => (part, 1),
        };
        let (first, last) = match range.split_once('-') {
            Some((a, b)) => (a.parse::<usize>().ok()?, b.parse::<usize>().ok()?),
            None => {
                let single = range.parse::<usize>().ok()?;
                (single, single)
            }
        };
        if first > last || last > MAX_ARRAY_INDEX {
            return None;
        }
        ids.extend((first..=last).step_by(step));
    }
    Some(ids)
}

/// The indices of a job id word (`12_3`, `12_[7,9-10%2]`) if it belongs to array job `job_id`.
fn array_ids_of(job_id: u64, word: &str) -> Option<Vec<usize>> {
    let (job, tasks) = word.trim().split_once('_')?;
    if job.parse::<u64>().ok()? != job_id {
        return None;
    }
    expand_array_ids(tasks)
}

/// What `squeue -h -j JOB -r -o '%i|%T'` prints: a line per pending or running element
/// (`12_3|RUNNING`). Without `-r` the pending rest is one line (`12_[7,9-10%2]|PENDING`), also
/// read. Finished elements are not listed (an empty output for an array that is over).
pub fn parse_squeue(job_id: u64, stdout: &str) -> BTreeMap<usize, SlurmState> {
    let mut states = BTreeMap::new();
    for line in stdout.lines() {
        let Some((id, state)) = line.split_once('|') else {
            continue;
        };
        let Some(ids) = array_ids_of(job_id, id) else {
            continue;
        };
        let state = SlurmState::from_slurm(state);
        for i in ids {
            states.insert(i, state.clone());
        }
    }
    states
}

/// What `sacct -n -P -j JOB -o JobID,State,ExitCode` prints: a line per element (`12_1|FAILED|3:0`)
/// and per step of it (`12_1.batch|...`, `12_1.extern|...`, skipped), the pending rest as one line
/// (`12_[2-3,7,9-10%2]|PENDING|0:0`). sacct trails slurmctld by a few seconds.
pub fn parse_sacct(job_id: u64, stdout: &str) -> BTreeMap<usize, SlurmState> {
    let mut states = BTreeMap::new();
    for line in stdout.lines() {
        let mut fields = line.split('|');
        let (Some(id), Some(state)) = (fields.next(), fields.next()) else {
            continue;
        };
        if id.contains('.') {
            continue;
        }
        let Some(ids) = array_ids_of(job_id, id) else {
            continue;
        };
        let state = SlurmState::from_slurm(state);
        for i in ids {
            states.insert(i, state.clone());
        }
    }
    states
}

/// What `scontrol show job -o JOB` prints: a line per element that started (`JobId=14
/// ArrayJobId=12 ArrayTaskId=1 ... JobState=FAILED ...`) and one for the pending rest
/// (`ArrayTaskId=3,7,9-10%2 ... JobState=PENDING`). The multi-line form (without `-o`) reads the
/// same: a record starts at each `JobId=`. Lasts MinJobAge seconds after an element ends.
pub fn parse_scontrol(job_id: u64, stdout: &str) -> BTreeMap<usize, SlurmState> {
    #[derive(Default)]
    struct Record<'a> {
        array_job_id: Option<&'a str>,
        array_task_id: Option<&'a str>,
        job_state: Option<&'a str>,
    }
    let mut records: Vec<Record> = Vec::new();
    for word in stdout.split_whitespace() {
        if word.starts_with("JobId=") {
            records.push(Record::default());
        }
        let Some(record) = records.last_mut() else {
            continue;
        };
        let Some((key, value)) = word.split_once('=') else {
            continue;
        };
        let slot = match key {
            "ArrayJobId" => &mut record.array_job_id,
            "ArrayTaskId" => &mut record.array_task_id,
            "JobState" => &mut record.job_state,
            _ => continue,
        };
        slot.get_or_insert(value);
    }
    let mut states = BTreeMap::new();
    for record in records {
        let (Some(array_job), Some(tasks), Some(state)) =
            (record.array_job_id, record.array_task_id, record.job_state)
        else {
            continue;
        };
        if array_job.parse::<u64>().ok() != Some(job_id) {
            continue;
        }
        let Some(ids) = expand_array_ids(tasks) else {
            continue;
        };
        let state = SlurmState::from_slurm(state);
        for i in ids {
            states.insert(i, state.clone());
        }
    }
    states
}

/// The state of every element of array job `job_id` that Slurm still knows, in the calling
/// process's environment (`SLURM_CONF` and the like). See [`query_with_env`].
pub fn query(job_id: u64) -> Result<BTreeMap<usize, SlurmState>> {
    query_with_env(job_id, &[])
}

/// The state of every element of array job `job_id` that Slurm still knows, with `env` added to
/// the environment of Slurm's commands.
///
/// Three sources, each over the one before: `sacct` when accounting works (everything, but a few
/// seconds late, and nothing at all without slurmdbd), then `scontrol show job` (slurmctld's
/// own, for MinJobAge seconds after an element ends), then `squeue` (the pending and running
/// ones). An element in none of them is missing from the map: never submitted, or forgotten
/// (slurmctld purged it and there is no accounting). Errors when squeue cannot be run or cannot
/// reach slurmctld; a job id slurmctld does not know is an empty answer, not an error.
pub fn query_with_env(
    job_id: u64,
    env: &[(String, String)],
) -> Result<BTreeMap<usize, SlurmState>> {
    let id = job_id.to_string();
    let squeue = run_slurm("squeue", &["-h", "-j", &id, "-r", "-o", "%i|%T"], env)?;
    let active = match checked(&squeue, "squeue")? {
        Some(stdout) => parse_squeue(job_id, &stdout),
        None => BTreeMap::new(),
    };

    let mut states = BTreeMap::new();
    match run_slurm(
        "sacct",
        &["-n", "-P", "-j", &id, "-o", "JobID,State,ExitCode"],
        env,
    ) {
        Ok(out) if out.status.success() => {
            states = parse_sacct(job_id, &String::from_utf8_lossy(&out.stdout));
        }
        // "Slurm accounting storage is disabled" (no slurmdbd), or no sacct at all.
        Ok(out) => tracing::debug!(
            "sacct does not answer: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(err) => tracing::debug!("no sacct: {err:#}"),
    }

    let scontrol = run_slurm("scontrol", &["show", "job", "-o", &id], env)?;
    if let Some(stdout) = checked(&scontrol, "scontrol show job")? {
        states.extend(parse_scontrol(job_id, &stdout));
    }
    states.extend(active);
    Ok(states)
}

/// Submits `script_path` (`sbatch --parsable SCRIPT`) in the calling process's environment, which
/// sbatch hands on to the job. The job id.
pub fn submit(script_path: &Path) -> Result<u64> {
    submit_with_env(script_path, &[])
}

/// Submits `script_path` with `env` added to sbatch's environment (and so to the job's).
pub fn submit_with_env(script_path: &Path, env: &[(String, String)]) -> Result<u64> {
    let out = run_slurm(
        "sbatch",
        &[OsStr::new("--parsable"), script_path.as_os_str()],
        env,
    )?;
    if !out.status.success() {
        bail!(
            "sbatch --parsable {} failed ({}): {}",
            script_path.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    parse_sbatch_parsable(&String::from_utf8_lossy(&out.stdout)).with_context(|| {
        format!(
            "sbatch --parsable {} (stderr: {})",
            script_path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )
    })
}

/// Runs one of Slurm's client commands; a missing one is said so, with where to look.
fn run_slurm<S: AsRef<OsStr>>(
    program: &str,
    args: &[S],
    env: &[(String, String)],
) -> Result<Output> {
    Command::new(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .map_err(|err| {
            if err.kind() == ErrorKind::NotFound {
                anyhow!("{program} not found: is Slurm installed? see docs/slurm.md")
            } else {
                anyhow!(err).context(format!("cannot run {program}"))
            }
        })
}

/// A query's stdout; `None` for a job id slurmctld does not know (purged after MinJobAge, or
/// never there: `slurm_load_jobs error: Invalid job id specified`); an error for any other
/// failure (slurmctld unreachable).
fn checked(out: &Output, what: &str) -> Result<Option<String>> {
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        return Ok(Some(String::from_utf8_lossy(&out.stdout).into_owned()));
    }
    if stderr.contains("Invalid job id") {
        return Ok(None);
    }
    bail!("{what} failed ({}): {}", out.status, stderr.trim())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;
    use std::path::PathBuf;

    fn fixture(name: &str) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/slurm")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn states(pairs: &[(usize, SlurmState)]) -> BTreeMap<usize, SlurmState> {
        pairs.iter().cloned().collect()
    }

    use SlurmState::*;

    // --- array_spec ------------------------------------------------------------------------

    #[test]
    fn array_spec_compresses_runs_into_ranges() {
        assert_eq!(array_spec(&[0, 1, 2, 3, 7, 9, 10]), "0-3,7,9-10");
        assert_eq!(array_spec(&[5]), "5");
        assert_eq!(array_spec(&[0, 2, 4]), "0,2,4");
        assert_eq!(array_spec(&[]), "");
    }

    #[test]
    fn array_spec_sorts_and_drops_duplicates() {
        assert_eq!(array_spec(&[10, 9, 3, 0, 2, 1, 7, 3, 0]), "0-3,7,9-10");
    }

    #[test]
    fn array_ids_read_back_what_array_spec_writes() {
        let indices = [0, 1, 2, 3, 7, 9, 10, 12];
        assert_eq!(
            expand_array_ids(&array_spec(&indices)).unwrap(),
            indices.to_vec()
        );
        assert_eq!(
            expand_array_ids("[0-3,7,9-10%2]").unwrap(),
            vec![0, 1, 2, 3, 7, 9, 10]
        );
        assert_eq!(expand_array_ids("0-12:4").unwrap(), vec![0, 4, 8, 12]);
        assert_eq!(expand_array_ids("4294967294"), None);
        assert_eq!(expand_array_ids("3-1"), None);
        assert_eq!(expand_array_ids("x"), None);
        assert_eq!(expand_array_ids(""), None);
    }

    // --- sbatch --parsable -----------------------------------------------------------------

    #[test]
    fn sbatch_parsable_gives_the_job_id() {
        // Captured: `sbatch --parsable --array=0-3,7,9-10%2 ...` on the single-node cluster.
        assert_eq!(
            parse_sbatch_parsable(&fixture("sbatch_parsable.txt")).unwrap(),
            12
        );
        assert_eq!(parse_sbatch_parsable("12345;cluster\n").unwrap(), 12345);
        assert_eq!(parse_sbatch_parsable("  777 \n\n").unwrap(), 777);
    }

    #[test]
    fn sbatch_parsable_refuses_what_is_not_a_job_id() {
        assert!(parse_sbatch_parsable("").is_err());
        let err = parse_sbatch_parsable("Submitted batch job 12\n").unwrap_err();
        assert!(format!("{err}").contains("not a job id"), "{err}");
    }

    // --- states ----------------------------------------------------------------------------

    #[test]
    fn states_from_slurm_words() {
        assert_eq!(SlurmState::from_slurm("PENDING"), Pending);
        assert_eq!(SlurmState::from_slurm("RUNNING"), Running);
        assert_eq!(SlurmState::from_slurm("COMPLETING"), Running);
        assert_eq!(SlurmState::from_slurm("CONFIGURING"), Running);
        assert_eq!(SlurmState::from_slurm("SUSPENDED"), Running);
        assert_eq!(SlurmState::from_slurm("REQUEUED"), Pending);
        assert_eq!(SlurmState::from_slurm("REQUEUE_HOLD"), Pending);
        assert_eq!(SlurmState::from_slurm("COMPLETED"), Completed);
        assert_eq!(SlurmState::from_slurm("FAILED"), Failed);
        assert_eq!(SlurmState::from_slurm("CANCELLED by 0"), Cancelled);
        assert_eq!(SlurmState::from_slurm("CANCELLED+"), Cancelled);
        assert_eq!(SlurmState::from_slurm("TIMEOUT"), Timeout);
        assert_eq!(SlurmState::from_slurm("DEADLINE"), Timeout);
        assert_eq!(SlurmState::from_slurm("OUT_OF_MEMORY"), OutOfMemory);
        assert_eq!(SlurmState::from_slurm("NODE_FAIL"), NodeFail);
        assert_eq!(SlurmState::from_slurm("BOOT_FAIL"), NodeFail);
        assert_eq!(SlurmState::from_slurm("PREEMPTED"), Preempted);
        assert_eq!(SlurmState::from_slurm("CD"), Completed);
        assert_eq!(SlurmState::from_slurm("PD"), Pending);
        assert_eq!(SlurmState::from_slurm("running"), Running);
        assert_eq!(
            SlurmState::from_slurm("REVOKED"),
            Unknown("REVOKED".to_string())
        );
    }

    #[test]
    fn active_and_failure_split_the_states() {
        for s in [Pending, Running] {
            assert!(s.is_active() && !s.is_failure(), "{s}");
        }
        for s in [Failed, Cancelled, Timeout, OutOfMemory, NodeFail, Preempted] {
            assert!(s.is_failure() && !s.is_active(), "{s}");
        }
        for s in [Completed, Unknown("REVOKED".into())] {
            assert!(!s.is_failure() && !s.is_active(), "{s}");
        }
        assert_eq!(OutOfMemory.to_string(), "OUT_OF_MEMORY");
        assert_eq!(Unknown("REVOKED".into()).to_string(), "REVOKED");
    }

    // --- squeue ----------------------------------------------------------------------------
    // Captured on array job 12: `--array=0-3,7,9-10%2 --time=00:00:05`, index 1 exits 3,
    // indices 2 and 3 sleep (2 is cancelled, 3 runs into the time limit), the others sleep 2 s.

    #[test]
    fn squeue_r_lists_each_pending_and_running_element() {
        let all = [0, 1, 2, 3, 7, 9, 10];
        assert_eq!(
            parse_squeue(12, &fixture("squeue_r_submitted.txt")),
            all.iter().map(|&i| (i, Pending)).collect()
        );
        assert_eq!(
            parse_squeue(12, &fixture("squeue_r_running.txt")),
            states(&[
                (0, Running),
                (2, Running),
                (3, Pending),
                (7, Pending),
                (9, Pending),
                (10, Pending)
            ])
        );
        assert_eq!(
            parse_squeue(12, &fixture("squeue_r_cancelled_one.txt")),
            states(&[(3, Running), (7, Pending), (9, Pending), (10, Pending)])
        );
        assert!(parse_squeue(12, &fixture("squeue_r_done.txt")).is_empty());
    }

    #[test]
    fn squeue_without_r_brackets_the_pending_rest() {
        assert_eq!(
            fixture("squeue_running.txt").lines().next(),
            Some("12_[3,7,9-10%2]|PENDING")
        );
        assert_eq!(
            parse_squeue(12, &fixture("squeue_running.txt")),
            parse_squeue(12, &fixture("squeue_r_running.txt"))
        );
        assert_eq!(
            parse_squeue(19, &fixture("squeue_held.txt")),
            (0..5).map(|i| (i, Pending)).collect()
        );
    }

    #[test]
    fn squeue_t_all_also_lists_finished_elements() {
        assert_eq!(
            parse_squeue(12, &fixture("squeue_all_r_done.txt")),
            states(&[
                (0, Completed),
                (1, Failed),
                (2, Cancelled),
                (3, Timeout),
                (7, Completed),
                (9, Completed),
                (10, Completed)
            ])
        );
    }

    #[test]
    fn squeue_lines_of_other_jobs_and_noise_are_skipped() {
        let out = "12_3|RUNNING\n13_3|FAILED\n12|RUNNING\nslurm_load_jobs error\n";
        assert_eq!(parse_squeue(12, out), states(&[(3, Running)]));
    }

    // --- sacct -----------------------------------------------------------------------------
    // Captured on array job 1 of a cluster with slurmdbd (MariaDB), same script as job 12.

    #[test]
    fn sacct_skips_steps_and_expands_the_pending_rest() {
        assert_eq!(
            parse_sacct(1, &fixture("sacct_running.txt")),
            states(&[
                (0, Running),
                (1, Failed),
                (2, Pending),
                (3, Pending),
                (7, Pending),
                (9, Pending),
                (10, Pending)
            ])
        );
    }

    #[test]
    fn sacct_after_the_end() {
        // Index 2 of job 1 was cancelled while still pending: sacct never lists it.
        let done = states(&[
            (0, Completed),
            (1, Failed),
            (3, Timeout),
            (7, Completed),
            (9, Completed),
            (10, Completed),
        ]);
        assert_eq!(parse_sacct(1, &fixture("sacct_done.txt")), done);
        assert_eq!(parse_sacct(1, &fixture("sacct_X_done.txt")), done);
        assert_eq!(
            parse_sacct(7, &fixture("sacct_cancelled_pending.txt")),
            (0..5).map(|i| (i, Cancelled)).collect()
        );
    }

    #[test]
    fn sacct_without_accounting_or_job_gives_nothing() {
        assert!(parse_sacct(1, &fixture("sacct_disabled.txt")).is_empty());
        assert!(parse_sacct(999999, &fixture("sacct_unknown.txt")).is_empty());
    }

    // --- scontrol --------------------------------------------------------------------------

    #[test]
    fn scontrol_one_line_per_element_and_one_for_the_pending_rest() {
        assert_eq!(
            parse_scontrol(12, &fixture("scontrol_o_submitted.txt")),
            [0, 1, 2, 3, 7, 9, 10]
                .iter()
                .map(|&i| (i, Pending))
                .collect()
        );
        assert_eq!(
            parse_scontrol(12, &fixture("scontrol_o_running.txt")),
            states(&[
                (0, Running),
                (1, Failed),
                (2, Running),
                (3, Pending),
                (7, Pending),
                (9, Pending),
                (10, Pending)
            ])
        );
        assert_eq!(
            parse_scontrol(12, &fixture("scontrol_o_cancelled_one.txt")),
            states(&[
                (0, Completed),
                (1, Failed),
                (2, Cancelled),
                (3, Running),
                (7, Pending),
                (9, Pending),
                (10, Pending)
            ])
        );
    }

    #[test]
    fn scontrol_after_the_end_one_line_and_multi_line() {
        let done = states(&[
            (0, Completed),
            (1, Failed),
            (2, Cancelled),
            (3, Timeout),
            (7, Completed),
            (9, Completed),
            (10, Completed),
        ]);
        assert_eq!(parse_scontrol(12, &fixture("scontrol_o_done.txt")), done);
        assert_eq!(
            parse_scontrol(12, &fixture("scontrol_multiline_done.txt")),
            done
        );
        assert!(parse_scontrol(13, &fixture("scontrol_o_done.txt")).is_empty());
    }

    #[test]
    fn scontrol_a_held_array_cancelled_before_it_ran() {
        assert_eq!(
            parse_scontrol(19, &fixture("scontrol_o_held.txt")),
            (0..5).map(|i| (i, Pending)).collect()
        );
        assert_eq!(
            parse_scontrol(19, &fixture("scontrol_o_cancelled_pending.txt")),
            (0..5).map(|i| (i, Cancelled)).collect()
        );
        assert!(parse_scontrol(19, &fixture("scontrol_unknown.txt")).is_empty());
    }

    #[test]
    fn an_element_cancelled_while_pending_vanishes() {
        let left = [0, 1, 3].iter().map(|&i| (i, Pending)).collect();
        assert_eq!(
            parse_squeue(25, &fixture("squeue_r_one_cancelled_while_pending.txt")),
            left
        );
        assert_eq!(
            parse_scontrol(25, &fixture("scontrol_o_one_cancelled_while_pending.txt")),
            left
        );
    }

    #[test]
    fn an_unknown_job_id_is_no_answer_and_other_failures_are_errors() {
        use std::os::unix::process::ExitStatusExt;
        let failed = |stderr: &str| Output {
            status: std::process::ExitStatus::from_raw(1 << 8),
            stdout: Vec::new(),
            stderr: stderr.as_bytes().to_vec(),
        };
        let unknown = fixture("squeue_unknown.txt");
        assert!(unknown.starts_with("slurm_load_jobs error: Invalid job id specified"));
        assert_eq!(checked(&failed(&unknown), "squeue").unwrap(), None);
        let unknown = fixture("scontrol_unknown.txt");
        assert_eq!(checked(&failed(&unknown), "scontrol").unwrap(), None);
        let err = checked(
            &failed("squeue: error: Unable to contact slurm controller (connect failure)"),
            "squeue",
        )
        .unwrap_err();
        assert!(format!("{err}").contains("Unable to contact"), "{err}");
    }

    // --- quoting and the job script --------------------------------------------------------

    #[test]
    fn shell_quote_leaves_plain_words_and_quotes_the_rest() {
        let q = |s: &str| shell_quote(OsStr::new(s));
        assert_eq!(q("/usr/bin/kforge"), "/usr/bin/kforge");
        assert_eq!(q("a=b,c:d@e%f+g-h_i.j"), "a=b,c:d@e%f+g-h_i.j");
        assert_eq!(q(""), "''");
        assert_eq!(q("/my batch"), "'/my batch'");
        assert_eq!(q("it's"), r"'it'\''s'");
        assert_eq!(q("$HOME `x` \"y\" ~ * ;"), "'$HOME `x` \"y\" ~ * ;'");
        assert_eq!(q("a\nb'c"), r"$'a\x0ab\'c'");
        let not_utf8 = OsString::from_vec(b"caf\xe9 \\".to_vec());
        assert_eq!(shell_quote(&not_utf8), r"$'caf\xe9 \\'");
    }

    #[test]
    fn shell_quote_survives_bash() {
        let words = [
            "plain",
            "/my batch/it's \"quoted\" $HOME `id` #1 %x \\ ~",
            "new\nline\ttab",
            "",
        ];
        for word in words {
            let out = Command::new("bash")
                .arg("-c")
                .arg(format!("printf %s {}", shell_quote(OsStr::new(word))))
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), word);
        }
        let not_utf8 = OsString::from_vec(b"caf\xe9'\x01".to_vec());
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!("printf %s {}", shell_quote(&not_utf8)))
            .output()
            .unwrap();
        assert_eq!(out.stdout, not_utf8.as_bytes());
    }

    #[test]
    fn sbatch_quote_escapes_what_sbatch_reads() {
        assert_eq!(sbatch_quote("gpu:1").unwrap(), "\"gpu:1\"");
        assert_eq!(
            sbatch_quote(r#"it's "q" #1 \ $y"#).unwrap(),
            r#""it's \"q\" \#1 \\ $y""#
        );
        assert_eq!(sbatch_quote("a\nb"), None);
    }

    #[test]
    fn job_name_part_keeps_a_single_word() {
        assert_eq!(job_name_part("level1-2025.06"), "level1-2025.06");
        assert_eq!(job_name_part("my batch 'x'"), "my_batch__x_");
    }

    #[test]
    fn a_plain_job_script() {
        let script = job_script(
            &SlurmOptions::default(),
            Path::new("/opt/kforge/bin/kforge"),
            Path::new("/home/me/batches/level1"),
            None,
            &[0, 1, 2, 3, 7, 9, 10],
            Path::new("/home/me/batches/level1/slurm/logs"),
        );
        insta::assert_snapshot!(script, @r#"
        #!/bin/bash
        # Written by `kforge batch --slurm`: one job array, element i runs task i of the batch.
        #SBATCH --job-name=kforge-level1
        #SBATCH --array=0-3,7,9-10
        #SBATCH --output="/home/me/batches/level1/slurm/logs/%A_%a.out"
        #
        # No secrets are written here. API keys stay in the environment of whoever runs sbatch,
        # and sbatch hands that environment to the job (--export=ALL is its default): an
        # --export=NONE among the extra arguments leaves the job without them.
        set -euo pipefail
        exec /opt/kforge/bin/kforge batch task /home/me/batches/level1 --index "$SLURM_ARRAY_TASK_ID"
        "#);
    }

    #[test]
    fn a_job_script_with_every_option_and_awkward_paths() {
        let opts = SlurmOptions {
            partition: Some("gpu".into()),
            gres: Some("gpu:1".into()),
            time: Some("01:30:00".into()),
            cpus_per_task: Some(8),
            mem: Some("32G".into()),
            extra: vec![
                "--account=proj #7".into(),
                "--exclusive".into(),
                "bad\narg".into(),
            ],
        };
        let script = job_script(
            &opts,
            Path::new("/opt/k forge/kforge"),
            Path::new("/data/it's \"my\" batch"),
            Some(Path::new("/etc/kforge $x.toml")),
            &[4],
            Path::new("/data/it's \"my\" batch/slurm/100% #1"),
        );
        insta::assert_snapshot!(script, @r#"
        #!/bin/bash
        # Written by `kforge batch --slurm`: one job array, element i runs task i of the batch.
        #SBATCH --job-name=kforge-it_s__my__batch
        #SBATCH --array=4
        #SBATCH --output="/data/it's \"my\" batch/slurm/100%% \#1/%A_%a.out"
        #SBATCH --partition="gpu"
        #SBATCH --gres="gpu:1"
        #SBATCH --time="01:30:00"
        #SBATCH --cpus-per-task=8
        #SBATCH --mem="32G"
        #SBATCH "--account=proj \#7" "--exclusive"
        # kforge: an extra sbatch argument with a control character in it was left out
        #
        # No secrets are written here. API keys stay in the environment of whoever runs sbatch,
        # and sbatch hands that environment to the job (--export=ALL is its default): an
        # --export=NONE among the extra arguments leaves the job without them.
        set -euo pipefail
        exec '/opt/k forge/kforge' --config '/etc/kforge $x.toml' batch task '/data/it'\''s "my" batch' --index "$SLURM_ARRAY_TASK_ID"
        "#);
    }

    #[test]
    fn a_log_dir_sbatch_cannot_take_is_written_by_the_script() {
        let script = job_script(
            &SlurmOptions::default(),
            Path::new("/usr/bin/kforge"),
            Path::new("/b"),
            None,
            &[0, 1],
            Path::new("/logs/back\\slash"),
        );
        assert!(script.contains("#SBATCH --output=/dev/null\n"), "{script}");
        assert!(
            script.contains(
                "exec >>'/logs/back\\slash'/\"${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}.out\" 2>&1\n"
            ),
            "{script}"
        );
        let not_utf8 = PathBuf::from(OsString::from_vec(b"/logs/\xff".to_vec()));
        let script = job_script(
            &SlurmOptions::default(),
            Path::new("/usr/bin/kforge"),
            Path::new("/"),
            None,
            &[0],
            &not_utf8,
        );
        assert!(
            script.contains("#SBATCH --job-name=kforge-batch\n"),
            "{script}"
        );
        assert!(script.contains("exec >>$'/logs/\\xff'/"), "{script}");
    }

    #[test]
    fn no_secret_from_the_environment_goes_into_the_script() {
        let script = job_script(
            &SlurmOptions::default(),
            Path::new("/usr/bin/kforge"),
            Path::new("/b"),
            None,
            &[0],
            Path::new("/b/slurm"),
        );
        for (key, value) in std::env::vars() {
            if key.ends_with("_API_KEY") && value.len() > 4 {
                assert!(!script.contains(&value), "{key} in the script");
            }
        }
        assert!(!script.contains("export "), "{script}");
    }

    #[test]
    fn slurm_options_round_trip_and_default_missing_fields() {
        let opts: SlurmOptions = serde_json::from_str(r#"{"partition":"gpu"}"#).unwrap();
        assert_eq!(opts.partition.as_deref(), Some("gpu"));
        assert!(opts.extra.is_empty());
        let back: SlurmOptions =
            serde_json::from_str(&serde_json::to_string(&opts).unwrap()).unwrap();
        assert_eq!(back, opts);
    }
}
