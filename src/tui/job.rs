//! The one background job the TUI's workers are made of (syntax colours, session files, the
//! batch feed), after gitui's `AsyncSingleJob`: a draw asks for a keyed result and gets it
//! from the cache, or starts its request and shows a placeholder for a frame. A worker
//! thread answers requests in the order their keys were first asked, hands each answer to
//! `notify` (which feeds the app's event channel), and the app gives it back through `done`,
//! which caches it for the next draw.
//!
//! A request waiting for the worker is replaced by a newer one for the same key (the latest
//! request wins, in the place in line of the first). Dropping the job stops its worker after
//! the request at hand; so does a `notify` that says no one listens any more.
//!
//! `BackgroundJob::inline` answers on the calling thread instead (tests and benchmarks,
//! where a frame must show everything at once).

use std::borrow::Borrow;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// An answer of the worker, on its way through the app's event channel to `done`.
#[derive(Debug, Clone)]
pub struct Done<K, O> {
    pub key: K,
    pub output: O,
}

/// What answers a request: `None` when there is nothing new to say (a refresh that found no
/// change); `notify` then hears nothing.
type Work<K, R, O> = Box<dyn FnMut(&K, R) -> Option<O> + Send>;

/// The request a periodic worker makes itself.
type Tick<K, R> = Box<dyn Fn() -> (K, R) + Send>;

/// The requests waiting for the worker, one per key, in the order their keys came.
struct Queue<K, R> {
    order: VecDeque<K>,
    requests: HashMap<K, R>,
    closed: bool,
}

struct Shared<K, R> {
    queue: Mutex<Queue<K, R>>,
    wake: Condvar,
}

impl<K: Eq + Hash + Clone, R> Shared<K, R> {
    fn lock(&self) -> MutexGuard<'_, Queue<K, R>> {
        // A worker that panicked left the queue consistent: every change is one statement.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, key: K, request: R) {
        let mut q = self.lock();
        if q.requests.insert(key.clone(), request).is_none() {
            q.order.push_back(key);
        }
        self.wake.notify_one();
    }

    /// The next request, waiting for one; with `every`, the tick's request once the worker
    /// has waited that long with nothing to do. `None`: the job is gone.
    fn next(&self, every: Option<&(Duration, Tick<K, R>)>) -> Option<(K, R)> {
        let mut q = self.lock();
        loop {
            if q.closed {
                return None;
            }
            if let Some(key) = q.order.pop_front()
                && let Some(request) = q.requests.remove(&key)
            {
                return Some((key, request));
            }
            match every {
                None => q = self.wake.wait(q).unwrap_or_else(PoisonError::into_inner),
                Some((interval, tick)) => {
                    let (guard, waited) = self
                        .wake
                        .wait_timeout(q, *interval)
                        .unwrap_or_else(PoisonError::into_inner);
                    q = guard;
                    if waited.timed_out() && q.order.is_empty() && !q.closed {
                        return Some(tick());
                    }
                }
            }
        }
    }
}

/// Answers kept for draws, oldest dropped first past `capacity`, and the keys asked for
/// whose answer has not arrived.
struct Cache<K, O> {
    outputs: HashMap<K, O>,
    order: VecDeque<K>,
    pending: HashSet<K>,
    capacity: usize,
}

impl<K: Eq + Hash + Clone, O> Cache<K, O> {
    fn insert(&mut self, key: K, output: O) {
        self.pending.remove(&key);
        if self.outputs.insert(key.clone(), output).is_none() {
            self.order.push_back(key);
        }
        while self.order.len() > self.capacity {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            self.outputs.remove(&old);
        }
    }
}

enum Runner<K, R, O> {
    /// Requests are answered on the calling thread.
    Inline(RefCell<Work<K, R, O>>),
    /// Requests go to a worker thread.
    Worker(Arc<Shared<K, R>>),
}

/// Keyed requests answered off the UI thread, their answers cached (see the module doc).
pub struct BackgroundJob<K, R, O> {
    runner: Runner<K, R, O>,
    cache: RefCell<Cache<K, O>>,
}

impl<K, R, O> BackgroundJob<K, R, O>
where
    K: Eq + Hash + Clone + Send + 'static,
    R: Send + 'static,
    O: Clone + Send + 'static,
{
    /// Answers on the calling thread, keeping at most `capacity` answers.
    pub fn inline(
        capacity: usize,
        work: impl FnMut(&K, R) -> Option<O> + Send + 'static,
    ) -> BackgroundJob<K, R, O> {
        BackgroundJob::new(Runner::Inline(RefCell::new(Box::new(work))), capacity)
    }

    /// Answers on a worker thread named `name`, keeping at most `capacity` answers; each
    /// answer goes to `notify`, which returns whether anyone still listens.
    pub fn spawn(
        name: &str,
        capacity: usize,
        work: impl FnMut(&K, R) -> Option<O> + Send + 'static,
        notify: impl Fn(Done<K, O>) -> bool + Send + 'static,
    ) -> BackgroundJob<K, R, O> {
        BackgroundJob::start(name, capacity, Box::new(work), Box::new(notify), None)
    }

    /// As `spawn`, and the worker also makes `tick`'s request when it starts and whenever it
    /// has waited `interval` with nothing to do.
    pub fn spawn_periodic(
        name: &str,
        capacity: usize,
        interval: Duration,
        tick: impl Fn() -> (K, R) + Send + 'static,
        work: impl FnMut(&K, R) -> Option<O> + Send + 'static,
        notify: impl Fn(Done<K, O>) -> bool + Send + 'static,
    ) -> BackgroundJob<K, R, O> {
        let every: (Duration, Tick<K, R>) = (interval, Box::new(tick));
        BackgroundJob::start(
            name,
            capacity,
            Box::new(work),
            Box::new(notify),
            Some(every),
        )
    }

    fn new(runner: Runner<K, R, O>, capacity: usize) -> BackgroundJob<K, R, O> {
        BackgroundJob {
            runner,
            cache: RefCell::new(Cache {
                outputs: HashMap::new(),
                order: VecDeque::new(),
                pending: HashSet::new(),
                capacity,
            }),
        }
    }

    fn start(
        name: &str,
        capacity: usize,
        mut work: Work<K, R, O>,
        notify: Box<dyn Fn(Done<K, O>) -> bool + Send>,
        every: Option<(Duration, Tick<K, R>)>,
    ) -> BackgroundJob<K, R, O> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                order: VecDeque::new(),
                requests: HashMap::new(),
                closed: false,
            }),
            wake: Condvar::new(),
        });
        if let Some((_, tick)) = &every {
            let (key, request) = tick();
            shared.push(key, request);
        }
        let worker = shared.clone();
        // A worker that cannot start leaves every request unanswered: the screen shows its
        // placeholders, as it would while a slow answer comes.
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                while let Some((key, request)) = worker.next(every.as_ref()) {
                    if let Some(output) = work(&key, request)
                        && !notify(Done { key, output })
                    {
                        return;
                    }
                }
            })
            .ok();
        BackgroundJob::new(Runner::Worker(shared), capacity)
    }

    /// The cached answer for `key`. Else its request (made by `request`) is started, once
    /// while it is pending, and this is `None`; inline, it is answered and returned now.
    pub fn get<Q>(&self, key: &Q, request: impl FnOnce() -> R) -> Option<O>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if let Some(output) = self.cached(key) {
            return Some(output);
        }
        match &self.runner {
            Runner::Inline(_) => self.request(key.to_owned(), request()),
            Runner::Worker(shared) => {
                if self.cache.borrow_mut().pending.insert(key.to_owned()) {
                    shared.push(key.to_owned(), request());
                }
                None
            }
        }
    }

    /// Makes a request whether or not `key` is cached, without marking it pending (a
    /// refresh, which may find nothing new). Inline, it is answered now: the answer, also
    /// cached, is returned; from the worker, it comes through `notify`.
    pub fn request(&self, key: K, request: R) -> Option<O> {
        match &self.runner {
            Runner::Inline(work) => {
                let output = (work.borrow_mut())(&key, request)?;
                self.insert(key, output.clone());
                Some(output)
            }
            Runner::Worker(shared) => {
                shared.push(key, request);
                None
            }
        }
    }

    /// The cached answer for `key`, asking for nothing.
    pub fn cached<Q>(&self, key: &Q) -> Option<O>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.cache.borrow().outputs.get(key).cloned()
    }

    /// Each cached answer, as `f` reads it.
    pub fn read_cached<T>(&self, f: impl Fn(&K, &O) -> T) -> Vec<T> {
        let cache = self.cache.borrow();
        cache
            .order
            .iter()
            .map(|k| f(k, &cache.outputs[k]))
            .collect()
    }

    /// How many answers are cached.
    pub fn cached_count(&self) -> usize {
        self.cache.borrow().outputs.len()
    }

    /// Whether `key` was asked for and its answer has not arrived.
    pub fn pending<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.cache.borrow().pending.contains(key)
    }

    /// Caches an answer got some other way (read on the caller's thread).
    pub fn insert(&self, key: K, output: O) {
        self.cache.borrow_mut().insert(key, output);
    }

    /// An answer of the worker, back from the app's event channel.
    pub fn done(&self, done: Done<K, O>) {
        self.insert(done.key, done.output);
    }

    /// Drops `key`'s cached answer: the next `get` asks again.
    pub fn forget<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut cache = self.cache.borrow_mut();
        cache.outputs.remove(key);
        cache.order.retain(|k| k.borrow() != key);
    }
}

impl<K, R, O> Drop for BackgroundJob<K, R, O> {
    fn drop(&mut self) {
        if let Runner::Worker(shared) = &self.runner {
            // Not `Shared::lock`: that needs the bounds of the main impl, which `Drop`
            // cannot have.
            shared
                .queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .closed = true;
            shared.wake.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    const WAIT: Duration = Duration::from_secs(10);

    /// A worker that answers `key * 10 + request` once `gate` lets it through, so tests can
    /// queue requests behind the one at hand.
    fn gated(
        gate: mpsc::Receiver<()>,
        answers: mpsc::Sender<Done<u32, u32>>,
    ) -> BackgroundJob<u32, u32, u32> {
        let gate = Mutex::new(gate);
        BackgroundJob::spawn(
            "test-job",
            8,
            move |key, request| {
                gate.lock().unwrap().recv().ok()?;
                Some(key * 10 + request)
            },
            move |done| answers.send(done).is_ok(),
        )
    }

    #[test]
    fn answers_come_in_the_order_keys_were_asked_and_are_cached_once_done() {
        let (open, gate) = mpsc::channel();
        let (tx, rx) = mpsc::channel();
        let job = gated(gate, tx);
        for key in [3, 1, 2] {
            assert_eq!(job.get(&key, || 0), None);
            assert!(job.pending(&key));
        }
        // Asking again while pending queues nothing more.
        assert_eq!(job.get(&1, || 9), None);
        for _ in 0..3 {
            open.send(()).unwrap();
        }
        let got: Vec<u32> = (0..3)
            .map(|_| {
                let done = rx.recv_timeout(WAIT).unwrap();
                let key = done.key;
                job.done(done);
                key
            })
            .collect();
        assert_eq!(got, [3, 1, 2]);
        assert_eq!(job.get(&1, || 0), Some(10));
        assert!(!job.pending(&1));
        open.send(()).unwrap();
        assert!(
            rx.recv_timeout(Duration::from_millis(200)).is_err(),
            "nothing else was queued"
        );
    }

    #[test]
    fn the_latest_request_for_a_waiting_key_wins_in_its_place() {
        let (open, gate) = mpsc::channel();
        let (tx, rx) = mpsc::channel();
        let job = gated(gate, tx);
        // Until the gate opens the worker holds at most key 1's request: the others wait.
        job.request(1, 1);
        job.request(2, 1);
        job.request(3, 1);
        job.request(2, 5);
        for _ in 0..3 {
            open.send(()).unwrap();
        }
        let got: Vec<u32> = (0..3)
            .map(|_| rx.recv_timeout(WAIT).unwrap().output)
            .collect();
        assert_eq!(got, [11, 25, 31]);
    }

    #[test]
    fn dropping_the_job_or_a_deaf_notify_ends_the_worker() {
        let (tx, rx) = mpsc::channel::<Done<u32, u32>>();
        let job = BackgroundJob::spawn(
            "test-job",
            1,
            |k: &u32, r: u32| Some(k + r),
            move |d| tx.send(d).is_ok(),
        );
        job.request(1, 1);
        assert_eq!(rx.recv_timeout(WAIT).unwrap().output, 2);
        drop(job);
        // The worker owned the only sender: it is gone once the worker ends.
        assert!(matches!(
            rx.recv_timeout(WAIT),
            Err(mpsc::RecvTimeoutError::Disconnected)
        ));

        let (ended_tx, ended) = mpsc::channel::<()>();
        let job = BackgroundJob::spawn(
            "test-job",
            1,
            |k: &u32, _: ()| Some(*k),
            move |_| {
                let _held = &ended_tx;
                false
            },
        );
        job.request(7, ());
        assert_eq!(
            ended.recv_timeout(WAIT),
            Err(mpsc::RecvTimeoutError::Disconnected),
            "a notify that says no one listens ends the worker while the job lives"
        );
        drop(job);
    }

    #[test]
    fn a_periodic_worker_asks_at_start_and_when_idle_and_says_only_news() {
        let (tx, rx) = mpsc::channel();
        let mut reads = 0;
        let job = BackgroundJob::spawn_periodic(
            "test-job",
            0,
            Duration::from_millis(20),
            || ((), ()),
            move |_, ()| {
                reads += 1;
                // Every read after the third finds nothing new.
                (reads <= 3).then_some(reads)
            },
            move |d| tx.send(d.output).is_ok(),
        );
        let got: Vec<u32> = (0..3).map(|_| rx.recv_timeout(WAIT).unwrap()).collect();
        assert_eq!(got, [1, 2, 3]);
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
        drop(job);
    }

    #[test]
    fn inline_answers_now_keeps_the_newest_and_refreshes_only_news() {
        let job = BackgroundJob::inline(2, |k: &u32, r: u32| (r > 0).then_some(k * 10 + r));
        assert_eq!(job.get(&1, || 1), Some(11));
        assert_eq!(job.get(&2, || 1), Some(21));
        assert_eq!(job.get(&3, || 1), Some(31));
        assert_eq!(job.cached_count(), 2);
        assert_eq!(job.cached(&1), None, "the oldest answer went first");
        assert_eq!(job.read_cached(|k, o| (*k, *o)), [(2, 21), (3, 31)]);
        assert_eq!(job.request(2, 0), None, "nothing new: the answer stays");
        assert_eq!(job.cached(&2), Some(21));
        assert_eq!(job.request(2, 5), Some(25));
        job.forget(&2);
        assert_eq!(job.cached(&2), None);
        assert!(!job.pending(&2), "inline requests never wait");
    }
}
