//! Sandbox escapes by a hostile kernel, against live targets: a secret in kforge's
//! environment, a loopback server, a stand-in home directory and an open session file,
//! and a daemon left behind. The kernel (tests/fixtures/kernels/sandbox_escape.py) runs
//! with the static filter off, so only the sandbox stands between it and these targets.

mod eval_common;

use eval_common::{evaluator, fixtures};
use std::io::Read;
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kforge::config::EvalConfig;
use kforge::eval::{Device, EvalRequest};
use kforge::protocol::Category;
use tokio_util::sync::CancellationToken;

const SECRET: &str = "sk-kforge-adversarial-0123456789abcdef";

/// Processes on this machine whose command line contains `needle`.
fn processes_with(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if text.contains(needle) {
                found.push(format!("{}: {text}", entry.file_name().to_string_lossy()));
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernel_cannot_reach_secrets_files_network_or_outlive_its_evaluation() {
    // The secret under a name no filter by name would catch; the evaluator's server is
    // started after this, so it inherits it (as kforge's own process would).
    // SAFETY: this test binary has this one test; nothing reads the environment concurrently.
    unsafe { std::env::set_var("LLM_ACCESS", SECRET) };

    let probe = tempfile::Builder::new()
        .prefix("kforge-probe-")
        .tempdir()
        .unwrap();
    let bashrc = probe.path().join("home/.bashrc");
    let events = probe.path().join("sessions/s/events.jsonl");
    std::fs::create_dir_all(bashrc.parent().unwrap()).unwrap();
    std::fs::create_dir_all(events.parent().unwrap()).unwrap();
    std::fs::write(&bashrc, "# untouched\n").unwrap();
    std::fs::write(&events, "{\"seq\": 1}\n").unwrap();
    // Held open, as kforge holds a session's events.jsonl: findable through /proc/<pid>/fd.
    let _open_session = std::fs::OpenOptions::new()
        .append(true)
        .open(&events)
        .unwrap();

    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let connections = Arc::new(AtomicUsize::new(0));
    let received = Arc::new(std::sync::Mutex::new(Vec::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let server = {
        let (connections, received, stop) = (connections.clone(), received.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut stream, _)) => {
                        connections.fetch_add(1, Ordering::Relaxed);
                        let mut data = Vec::new();
                        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
                        let _ = stream.read_to_end(&mut data);
                        received.lock().unwrap().extend(data);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        })
    };

    let template = std::fs::read_to_string(fixtures().join("kernels/sandbox_escape.py")).unwrap();
    let kernel = probe.path().join("kernel.py");
    std::fs::write(
        &kernel,
        template
            .replace("@PROBE_DIR@", probe.path().to_str().unwrap())
            .replace("@PORT@", &port.to_string()),
    )
    .unwrap();
    let marker = format!("4242.{port}");

    let evaluator = evaluator();
    let settings = EvalConfig {
        timeout_s: 120.0,
        static_checks: false,
        ..EvalConfig::default()
    };
    let request = EvalRequest::new(
        fixtures().join("tasks/relu.py"),
        &kernel,
        Device::Cpu,
        settings,
    );
    let result = evaluator
        .evaluate(request, CancellationToken::new(), None)
        .await
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
    let json = serde_json::to_string(&result).unwrap();

    let sandbox = result
        .sandbox
        .clone()
        .expect("the result says which sandbox held the kernel");
    assert!(sandbox.enforced, "no sandbox here: {}", sandbox.reason);
    assert!(
        result.correct,
        "the kernel itself is correct: {} {}",
        result.summary, result.log
    );
    assert!(
        result.log.contains("could not connect") || result.log.contains("could not write"),
        "the kernel's attempts ran and were logged:\n{}",
        result.log
    );
    assert!(
        !json.contains(SECRET),
        "the secret reached the result:\n{}",
        result.log
    );
    assert_eq!(std::fs::read_to_string(&bashrc).unwrap(), "# untouched\n");
    assert_eq!(std::fs::read_to_string(&events).unwrap(), "{\"seq\": 1}\n");
    assert_eq!(
        connections.load(Ordering::Relaxed),
        0,
        "the kernel reached 127.0.0.1:{port}"
    );
    assert!(!String::from_utf8_lossy(&received.lock().unwrap()).contains(SECRET));
    assert_eq!(
        processes_with(&marker),
        Vec::<String>::new(),
        "the daemon outlived the evaluation"
    );
    assert!(
        result.flags.iter().any(|f| f == "stray_processes"),
        "the daemon was found and killed: {:?} {:?}",
        result.flags,
        result.notes
    );

    // With the static filter on, the same kernel never runs.
    let request = EvalRequest::new(
        fixtures().join("tasks/relu.py"),
        &kernel,
        Device::Cpu,
        EvalConfig {
            timeout_s: 120.0,
            ..EvalConfig::default()
        },
    );
    let result = evaluator
        .evaluate(request, CancellationToken::new(), None)
        .await
        .unwrap();
    assert_eq!(
        result.category,
        Some(Category::StaticCheck),
        "{}",
        result.summary
    );
    evaluator.shutdown().await;
}
