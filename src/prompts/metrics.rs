//! Nsight Compute metrics of a profiled candidate, labelled and formatted for the prompts.

use serde::{Deserialize, Serialize};

/// One Nsight Compute metric.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Metric {
    /// The Nsight Compute name (`launch__grid_size`).
    pub name: String,
    /// What it means, in words.
    pub label: String,
    /// The value, formatted with its unit.
    pub value: String,
}

/// The metrics of one profiled kernel.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct KernelMetrics {
    pub kernel: String,
    pub values: Vec<Metric>,
}
/// What each Nsight Compute metric kforge collects means, and how to show its value.
const METRIC_LABELS: &[(&str, &str, &str)] = &[
    ("gpu__time_duration.sum", "kernel duration", "ns"),
    (
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "SM (compute) throughput",
        "%",
    ),
    (
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        "memory throughput",
        "%",
    ),
    ("dram__bytes_read.sum", "DRAM bytes read", "bytes"),
    ("dram__bytes_write.sum", "DRAM bytes written", "bytes"),
    (
        "sm__warps_active.avg.pct_of_peak_sustained_active",
        "achieved occupancy",
        "%",
    ),
    ("launch__registers_per_thread", "registers per thread", ""),
    (
        "launch__shared_mem_per_block_dynamic",
        "dynamic shared memory per block",
        "bytes",
    ),
    (
        "launch__shared_mem_per_block_static",
        "static shared memory per block",
        "bytes",
    ),
    ("launch__grid_size", "grid size (blocks)", ""),
    ("launch__block_size", "threads per block", ""),
    ("lts__t_sector_hit_rate.pct", "L2 hit rate", "%"),
    ("l1tex__t_sector_hit_rate.pct", "L1 hit rate", "%"),
];

fn format_metric(value: &serde_json::Value, unit: &str) -> String {
    let Some(x) = value.as_f64() else {
        return value
            .as_str()
            .map_or_else(|| value.to_string(), str::to_string);
    };
    match unit {
        "%" => format!("{x:.1}%"),
        "ns" if x >= 1e6 => format!("{:.3} ms", x / 1e6),
        "ns" => format!("{:.1} us", x / 1e3),
        "bytes" if x >= 1e6 => format!("{:.2} MB", x / 1e6),
        "bytes" if x >= 1e3 => format!("{:.1} KB", x / 1e3),
        "bytes" => format!("{x:.0} B"),
        _ if x.fract() == 0.0 => format!("{x:.0}"),
        _ => format!("{x}"),
    }
}

/// The metrics of an evaluation's `profile` (the harness's Nsight Compute output:
/// `{"available": true, "kernels": [{"name", "metrics": {name: value}}]}`); empty when
/// profiling was unavailable.
pub fn metrics_from_profile(profile: &serde_json::Value) -> Vec<KernelMetrics> {
    if profile.get("available").and_then(|v| v.as_bool()) == Some(false) {
        return Vec::new();
    }
    let Some(kernels) = profile.get("kernels").and_then(|k| k.as_array()) else {
        return Vec::new();
    };
    kernels
        .iter()
        .map(|k| {
            let metrics = k.get("metrics").and_then(|m| m.as_object());
            let mut values = Vec::new();
            if let Some(metrics) = metrics {
                for (name, label, unit) in METRIC_LABELS {
                    if let Some(v) = metrics.get(*name) {
                        values.push(Metric {
                            name: name.to_string(),
                            label: label.to_string(),
                            value: format_metric(v, unit),
                        });
                    }
                }
                for (name, v) in metrics {
                    if !METRIC_LABELS.iter().any(|(n, _, _)| n == name) {
                        values.push(Metric {
                            name: name.clone(),
                            label: name.clone(),
                            value: format_metric(v, ""),
                        });
                    }
                }
            }
            KernelMetrics {
                kernel: k
                    .get("name")
                    .and_then(|n| n.as_str())
                    .unwrap_or("?")
                    .to_string(),
                values,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_labelled_and_formatted() {
        let profile = serde_json::json!({"available": true, "tool": "ncu", "kernels": [
            {"name": "relu_kernel", "metrics": {"launch__grid_size": 4096.0,
             "sm__throughput.avg.pct_of_peak_sustained_elapsed": 12.345,
             "dram__bytes_read.sum": 6442450944.0, "gpu__time_duration.sum": 2500000.0,
             "custom.metric": "n/a"}}]});
        let m = metrics_from_profile(&profile);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].kernel, "relu_kernel");
        let shown: Vec<(&str, &str)> = m[0]
            .values
            .iter()
            .map(|v| (v.label.as_str(), v.value.as_str()))
            .collect();
        assert_eq!(
            shown,
            vec![
                ("kernel duration", "2.500 ms"),
                ("SM (compute) throughput", "12.3%"),
                ("DRAM bytes read", "6442.45 MB"),
                ("grid size (blocks)", "4096"),
                ("custom.metric", "n/a"),
            ]
        );
        assert!(metrics_from_profile(&serde_json::json!({"available": false})).is_empty());
    }
}
