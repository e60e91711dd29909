//! The stable names of the pipeline's work (`seed1`, `seed1/repair2`, `opt3`,
//! `stage/block_tiling`...) and of its gates (`call/seed1`, `algorithm3`, `stages3`...). A
//! resumed run replays the plan from the start and matches each step against what an
//! earlier run recorded under the same name, so the text form is an on-disk format: the
//! `key` of `candidate_created`, `llm_call_started` and `gate_opened` in `events.jsonl`.
//! `Display` writes it and `FromStr` reads it back; they are each other's inverse.

use std::fmt;
use std::str::FromStr;

use super::CandidateId;

/// A step that asks the LLM or makes a candidate.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum StepKey {
    /// The first generation of seed `index` (`seed1`).
    Seed { index: u32 },
    /// Repair `attempt` (from 1) of the lineage of step `of` (`seed1/repair2`).
    Repair { of: Box<StepKey>, attempt: u32 },
    /// The one follow-up of `of` whose answer lacked what was asked (`seed1/again`).
    Again { of: Box<StepKey> },
    /// The algorithm analysis of `candidate` (`analysis3`).
    Analysis { candidate: CandidateId },
    /// The optimization of `candidate` from its analysis (`opt3`).
    Optimize { candidate: CandidateId },
    /// The tuning stage `name` (`stage/block_tiling`); a stage name holds no `/`.
    Stage { name: String },
    /// The repair of `candidate`, correct on the task's sizes, after it failed on unseen
    /// ones (`shapes3`; its attempts are `shapes3/repair1`...).
    Shapes { candidate: CandidateId },
    /// The person's action `number` of the engine process `process` (`user2-4711`).
    Action { number: u32, process: u32 },
}

/// A point where the engine asks the person.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum GateKey {
    /// Before the call of the step (step mode): `call/seed1`.
    Call(StepKey),
    /// Before the algorithm analysis and optimization of `candidate`: `algorithm3`.
    Algorithm { candidate: CandidateId },
    /// Before the tuning stages on `base`: `stages3`; a session from before the key named
    /// its base wrote `stages` (then `base` is None).
    Stages { base: Option<CandidateId> },
    /// Before the evaluation of `candidate` (step mode): `eval3`.
    Evaluation { candidate: CandidateId },
    /// Before the best is taken as final: `final`.
    Final,
}

/// Text that is not a key this version writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownKey(pub String);

impl fmt::Display for UnknownKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not a step key: {:?}", self.0)
    }
}

impl std::error::Error for UnknownKey {}

/// How the keys of the person's actions begin (`user<n>-<pid>`).
const ACTION: &str = "user";
const REPAIR: &str = "/repair";
const AGAIN: &str = "/again";
const STAGE: &str = "stage/";
const CALL: &str = "call/";

impl StepKey {
    /// The step this one continues: a repair's or follow-up's lineage, down to the step
    /// that started it.
    pub fn root(&self) -> &StepKey {
        match self {
            StepKey::Repair { of, .. } | StepKey::Again { of } => of.root(),
            other => other,
        }
    }

    /// Whether the step serves one of the person's actions (or continues one).
    pub fn is_action(&self) -> bool {
        matches!(self.root(), StepKey::Action { .. })
    }

    /// Repair `attempt` of this step's lineage.
    pub fn repair(&self, attempt: u32) -> StepKey {
        StepKey::Repair {
            of: Box::new(self.clone()),
            attempt,
        }
    }

    /// The follow-up to this step's call.
    pub fn again(&self) -> StepKey {
        StepKey::Again {
            of: Box::new(self.clone()),
        }
    }

    /// The gate before this step's call.
    pub fn call_gate(&self) -> GateKey {
        GateKey::Call(self.clone())
    }
}

impl fmt::Display for StepKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StepKey::Seed { index } => write!(f, "seed{index}"),
            StepKey::Repair { of, attempt } => write!(f, "{of}{REPAIR}{attempt}"),
            StepKey::Again { of } => write!(f, "{of}{AGAIN}"),
            StepKey::Analysis { candidate } => write!(f, "analysis{candidate}"),
            StepKey::Optimize { candidate } => write!(f, "opt{candidate}"),
            StepKey::Stage { name } => write!(f, "{STAGE}{name}"),
            StepKey::Shapes { candidate } => write!(f, "shapes{candidate}"),
            StepKey::Action { number, process } => write!(f, "{ACTION}{number}-{process}"),
        }
    }
}

impl FromStr for StepKey {
    type Err = UnknownKey;

    fn from_str(s: &str) -> Result<StepKey, UnknownKey> {
        let unknown = || UnknownKey(s.to_string());
        if let Some(of) = s.strip_suffix(AGAIN) {
            return Ok(of.parse::<StepKey>().map_err(|_| unknown())?.again());
        }
        if let Some(at) = s.rfind(REPAIR)
            && let Some(attempt) = number(&s[at + REPAIR.len()..])
        {
            return Ok(s[..at]
                .parse::<StepKey>()
                .map_err(|_| unknown())?
                .repair(attempt));
        }
        if let Some(name) = s.strip_prefix(STAGE) {
            return match name.is_empty() {
                true => Err(unknown()),
                false => Ok(StepKey::Stage { name: name.into() }),
            };
        }
        if let Some((number_text, process)) =
            s.strip_prefix(ACTION).and_then(|rest| rest.split_once('-'))
        {
            let (Some(number), Some(process)) = (number(number_text), number(process)) else {
                return Err(unknown());
            };
            return Ok(StepKey::Action { number, process });
        }
        if let Some(index) = s.strip_prefix("seed").and_then(number) {
            return Ok(StepKey::Seed { index });
        }
        if let Some(candidate) = numbered(s, "analysis") {
            return Ok(StepKey::Analysis { candidate });
        }
        if let Some(candidate) = numbered(s, "opt") {
            return Ok(StepKey::Optimize { candidate });
        }
        if let Some(candidate) = numbered(s, "shapes") {
            return Ok(StepKey::Shapes { candidate });
        }
        Err(unknown())
    }
}

impl fmt::Display for GateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GateKey::Call(step) => write!(f, "{CALL}{step}"),
            GateKey::Algorithm { candidate } => write!(f, "algorithm{candidate}"),
            GateKey::Stages { base: Some(base) } => write!(f, "stages{base}"),
            GateKey::Stages { base: None } => f.write_str("stages"),
            GateKey::Evaluation { candidate } => write!(f, "eval{candidate}"),
            GateKey::Final => f.write_str("final"),
        }
    }
}

impl FromStr for GateKey {
    type Err = UnknownKey;

    fn from_str(s: &str) -> Result<GateKey, UnknownKey> {
        if let Some(step) = s.strip_prefix(CALL) {
            return step
                .parse()
                .map(GateKey::Call)
                .map_err(|_| UnknownKey(s.to_string()));
        }
        if let Some(candidate) = numbered(s, "algorithm") {
            return Ok(GateKey::Algorithm { candidate });
        }
        if s == "stages" {
            return Ok(GateKey::Stages { base: None });
        }
        if let Some(base) = numbered(s, "stages") {
            return Ok(GateKey::Stages { base: Some(base) });
        }
        if let Some(candidate) = numbered(s, "eval") {
            return Ok(GateKey::Evaluation { candidate });
        }
        if s == "final" {
            return Ok(GateKey::Final);
        }
        Err(UnknownKey(s.to_string()))
    }
}

/// A number as `Display` writes it: digits only, no leading zero (so that text that
/// parses is exactly the text a key writes).
fn number(text: &str) -> Option<u32> {
    let canonical = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    canonical.then(|| text.parse().ok()).flatten()
}

/// The candidate of `<word><id>`.
fn numbered(text: &str, word: &str) -> Option<CandidateId> {
    text.strip_prefix(word).and_then(number).map(CandidateId)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_step_key() -> Vec<StepKey> {
        let seed = StepKey::Seed { index: 1 };
        let stage = StepKey::Stage {
            name: "block_tiling".into(),
        };
        let action = StepKey::Action {
            number: 2,
            process: 4711,
        };
        vec![
            seed.clone(),
            StepKey::Seed { index: 10 },
            seed.repair(2),
            seed.repair(1).repair(3),
            seed.again(),
            seed.repair(2).again(),
            StepKey::Analysis {
                candidate: CandidateId(3),
            },
            StepKey::Optimize {
                candidate: CandidateId(3),
            },
            StepKey::Optimize {
                candidate: CandidateId(3),
            }
            .repair(1),
            stage.clone(),
            stage.repair(1),
            stage.again(),
            StepKey::Shapes {
                candidate: CandidateId(7),
            }
            .repair(2),
            action.clone(),
            action.repair(1),
            action.again(),
        ]
    }

    fn every_gate_key() -> Vec<GateKey> {
        let mut keys: Vec<GateKey> = every_step_key().iter().map(StepKey::call_gate).collect();
        keys.extend([
            GateKey::Algorithm {
                candidate: CandidateId(1),
            },
            GateKey::Stages {
                base: Some(CandidateId(4)),
            },
            GateKey::Stages { base: None },
            GateKey::Evaluation {
                candidate: CandidateId(12),
            },
            GateKey::Final,
        ]);
        keys
    }

    #[test]
    fn keys_write_the_text_sessions_hold() {
        let texts: Vec<String> = every_step_key().iter().map(|k| k.to_string()).collect();
        assert_eq!(
            texts,
            [
                "seed1",
                "seed10",
                "seed1/repair2",
                "seed1/repair1/repair3",
                "seed1/again",
                "seed1/repair2/again",
                "analysis3",
                "opt3",
                "opt3/repair1",
                "stage/block_tiling",
                "stage/block_tiling/repair1",
                "stage/block_tiling/again",
                "shapes7/repair2",
                "user2-4711",
                "user2-4711/repair1",
                "user2-4711/again",
            ]
        );
        let gates: Vec<String> = every_gate_key()[16..]
            .iter()
            .map(|k| k.to_string())
            .collect();
        assert_eq!(
            gates,
            ["algorithm1", "stages4", "stages", "eval12", "final"]
        );
        assert_eq!(every_gate_key()[2].to_string(), "call/seed1/repair2");
    }

    #[test]
    fn every_key_reads_back_as_itself() {
        for key in every_step_key() {
            assert_eq!(key.to_string().parse::<StepKey>(), Ok(key.clone()), "{key}");
        }
        for key in every_gate_key() {
            assert_eq!(key.to_string().parse::<GateKey>(), Ok(key.clone()), "{key}");
        }
    }

    #[test]
    fn text_no_key_writes_is_refused() {
        for text in [
            "",
            "seed",
            "seed01",
            "seed+1",
            "seedx",
            "opt",
            "stage/",
            "user1",
            "user1-",
            "user-2",
            "seed1/repair",
            "seed1/repair01",
            "/again",
            "unknown3",
            "call/",
        ] {
            assert!(text.parse::<StepKey>().is_err(), "{text:?}");
        }
        for text in ["", "call/final", "stages01", "eval", "algorithm", "finally"] {
            assert!(text.parse::<GateKey>().is_err(), "{text:?}");
        }
    }

    #[test]
    fn a_lineage_knows_the_step_that_started_it() {
        let action = StepKey::Action {
            number: 1,
            process: 9,
        };
        assert!(action.repair(2).again().is_action());
        assert_eq!(action.repair(2).again().root(), &action);
        assert!(!StepKey::Seed { index: 1 }.repair(1).is_action());
    }

    /// Every key the golden sessions recorded reads back, and writes the same text.
    #[test]
    fn every_key_of_the_golden_sessions_parses() {
        let sessions = [
            include_str!("../../tests/fixtures/sessions/softmax/events.jsonl"),
            include_str!("../../tests/fixtures/sessions/v1_review_budget/events.jsonl"),
        ];
        let mut seen = 0;
        for line in sessions.iter().flat_map(|s| s.lines()) {
            let event: serde_json::Value = serde_json::from_str(line).unwrap();
            let Some(key) = event["key"].as_str() else {
                continue;
            };
            let written = match event["type"].as_str() {
                Some("gate_opened") => key.parse::<GateKey>().map(|k| k.to_string()),
                _ => key.parse::<StepKey>().map(|k| k.to_string()),
            };
            assert_eq!(written.as_deref(), Ok(key), "{line}");
            seen += 1;
        }
        assert!(seen >= 15, "the golden sessions hold {seen} keys");
    }
}
