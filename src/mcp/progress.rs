//! An evaluation's phases as MCP progress with a total. The evaluator reports phases by
//! name ("loading task", "correctness trial 2/5", "timing: up to 100 runs..."); how many
//! there will be is not known, but the steps that count are: the set-up, each correctness
//! trial, the signed-input trial (or the audited forward), and on a GPU the timing and the
//! re-check after it. `progress` is the number of those steps done when a phase starts,
//! with the phases inside a step (the set-up's several, the timing's) adding fractions
//! that stay below the next step, so that it rises with every notification as the spec
//! asks; `total` is the number of steps.

use crate::config::EvalConfig;

/// One `notifications/progress`: how far, out of how much, and the phase.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressUpdate {
    pub progress: f64,
    pub total: usize,
    pub message: String,
}

/// The steps of one evaluation that progress counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    SetUp,
    Trial(u32),
    /// The forward ruled on for provenance: the signed-input trial, or an audited forward
    /// where there is none.
    Provenance,
    Timing,
    Recheck,
}

/// The steps an evaluation with these settings goes through when it passes them all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalPlan {
    steps: Vec<Step>,
}

impl EvalPlan {
    /// `timed`: on a GPU with timing asked for.
    pub fn new(settings: &EvalConfig, timed: bool) -> EvalPlan {
        let mut steps = vec![Step::SetUp];
        steps.extend((1..=settings.trials).map(Step::Trial));
        steps.push(Step::Provenance);
        if timed {
            steps.push(Step::Timing);
            if settings.post_timing_check {
                steps.push(Step::Recheck);
            }
        }
        EvalPlan { steps }
    }

    pub fn total(&self) -> usize {
        self.steps.len()
    }

    /// The step a phase starts, if it starts one.
    fn step_of(phase: &str) -> Option<Step> {
        if let Some(rest) = phase.strip_prefix("correctness trial ") {
            let n = rest.split('/').next()?.trim().parse().ok()?;
            return Some(Step::Trial(n));
        }
        if phase == "signed-input trial" || phase.starts_with("audit of ") {
            return Some(Step::Provenance);
        }
        // The kernel's timing starts with "timing"; "timing: up to N runs of ..." follows it,
        // and also comes earlier for the reference alone (in the set-up).
        if phase == "timing" {
            return Some(Step::Timing);
        }
        if phase.starts_with("re-check after timing") {
            return Some(Step::Recheck);
        }
        None
    }
}

/// Turns phases into rising progress values against the plan's total.
#[derive(Debug)]
pub struct ProgressCounter {
    plan: EvalPlan,
    step: usize,
    /// Phases seen since the current step began.
    within: u32,
    started: bool,
}

impl ProgressCounter {
    pub fn new(plan: EvalPlan) -> ProgressCounter {
        ProgressCounter {
            plan,
            step: 0,
            within: 0,
            started: false,
        }
    }

    pub fn total(&self) -> usize {
        self.plan.total()
    }

    /// The progress at the start of `phase`: the steps done, plus k/(k+1) for the k-th
    /// phase inside the current step. A step never goes back (a phase the plan did not
    /// foresee counts inside the current one).
    pub fn next(&mut self, phase: &str) -> f64 {
        let index = EvalPlan::step_of(phase)
            .and_then(|s| self.plan.steps.iter().position(|&p| p == s))
            .filter(|&i| i > self.step || !self.started);
        match index {
            Some(i) => {
                self.step = i;
                self.within = 0;
            }
            None if self.started => self.within += 1,
            None => {}
        }
        self.started = true;
        let k = f64::from(self.within);
        self.step as f64 + k / (k + 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(trials: u32) -> EvalConfig {
        EvalConfig {
            trials,
            ..EvalConfig::default()
        }
    }

    #[test]
    fn a_cpu_evaluation_counts_set_up_trials_and_the_signed_trial() {
        let plan = EvalPlan::new(&settings(2), false);
        assert_eq!(plan.total(), 4);
        let mut c = ProgressCounter::new(plan);
        let seen: Vec<f64> = [
            "loading task",
            "drawing inputs",
            "reference forward",
            "correctness trial 1/2",
            "correctness trial 2/2",
            "signed-input trial",
        ]
        .iter()
        .map(|p| c.next(p))
        .collect();
        assert_eq!(seen, [0.0, 0.5, 2.0 / 3.0, 1.0, 2.0, 3.0]);
    }

    #[test]
    fn a_gpu_evaluation_adds_timing_and_the_recheck_and_never_goes_back() {
        let mut c = ProgressCounter::new(EvalPlan::new(&settings(1), true));
        assert_eq!(c.total(), 5);
        let mut last = -1.0;
        for phase in [
            "loading task",
            "timing reference: round 1 of 3 (reference first)",
            "timing: up to 100 runs of the reference",
            "calibrating the timing window",
            "loading kernel",
            "correctness trial 1/1",
            "signed-input trial",
            "audit of one forward",
            "timing",
            "timing: up to 100 runs of the reference and the kernel",
            "correctness trial 1/1",
            "re-check after timing",
        ] {
            let p = c.next(phase);
            assert!(p > last, "{phase}: {p} after {last}");
            assert!(p < c.total() as f64, "{phase}: {p}");
            last = p;
        }
        assert_eq!(last, 4.0);
    }

    #[test]
    fn many_phases_in_one_step_stay_below_the_next() {
        let mut c = ProgressCounter::new(EvalPlan::new(&settings(1), false));
        let mut last = -1.0;
        for _ in 0..10_000 {
            let p = c.next("timing reference: round 1 of 3");
            assert!(p > last && p < 1.0, "{p}");
            last = p;
        }
    }
}
