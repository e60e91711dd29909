//! `kforge::batch::slurm` against a real Slurm: the single-node cluster of
//! scripts/slurm-single-node.sh (tests/slurm_common), skipped where Slurm cannot be installed.

mod batch_common;
mod engine_common;
mod eval_common;
mod slurm_common;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use kforge::batch::slurm::{self, SlurmOptions, SlurmState};

/// A stand-in for kforge (the array's elements only need something to run): writes its
/// arguments, one a line, to `BATCH/task-<index>` and says which element it is.
const FAKE_KFORGE: &str = r#"#!/bin/sh
# --config CONFIG batch task BATCH --index N
printf '%s\n' "$@" > "$5/task-$7"
echo "element $7 of array job $SLURM_ARRAY_JOB_ID"
"#;

#[test]
fn a_job_array_runs_on_the_single_node_cluster() {
    let Some(cluster) = slurm_common::slurm_cluster() else {
        return;
    };
    let env = cluster.env();
    let work = tempfile::tempdir().unwrap();
    // Names sbatch and bash could each misread: the job script's quoting meets both.
    let batch = work.path().join("my batch 'q' \"d\" #1 %x $y");
    let logs = batch.join("slurm logs %A");
    std::fs::create_dir_all(&logs).unwrap();
    let fake = work.path().join("fake kforge");
    std::fs::write(&fake, FAKE_KFORGE).unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = work.path().join("a config.toml");

    let options = SlurmOptions {
        partition: Some("debug".into()),
        time: Some("00:05:00".into()),
        cpus_per_task: Some(1),
        mem: Some("100M".into()),
        extra: vec!["--comment=kforge test #1".into()],
        ..SlurmOptions::default()
    };
    let indices = [0, 1, 3];
    let script = slurm::job_script(&options, &fake, &batch, Some(&config), &indices, &logs);
    let script_path = work.path().join("job.sh");
    std::fs::write(&script_path, &script).unwrap();

    let job = slurm::submit_with_env(&script_path, &env)
        .unwrap_or_else(|e| panic!("{e:#}\n{script}\n{}", cluster.log_tail()));

    let deadline = Instant::now() + Duration::from_secs(120);
    let states = loop {
        let states = slurm::query_with_env(job, &env).unwrap();
        let failed: BTreeMap<_, _> = states.iter().filter(|(_, s)| s.is_failure()).collect();
        assert!(
            failed.is_empty(),
            "failed elements {failed:?}\n{script}\n{}",
            cluster.log_tail()
        );
        if indices
            .iter()
            .all(|i| states.get(i) == Some(&SlurmState::Completed))
        {
            break states;
        }
        assert!(
            Instant::now() < deadline,
            "not all completed in 120 s: {states:?}\n{}",
            cluster.log_tail()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(
        states.keys().copied().collect::<Vec<_>>(),
        indices.to_vec(),
        "only the submitted indices"
    );

    for i in indices {
        let args = read(&batch.join(format!("task-{i}")));
        let expected = [
            "--config".to_string(),
            config.display().to_string(),
            "batch".into(),
            "task".into(),
            batch.display().to_string(),
            "--index".into(),
            i.to_string(),
        ];
        assert_eq!(args.lines().collect::<Vec<_>>(), expected);
        let log = read(&logs.join(format!("{job}_{i}.out")));
        assert_eq!(log.trim(), format!("element {i} of array job {job}"));
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| {
        let listing: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        panic!("{}: {e} (there: {listing:?})", path.display())
    })
}

mod slurm_batch {
    //! `kforge batch --slurm` end to end on the single-node cluster: three tasks on the CPU
    //! against a scripted LLM; one element fails (its provider refuses the calls), `batch
    //! status` shows Slurm's word for each element, and `batch resume` re-submits only that
    //! one, which then completes.

    use std::path::Path;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    use serde_json::Value;

    use super::batch_common::{read_json, task_statuses};
    use super::engine_common::*;
    use super::eval_common::{kforge, text};

    fn manifest(batch: &Path) -> Value {
        read_json(&batch.join("batch.json"))
    }

    /// Waits until `n` runs of the batch have ended (each element records its run).
    fn wait_for_runs(batch: &Path, n: usize, env: &[(String, String)], what: &str) {
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            let ended = manifest(batch)["runs"]
                .as_array()
                .map_or(0, |r| r.iter().filter(|r| !r["ended"].is_null()).count());
            if ended >= n {
                return;
            }
            if Instant::now() > deadline {
                let status = kforge(&["batch", "status", &batch.display().to_string()])
                    .envs(env.iter().cloned())
                    .output()
                    .unwrap();
                let logs: Vec<String> = std::fs::read_dir(batch.join("slurm"))
                    .unwrap()
                    .flatten()
                    .filter(|e| e.path().extension().is_some_and(|x| x == "out"))
                    .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
                    .collect();
                panic!(
                    "{what}: {ended} of {n} runs ended in 300 s\n{}\n{}",
                    text(&status.stdout),
                    logs.join("\n-----\n")
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_three_task_batch_completes_on_the_single_node_cluster() {
        let Some(cluster) = super::slurm_common::slurm_cluster() else {
            return;
        };
        let env = cluster.env();
        // relu_01's calls are refused (401) until the flag is cleared.
        let refuse = Arc::new(AtomicBool::new(true));
        let script: Script = {
            let refuse = refuse.clone();
            Arc::new(move |step, user: &str, _| {
                if user.contains("SLURM-FLAKY") && refuse.load(Ordering::SeqCst) {
                    return "HTTP:401".into();
                }
                match step {
                    Step::Analysis => analysis_json("no"),
                    _ => fenced(&relu_ok("slurm seed")),
                }
            })
        };
        let mock = MockLlm::start(script, Duration::ZERO).await;
        let work = tempfile::tempdir().unwrap();
        let tasks = work.path().join("tasks");
        std::fs::create_dir_all(&tasks).unwrap();
        let relu = std::fs::read_to_string(fixtures().join("tasks/relu.py")).unwrap();
        for i in 0..3 {
            let marker = if i == 1 { "# SLURM-FLAKY\n" } else { "" };
            std::fs::write(
                tasks.join(format!("relu_{i:02}.py")),
                format!("{marker}{relu}"),
            )
            .unwrap();
        }
        let config = work.path().join("kforge-test.toml");
        std::fs::write(
            &config,
            format!(
                "[llm]\ndefault = \"mock\"\nread_timeout_s = 30\n\n[llm.providers.mock]\npreset = \"vllm\"\nbase_url = \"{}\"\nmodel = \"mock-1\"\n\n[pipeline]\nseeds = 1\nstages = []\n\n[eval]\ntimeout_s = 60.0\nshape_check = false\n",
                mock.base_url
            ),
        )
        .unwrap();
        let batch = work.path().join("slurm-batch");
        let b = batch.display().to_string();

        let submitted = tokio::task::spawn_blocking({
            let (env, tasks, config) = (env.clone(), tasks.clone(), config.clone());
            move || {
                kforge(&[
                    "batch",
                    &tasks.display().to_string(),
                    "--out",
                    &b,
                    "--config",
                    &config.display().to_string(),
                    "--cpu",
                    "--slurm",
                    "--partition",
                    "debug",
                    "--time",
                    "00:10:00",
                    "--cpus-per-task",
                    "1",
                ])
                .envs(env)
                .output()
                .unwrap()
            }
        })
        .await
        .unwrap();
        assert!(
            submitted.status.success(),
            "{}\n{}",
            text(&submitted.stderr),
            cluster.log_tail()
        );
        assert!(text(&submitted.stderr).contains("submitted job array"));
        let m = manifest(&batch);
        let first_job = m["slurm"]["submissions"][0]["job_id"].as_u64().unwrap();
        assert_eq!(
            m["slurm"]["submissions"][0]["indices"],
            serde_json::json!([0, 1, 2])
        );
        let job_sh = std::fs::read_to_string(batch.join("slurm/job.sh")).unwrap();
        assert!(job_sh.contains("#SBATCH --array=0-2"), "{job_sh}");
        assert!(!job_sh.contains("KEY"), "no secrets in the script");

        tokio::task::spawn_blocking({
            let (batch, env) = (batch.clone(), env.clone());
            move || wait_for_runs(&batch, 3, &env, "the first submission")
        })
        .await
        .unwrap();
        let status = kforge(&["batch", "status", &batch.display().to_string()])
            .envs(env.iter().cloned())
            .output()
            .unwrap();
        let table = text(&status.stdout);
        let row = |key: &str| {
            table
                .lines()
                .find(|l| l.starts_with(key))
                .unwrap_or_else(|| panic!("no row {key}:\n{table}"))
                .to_string()
        };
        assert!(row("relu_00").contains("complete"), "{table}");
        assert!(
            row("relu_00").contains(&format!("{first_job}_0 COMPLETED")),
            "{table}"
        );
        assert!(row("relu_01").contains("failed"), "{table}");
        assert!(
            row("relu_01").contains(&format!("{first_job}_1 FAILED")),
            "{table}"
        );
        assert!(row("relu_02").contains("complete"), "{table}");

        // The provider is back: resume re-submits the failed element only.
        refuse.store(false, Ordering::SeqCst);
        let resumed = tokio::task::spawn_blocking({
            let (batch, env) = (batch.clone(), env.clone());
            move || {
                kforge(&["batch", "resume", &batch.display().to_string()])
                    .envs(env)
                    .output()
                    .unwrap()
            }
        })
        .await
        .unwrap();
        assert!(resumed.status.success(), "{}", text(&resumed.stderr));
        assert!(
            text(&resumed.stderr).contains("re-submitting 1: relu_01"),
            "{}",
            text(&resumed.stderr)
        );
        let m = manifest(&batch);
        assert_eq!(
            m["slurm"]["submissions"][1]["indices"],
            serde_json::json!([1])
        );
        tokio::task::spawn_blocking({
            let (batch, env) = (batch.clone(), env.clone());
            move || wait_for_runs(&batch, 4, &env, "the re-submission")
        })
        .await
        .unwrap();
        let statuses = task_statuses(&batch);
        assert_eq!(statuses, ["complete", "complete", "complete"]);
        let again = kforge(&["batch", "resume", &batch.display().to_string()])
            .envs(env.iter().cloned())
            .output()
            .unwrap();
        assert!(
            text(&again.stderr).contains("nothing to re-submit"),
            "{}",
            text(&again.stderr)
        );
    }
}
