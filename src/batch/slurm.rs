//! (Replaced by the Slurm branch: the options a batch submits with.)
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SlurmOptions {
    pub partition: Option<String>,
    pub gres: Option<String>,
    pub time: Option<String>,
    pub cpus_per_task: Option<u32>,
    pub mem: Option<String>,
    pub extra: Vec<String>,
}
