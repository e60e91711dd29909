//! TUI figures for docs/benchmarks.md (printed, never asserted):
//! `cargo bench --bench tui` (release). A generated session of 500 candidates and 100k
//! console lines: open time (read + fold + first frame at 200x60), frame times at 200x60
//! (p50/p99, a key then its frame, over every tab), peak RSS, and CPU used while nothing
//! changes (the real loop with its one-second tick; then with the 100 ms attach poll).
//!
//! Options: `--candidates N`, `--logs N`, `--frames N`, `--idle-secs N`.

use std::time::{Duration, Instant};

use kforge::session::store::SessionDir;
use kforge::tui::app::Input;
use kforge::tui::attach;
use kforge::tui::runtime::run_loop;
use kforge::tui::testing::{Harness, HarnessOptions, key_event, write_big_session};

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn status_kb(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// CPU time of every thread of this process, in milliseconds (ns resolution: the first
/// field of /proc/self/task/*/schedstat). Threads that ended are not counted.
fn cpu_ms() -> f64 {
    let mut ns = 0u64;
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for t in tasks.flatten() {
            if let Ok(text) = std::fs::read_to_string(t.path().join("schedstat")) {
                ns += text
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    ns as f64 / 1e6
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn main() {
    let candidates = arg("--candidates", 500) as u32;
    let logs = arg("--logs", 100_000) as u32;
    let frames = arg("--frames", 2000) as usize;
    let idle_secs = arg("--idle-secs", 5);
    let tmp = tempfile::tempdir().expect("tempdir");
    let t = Instant::now();
    write_big_session(tmp.path(), candidates, logs).expect("write session");
    let size = std::fs::metadata(tmp.path().join("events.jsonl"))
        .map(|m| m.len())
        .unwrap_or(0);
    println!(
        "session: {candidates} candidates, {logs} log lines, events.jsonl {:.1} MB (written in {:.0} ms)",
        size as f64 / 1e6,
        t.elapsed().as_secs_f64() * 1e3
    );

    // Open: read events.jsonl, fold, build the app, draw the first frame (highlighting
    // inline here, so the first frame includes loading syntect and highlighting).
    let rss_before = status_kb("VmRSS:");
    let t = Instant::now();
    let session = SessionDir::open(tmp.path()).expect("open");
    let (records, _) = attach::read_initial(&session).expect("read");
    let t_read = t.elapsed();
    let mut h = Harness::with_records(
        session,
        &records,
        HarnessOptions {
            width: 200,
            height: 60,
            ..Default::default()
        },
    )
    .expect("harness");
    let t_open = t.elapsed();
    drop(records);
    println!(
        "open: {:.1} ms (read + parse {:.1} ms, fold + first frame {:.1} ms)",
        t_open.as_secs_f64() * 1e3,
        t_read.as_secs_f64() * 1e3,
        (t_open - t_read).as_secs_f64() * 1e3
    );

    // Frames: a key, its handling and its frame, over every view.
    let keys = [
        "j", "j", "k", "2", "s", "n", "3", "4", ".", "5", "6", "1", "tab", "l", "h", "tab",
        "pagedown", "tab", "k", "k", "g", "G", "backtab", "backtab", "backtab", "j",
    ];
    // The UI thread never highlights (a worker does, see below): warm the highlight
    // cache for every kernel so the frames measure what the UI thread does.
    let t = Instant::now();
    let cx = h.app.ctx();
    let theme = cx.theme.syntax.clone();
    let ids: Vec<_> = cx.state.candidates.keys().copied().collect();
    for id in &ids {
        if let Some(code) = cx.code(*id) {
            cx.highlighter.get(&code, theme.as_deref());
        }
    }
    let warm = t.elapsed();
    println!(
        "syntax highlighting (worker thread in the app): {} kernels in {:.0} ms, {:.1} ms each",
        ids.len(),
        warm.as_secs_f64() * 1e3,
        warm.as_secs_f64() * 1e3 / ids.len().max(1) as f64
    );
    for k in keys {
        h.key(k); // warm the other caches
    }
    let mut per_key: std::collections::BTreeMap<&str, f64> = Default::default();
    let mut times = Vec::with_capacity(frames);
    let mut draw_only = Vec::with_capacity(frames);
    for i in 0..frames {
        let k = key_event(keys[i % keys.len()]);
        let t = Instant::now();
        h.input(Input::Key(k));
        let ms = t.elapsed().as_secs_f64() * 1e3;
        times.push(ms);
        let e = per_key.entry(keys[i % keys.len()]).or_default();
        *e = e.max(ms);
        let t = Instant::now();
        h.redraw();
        draw_only.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    draw_only.sort_by(f64::total_cmp);
    println!(
        "frame at 200x60 (key + its frame), {} frames: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        frames,
        pct(&times, 0.5),
        pct(&times, 0.99),
        times.last().copied().unwrap_or(0.0)
    );

    let mut slow: Vec<_> = per_key.into_iter().collect();
    slow.sort_by(|a, b| b.1.total_cmp(&a.1));
    println!(
        "slowest keys (max ms): {}",
        slow.iter()
            .take(5)
            .map(|(k, v)| format!("{k} {v:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "frame at 200x60 (draw only): p50 {:.2} ms, p99 {:.2} ms",
        pct(&draw_only, 0.5),
        pct(&draw_only, 0.99)
    );

    println!(
        "memory: peak RSS {:.1} MB with the session open and every view drawn (RSS before opening {:.1} MB)",
        status_kb("VmHWM:") as f64 / 1024.0,
        rss_before as f64 / 1024.0
    );

    // Idle: the real loop with its one-second tick and nothing happening.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let idle = |with_attach: bool, h: &mut Harness| -> (f64, usize) {
        rt.block_on(async {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let tick_tx = tx.clone();
            let ticker = tokio::spawn(async move {
                let mut iv = tokio::time::interval(Duration::from_secs(1));
                loop {
                    iv.tick().await;
                    if tick_tx.send(Input::Tick).is_err() {
                        break;
                    }
                }
            });
            let (ev_tx, mut ev_rx) = tokio::sync::mpsc::unbounded_channel();
            let follow = with_attach.then(|| {
                let session = SessionDir::open(tmp.path()).expect("open");
                let (initial, offset) = attach::read_initial(&session).expect("read");
                attach::follow(
                    session,
                    offset,
                    &initial,
                    ev_tx.clone(),
                    attach::POLL_INTERVAL,
                )
            });
            let fwd_tx = tx.clone();
            let forward = tokio::spawn(async move {
                while let Some(r) = ev_rx.recv().await {
                    let _ = fwd_tx.send(Input::Event(r));
                }
            });
            let quit_tx = tx.clone();
            drop(tx);
            let frames_before = h.frames;
            let stopper = tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(idle_secs)).await;
                let _ = quit_tx.send(Input::Key(key_event("q")));
            });
            // Let the first tick and start-up pass before measuring.
            let cpu0 = cpu_ms();
            let _ = run_loop(&mut h.terminal, &mut h.app, &mut rx, &mut h.host).await;
            let cpu = cpu_ms() - cpu0;
            ticker.abort();
            forward.abort();
            stopper.abort();
            if let Some(f) = follow {
                f.abort();
            }
            (cpu, h.frames - frames_before)
        })
    };
    let (cpu, _) = idle(false, &mut h);
    println!(
        "idle {idle_secs} s (finished session, 1 s tick): CPU {cpu:.2} ms ({:.3}% of a core)",
        cpu / (idle_secs as f64 * 10.0)
    );
    let mut h2 = Harness::open(
        tmp.path(),
        HarnessOptions {
            width: 200,
            height: 60,
            ..Default::default()
        },
    )
    .expect("harness");
    let (cpu, _) = idle(true, &mut h2);
    println!(
        "idle {idle_secs} s (attached, 100 ms poll of events.jsonl): CPU {cpu:.2} ms ({:.3}% of a core)",
        cpu / (idle_secs as f64 * 10.0)
    );
}
