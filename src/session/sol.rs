//! A candidate's speed-of-light words: its evaluation's share of the bound and the
//! faster-than-light flag (the record itself is `crate::protocol::sol`).

use crate::protocol::sol::{FASTER_THAN_LIGHT, pct_suffix};
use crate::session::state::Candidate;

impl Candidate {
    /// The kernel's % of the speed of light, when measured.
    pub fn sol_pct(&self) -> Option<f64> {
        self.eval.as_ref().and_then(|e| e.sol_pct)
    }

    /// Whether its evaluation flagged it faster than light.
    pub fn faster_than_light(&self) -> bool {
        self.eval
            .as_ref()
            .is_some_and(|e| e.flags.iter().any(|f| f == FASTER_THAN_LIGHT))
    }

    /// ` 40%SoL`, ` FTL` or nothing (`pct_suffix`).
    pub fn sol_suffix(&self) -> String {
        pct_suffix(self.sol_pct(), self.faster_than_light())
    }
}
