//! In-process wire on ethercrab's public `PduTx`/`PduRx` hooks: a thread takes each frame the
//! master queues, passes it through the simulated chain and hands the reply back. No socket, no
//! root, and no sleeping: with the virtual clock a test runs as fast as the CPU allows.

use crate::error::EcsimError;
use crate::network::{FrameOutcome, SimNetwork};
use ethercrab::{PduRx, PduTx};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Wake, Waker};
use std::thread::{self, JoinHandle, Thread};
use std::time::{Duration, Instant};

/// Wakes the wire thread when the master queues a frame.
struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// A running in-process wire. Dropping it stops the thread.
pub struct SimHandle {
    net: Arc<Mutex<SimNetwork>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SimHandle {
    /// Lock the network to inspect drives or inject faults between cycles. Hold it briefly:
    /// frames wait while it is held.
    pub fn network(&self) -> MutexGuard<'_, SimNetwork> {
        self.net.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stop the wire thread and wait for it.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Start the wire thread serving `tx`/`rx` (from `PduStorage::try_split`) with `net`.
pub fn spawn_in_process(
    tx: PduTx<'static>,
    rx: PduRx<'static>,
    net: SimNetwork,
) -> Result<SimHandle, EcsimError> {
    let net = Arc::new(Mutex::new(net));
    let stop = Arc::new(AtomicBool::new(false));
    let (net2, stop2) = (Arc::clone(&net), Arc::clone(&stop));
    let thread = thread::Builder::new()
        .name("ecsim-wire".into())
        .spawn(move || wire_loop(tx, rx, &net2, &stop2))
        .map_err(EcsimError::Thread)?;
    Ok(SimHandle {
        net,
        stop,
        thread: Some(thread),
    })
}

fn wire_loop(
    mut tx: PduTx<'static>,
    mut rx: PduRx<'static>,
    net: &Mutex<SimNetwork>,
    stop: &AtomicBool,
) {
    let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
    let mut reply = Vec::with_capacity(1600);
    let mut delayed: Vec<(Instant, Vec<u8>)> = Vec::new();
    while !stop.load(Ordering::Acquire) {
        // Register before looking for frames so a frame queued in between still wakes us.
        tx.replace_waker(&waker);
        if tx.should_exit() {
            break;
        }
        while let Some(frame) = tx.next_sendable_frame() {
            let mut outcome = FrameOutcome::NoReply;
            let sent = frame.send_blocking(|bytes| {
                let mut n = net.lock().unwrap_or_else(|p| p.into_inner());
                outcome = n.process_frame(bytes, &mut reply);
                Ok(bytes.len())
            });
            if sent.is_err() {
                continue;
            }
            match outcome {
                FrameOutcome::Reply { delay_ns: 0 } => {
                    // A reply the master no longer waits for (timed out) is an error we ignore,
                    // as a NIC driver would.
                    let _ = rx.receive_frame(&reply);
                }
                FrameOutcome::Reply { delay_ns } => {
                    delayed.push((
                        Instant::now() + Duration::from_nanos(delay_ns),
                        reply.clone(),
                    ));
                }
                FrameOutcome::NoReply => {}
            }
        }
        let now = Instant::now();
        delayed.retain(|(due, f)| {
            if *due <= now {
                let _ = rx.receive_frame(f);
                false
            } else {
                true
            }
        });
        let wait = delayed
            .iter()
            .map(|(due, _)| due.saturating_duration_since(now))
            .min()
            .unwrap_or(Duration::from_millis(5));
        thread::park_timeout(wait);
    }
}
