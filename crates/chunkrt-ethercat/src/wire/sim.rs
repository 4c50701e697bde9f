//! The in-process wire: frames go straight through a `chunkrt_ecsim::SimNetwork` on the
//! calling thread. The master, the frames and the drive models are the real ones; only the
//! cable is missing, so `cargo test` needs no root and no interface.

use super::{Wire, WireError, MAX_FRAME};
use chunkrt_ecsim::{FrameOutcome, SimNetwork};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Replies held back (injected delay) at most at once; more are dropped, as a full NIC
/// ring would.
const HELD: usize = 8;

/// A reply waiting for its delivery time.
struct Held {
    due: Instant,
    len: usize,
    bytes: [u8; MAX_FRAME],
}

/// The wire end the backend owns.
pub struct SimWire {
    net: Arc<Mutex<SimNetwork>>,
    reply: Vec<u8>,
    held: Vec<Held>,
}

/// The test's handle on the same simulated chain: inspect drives, inject faults.
#[derive(Clone)]
pub struct SimControl {
    net: Arc<Mutex<SimNetwork>>,
}

impl SimControl {
    /// Locks the chain (frames wait meanwhile; hold it briefly).
    pub fn network(&self) -> MutexGuard<'_, SimNetwork> {
        self.net.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl SimWire {
    /// Puts `net` behind a wire; the control handle shares it.
    pub fn new(net: SimNetwork) -> (SimWire, SimControl) {
        let net = Arc::new(Mutex::new(net));
        let held = (0..HELD)
            .map(|_| Held {
                due: Instant::now(),
                len: 0,
                bytes: [0; MAX_FRAME],
            })
            .collect();
        (
            SimWire {
                net: Arc::clone(&net),
                reply: Vec::with_capacity(MAX_FRAME * 2),
                held,
            },
            SimControl { net },
        )
    }

    fn hold(&mut self, due: Instant) {
        if let Some(slot) = self.held.iter_mut().find(|h| h.len == 0) {
            let n = self.reply.len().min(MAX_FRAME);
            slot.bytes[..n].copy_from_slice(&self.reply[..n]);
            slot.len = n;
            slot.due = due;
        }
    }
}

impl Wire for SimWire {
    fn send(&mut self, frame: &[u8]) -> Result<(), WireError> {
        let outcome = {
            let mut net = self.net.lock().unwrap_or_else(|p| p.into_inner());
            net.process_frame(frame, &mut self.reply)
        };
        match outcome {
            FrameOutcome::Reply { delay_ns } => {
                self.hold(Instant::now() + Duration::from_nanos(delay_ns));
            }
            FrameOutcome::NoReply => {}
        }
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> Result<usize, WireError> {
        let deadline = Instant::now() + timeout;
        loop {
            let next = self
                .held
                .iter_mut()
                .filter(|h| h.len > 0)
                .min_by_key(|h| h.due);
            let Some(h) = next else {
                std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
                return Ok(0);
            };
            let now = Instant::now();
            if h.due <= now {
                let n = h.len.min(buf.len());
                buf[..n].copy_from_slice(&h.bytes[..n]);
                h.len = 0;
                return Ok(n);
            }
            if h.due > deadline {
                std::thread::sleep(deadline.saturating_duration_since(now));
                return Ok(0);
            }
            std::thread::sleep(h.due - now);
        }
    }

    fn describe(&self) -> String {
        "the in-process simulated chain".into()
    }
}
