//! A whole session replayed from real-model answers (issue 36): the transcript in
//! `tests/fixtures/replay/softmax_cpu.json` holds the answers written, as a strong model
//! would and without running them first, to every prompt of a CPU session on the softmax
//! fixture (`--provider manual --seeds 2 --speed-calls-on-cpu`). Here a `command` provider
//! (`replay.py`) answers each prompt from it, the real CPU evaluator judges every kernel,
//! and the session must end as it did: complete, the same calls in the same steps, the
//! same best, correct on every unseen shape.

mod eval_common;

use eval_common::{fixtures, interpreter, kforge, text};
use kforge::protocol::{CallKind, RunEnd};
use kforge::session::state::SessionState;
use kforge::session::store::SessionDir;

#[test]
fn a_recorded_session_replays_through_a_command_provider_to_the_same_end() {
    let transcript_file = fixtures().join("replay/softmax_cpu.json");
    let transcript: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&transcript_file).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("answered.log");
    let config = dir.path().join("kforge-test.toml");
    std::fs::write(
        &config,
        format!(
            // One call at a time, as the transcript was written (the person answered seed 1
            // first): the seeds' kernels become candidates 1 and 2 in that order, and on the
            // CPU, where nothing is timed, the earlier correct candidate is the best.
            "[pipeline]\nmax_concurrent_calls = 1\n\n[llm]\ndefault = \"replay\"\n\n[llm.providers.replay]\nprotocol = \"command\"\ncommand = [{:?}, {:?}, {:?}, {:?}]\n",
            interpreter().display().to_string(),
            fixtures().join("replay/replay.py").display().to_string(),
            transcript_file.display().to_string(),
            log.display().to_string(),
        ),
    )
    .unwrap();
    let sessions = dir.path().join("sessions");
    let task = fixtures().join("tasks/softmax.py");
    let out = kforge(&[
        "run",
        task.to_str().unwrap(),
        "--cpu",
        "--headless",
        "--seeds",
        "2",
        "--speed-calls-on-cpu",
        "--config",
        config.to_str().unwrap(),
        "--provider",
        "replay",
        "--timeout",
        "120",
        "--sessions-dir",
        sessions.to_str().unwrap(),
    ])
    .output()
    .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");

    let session_dir = std::fs::read_dir(&sessions)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let session = SessionDir::open(&session_dir).unwrap();
    let state = SessionState::from_records(&session.read_events().unwrap().records);
    assert_eq!(state.end, Some(RunEnd::Complete), "{stderr}");

    // The same calls, step by step, each answered from the transcript. The two seed calls
    // run at once and a candidate's id is taken when its answer arrives, so a key that names
    // a candidate by id (`analysis2`, `opt2`) is compared by the seed that candidate is: in
    // the recording seed N's kernel was candidate N (analysis1 matched `softmax_row_kernel`).
    let recorded: Vec<(String, String)> = transcript["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["key"].as_str().unwrap().to_string(),
                c["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let seed_of_candidate = |id: u32| {
        state
            .candidates
            .get(&kforge::protocol::CandidateId(id))
            .map_or_else(|| format!("#{id}"), |c| c.key.clone())
    };
    let mut made: Vec<(String, String)> = state
        .calls
        .values()
        .map(|c| {
            (
                by_seed(&c.key, seed_of_candidate),
                c.kind.word().to_string(),
            )
        })
        .collect();
    let mut expected: Vec<(String, String)> = recorded
        .iter()
        .map(|(key, kind)| (by_seed(key, |id| format!("seed{id}")), kind.clone()))
        .collect();
    made.sort();
    expected.sort();
    assert_eq!(made, expected);
    assert!(state.calls.values().all(|c| c.ok == Some(true)));
    let mut answered: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    answered.sort();
    let mut keys: Vec<String> = recorded.into_iter().map(|(k, _)| k).collect();
    keys.sort();
    assert_eq!(answered, keys, "each prompt matched its own recorded call");
    assert_eq!(
        state
            .calls
            .values()
            .filter(|c| c.kind == CallKind::Seed)
            .count(),
        2
    );

    // Every kernel correct; the best is seed 1's, right on every unseen shape.
    assert!(state.candidates.values().all(|c| c.is_correct()));
    let best = &state.candidates[&state.best.unwrap()];
    assert_eq!(best.key, transcript["ended"]["best_key"].as_str().unwrap());
    assert_eq!(
        best.shapes.as_ref().unwrap().line,
        transcript["ended"]["shapes"].as_str().unwrap()
    );
    assert!(
        session
            .read_file("best_kernel.py")
            .unwrap()
            .contains("def softmax_row_kernel")
    );
}

/// `analysis2` -> `analysis(seed1)` where candidate 2 is seed 1's kernel (`seed_of`); other
/// keys as they are.
fn by_seed(key: &str, seed_of: impl Fn(u32) -> String) -> String {
    for prefix in ["analysis", "opt"] {
        if let Some(id) = key.strip_prefix(prefix).and_then(|n| n.parse::<u32>().ok()) {
            return format!("{prefix}({})", seed_of(id));
        }
    }
    key.to_string()
}
