//! Spreads evaluations over the devices of a session or a batch: each request goes to the
//! device with the fewest evaluations outstanding (queued or running) from this pool, the
//! lowest index on a tie. The evaluator behind runs one job at a time per device, so no
//! two timed runs ever share a GPU; the harness times the reference in the same job (or
//! reads the baseline cached for that very device), so a score always compares kernel and
//! reference on one device. One pool is shared by every session of a batch.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::ports::EvalPort;
use crate::eval::devices::DeviceSet;
use crate::eval::{Device, EvalError, EvalProgress, EvalRequest};
use crate::protocol::EvalResult;

pub struct DevicePool {
    inner: Arc<dyn EvalPort>,
    devices: DeviceSet,
    outstanding: Mutex<HashMap<Device, usize>>,
}

/// Gives the device's slot back when the evaluation ends, however it ends (a cancelled
/// future is dropped mid-way).
struct Slot<'a> {
    pool: &'a DevicePool,
    device: Device,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut outstanding = self.pool.outstanding.lock().expect("pool");
        if let Some(n) = outstanding.get_mut(&self.device) {
            *n = n.saturating_sub(1);
        }
    }
}

impl DevicePool {
    pub fn new(inner: Arc<dyn EvalPort>, devices: DeviceSet) -> DevicePool {
        DevicePool {
            inner,
            devices,
            outstanding: Mutex::new(HashMap::new()),
        }
    }

    pub fn devices(&self) -> &DeviceSet {
        &self.devices
    }

    /// Takes a slot on the least loaded device.
    fn take_slot(&self) -> Slot<'_> {
        let mut outstanding = self.outstanding.lock().expect("pool");
        let device = *self
            .devices
            .devices()
            .iter()
            .min_by_key(|d| outstanding.get(d).copied().unwrap_or(0))
            .expect("a device set is never empty");
        *outstanding.entry(device).or_default() += 1;
        Slot { pool: self, device }
    }
}

impl EvalPort for DevicePool {
    fn prepare(&self, _device: Device) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            for d in self.devices.devices() {
                self.inner.prepare(*d).await;
            }
        })
    }

    fn evaluate(
        &self,
        mut request: EvalRequest,
        cancel: CancellationToken,
        progress: Option<mpsc::UnboundedSender<EvalProgress>>,
    ) -> BoxFuture<'_, Result<EvalResult, EvalError>> {
        Box::pin(async move {
            let slot = self.take_slot();
            request.device = slot.device;
            let result = self.inner.evaluate(request, cancel, progress).await;
            drop(slot);
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::config::EvalConfig;

    /// Records, per device, how many evaluations run at once and in all.
    #[derive(Default)]
    struct Recording {
        running: Mutex<HashMap<Device, usize>>,
        most_at_once: Mutex<HashMap<Device, usize>>,
        total: Mutex<HashMap<Device, usize>>,
        calls: AtomicUsize,
    }

    impl EvalPort for Recording {
        fn prepare(&self, _device: Device) -> BoxFuture<'_, ()> {
            Box::pin(async {})
        }

        fn evaluate(
            &self,
            request: EvalRequest,
            _cancel: CancellationToken,
            _progress: Option<mpsc::UnboundedSender<EvalProgress>>,
        ) -> BoxFuture<'_, Result<EvalResult, EvalError>> {
            Box::pin(async move {
                let d = request.device;
                self.calls.fetch_add(1, Ordering::SeqCst);
                {
                    let mut running = self.running.lock().unwrap();
                    let n = running.entry(d).or_default();
                    *n += 1;
                    let mut most = self.most_at_once.lock().unwrap();
                    let m = most.entry(d).or_default();
                    *m = (*m).max(*n);
                    *self.total.lock().unwrap().entry(d).or_default() += 1;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
                *self.running.lock().unwrap().get_mut(&d).unwrap() -= 1;
                Ok(EvalResult::default())
            })
        }
    }

    fn request() -> EvalRequest {
        EvalRequest::new("t.py", "k.py", Device::Cuda(7), EvalConfig::default())
    }

    #[tokio::test]
    async fn evaluations_spread_evenly_and_never_leave_the_set() {
        let recording = Arc::new(Recording::default());
        let pool = Arc::new(DevicePool::new(
            recording.clone(),
            DeviceSet::parse_list("0,1").unwrap(),
        ));
        let jobs: Vec<_> = (0..8)
            .map(|_| {
                let pool = pool.clone();
                tokio::spawn(async move {
                    pool.evaluate(request(), CancellationToken::new(), None)
                        .await
                })
            })
            .collect();
        for j in jobs {
            j.await.unwrap().unwrap();
        }
        let total = recording.total.lock().unwrap().clone();
        assert_eq!(total.get(&Device::Cuda(0)), Some(&4), "{total:?}");
        assert_eq!(total.get(&Device::Cuda(1)), Some(&4), "{total:?}");
        assert_eq!(
            total.get(&Device::Cuda(7)),
            None,
            "the requested device is replaced"
        );
        assert!(pool.outstanding.lock().unwrap().values().all(|n| *n == 0));
    }

    #[tokio::test]
    async fn an_idle_device_is_taken_before_a_busy_one() {
        let recording = Arc::new(Recording::default());
        let pool = Arc::new(DevicePool::new(
            recording.clone(),
            DeviceSet::parse_list("0,1").unwrap(),
        ));
        // Two at once: one on each device, not two on the first.
        let a = {
            let pool = pool.clone();
            tokio::spawn(async move {
                pool.evaluate(request(), CancellationToken::new(), None)
                    .await
            })
        };
        let b = {
            let pool = pool.clone();
            tokio::spawn(async move {
                pool.evaluate(request(), CancellationToken::new(), None)
                    .await
            })
        };
        a.await.unwrap().unwrap();
        b.await.unwrap().unwrap();
        let most = recording.most_at_once.lock().unwrap().clone();
        assert_eq!(most.get(&Device::Cuda(0)), Some(&1), "{most:?}");
        assert_eq!(most.get(&Device::Cuda(1)), Some(&1), "{most:?}");
    }

    #[tokio::test]
    async fn a_dropped_evaluation_gives_its_slot_back() {
        let recording = Arc::new(Recording::default());
        let pool = DevicePool::new(recording.clone(), DeviceSet::parse_list("0,1").unwrap());
        let fut = pool.evaluate(request(), CancellationToken::new(), None);
        // Polled once (the slot is taken), then dropped as a cancelled step drops it.
        let _ = tokio::time::timeout(Duration::from_millis(1), fut).await;
        assert!(pool.outstanding.lock().unwrap().values().all(|n| *n == 0));
    }
}
