//! `kforge::batch::slurm` against a real Slurm: the single-node cluster of
//! scripts/slurm-single-node.sh (tests/slurm_common), skipped where Slurm cannot be installed.

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
