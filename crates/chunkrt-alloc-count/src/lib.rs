//! A counting global allocator for the tests that prove the real-time path never
//! allocates.
//!
//! Only allocations made by the thread that is watching, while it watches, are
//! counted. A process-wide counter is not enough: the test harness's main thread
//! allocates while the test runs (libtest's result channel sets up its waiter lazily),
//! and a process-wide count read those allocations as the control path's — 4 of them,
//! in about 7 of 10 runs on a 2-core machine.
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: chunkrt_alloc_count::CountingAllocator = chunkrt_alloc_count::CountingAllocator;
//!
//! let (_, allocations) = chunkrt_alloc_count::count_allocations(|| control.cycle(..));
//! assert_eq!(allocations, 0);
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    // Const-initialised and without a destructor: reading them never allocates, so
    // the allocator can use them, even while a thread is being torn down.
    static WATCHING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    // Bytes allocated less bytes freed by the watching thread while it watches, and
    // the most they reached.
    static LIVE: Cell<i64> = const { Cell::new(0) };
    static PEAK: Cell<i64> = const { Cell::new(0) };
}

/// The system allocator, counting the watching thread's allocations and reallocations.
///
/// Install it with `#[global_allocator]` in the test binary.
pub struct CountingAllocator;

impl CountingAllocator {
    fn note(size: usize) {
        if WATCHING.with(Cell::get) {
            ALLOCATIONS.with(|a| a.set(a.get() + 1));
            allocation_seen(size);
        }
    }

    /// `delta` bytes more (or fewer) live on the watching thread.
    fn live(delta: i64) {
        if WATCHING.with(Cell::get) {
            let now = LIVE.with(|l| {
                l.set(l.get() + delta);
                l.get()
            });
            PEAK.with(|p| p.set(p.get().max(now)));
        }
    }
}

// SAFETY: every call is forwarded to the system allocator unchanged; the counting
// only touches const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::note(layout.size());
        Self::live(layout.size() as i64);
        // SAFETY: same contract as ours, passed through.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Self::note(layout.size());
        Self::live(layout.size() as i64);
        // SAFETY: same contract as ours, passed through.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        Self::live(-(layout.size() as i64));
        // SAFETY: `ptr` came from `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Self::note(new_size);
        Self::live(new_size as i64 - layout.size() as i64);
        // SAFETY: same contract as ours, passed through.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Called for every counted allocation: a debugger breakpoint here
/// (`break chunkrt_alloc_count::allocation_seen`) shows who allocated.
#[inline(never)]
pub fn allocation_seen(size: usize) {
    std::hint::black_box(size);
}

/// Runs `f` on this thread with counting on and returns its result and the number of
/// allocations (and reallocations) it made on this thread.
///
/// Only counts when [`CountingAllocator`] is the global allocator.
pub fn count_allocations<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = ALLOCATIONS.with(Cell::get);
    let was_watching = WATCHING.with(|w| w.replace(true));
    let r = f();
    WATCHING.with(|w| w.set(was_watching));
    (r, ALLOCATIONS.with(Cell::get) - before)
}

/// Runs `f` on this thread and returns its result and the most bytes it held allocated
/// at once on this thread (its own allocations less its own frees; memory another
/// thread allocates is not counted). Only measures when [`CountingAllocator`] is the
/// global allocator.
pub fn peak_bytes<R>(f: impl FnOnce() -> R) -> (R, u64) {
    LIVE.with(|l| l.set(0));
    PEAK.with(|p| p.set(0));
    let was_watching = WATCHING.with(|w| w.replace(true));
    let r = f();
    WATCHING.with(|w| w.set(was_watching));
    (r, PEAK.with(Cell::get).max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[global_allocator]
    static GLOBAL: CountingAllocator = CountingAllocator;

    #[test]
    fn counts_this_threads_allocations_and_not_another_threads() {
        let (v, n) = count_allocations(|| std::hint::black_box(vec![1u8; 64]));
        assert_eq!(v.len(), 64);
        assert_eq!(n, 1, "one Vec, one allocation");
        let (_, grown) = count_allocations(|| {
            let mut v = Vec::with_capacity(1);
            for i in 0..100u32 {
                v.push(i);
            }
            std::hint::black_box(v)
        });
        assert!(grown > 1, "growing reallocates: {grown}");

        let other = std::thread::spawn(|| {
            for _ in 0..1000 {
                std::hint::black_box(vec![0u8; 128]);
            }
        });
        let (_, mine) = count_allocations(|| {
            other.join().expect("the other thread finishes");
        });
        // Joining does not allocate here; the other thread's 1000 allocations are not ours.
        assert!(mine < 1000, "another thread's allocations counted: {mine}");
        // The peak: two buffers of 1 MiB held at once, then freed, then one of 512 KiB.
        let (_, peak) = peak_bytes(|| {
            let a = std::hint::black_box(vec![1u8; 1 << 20]);
            let b = std::hint::black_box(vec![2u8; 1 << 20]);
            drop((a, b));
            std::hint::black_box(vec![3u8; 1 << 19]);
        });
        assert!((2 << 20..(2 << 20) + 4096).contains(&peak), "{peak}");
    }

    #[test]
    fn nothing_counted_outside_the_watch() {
        let (_, n) = count_allocations(|| ());
        assert_eq!(n, 0);
        std::hint::black_box(vec![0u8; 16]);
        let (_, n) = count_allocations(|| 1 + 1);
        assert_eq!(n, 0);
    }
}
