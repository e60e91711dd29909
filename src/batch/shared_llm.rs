//! What the tasks of a batch share on the LLM side: a bound on calls in flight over all
//! tasks (each session still has its own bound), and the batch's token and cost budget,
//! counted over every task's calls (earlier runs included) and tripped once.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::engine::ports::{Answer, CallFailure, CallProgress, LlmCall, LlmPort};
use crate::protocol::{CallId, TokenUsage};

/// The batch's spending so far and its limits.
pub struct Ledger {
    spent: Mutex<Spent>,
    max_tokens: Option<u64>,
    max_cost_usd: Option<f64>,
    /// Cancelled when a batch budget is reached (by spending or by the wall clock).
    pub tripped: CancellationToken,
    reason: Mutex<Option<String>>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spent {
    pub tokens: u64,
    pub cost_usd: f64,
}

impl Ledger {
    /// A ledger starting from what earlier runs spent.
    pub fn new(spent: Spent, max_tokens: Option<u64>, max_cost_usd: Option<f64>) -> Ledger {
        let ledger = Ledger {
            spent: Mutex::new(spent),
            max_tokens,
            max_cost_usd,
            tripped: CancellationToken::new(),
            reason: Mutex::new(None),
        };
        ledger.check();
        ledger
    }

    pub fn spent(&self) -> Spent {
        *self.spent.lock().expect("ledger")
    }

    /// Why the batch's budget is spent, once it is.
    pub fn reason(&self) -> Option<String> {
        self.reason.lock().expect("ledger").clone()
    }

    /// Ends the batch's budget for `reason` (the first reason stays).
    pub fn trip(&self, reason: String) {
        let mut r = self.reason.lock().expect("ledger");
        if r.is_none() {
            *r = Some(reason);
        }
        self.tripped.cancel();
    }

    fn add(&self, usage: &TokenUsage, cost: Option<f64>) {
        {
            let mut spent = self.spent.lock().expect("ledger");
            spent.tokens += usage.input + usage.output;
            spent.cost_usd += cost.unwrap_or(0.0);
        }
        self.check();
    }

    fn check(&self) {
        let spent = self.spent();
        if let Some(max) = self.max_tokens
            && spent.tokens >= max
        {
            self.trip(format!(
                "the batch token budget ({max}) is spent: {} tokens",
                spent.tokens
            ));
        }
        if let Some(max) = self.max_cost_usd
            && spent.cost_usd >= max
        {
            self.trip(format!(
                "the batch cost budget (${max}) is spent: ${:.4}",
                spent.cost_usd
            ));
        }
    }
}

/// One session's port, bounded by the batch's call slots and counted in its ledger.
pub struct SharedLlm {
    inner: Arc<dyn LlmPort>,
    slots: Arc<Semaphore>,
    ledger: Arc<Ledger>,
}

impl SharedLlm {
    pub fn new(inner: Arc<dyn LlmPort>, slots: Arc<Semaphore>, ledger: Arc<Ledger>) -> SharedLlm {
        SharedLlm {
            inner,
            slots,
            ledger,
        }
    }
}

impl LlmPort for SharedLlm {
    fn label(&self) -> (String, String) {
        self.inner.label()
    }

    fn complete<'a>(
        &'a self,
        call: &'a LlmCall,
        cancel: &'a CancellationToken,
        progress: &'a mut (dyn FnMut(CallProgress) + Send),
    ) -> BoxFuture<'a, Result<Answer, CallFailure>> {
        Box::pin(async move {
            let permit = tokio::select! {
                biased;
                // The batch stops every session; a call not sent yet is never sent.
                _ = self.ledger.tripped.cancelled() => return Err(CallFailure::Cancelled),
                _ = cancel.cancelled() => return Err(CallFailure::Cancelled),
                permit = self.slots.acquire() => permit.map_err(|_| CallFailure::Cancelled)?,
            };
            let outcome = self.inner.complete(call, cancel, progress).await;
            drop(permit);
            match &outcome {
                Ok(answer) => self.ledger.add(&answer.usage, answer.cost_usd),
                Err(failure) => {
                    let (_, usage, cost) = failure.parts();
                    self.ledger.add(&usage, cost);
                }
            }
            outcome
        })
    }

    fn manual_answer_file(&self, call: CallId) -> Option<String> {
        self.inner.manual_answer_file(call)
    }

    fn manual_answer(&self, call: CallId, text: String) -> Result<(), String> {
        self.inner.manual_answer(call, text)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::llm::ChatRequest;
    use crate::protocol::CallKind;

    /// Answers after a moment with 100 tokens for $0.01, counting calls at once.
    #[derive(Default)]
    struct Slow {
        now: AtomicUsize,
        most: AtomicUsize,
        calls: AtomicUsize,
    }

    impl LlmPort for Slow {
        fn label(&self) -> (String, String) {
            ("p".into(), "m".into())
        }

        fn complete<'a>(
            &'a self,
            _call: &'a LlmCall,
            _cancel: &'a CancellationToken,
            _progress: &'a mut (dyn FnMut(CallProgress) + Send),
        ) -> BoxFuture<'a, Result<Answer, CallFailure>> {
            Box::pin(async move {
                self.calls.fetch_add(1, Ordering::SeqCst);
                let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
                self.most.fetch_max(n, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                self.now.fetch_sub(1, Ordering::SeqCst);
                Ok(Answer {
                    text: "ok".into(),
                    usage: TokenUsage {
                        input: 90,
                        output: 10,
                        ..Default::default()
                    },
                    cost_usd: Some(0.01),
                    warning: None,
                })
            })
        }
    }

    fn call() -> LlmCall {
        LlmCall {
            call: CallId(1),
            key: "seed1".into(),
            kind: CallKind::Seed,
            request: ChatRequest::default(),
        }
    }

    async fn ask(port: &SharedLlm) -> Result<Answer, CallFailure> {
        port.complete(&call(), &CancellationToken::new(), &mut |_| {})
            .await
    }

    #[tokio::test]
    async fn calls_over_all_sessions_are_bounded_and_counted() {
        let slow = Arc::new(Slow::default());
        let slots = Arc::new(Semaphore::new(2));
        let ledger = Arc::new(Ledger::new(Spent::default(), None, None));
        // Three sessions' ports share the slots and the ledger.
        let ports: Vec<Arc<SharedLlm>> = (0..3)
            .map(|_| Arc::new(SharedLlm::new(slow.clone(), slots.clone(), ledger.clone())))
            .collect();
        let mut jobs = Vec::new();
        for i in 0..9 {
            let port = ports[i % 3].clone();
            jobs.push(tokio::spawn(async move { ask(&port).await }));
        }
        for j in jobs {
            j.await.unwrap().unwrap();
        }
        assert_eq!(slow.most.load(Ordering::SeqCst), 2);
        let spent = ledger.spent();
        assert_eq!(spent.tokens, 900);
        assert!((spent.cost_usd - 0.09).abs() < 1e-9);
        assert!(ledger.reason().is_none());
    }

    #[tokio::test]
    async fn a_spent_budget_trips_once_and_no_further_call_is_sent() {
        let slow = Arc::new(Slow::default());
        let ledger = Arc::new(Ledger::new(
            Spent {
                tokens: 150,
                cost_usd: 0.0,
            },
            Some(300),
            None,
        ));
        let port = SharedLlm::new(slow.clone(), Arc::new(Semaphore::new(4)), ledger.clone());
        ask(&port).await.unwrap();
        assert!(!ledger.tripped.is_cancelled(), "250 of 300");
        ask(&port).await.unwrap();
        assert!(ledger.tripped.is_cancelled());
        assert_eq!(
            ledger.reason().unwrap(),
            "the batch token budget (300) is spent: 350 tokens"
        );
        assert_eq!(ask(&port).await, Err(CallFailure::Cancelled));
        assert_eq!(slow.calls.load(Ordering::SeqCst), 2);
        // A ledger whose earlier runs spent the budget starts tripped.
        let spent = Ledger::new(
            Spent {
                tokens: 0,
                cost_usd: 5.0,
            },
            None,
            Some(5.0),
        );
        assert!(spent.tripped.is_cancelled());
    }
}
