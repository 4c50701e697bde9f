//! `exchange` never allocates: a counting allocator watches the calling thread through
//! thousands of cycles (tracking, a lost frame, a refused command, a drive fault).

mod common;

use chunkrt_core::{Backend, DriveRequest};
use common::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

struct Counting;

thread_local! {
    static WATCHED: Cell<bool> = const { Cell::new(false) };
}
static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: defers every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if WATCHED.with(Cell::get) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if WATCHED.with(Cell::get) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn exchange_never_allocates() {
    let cfg = config();
    let mut sim = sim_config(&cfg, 7);
    sim.frames.drop = 0.01;
    let (mut b, ctl) = backend(&cfg, sim);
    let fb0 = start(&mut b);
    let mut fb = fb0;
    // Warm-up outside the watch: first-use initialisation in ethercrab's timer reactor.
    for k in 1..=10 {
        let _ = b.exchange(t(k, 1.0), &hold(&fb0, DriveRequest::Track), &mut fb);
    }
    WATCHED.with(|w| w.set(true));
    for k in 11..=3000u64 {
        let mut cmd = hold(&fb0, DriveRequest::Track);
        cmd.pos_rad[0] += 0.05 * (k as f64 * 1e-3).sin();
        if k == 1500 {
            cmd.pos_rad[2] = f64::NAN;
        }
        let _ = b.exchange(t(k, 1.0), &cmd, &mut fb);
    }
    WATCHED.with(|w| w.set(false));
    ctl.network().inject_drive_fault(1, 0x2310);
    WATCHED.with(|w| w.set(true));
    for k in 3001..=3100u64 {
        let req = if k < 3050 {
            DriveRequest::QuickStop
        } else {
            DriveRequest::FaultReset
        };
        let _ = b.exchange(t(k, 1.0), &hold(&fb, req), &mut fb);
    }
    WATCHED.with(|w| w.set(false));
    let n = ALLOCS.load(Ordering::Relaxed);
    assert!(b.stats().frames_lost > 0, "the lost-frame path ran");
    assert!(b.stats().drive_faults > 0, "the fault path ran");
    assert_eq!(n, 0, "allocations on the control thread: {n}");
}
