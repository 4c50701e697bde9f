//! Drives ethercrab's futures on the calling thread, servicing the wire in between.
//!
//! Why in the calling (control) thread rather than ethercrab's `tx_rx_task` on a thread of
//! its own: a cycle is one frame out and one frame back. With a separate I/O thread that is
//! two cross-thread wake-ups per cycle (control -> I/O thread to send, I/O thread ->
//! control on the reply), each a futex wake plus a scheduling decision, and on an isolated
//! core a second real-time thread to place. Here the control thread polls the future once
//! (ethercrab queues the LRW), sends it with one `send(2)`, waits in `ppoll(2)` for the reply
//! with the cycle's own deadline, hands it to `PduRx` and polls the future to completion:
//! no hand-off, no allocation, and the round trip measured is the wire's. The price is that
//! ethercrab's futures are only polled while a call is in progress, which is all the backend
//! needs (it is the only user of the bus).
//!
//! Measured with `examples/transport_rtt.rs` against 7 simulated drives over a veth pair
//! (1 ms period, SCHED_FIFO, busy 2-core host): the control thread spends p50 60 us / p99
//! 145 us per cycle this way, against p50 148 us / p99 308 us with ethercrab's `tx_rx_task`
//! on its own thread (docs/ethercat.md).

use crate::error::BringUpError;
use crate::wire::{Wire, WireError, MAX_FRAME};
use ethercrab::{PduRx, PduStorage, PduTx};
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// Frames in flight at most (a power of two).
pub const MAX_FRAMES: usize = 16;
/// Bytes of EtherCAT payload per frame: the whole process image plus one AL status check
/// per drive fit in one frame.
pub const MAX_PDU_DATA: usize = PduStorage::element_size(1100);
/// The PDU storage a bus runs on.
pub type Storage = PduStorage<MAX_FRAMES, MAX_PDU_DATA>;

/// How long `block_on` waits on the wire between two polls when no reply is pending: the
/// latency with which ethercrab's own timers (state polling, timeouts) are noticed.
pub const SLICE: Duration = Duration::from_micros(200);

/// Set by ethercrab's wakers (a reply arrived, a timer fired).
struct Signal(AtomicBool);

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }
}

/// Why `block_on` returned without the future's output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stall {
    /// The deadline passed first; the future was dropped (its frame slot released).
    Deadline,
    /// The wire failed.
    Wire(WireError),
}

/// The TX/RX halves of the PDU loop and the wire under them.
pub struct Io {
    tx: PduTx<'static>,
    rx: PduRx<'static>,
    wire: Box<dyn Wire>,
    buf: Box<[u8; MAX_FRAME]>,
    signal: Arc<Signal>,
    waker: Waker,
    sent_at: Option<Instant>,
    received_at: Option<Instant>,
    /// The first reply of the last `block_on` that ethercrab refused as malformed.
    malformed: Option<ethercrab::error::Error>,
}

impl Io {
    /// Takes the halves from a split storage and the wire.
    pub fn new(tx: PduTx<'static>, rx: PduRx<'static>, wire: Box<dyn Wire>) -> Io {
        let signal = Arc::new(Signal(AtomicBool::new(false)));
        let waker = Waker::from(Arc::clone(&signal));
        // Nothing needs waking when ethercrab queues a frame: block_on looks after every poll.
        tx.replace_waker(&waker);
        Io {
            tx,
            rx,
            wire,
            buf: Box::new([0; MAX_FRAME]),
            signal,
            waker,
            sent_at: None,
            received_at: None,
            malformed: None,
        }
    }

    /// What the wire is.
    pub fn describe(&self) -> String {
        self.wire.describe()
    }

    /// When the last frame went out (during the last `block_on`).
    pub fn sent_at(&self) -> Option<Instant> {
        self.sent_at
    }

    /// Round trip of the last frame: from its `send` to the arrival of a reply.
    pub fn last_rtt(&self) -> Option<Duration> {
        match (self.sent_at, self.received_at) {
            (Some(s), Some(r)) if r >= s => Some(r - s),
            _ => None,
        }
    }

    /// An EtherCAT reply that came back during the last `block_on` and that ethercrab
    /// could not read (a header that does not fit the frame, a datagram cut short): the
    /// reply of a frame in flight, most likely, which then never completes. Replies that
    /// match no frame in flight (a reply to a frame given up on, other traffic) are not
    /// counted here: they are ignored, as ethercrab's own receive task ignores them.
    pub fn malformed_reply(&self) -> Option<ethercrab::error::Error> {
        self.malformed
    }

    /// Polls `fut` to completion, sending what it queues and feeding replies back, until
    /// `deadline` (None: ethercrab's own timeouts decide). Between polls it waits on the
    /// wire at most `slice`: the latency with which ethercrab's timers are noticed (a
    /// cycle passes its whole frame timeout, bring-up [`SLICE`]). Never allocates.
    pub fn block_on<F: Future>(
        &mut self,
        fut: F,
        deadline: Option<Instant>,
        slice: Duration,
    ) -> Result<F::Output, Stall> {
        let mut fut = pin!(fut);
        let waker = self.waker.clone();
        let mut cx = Context::from_waker(&waker);
        self.sent_at = None;
        self.received_at = None;
        self.malformed = None;
        loop {
            self.signal.0.store(false, Ordering::Release);
            if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
                return Ok(v);
            }
            self.send_queued().map_err(Stall::Wire)?;
            if self.signal.0.load(Ordering::Acquire) {
                continue;
            }
            // Past the deadline, one last look without waiting: a reply that arrived while
            // this thread was preempted is late, not lost.
            let (wait, last) = match deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    (left.min(slice), left.is_zero())
                }
                None => (slice, false),
            };
            let n = self
                .wire
                .recv(&mut self.buf[..], wait)
                .map_err(Stall::Wire)?;
            if n == 0 && last {
                return Err(Stall::Deadline);
            }
            if n > 0 {
                self.received_at = Some(Instant::now());
                // Frames that are not ours (other traffic, a reply that timed out) are
                // ignored here exactly as ethercrab's own tx/rx task ignores them; a reply
                // it cannot read is noted for the caller.
                if let Err(e) = self.rx.receive_frame(&self.buf[..n]) {
                    if !unmatched(&e) {
                        self.malformed.get_or_insert(e);
                    }
                }
            }
        }
    }

    fn send_queued(&mut self) -> Result<(), WireError> {
        while let Some(frame) = self.tx.next_sendable_frame() {
            let wire = &mut self.wire;
            let mut err = None;
            let _ = frame.send_blocking(|bytes| match wire.send(bytes) {
                Ok(()) => Ok(bytes.len()),
                Err(e) => {
                    err = Some(e);
                    Err(ethercrab::error::Error::SendFrame)
                }
            });
            if let Some(e) = err {
                return Err(e);
            }
            self.sent_at = Some(Instant::now());
        }
        Ok(())
    }
}

/// Whether a receive error only says that the reply belongs to no frame in flight (its
/// first PDU's index is not one sent, or that frame is no longer waiting).
fn unmatched(e: &ethercrab::error::Error) -> bool {
    use ethercrab::error::{Error, PduError};
    matches!(e, Error::Pdu(PduError::Decode | PduError::InvalidIndex(_)))
}

/// Runs one bring-up step with its own deadline.
pub(crate) fn step<F: Future>(
    io: &mut Io,
    name: &'static str,
    timeout: Duration,
    fut: F,
) -> Result<F::Output, BringUpError> {
    io.block_on(fut, Some(Instant::now() + timeout), SLICE)
        .map_err(|s| BringUpError::Bus {
            step: name,
            wire: io.describe(),
            reason: match s {
                Stall::Deadline => format!("no progress within {timeout:?}"),
                Stall::Wire(e) => e.to_string(),
            },
        })
}
