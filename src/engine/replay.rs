//! The one place a resumed run looks at what the earlier run saved. A resumed run replays
//! the pipeline from the start; every step asks here, by its stable key (`seed1`,
//! `seed1/repair2`, `analysis3`, `stage/block_tiling`...), whether its work is done:
//! an answered LLM call is read back from `llm/`, a created candidate from `kernels/`, an
//! evaluation from `eval/`, a gate's decision from the events. Only what is missing is
//! done again. Because files are written before the events that name them, an event
//! found here always has its file; a file removed by hand makes the step run again.

use std::collections::HashMap;

use crate::protocol::EvalResult;
use crate::protocol::{CallId, CandidateId, Decision, GateKey, GateKind, StepKey};
use crate::session::state::{Candidate, Gate, SessionState};
use crate::session::store::SessionDir;

pub struct Replay {
    prior: SessionState,
    session: SessionDir,
    answered: HashMap<StepKey, CallId>,
    candidates: HashMap<StepKey, CandidateId>,
    decisions: HashMap<GateKey, Decision>,
}

/// A saved answer.
pub struct SavedAnswer {
    pub call: CallId,
    pub text: String,
}

impl Replay {
    pub fn new(prior: SessionState, session: SessionDir) -> Replay {
        // Later entries win: a key asked again (a re-asked call) keeps its latest answer.
        let answered = prior
            .calls
            .values()
            .filter(|c| c.ok == Some(true) && c.response_file.is_some())
            .filter_map(|c| Some((c.step_key()?, c.id)))
            .collect();
        let candidates = prior
            .candidates
            .values()
            .filter_map(|c| Some((c.step_key()?, c.id)))
            .collect();
        let decisions = prior
            .gates
            .values()
            .filter_map(|g| Some((gate_key(g)?, g.decision.clone()?)))
            .collect();
        Replay {
            prior,
            session,
            answered,
            candidates,
            decisions,
        }
    }

    /// The state the run started from.
    pub fn prior(&self) -> &SessionState {
        &self.prior
    }

    pub fn is_resume(&self) -> bool {
        self.prior.info.is_some()
    }

    /// The answer saved for the call `key`, when its file is still there.
    pub fn answer(&self, key: &StepKey) -> Option<SavedAnswer> {
        let call = *self.answered.get(key)?;
        let file = self.prior.calls.get(&call)?.response_file.clone()?;
        let text = self.session.read_file(&file).ok()?;
        Some(SavedAnswer { call, text })
    }

    /// The candidate the step `key` created, with its code, when its file is still there.
    pub fn candidate(&self, key: &StepKey) -> Option<(&Candidate, String)> {
        let c = self.prior.candidates.get(self.candidates.get(key)?)?;
        let code = self.session.read_file(&c.file).ok()?;
        Some((c, code))
    }

    /// The saved evaluation of a candidate, when its result file is still readable.
    pub fn evaluation(&self, id: CandidateId) -> Option<EvalResult> {
        let c = self.prior.candidates.get(&id)?;
        c.eval.as_ref()?;
        let text = self.session.read_file(c.eval_file.as_deref()?).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// The decision already taken at the gate `key`.
    pub fn decision(&self, key: &GateKey) -> Option<Decision> {
        self.decisions.get(key).cloned()
    }

    pub fn has_analysis(&self, id: CandidateId) -> bool {
        self.prior
            .candidates
            .get(&id)
            .is_some_and(|c| c.analysis.is_some())
    }

    pub fn has_persistent_check(&self, id: CandidateId) -> bool {
        self.prior
            .candidates
            .get(&id)
            .is_some_and(|c| c.persistent.is_some())
    }

    /// The candidate the earlier run's stages started from: the base its first stage's
    /// call worked on, else the base its approved stages gate named. None when the
    /// earlier run did not get that far (the stages go on the best then).
    pub fn tuning_base(&self, first_stage: &str) -> Option<CandidateId> {
        let first = StepKey::Stage {
            name: first_stage.to_string(),
        };
        let called = self
            .prior
            .calls
            .values()
            .find(|c| c.step_key().as_ref() == Some(&first))
            .and_then(|c| c.candidate);
        called.or_else(|| {
            self.prior
                .gates
                .values()
                .rev()
                .find(|g| {
                    g.kind == GateKind::Stages
                        && g.decision.as_ref().is_some_and(|d| *d != Decision::Reject)
                })
                .and_then(|g| g.candidate)
        })
    }

    pub fn stage_recorded(&self, stage: &str) -> bool {
        self.prior.stages.iter().any(|s| s.stage == stage)
    }

    /// How many of the person's actions earlier runs served (their keys go on from there).
    pub fn actions(&self) -> u32 {
        self.prior
            .candidates
            .values()
            .filter(|c| c.from_action())
            .count() as u32
    }
}

/// A gate's key as this version asks it: a stages gate of a session from before its key
/// named its base (`stages`) counts for the base it asked about (`stages<id>`). None for
/// a key this version does not write (no step asks it).
fn gate_key(gate: &Gate) -> Option<GateKey> {
    match (gate.gate_key()?, gate.candidate) {
        (GateKey::Stages { base: None }, Some(base)) if gate.kind == GateKind::Stages => {
            Some(GateKey::Stages { base: Some(base) })
        }
        (key, _) => Some(key),
    }
}
