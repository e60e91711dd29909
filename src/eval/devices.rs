//! The devices a session or a batch evaluates on: one or more GPUs of this machine, or the
//! CPU (Triton's interpreter). A set is never empty and never mixes the CPU with GPUs: a
//! score compares kernel and reference timed on one device, and CPU results carry no
//! timing at all.

use std::fmt;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use super::{Device, Evaluator};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<Device>", into = "Vec<Device>")]
pub struct DeviceSet(Vec<Device>);

impl DeviceSet {
    pub fn new(devices: Vec<Device>) -> Result<DeviceSet> {
        let mut unique: Vec<Device> = Vec::with_capacity(devices.len());
        for d in devices {
            if !unique.contains(&d) {
                unique.push(d);
            }
        }
        match unique.as_slice() {
            [] => bail!("no device to evaluate on"),
            [_] => {}
            several if several.contains(&Device::Cpu) => {
                bail!("the CPU cannot be mixed with GPUs in one device set")
            }
            _ => {}
        }
        Ok(DeviceSet(unique))
    }

    pub fn one(device: Device) -> DeviceSet {
        DeviceSet(vec![device])
    }

    /// The first device: the one a task is checked on, and what older readers of
    /// session.json see as `device`.
    pub fn primary(&self) -> Device {
        self.0[0]
    }

    pub fn is_gpu(&self) -> bool {
        self.primary().is_gpu()
    }

    pub fn devices(&self) -> &[Device] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// `0,1` style list of CUDA indices (`--devices`), or `cpu`.
    pub fn parse_list(text: &str) -> Result<DeviceSet> {
        let mut devices = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let device = match part.parse::<u32>() {
                Ok(i) => Device::Cuda(i),
                Err(_) => match Device::parse(part) {
                    Some(d) => d,
                    None => bail!(
                        "`{part}` is not a device: write CUDA indices (`0,1`), `cuda:N` or `cpu`"
                    ),
                },
            };
            devices.push(device);
        }
        DeviceSet::new(devices)
    }
}

impl TryFrom<Vec<Device>> for DeviceSet {
    type Error = anyhow::Error;
    fn try_from(v: Vec<Device>) -> Result<DeviceSet> {
        DeviceSet::new(v)
    }
}

impl From<DeviceSet> for Vec<Device> {
    fn from(s: DeviceSet) -> Vec<Device> {
        s.0
    }
}

impl fmt::Display for DeviceSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let [one] = self.0.as_slice() {
            return write!(f, "{one}");
        }
        let names: Vec<String> = self.0.iter().map(Device::torch_name).collect();
        write!(f, "{}", names.join(","))
    }
}

/// Which devices were asked for (`--device`, `--devices`, `--cpu`:
/// `launch::options::DeviceSetArgs`), before the visible GPUs are known: a batch keeps this
/// in batch.json, so that a Slurm job resolves it on the node it lands on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceChoice {
    /// Every GPU visible to the process, else the CPU.
    AllVisible,
    Cpu,
    Listed(DeviceSet),
}

impl DeviceChoice {
    /// The devices, checked against the GPUs visible now; with no GPU at all the CPU (said
    /// on stderr, since timing is then not meaningful).
    pub async fn resolve(&self, evaluator: &Evaluator) -> Result<DeviceSet> {
        Ok(match self {
            DeviceChoice::Cpu => DeviceSet::one(Device::Cpu),
            DeviceChoice::Listed(set) => {
                if set.is_gpu() {
                    let count = visible_gpus(evaluator).await?;
                    for d in set.devices() {
                        if let Device::Cuda(n) = d {
                            check_visible(*n, count)?;
                        }
                    }
                }
                set.clone()
            }
            DeviceChoice::AllVisible => {
                let count = visible_gpus(evaluator).await?;
                if count == 0 {
                    no_gpu_note();
                    DeviceSet::one(Device::Cpu)
                } else {
                    DeviceSet::new((0..count).map(Device::Cuda).collect())?
                }
            }
        })
    }
}

/// How many CUDA devices this process sees (CUDA_VISIBLE_DEVICES applies).
pub async fn visible_gpus(evaluator: &Evaluator) -> Result<u32> {
    let info = evaluator.device_info().await?;
    if let Some(error) = info.get("error").and_then(|e| e.as_str()) {
        bail!("cannot query CUDA devices: {error}");
    }
    Ok(info
        .get("devices")
        .and_then(|d| d.as_array())
        .map_or(0, |d| d.len()) as u32)
}

/// Refuses `cuda:n` when only `count` CUDA devices are visible.
pub fn check_visible(n: u32, count: u32) -> Result<()> {
    if n >= count {
        bail!(
            "cuda:{n} was requested but {count} CUDA device(s) are visible (see `kforge doctor`)"
        );
    }
    Ok(())
}

/// Says on stderr that evaluations fall back to the CPU (no timing there).
pub fn no_gpu_note() {
    eprintln!(
        "kforge: no CUDA device found: evaluating on the CPU through Triton's interpreter (correctness only)"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_dedupe_and_refuse_mixing_the_cpu_with_gpus() {
        let set = DeviceSet::parse_list("0, 1,cuda:1").unwrap();
        assert_eq!(set.devices(), &[Device::Cuda(0), Device::Cuda(1)]);
        assert_eq!(set.to_string(), "cuda:0,cuda:1");
        assert_eq!(set.primary(), Device::Cuda(0));
        assert!(set.is_gpu());
        assert_eq!(DeviceSet::parse_list("cpu").unwrap().primary(), Device::Cpu);
        assert!(DeviceSet::parse_list("").is_err());
        assert!(DeviceSet::parse_list("0,cpu").is_err());
        let err = DeviceSet::parse_list("gpu0").unwrap_err().to_string();
        assert!(err.contains("`gpu0` is not a device"), "{err}");
    }

    #[test]
    fn a_set_is_written_as_a_list_of_torch_names() {
        let set = DeviceSet::parse_list("1,0").unwrap();
        let text = serde_json::to_string(&set).unwrap();
        assert_eq!(text, r#"["cuda:1","cuda:0"]"#);
        assert_eq!(serde_json::from_str::<DeviceSet>(&text).unwrap(), set);
        assert!(serde_json::from_str::<DeviceSet>("[]").is_err());
    }
}
