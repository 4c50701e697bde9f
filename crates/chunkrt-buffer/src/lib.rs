//! chunkrt-buffer: a lock-free single-producer single-consumer latest-value handoff.
//!
//! A triple buffer: three slots, one owned by the [`Publisher`] (the back buffer it
//! writes), one owned by the [`Subscriber`] (the front buffer it reads), and one parked
//! in a shared atomic together with a "fresh" flag. Publishing writes the back buffer
//! and swaps it with the parked slot; reading a new value swaps the front buffer with
//! the parked slot. Neither side ever waits for the other, and neither ever touches the
//! slot the other owns, so the reader never sees a torn value. Values the reader did not
//! pick up in time are overwritten: only the latest one matters (chunks inference ->
//! control, observations control -> inference).
//!
//! The payload is any `T: Copy + Send` and lives inline in the slots: the only heap
//! allocation is in [`channel`]; publishing and reading never allocate, lock or make a
//! system call.
//!
//! ```
//! let (mut publisher, mut subscriber) = chunkrt_buffer::channel([0u64; 4]);
//! assert!(subscriber.latest().is_none()); // nothing published yet
//! assert_eq!(subscriber.peek(), &[0; 4]); // the initial value
//!
//! publisher.publish(&[1; 4]);
//! publisher.publish_with(|slot| *slot = [2; 4]); // writes in place, no stack copy
//! assert_eq!(subscriber.latest(), Some(&[2; 4])); // only the newest survives
//! assert!(subscriber.latest().is_none()); // nothing new since
//! assert_eq!(subscriber.peek(), &[2; 4]);
//! ```
//!
//! # Verification
//!
//! - The loom model (`tests/loom.rs`) explores every interleaving of a publisher and a
//!   subscriber thread against loom's C11 memory model:
//!   `CARGO_TARGET_DIR=target/loom RUSTFLAGS="--cfg loom" cargo test -p chunkrt-buffer --release --test loom`
//!   (its own target directory, so the changed `RUSTFLAGS` do not force a rebuild of
//!   the shared one; it finishes in seconds once built).
//! - A two-thread stress test (`tests/stress.rs`, part of plain `cargo test`) checks a
//!   sequence number and a checksum over a 4 KiB payload on every read.
//! - Both the unit tests and the stress test (with a smaller count) run under miri:
//!   `cargo +nightly miri test -p chunkrt-buffer`.

mod sync;

use sync::{Arc, AtomicU8, Ordering, UnsafeCell};

/// Bits of the shared byte that hold the index of the parked slot.
const INDEX_MASK: u8 = 0b011;
/// Set by the publisher when the parked slot holds a value the subscriber has not seen.
const FRESH: u8 = 0b100;

/// One slot, aligned so that two slots never share a cache line: the publisher writing
/// its slot must not slow down the subscriber reading the neighbouring one.
#[repr(align(128))]
struct Slot<T>(UnsafeCell<T>);

/// What both handles point to.
struct Shared<T> {
    /// Index of the parked slot (bits 0-1) and the `FRESH` flag (bit 2).
    back: AtomicU8,
    /// The three slots. Ownership: at every moment the publisher's `write_idx`, the
    /// subscriber's `read_idx` and `back & INDEX_MASK` are a permutation of {0, 1, 2}.
    slots: Box<[Slot<T>]>,
}

/// Creates a channel whose three slots all start as `init`, and splits it into its
/// two handles. This is the only allocation the channel ever makes.
pub fn channel<T: Copy + Send>(init: T) -> (Publisher<T>, Subscriber<T>) {
    // Built slot by slot on the heap: a `[Slot<T>; 3]` temporary would put three
    // payloads (24 KiB for a chunk) on the caller's stack.
    let slots: Box<[Slot<T>]> = (0..3).map(|_| Slot(UnsafeCell::new(init))).collect();
    let shared = Arc::new(Shared {
        back: AtomicU8::new(1),
        slots,
    });
    (
        Publisher {
            shared: Arc::clone(&shared),
            write_idx: 0,
        },
        Subscriber {
            shared,
            read_idx: 2,
        },
    )
}

/// The writing half of a [`channel`]. Not `Clone`: there is exactly one producer.
pub struct Publisher<T> {
    shared: Arc<Shared<T>>,
    /// The slot this handle owns (the back buffer).
    write_idx: u8,
}

impl<T> core::fmt::Debug for Publisher<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Publisher")
            .field("write_idx", &self.write_idx)
            .finish_non_exhaustive()
    }
}

// SAFETY: a `Publisher` only ever accesses the slot it owns (`write_idx`) and the atomic;
// moving it to another thread moves that exclusive access along with it. Values of `T`
// cross threads through the slots, which is what `T: Send` permits.
unsafe impl<T: Send> Send for Publisher<T> {}

impl<T: Copy + Send> Publisher<T> {
    /// Publishes a copy of `value`, replacing any value the subscriber has not read yet.
    /// Returns `true` when such an unread value was dropped.
    pub fn publish(&mut self, value: &T) -> bool {
        self.publish_with(|slot| *slot = *value)
    }

    /// Publishes a value written in place by `f`, which gets the back buffer. The back
    /// buffer holds an older value (one published before, or the initial value), so `f`
    /// must write every field that matters. Returns `true` when a value the subscriber
    /// had not read yet was dropped.
    pub fn publish_with(&mut self, f: impl FnOnce(&mut T)) -> bool {
        self.shared.slots[usize::from(self.write_idx)]
            .0
            .with_mut(|ptr| {
                // SAFETY: slot `write_idx` is owned by this publisher alone (the permutation
                // invariant on `Shared::slots`), and `&mut self` keeps this the only access
                // through it. The subscriber's last reads of this slot, from when it owned
                // it, happen-before this write: it released them with its swap, and our swap
                // that handed us the slot acquired them.
                f(unsafe { &mut *ptr })
            });
        // Release: the write above becomes visible to the subscriber that acquires this
        // slot. Acquire: we take over the parked slot, whose last reads by the
        // subscriber must be finished before we write it next time.
        let previous = self
            .shared
            .back
            .swap(self.write_idx | FRESH, Ordering::AcqRel);
        self.write_idx = previous & INDEX_MASK;
        previous & FRESH != 0
    }
}

/// The reading half of a [`channel`]. Not `Clone`: there is exactly one consumer.
pub struct Subscriber<T> {
    shared: Arc<Shared<T>>,
    /// The slot this handle owns (the front buffer).
    read_idx: u8,
}

impl<T> core::fmt::Debug for Subscriber<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Subscriber")
            .field("read_idx", &self.read_idx)
            .finish_non_exhaustive()
    }
}

// SAFETY: a `Subscriber` only ever accesses the slot it owns (`read_idx`) and the atomic;
// moving it to another thread moves that exclusive access along with it. Values of `T`
// arrive from the publisher's thread, which is what `T: Send` permits.
unsafe impl<T: Send> Send for Subscriber<T> {}

impl<T: Copy + Send> Subscriber<T> {
    /// Whether a value was published since the last read. Never waits.
    pub fn has_update(&self) -> bool {
        self.shared.back.load(Ordering::Relaxed) & FRESH != 0
    }

    /// Takes the newest value if one was published since the last read, and returns
    /// whether it did. Afterwards [`peek`](Self::peek) returns the newest value.
    pub fn update(&mut self) -> bool {
        if !self.has_update() {
            return false;
        }
        // Acquire: the publisher's writes to the slot we take are visible. Release: our
        // reads of the slot we give back finish before the publisher writes it again.
        // The flag cannot have been cleared since the load above: only we clear it.
        let previous = self.shared.back.swap(self.read_idx, Ordering::AcqRel);
        self.read_idx = previous & INDEX_MASK;
        true
    }

    /// The newest value, by reference, if one was published since the last read;
    /// `None` otherwise (the previous value stays available through `peek`).
    pub fn latest(&mut self) -> Option<&T> {
        if self.update() {
            Some(self.peek())
        } else {
            None
        }
    }

    /// The value read last (the initial value before anything was read), by reference.
    pub fn peek(&self) -> &T {
        self.shared.slots[usize::from(self.read_idx)].0.with(|ptr| {
            // SAFETY: slot `read_idx` is owned by this subscriber (the permutation
            // invariant), so the publisher does not write it while we hold it. The
            // returned borrow lives at most as long as `&self`, and `read_idx` (the only
            // way to give the slot back) changes only through `&mut self`, so the slot
            // is still ours for as long as the reference is alive. The publisher's write
            // of it happens-before: its swap released it and ours acquired it.
            unsafe { &*ptr }
        })
    }

    /// Runs `f` on the value read last, inside the cell's access scope. Same as
    /// `f(self.peek())`; under loom the access is tracked for the whole of `f`, which is
    /// how the loom model checks that no read overlaps a write.
    pub fn peek_with<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        self.shared.slots[usize::from(self.read_idx)].0.with(|ptr| {
            // SAFETY: as in `peek`: the slot is ours until `&mut self` gives it back.
            f(unsafe { &*ptr })
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn starts_with_the_initial_value_and_nothing_fresh() {
        let (_publisher, mut subscriber) = channel(7u32);
        assert!(!subscriber.has_update());
        assert_eq!(subscriber.latest(), None);
        assert_eq!(*subscriber.peek(), 7);
    }

    #[test]
    fn every_value_is_seen_when_read_between_publishes() {
        let (mut publisher, mut subscriber) = channel(0u64);
        for i in 1..=20u64 {
            assert!(!publisher.publish(&i), "value {i} overwrote an unread one");
            assert!(subscriber.has_update());
            assert_eq!(subscriber.latest(), Some(&i));
            assert_eq!(subscriber.latest(), None);
            assert_eq!(*subscriber.peek(), i);
        }
    }

    #[test]
    fn only_the_latest_of_several_publishes_is_read() {
        let (mut publisher, mut subscriber) = channel(0u64);
        assert!(!publisher.publish(&1));
        assert!(publisher.publish(&2), "the unread 1 is dropped");
        assert!(publisher.publish(&3), "the unread 2 is dropped");
        assert_eq!(subscriber.latest(), Some(&3));
        assert_eq!(subscriber.latest(), None);
        assert_eq!(*subscriber.peek(), 3);
    }

    #[test]
    fn publish_with_writes_in_place() {
        let (mut publisher, mut subscriber) = channel([0u8; 16]);
        publisher.publish_with(|slot| slot[3] = 9);
        let value = subscriber.latest().copied().expect("a value was published");
        assert_eq!(value[3], 9);
        assert_eq!(subscriber.peek_with(|v| v[3]), 9);
    }

    #[test]
    fn update_then_peek_sees_the_newest() {
        let (mut publisher, mut subscriber) = channel(0i32);
        assert!(!subscriber.update());
        publisher.publish(&-4);
        assert!(subscriber.update());
        assert!(!subscriber.update());
        assert_eq!(*subscriber.peek(), -4);
    }

    #[test]
    fn slots_stay_a_permutation_through_any_sequence() {
        // Interleave publishes and reads in a fixed irregular pattern and check the
        // ownership invariant after every step.
        let (mut publisher, mut subscriber) = channel(0u32);
        let pattern = [1, 0, 0, 1, 1, 1, 0, 1, 0, 0, 0, 1, 1, 0];
        let mut next = 1u32;
        for (step, &op) in pattern.iter().cycle().take(200).enumerate() {
            if op == 1 {
                publisher.publish(&next);
                next += 1;
            } else if let Some(&v) = subscriber.latest() {
                assert_eq!(v, next - 1, "step {step}: not the newest value");
            }
            let parked = subscriber.shared.back.load(Ordering::Relaxed) & INDEX_MASK;
            let mut seen = [false; 3];
            for idx in [publisher.write_idx, subscriber.read_idx, parked] {
                assert!(
                    !seen[usize::from(idx)],
                    "step {step}: slot {idx} owned twice"
                );
                seen[usize::from(idx)] = true;
            }
        }
    }

    #[test]
    fn handles_are_send() {
        fn assert_send<S: Send>() {}
        assert_send::<Publisher<[f64; 1024]>>();
        assert_send::<Subscriber<[f64; 1024]>>();
    }
}
