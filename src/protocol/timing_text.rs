//! How a timing was taken, in words: the method and the environment that shaped the
//! figures (clocks, math modes, versions), for `kforge eval`'s verdict and the TUI's Eval
//! tab.

use super::{LaunchDraws, LaunchPath, TimingEnvironment};

/// What a timing `method` means, in words (`judge_window`; an unknown method as written),
/// with how many forwards each timed window held when there were several.
pub fn method_text(method: Option<&str>, forwards_per_window: Option<u32>) -> String {
    let text = match method {
        Some("judge_window") => {
            "judge window: the judge's own CUDA events around each process's whole GPU work".into()
        }
        Some(other) => other.to_string(),
        None => "CUDA events".into(),
    };
    match forwards_per_window {
        Some(n) if n > 1 => format!("{text}, {n} forwards per window (each on its own inputs)"),
        _ => text,
    }
}

fn on_off(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "on",
        Some(false) => "off",
        None => "?",
    }
}

/// `1980 -> 1755 MHz (max 1980)`, `1980 MHz (max 1980)` when before equals after.
fn clock(name: &str, before_after: Option<&[f64]>, max: Option<f64>) -> Option<String> {
    let max = max.map(|m| format!(" (max {m:.0})")).unwrap_or_default();
    match before_after? {
        [before, after] if before != after => {
            Some(format!("{name} {before:.0} -> {after:.0} MHz{max}"))
        }
        [value, ..] => Some(format!("{name} {value:.0} MHz{max}")),
        [] => None,
    }
}

/// The environment as labelled lines: `math` (TF32, float32 matmul precision), `clocks`
/// (SM and memory before -> after timing, locked or not, throttle reasons), `software`
/// (driver, CUDA, torch, triton), and the harness's own words on `method` and `inputs`.
/// Lines with nothing known are left out.
pub fn environment_lines(env: &TimingEnvironment) -> Vec<(&'static str, String)> {
    let mut lines = Vec::new();
    if env.tf32_matmul.is_some()
        || env.tf32_cudnn.is_some()
        || env.float32_matmul_precision.is_some()
    {
        let mut math = format!(
            "TF32 matmul {}, TF32 cuDNN {}",
            on_off(env.tf32_matmul),
            on_off(env.tf32_cudnn)
        );
        if let Some(p) = &env.float32_matmul_precision {
            math.push_str(&format!(", float32 matmul precision {p}"));
        }
        if let Some(policy) = env.precision {
            math = format!("{policy}, {}; reference {math}", policy.comparison());
        }
        lines.push(("math", math));
    }
    let mut clocks: Vec<String> = [
        clock("SM", env.sm_clock_mhz.as_deref(), env.max_sm_clock_mhz),
        clock(
            "memory",
            env.mem_clock_mhz.as_deref(),
            env.max_mem_clock_mhz,
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    match env.clocks_locked {
        Some(true) => clocks.push("locked".into()),
        Some(false) => clocks.push("not locked".into()),
        None if !clocks.is_empty() => clocks.push("locked: unknown".into()),
        None => {}
    }
    if !env.throttle_reasons.is_empty() {
        clocks.push(format!("throttle: {}", env.throttle_reasons.join(", ")));
    }
    if !clocks.is_empty() {
        lines.push(("clocks", clocks.join(", ")));
    }
    let software: Vec<String> = [
        env.driver.as_ref().map(|d| format!("driver {d}")),
        match (&env.cuda_driver, &env.cuda_runtime) {
            (Some(d), Some(r)) if d == r => Some(format!("CUDA {d}")),
            (Some(d), Some(r)) => Some(format!("CUDA driver {d}, runtime {r}")),
            (Some(d), None) => Some(format!("CUDA driver {d}")),
            (None, Some(r)) => Some(format!("CUDA runtime {r}")),
            (None, None) => None,
        },
        env.torch.as_ref().map(|t| format!("torch {t}")),
        env.triton.as_ref().map(|t| format!("triton {t}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !software.is_empty() {
        lines.push(("software", software.join(", ")));
    }
    if let Some(m) = env.timing_method.as_ref().filter(|m| !m.trim().is_empty()) {
        lines.push(("method", m.clone()));
    }
    if let Some(i) = env.input_refresh.as_ref().filter(|i| !i.trim().is_empty()) {
        lines.push(("inputs", i.clone()));
    }
    if let Some(launch) = env.launch_path.as_ref().and_then(launch_text) {
        lines.push(("launch", launch));
    }
    lines
}

/// One process's draws: `kernel 0.468 ms (3 draws)`, `reference 0.52 ms (6 draws, none within
/// 4% of the floor)`, `kernel not drawn (why)`.
fn draws_text(name: &str, draws: &LaunchDraws, tolerance: Option<f64>) -> String {
    let Some(kept) = draws.probes_ms.last() else {
        let why = draws.error.as_deref().unwrap_or("no probe");
        return format!("{name} not drawn ({why})");
    };
    let count = draws.probes_ms.len();
    let plural = if count == 1 { "" } else { "s" };
    let missed = match (draws.accepted, tolerance) {
        (Some(false), Some(t)) => format!(", none within {:.0}% of the floor", t * 100.0),
        (Some(false), None) => ", none within the tolerance".into(),
        _ => String::new(),
    };
    format!("{name} {kept:.3} ms ({count} draw{plural}{missed})")
}

/// The `launch` line: each timing process's kept probe and draws, then the device's floor.
fn launch_text(launch: &LaunchPath) -> Option<String> {
    let p = &launch.processes;
    let parts: Vec<String> = [
        ("kernel", &p.kernel),
        ("reference", &p.reference),
        ("compiled", &p.compiled),
    ]
    .into_iter()
    .filter_map(|(name, draws)| {
        draws
            .as_ref()
            .map(|d| draws_text(name, d, launch.tolerance))
    })
    .collect();
    if parts.is_empty() {
        return None;
    }
    let launches = launch.launches.unwrap_or(256);
    let floor = launch
        .floor_ms
        .map(|f| format!("; device floor {f:.3} ms"))
        .unwrap_or_default();
    Some(format!(
        "context probes ({launches} queued launches): {}{floor}",
        parts.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_launch_line_says_each_process_draws_and_the_floor() {
        let env = TimingEnvironment {
            launch_path: Some(LaunchPath {
                tolerance: Some(0.04),
                max_draws: Some(6),
                launches: Some(256),
                floor_ms: Some(0.4577),
                processes: crate::protocol::LaunchPathProcesses {
                    kernel: Some(LaunchDraws {
                        floor_ms: Some(0.4584),
                        probes_ms: vec![0.515, 0.495, 0.4601],
                        accepted: Some(true),
                        error: None,
                    }),
                    reference: Some(LaunchDraws {
                        probes_ms: vec![0.52; 6],
                        accepted: Some(false),
                        ..Default::default()
                    }),
                    compiled: Some(LaunchDraws {
                        error: Some("libcuda: not found".into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            }),
            ..Default::default()
        };
        let lines = environment_lines(&env);
        assert_eq!(
            lines,
            vec![(
                "launch",
                "context probes (256 queued launches): kernel 0.460 ms (3 draws), reference 0.520 \
                 ms (6 draws, none within 4% of the floor), compiled not drawn (libcuda: not \
                 found); device floor 0.458 ms"
                    .to_string()
            )]
        );
        assert!(environment_lines(&TimingEnvironment::default()).is_empty());
    }

    #[test]
    fn the_launch_path_round_trips_through_the_result_json() {
        let json = serde_json::json!({"launch_path": {"tolerance": 0.04, "max_draws": 6, "launches": 256,
            "floor_ms": 0.46, "processes": {"kernel": {"floor_ms": null, "probes_ms": [0.47, 0.46],
            "accepted": true}, "future_side": {"probes_ms": [1.0]}}}});
        let env: TimingEnvironment = serde_json::from_value(json.clone()).unwrap();
        let launch = env.launch_path.as_ref().unwrap();
        assert_eq!(
            launch.processes.kernel.as_ref().unwrap().probes_ms,
            vec![0.47, 0.46]
        );
        assert!(launch.processes.extra.contains_key("future_side"));
        let back = serde_json::to_value(&env).unwrap();
        assert_eq!(
            back["launch_path"]["processes"]["future_side"],
            json["launch_path"]["processes"]["future_side"]
        );
    }

    #[test]
    fn methods_are_described() {
        assert!(method_text(Some("judge_window"), None).starts_with("judge window:"));
        assert_eq!(method_text(Some("other"), Some(1)), "other");
        assert_eq!(method_text(None, None), "CUDA events");
        assert!(
            method_text(Some("judge_window"), Some(34))
                .ends_with(", 34 forwards per window (each on its own inputs)")
        );
    }

    #[test]
    fn the_math_line_names_the_precision_policy_the_reference_ran_under() {
        let env = TimingEnvironment {
            precision: Some(crate::protocol::PrecisionPolicy::Tf32),
            tf32_matmul: Some(true),
            tf32_cudnn: Some(true),
            float32_matmul_precision: Some("high".into()),
            ..Default::default()
        };
        assert_eq!(
            environment_lines(&env)[0],
            (
                "math",
                "tf32, TF32 vs TF32; reference TF32 matmul on, TF32 cuDNN on, float32 matmul precision high"
                    .to_string()
            )
        );
    }

    #[test]
    fn the_environment_is_described_line_by_line() {
        let env = TimingEnvironment {
            tf32_matmul: Some(false),
            tf32_cudnn: Some(true),
            float32_matmul_precision: Some("highest".into()),
            sm_clock_mhz: Some(vec![1980.0, 1755.0]),
            mem_clock_mhz: Some(vec![3201.0, 3201.0]),
            max_sm_clock_mhz: Some(1980.0),
            max_mem_clock_mhz: Some(3201.0),
            clocks_locked: Some(false),
            throttle_reasons: vec!["sw_thermal".into()],
            driver: Some("580.159.04".into()),
            cuda_driver: Some("13.0".into()),
            cuda_runtime: Some("13.0".into()),
            torch: Some("2.11.0".into()),
            triton: Some("3.6.0".into()),
            timing_method: Some("CUDA events around each forward".into()),
            ..Default::default()
        };
        assert_eq!(
            environment_lines(&env),
            [
                (
                    "math",
                    "TF32 matmul off, TF32 cuDNN on, float32 matmul precision highest".to_string()
                ),
                (
                    "clocks",
                    "SM 1980 -> 1755 MHz (max 1980), memory 3201 MHz (max 3201), not locked, throttle: sw_thermal".to_string()
                ),
                (
                    "software",
                    "driver 580.159.04, CUDA 13.0, torch 2.11.0, triton 3.6.0".to_string()
                ),
                ("method", "CUDA events around each forward".to_string()),
            ]
        );
        let sparse = TimingEnvironment {
            sm_clock_mhz: Some(vec![1410.0, 1410.0]),
            cuda_driver: Some("13.0".into()),
            cuda_runtime: Some("12.8".into()),
            ..Default::default()
        };
        assert_eq!(
            environment_lines(&sparse),
            [
                ("clocks", "SM 1410 MHz, locked: unknown".to_string()),
                ("software", "CUDA driver 13.0, runtime 12.8".to_string()),
            ]
        );
        assert!(environment_lines(&TimingEnvironment::default()).is_empty());
    }
}
