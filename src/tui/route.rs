//! Where the session view carries out an action that no component used (`App::global`):
//! on the selected candidate, on the run, on the view, or nowhere because only a pane, a
//! tab or a dialog answers it. One exhaustive match (`Route::of`) and exhaustive handlers
//! over each group: a new action does not compile until it is given its place, so none can
//! silently do nothing.

use super::keymap::Action;

/// What the person asks of the selected candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CandidateAction {
    Repair,
    Optimize,
    EditEval,
    EditInline,
    Reevaluate,
    Profile,
    MarkFinal,
    Copy,
}

/// What the person asks of the run: pause, cancel, ask again, gates, modes, approvals,
/// manual answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunAction {
    PauseResume,
    CancelCall,
    CancelAllCalls,
    Reask,
    OpenGate,
    AnswerCall,
    SwitchMode,
    Revoke,
}

/// Moving around the view: quitting, help, focus, filters, follow, mark, jumps, theme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewAction {
    Quit,
    Interrupt,
    Help,
    FocusNext,
    FocusPrev,
    Filter,
    ClearFilter,
    Follow,
    Mark,
    JumpBest,
    JumpFailure,
    Theme,
    Suspend,
}

/// Where an action goes once no component has used it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Candidate(CandidateAction),
    Run(RunAction),
    View(ViewAction),
    /// Only a pane, a detail tab, a dialog or the batch view answers it: when none did (a
    /// key of a pane without the focus), there is nothing for the app to do.
    Component,
}

impl Route {
    pub fn of(action: Action) -> Route {
        use CandidateAction as C;
        use RunAction as R;
        use ViewAction as V;
        match action {
            Action::Repair => Route::Candidate(C::Repair),
            Action::Optimize => Route::Candidate(C::Optimize),
            Action::EditEval => Route::Candidate(C::EditEval),
            Action::EditInline => Route::Candidate(C::EditInline),
            Action::Reevaluate => Route::Candidate(C::Reevaluate),
            Action::Profile => Route::Candidate(C::Profile),
            Action::MarkFinal => Route::Candidate(C::MarkFinal),
            Action::Copy => Route::Candidate(C::Copy),
            Action::PauseResume => Route::Run(R::PauseResume),
            Action::CancelCall => Route::Run(R::CancelCall),
            Action::CancelAllCalls => Route::Run(R::CancelAllCalls),
            Action::Reask => Route::Run(R::Reask),
            Action::OpenGate => Route::Run(R::OpenGate),
            Action::AnswerCall => Route::Run(R::AnswerCall),
            Action::SwitchMode => Route::Run(R::SwitchMode),
            Action::Revoke => Route::Run(R::Revoke),
            Action::Quit => Route::View(V::Quit),
            Action::Interrupt => Route::View(V::Interrupt),
            Action::Help => Route::View(V::Help),
            Action::FocusNext => Route::View(V::FocusNext),
            Action::FocusPrev => Route::View(V::FocusPrev),
            Action::Filter => Route::View(V::Filter),
            Action::ClearFilter => Route::View(V::ClearFilter),
            Action::Follow => Route::View(V::Follow),
            Action::Mark => Route::View(V::Mark),
            Action::JumpBest => Route::View(V::JumpBest),
            Action::JumpFailure => Route::View(V::JumpFailure),
            Action::Theme => Route::View(V::Theme),
            Action::Suspend => Route::View(V::Suspend),
            // Scrolling and moving: the focused pane's.
            Action::Up
            | Action::Down
            | Action::PageUp
            | Action::PageDown
            | Action::Top
            | Action::Bottom
            // The detail tabs' (from any pane).
            | Action::TabNext
            | Action::TabPrev
            | Action::TabCode
            | Action::TabDiff
            | Action::TabCompare
            | Action::TabLlm
            | Action::TabEval
            | Action::TabAnalysis
            | Action::DiffLayout
            | Action::NextHunk
            | Action::PrevHunk
            | Action::NextCall
            | Action::PrevCall
            | Action::ScrollLeft
            | Action::ScrollRight
            | Action::ClearSearch
            // The tree's and the timeline's.
            | Action::Collapse
            | Action::Expand
            | Action::Toggle
            | Action::PointPrev
            | Action::PointNext
            // The gate dialog's and the confirmations'.
            | Action::Approve
            | Action::ApproveAlways
            | Action::Reject
            | Action::Rewrite
            | Action::RewriteInline
            | Action::GateDiff
            | Action::Later
            | Action::Yes
            | Action::StopRun
            | Action::No
            // The batch view's.
            | Action::OpenTask => Route::Component,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::keymap::{ALL, Context};

    /// An action of the global context that a pane does not answer has a place in the app:
    /// the app's own keys are exactly the candidate, run and view groups.
    #[test]
    fn every_global_action_of_the_app_has_a_handler() {
        for action in ALL {
            match Route::of(*action) {
                Route::Candidate(_) | Route::Run(_) | Route::View(_) => {
                    assert_eq!(action.context(), Context::Global, "{action:?}")
                }
                Route::Component => {}
            }
        }
    }
}
