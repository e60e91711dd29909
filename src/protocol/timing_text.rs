//! How a timing was taken, in words: the method and the environment that shaped the
//! figures (clocks, math modes, versions), for `kforge eval`'s verdict and the TUI's Eval
//! tab.

use super::TimingEnvironment;

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
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

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
