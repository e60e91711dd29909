//! The prompts a call can be rendered from, by name: their files and the tuning stages'
//! templates (which call kind renders which template is the kind's descriptor,
//! `CallKind::descriptor`; the files themselves are `prompts::templates`'s).

use serde::{Deserialize, Serialize};

/// A prompt a call can be rendered from (the system prompt is rendered with every one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TemplateName {
    System,
    Seed,
    Repair,
    Analysis,
    OptimizeFromAnalysis,
    StageGridAndParallel,
    StageBlockTiling,
    StageMemoryAndTuning,
    Instructed,
    /// Asks again, in the same conversation, after an answer kforge could not use.
    Followup,
}

impl TemplateName {
    pub const ALL: [TemplateName; 10] = [
        TemplateName::System,
        TemplateName::Seed,
        TemplateName::Repair,
        TemplateName::Analysis,
        TemplateName::OptimizeFromAnalysis,
        TemplateName::StageGridAndParallel,
        TemplateName::StageBlockTiling,
        TemplateName::StageMemoryAndTuning,
        TemplateName::Instructed,
        TemplateName::Followup,
    ];

    /// The stage names, in pipeline order.
    pub const STAGES: [&'static str; 3] =
        ["grid_and_parallel", "block_tiling", "memory_and_tuning"];

    /// Short name (`repair`, `stage_block_tiling`).
    pub fn as_str(self) -> &'static str {
        match self {
            TemplateName::System => "system",
            TemplateName::Seed => "seed",
            TemplateName::Repair => "repair",
            TemplateName::Analysis => "analysis",
            TemplateName::OptimizeFromAnalysis => "optimize_from_analysis",
            TemplateName::StageGridAndParallel => "stage_grid_and_parallel",
            TemplateName::StageBlockTiling => "stage_block_tiling",
            TemplateName::StageMemoryAndTuning => "stage_memory_and_tuning",
            TemplateName::Instructed => "instructed",
            TemplateName::Followup => "followup",
        }
    }

    /// The template's file name (`repair.j2`).
    pub fn file_name(self) -> String {
        format!("{}.j2", self.as_str())
    }

    /// The template of a tuning stage by its name (`block_tiling`).
    pub fn stage(name: &str) -> Option<TemplateName> {
        match name {
            "grid_and_parallel" => Some(TemplateName::StageGridAndParallel),
            "block_tiling" => Some(TemplateName::StageBlockTiling),
            "memory_and_tuning" => Some(TemplateName::StageMemoryAndTuning),
            _ => None,
        }
    }
}

impl std::fmt::Display for TemplateName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
