//! How commands reach a running engine: gates waiting for decisions, pause, cancellation of calls in flight, stop, and the person's own
//! actions (repair / optimize / manual candidates ...), queued for the action worker.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::protocol::{CallId, CandidateId, Command, Decision, GateId, GateKind, Mode};

/// A waiting gate: where its decision goes, whether it takes a rewrite, its kind.
type Waiting = (oneshot::Sender<Decision>, bool, GateKind);

pub struct Control {
    /// Waiting gates: where the decision goes, whether a rewrite means anything there, and
    /// the gate's kind (a mode switch or a standing approval approves those of a kind).
    gates: Mutex<HashMap<GateId, Waiting>>,
    /// Waiting gates that ask about the session's best (the stages gate), with the
    /// candidate they name: withdrawn the moment the best moves from it.
    about_best: Mutex<HashMap<GateId, CandidateId>>,
    /// The answer each gate got, so a second answer (another window) is told it lost.
    answered: Mutex<HashMap<GateId, &'static str>>,
    /// Gates the engine withdrew (to ask again), and why: an answer that comes late is told.
    withdrawn: Mutex<HashMap<GateId, String>>,
    calls: Mutex<HashMap<CallId, CancellationToken>>,
    paused: watch::Sender<bool>,
    mode: Mutex<Mode>,
    /// The gate kinds approved for the rest of the session (`Event::StandingApproval`).
    standing: Mutex<Vec<GateKind>>,
    /// Cancelled by `Stop`, a budget, a fatal error or Ctrl-C: everything winds down.
    pub stop: CancellationToken,
    actions: mpsc::UnboundedSender<Command>,
}

/// What `Control::dispatch` did with a command, for the log.
pub enum Dispatched {
    Handled(String),
    /// Not done; says why (to be logged after the command's description).
    Ignored(String),
    /// Not done because someone else answered first; the whole sentence to log.
    Lost(String),
}

impl Control {
    pub fn new(mode: Mode) -> (Control, mpsc::UnboundedReceiver<Command>) {
        let (actions, rx) = mpsc::unbounded_channel();
        let control = Control {
            gates: Mutex::new(HashMap::new()),
            answered: Mutex::new(HashMap::new()),
            withdrawn: Mutex::new(HashMap::new()),
            about_best: Mutex::new(HashMap::new()),
            calls: Mutex::new(HashMap::new()),
            paused: watch::channel(false).0,
            mode: Mutex::new(mode),
            standing: Mutex::new(Vec::new()),
            stop: CancellationToken::new(),
            actions,
        };
        (control, rx)
    }

    pub fn mode(&self) -> Mode {
        *self.mode.lock().expect("mode lock")
    }

    /// Switches the mode; a switch to step mode ends every standing approval (returned,
    /// so the console can say so).
    pub fn set_mode(&self, mode: Mode) -> Vec<GateKind> {
        *self.mode.lock().expect("mode lock") = mode;
        if mode == Mode::Step {
            std::mem::take(&mut *self.standing.lock().expect("standing"))
        } else {
            Vec::new()
        }
    }

    /// Approves every gate of `kind` from now on; false when it already was.
    pub fn approve_always(&self, kind: GateKind) -> bool {
        let mut standing = self.standing.lock().expect("standing");
        if standing.contains(&kind) {
            return false;
        }
        standing.push(kind);
        true
    }

    /// Takes back the standing approval of `kind`, or every one (`None`); returns the kinds
    /// taken back, in the order they were given (empty: there was none). Approves nothing:
    /// a gate asks again wherever the mode asks it.
    pub fn revoke(&self, kind: Option<GateKind>) -> Vec<GateKind> {
        let mut standing = self.standing.lock().expect("standing");
        let (taken, kept): (Vec<GateKind>, Vec<GateKind>) = standing
            .iter()
            .copied()
            .partition(|k| kind.is_none_or(|wanted| wanted == *k));
        *standing = kept;
        taken
    }

    /// The kinds approved for the rest of the session, in the order given.
    pub fn standing(&self) -> Vec<GateKind> {
        self.standing.lock().expect("standing").clone()
    }

    /// Whether gates of `kind` are approved without asking (a standing approval).
    pub fn approved_always(&self, kind: GateKind) -> bool {
        self.standing.lock().expect("standing").contains(&kind)
    }

    /// Whether a gate of `kind` is asked at all now: the mode stops there and no standing
    /// approval answers it.
    pub fn asks(&self, kind: GateKind) -> bool {
        self.mode().asks(kind) && !self.approved_always(kind)
    }

    /// The waiting gates that are no longer asked (after a mode switch or a standing
    /// approval), oldest first, with their kinds.
    pub fn gates_not_asked(&self) -> Vec<(GateId, GateKind)> {
        let mut gates: Vec<(GateId, GateKind)> = self
            .gates
            .lock()
            .expect("gates lock")
            .iter()
            .map(|(gate, (_, _, kind))| (*gate, *kind))
            .filter(|(_, kind)| !self.asks(*kind))
            .collect();
        gates.sort_by_key(|(gate, _)| *gate);
        gates
    }

    pub fn is_paused(&self) -> bool {
        *self.paused.borrow()
    }

    /// Returns once the engine is not paused (or is stopping).
    pub async fn wait_unpaused(&self) {
        let mut rx = self.paused.subscribe();
        while *rx.borrow_and_update() {
            tokio::select! {
                _ = self.stop.cancelled() => return,
                changed = rx.changed() => if changed.is_err() { return },
            }
        }
    }

    /// Registers a gate; the receiver gets the decision. `rewritable`: a prompt or kernel
    /// waits there (elsewhere a rewrite is refused, not taken as an approval).
    pub fn open_gate(
        &self,
        gate: GateId,
        kind: GateKind,
        rewritable: bool,
    ) -> oneshot::Receiver<Decision> {
        let (tx, rx) = oneshot::channel();
        self.gates
            .lock()
            .expect("gates lock")
            .insert(gate, (tx, rewritable, kind));
        rx
    }

    /// Marks a waiting gate as one about the best, naming `base`.
    pub fn gate_about_best(&self, gate: GateId, base: CandidateId) {
        self.about_best
            .lock()
            .expect("about best")
            .insert(gate, base);
    }

    /// The best is `best` now (`why` says how it moved): waiting gates about another
    /// candidate are withdrawn at once, so a decision sent after this is not taken for
    /// them (whoever sends one is told), and their steps ask again.
    pub fn best_moved(&self, best: Option<CandidateId>, why: &str) {
        let stale: Vec<GateId> = self
            .about_best
            .lock()
            .expect("about best")
            .iter()
            .filter(|(_, base)| Some(**base) != best)
            .map(|(gate, _)| *gate)
            .collect();
        for gate in stale {
            self.withdraw_gate(gate, why);
        }
    }

    /// Withdraws a waiting gate (its step asks again): its receiver ends without a
    /// decision, `withdrawn` tells the step why, and a decision sent to it from now on is
    /// not taken (whoever sends one is told why).
    pub fn withdraw_gate(&self, gate: GateId, why: &str) {
        self.about_best.lock().expect("about best").remove(&gate);
        if self
            .gates
            .lock()
            .expect("gates lock")
            .remove(&gate)
            .is_some()
        {
            self.withdrawn
                .lock()
                .expect("withdrawn")
                .insert(gate, why.to_string());
        }
    }

    /// Why the gate was withdrawn, if it was.
    pub fn withdrawn(&self, gate: GateId) -> Option<String> {
        self.withdrawn
            .lock()
            .expect("withdrawn")
            .get(&gate)
            .cloned()
    }

    /// A token for one LLM call, cancelled by `CancelCall` or by stop.
    pub fn call_token(&self, call: CallId) -> CancellationToken {
        let token = self.stop.child_token();
        self.calls
            .lock()
            .expect("calls lock")
            .insert(call, token.clone());
        token
    }

    pub fn call_done(&self, call: CallId) {
        self.calls.lock().expect("calls lock").remove(&call);
    }

    pub fn dispatch(&self, command: Command) -> Dispatched {
        match command {
            Command::Resolve { gate, decision } => {
                let mut gates = self.gates.lock().expect("gates lock");
                if matches!(decision, Decision::Rewrite { .. })
                    && gates
                        .get(&gate)
                        .is_some_and(|(_, rewritable, _)| !rewritable)
                {
                    return Dispatched::Ignored(format!(
                        "gate {gate} has no prompt or kernel to rewrite: your rewrite was not applied; approve or reject it"
                    ));
                }
                match gates.remove(&gate) {
                    Some((tx, _, _)) => {
                        self.about_best.lock().expect("about best").remove(&gate);
                        let word = decision.word();
                        let _ = tx.send(decision);
                        self.answered.lock().expect("answered").insert(gate, word);
                        Dispatched::Handled(format!("gate {gate}: {word}"))
                    }
                    None => match self.answered.lock().expect("answered").get(&gate) {
                        Some(taken) => Dispatched::Lost(format!(
                            "gate {gate} was already answered ({taken}); your {} was not applied",
                            decision.word()
                        )),
                        None => match self.withdrawn.lock().expect("withdrawn").get(&gate) {
                            Some(why) => Dispatched::Lost(format!(
                                "gate {gate} was withdrawn ({why}); your {} was not applied: answer the gate asked in its place",
                                decision.word()
                            )),
                            None => Dispatched::Ignored(format!("gate {gate} is not waiting")),
                        },
                    },
                }
            }
            // The engine hands manual answers to its LLM port before they get here.
            Command::ManualAnswer { call, .. } => {
                Dispatched::Ignored(format!("call {call} is not waiting for a manual answer"))
            }
            Command::Pause => {
                self.paused.send_replace(true);
                Dispatched::Handled("paused: running steps finish, no new step starts".into())
            }
            Command::Resume => {
                self.paused.send_replace(false);
                Dispatched::Handled("resumed".into())
            }
            Command::CancelCall { call } => {
                let calls = self.calls.lock().expect("calls lock");
                let cancelled: Vec<CallId> = calls
                    .iter()
                    .filter(|(id, _)| call.is_none_or(|wanted| wanted == **id))
                    .map(|(id, token)| {
                        token.cancel();
                        *id
                    })
                    .collect();
                if cancelled.is_empty() {
                    Dispatched::Ignored("no LLM call in flight to cancel".into())
                } else {
                    let list: Vec<String> = cancelled.iter().map(|c| c.to_string()).collect();
                    Dispatched::Handled(format!("cancelled call {}", list.join(", ")))
                }
            }
            // The engine records these before they take effect (`Inner::switch_mode`,
            // `Inner::approve_always`, `Inner::revoke_approvals`): they do not get here.
            command @ (Command::SetMode { .. }
            | Command::ApproveAlways { .. }
            | Command::RevokeApprovals { .. }) => {
                Dispatched::Ignored(format!("{} is done by the engine", command.describe()))
            }
            // The engine marks final itself before commands get here.
            Command::MarkFinal { candidate } => {
                Dispatched::Ignored(format!("candidate {candidate} cannot be marked here"))
            }
            Command::Stop => {
                self.stop.cancel();
                // Open gates end unanswered (the engine withdraws them; resume asks again).
                self.gates.lock().expect("gates lock").clear();
                self.paused.send_replace(false);
                Dispatched::Handled("stopping: the session stays resumable".into())
            }
            action @ (Command::Repair { .. }
            | Command::Optimize { .. }
            | Command::Manual { .. }
            | Command::Reevaluate { .. }
            | Command::Profile { .. }
            | Command::Reask { .. }) => {
                let what = action.describe();
                if self.actions.send(action).is_ok() {
                    Dispatched::Handled(format!("queued: {what}"))
                } else {
                    Dispatched::Ignored("the engine no longer takes actions".into())
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::CandidateId;

    #[tokio::test]
    async fn gates_answers_pause_and_stop() {
        let (control, mut actions) = Control::new(Mode::Step);
        let gate = control.open_gate(GateId(1), GateKind::Stages, false);
        // A rewrite where nothing can be rewritten is refused; the gate keeps waiting.
        assert!(matches!(
            control.dispatch(Command::Resolve {
                gate: GateId(1),
                decision: Decision::Rewrite { text: "x".into() }
            }),
            Dispatched::Ignored(m) if m.contains("no prompt or kernel to rewrite")
        ));
        assert!(matches!(
            control.dispatch(Command::Resolve {
                gate: GateId(2),
                decision: Decision::Approve
            }),
            Dispatched::Ignored(_)
        ));
        assert!(matches!(
            control.dispatch(Command::Resolve {
                gate: GateId(1),
                decision: Decision::Approve
            }),
            Dispatched::Handled(_)
        ));
        assert_eq!(gate.await.unwrap(), Decision::Approve);

        control.dispatch(Command::Pause);
        assert!(control.is_paused());
        control.dispatch(Command::Resume);
        control.wait_unpaused().await;

        let token = control.call_token(CallId(9));
        control.dispatch(Command::CancelCall {
            call: Some(CallId(9)),
        });
        assert!(token.is_cancelled());

        control.dispatch(Command::Repair {
            candidate: CandidateId(1),
            instruction: "x".into(),
        });
        assert!(matches!(
            actions.try_recv().unwrap(),
            Command::Repair { .. }
        ));

        let pending = control.open_gate(GateId(3), GateKind::LlmCall, true);
        control.dispatch(Command::Stop);
        assert!(control.stop.is_cancelled());
        assert!(
            pending.await.is_err(),
            "open gates end unanswered when the run stops"
        );
    }

    #[test]
    fn what_a_mode_and_standing_approvals_ask() {
        let (control, _actions) = Control::new(Mode::Step);
        let _llm = control.open_gate(GateId(1), GateKind::LlmCall, true);
        let _stages = control.open_gate(GateId(2), GateKind::Stages, false);
        assert!(control.gates_not_asked().is_empty());
        assert!(control.approve_always(GateKind::LlmCall));
        assert!(!control.approve_always(GateKind::LlmCall), "once is enough");
        assert_eq!(
            control.gates_not_asked(),
            vec![(GateId(1), GateKind::LlmCall)]
        );
        assert!(control.set_mode(Mode::Review).is_empty());
        assert!(!control.asks(GateKind::Evaluation) && control.asks(GateKind::Stages));
        control.set_mode(Mode::Auto);
        assert_eq!(control.gates_not_asked().len(), 2);
        assert_eq!(control.set_mode(Mode::Step), vec![GateKind::LlmCall]);
        assert!(
            control.asks(GateKind::LlmCall),
            "step mode asks everything again"
        );
    }

    #[test]
    fn revoking_takes_back_one_kind_or_all_and_approves_nothing() {
        let (control, _actions) = Control::new(Mode::Step);
        let _eval = control.open_gate(GateId(1), GateKind::Evaluation, true);
        control.approve_always(GateKind::LlmCall);
        control.approve_always(GateKind::Stages);
        assert_eq!(control.revoke(Some(GateKind::Evaluation)), vec![]);
        assert_eq!(
            control.revoke(Some(GateKind::LlmCall)),
            vec![GateKind::LlmCall]
        );
        assert!(control.asks(GateKind::LlmCall) && !control.asks(GateKind::Stages));
        assert_eq!(control.standing(), vec![GateKind::Stages]);
        assert_eq!(control.revoke(None), vec![GateKind::Stages]);
        assert!(control.standing().is_empty());
        // The mode is untouched and the waiting gate still waits.
        assert_eq!(control.mode(), Mode::Step);
        assert!(control.gates_not_asked().is_empty());
        assert!(control.gates.lock().unwrap().contains_key(&GateId(1)));
    }
}
