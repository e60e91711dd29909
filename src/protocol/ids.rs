//! Newtype ids: a candidate, an LLM call and a gate are numbered separately, and the
//! compiler keeps them apart. On disk each is a bare number (`#[serde(transparent)]`), as
//! it always was in `events.jsonl`.

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub u32);

        impl $name {
            /// The id after this one (ids are handed out in increasing order).
            pub fn next(self) -> $name {
                $name(self.0 + 1)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl std::str::FromStr for $name {
            type Err = std::num::ParseIntError;
            fn from_str(s: &str) -> Result<$name, Self::Err> {
                s.trim().trim_start_matches('#').parse().map($name)
            }
        }
    };
}

id_type!(
    /// A candidate kernel (`kernels/<id>-<kind>.py`, `eval/<id>.json`).
    CandidateId
);
id_type!(
    /// An LLM call (`llm/<id>.prompt.md`, `llm/<id>.response.md`).
    CallId
);
id_type!(
    /// A point where the engine waits for the person.
    GateId
);

/// Hands out ids after the highest one already used (a resumed session goes on numbering).
#[derive(Debug, Default)]
pub struct IdCounter(std::sync::atomic::AtomicU32);

impl IdCounter {
    /// A counter whose first id follows `highest` (1 when there is none).
    pub fn after(highest: Option<u32>) -> IdCounter {
        IdCounter(std::sync::atomic::AtomicU32::new(highest.unwrap_or(0) + 1))
    }

    pub fn take(&self) -> u32 {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_bare_numbers_on_disk_and_keep_format_specs() {
        assert_eq!(serde_json::to_string(&CandidateId(7)).unwrap(), "7");
        assert_eq!(serde_json::from_str::<CallId>("12").unwrap(), CallId(12));
        assert_eq!(format!("{:>3}|#{}", GateId(4), CandidateId(5)), "  4|#5");
        assert_eq!("#9".parse::<CandidateId>().unwrap(), CandidateId(9));
        assert_eq!(CandidateId(1).next(), CandidateId(2));
        let counter = IdCounter::after(Some(4));
        assert_eq!((counter.take(), counter.take()), (5, 6));
    }
}

/// A task of a batch: `L1_019_ReLU` for KernelBench's level 1 problem 19, else the task
/// file's name. It names the task's session directory (`tasks/<key>`), its rows and its
/// Slurm array element, so it holds only `[A-Za-z0-9_.-]`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TaskKey(pub String);

impl TaskKey {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TaskKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
