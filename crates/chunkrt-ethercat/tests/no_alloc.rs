//! `exchange` never allocates: a counting allocator watches the calling thread through
//! thousands of cycles (tracking, a lost frame, a refused command, a drive fault).

mod common;

use chunkrt_alloc_count::{count_allocations, CountingAllocator};
use chunkrt_core::{Backend, DriveRequest};
use common::*;

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

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
    let ((), tracking) = count_allocations(|| {
        for k in 11..=3000u64 {
            let mut cmd = hold(&fb0, DriveRequest::Track);
            cmd.pos_rad[0] += 0.05 * (k as f64 * 1e-3).sin();
            if k == 1500 {
                cmd.pos_rad[2] = f64::NAN;
            }
            let _ = b.exchange(t(k, 1.0), &cmd, &mut fb);
        }
    });
    ctl.network().inject_drive_fault(1, 0x2310);
    let ((), fault) = count_allocations(|| {
        for k in 3001..=3100u64 {
            let req = if k < 3050 {
                DriveRequest::QuickStop
            } else {
                DriveRequest::FaultReset
            };
            let _ = b.exchange(t(k, 1.0), &hold(&fb, req), &mut fb);
        }
    });
    let n = tracking + fault;
    assert!(b.stats().frames_lost > 0, "the lost-frame path ran");
    assert!(b.stats().drive_faults > 0, "the fault path ran");
    assert_eq!(n, 0, "allocations on the control thread: {n}");
}
