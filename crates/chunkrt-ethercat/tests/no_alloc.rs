//! `exchange` never allocates: a counting allocator watches the calling thread through
//! thousands of cycles (tracking, a lost frame, a refused command, a drive fault, and a
//! whole rejoin of a power-cycled drive: identity, mailbox SDOs, DC, SAFE-OP, OP).

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
    // Drive 6 loses power for 30 ms and is brought back. The simulator runs on this thread
    // too and allocates when it powers a drive up (a fresh ESC and object dictionary): that
    // one exchange is left out of the count; every other cycle of the rejoin is counted.
    ctl.network().power_cycle(6, 30_000_000);
    let mut rejoin = 0;
    let mut left_out = 0;
    let mut k = 3100u64;
    while b.stats().rejoins_completed == 0 || !all_enabled(&fb) {
        k += 1;
        assert!(k < 6000, "no rejoin: {:?}", b.stats());
        let off = !ctl.network().powered(6);
        let req = if b.stats().rejoins_completed == 0 {
            DriveRequest::Track
        } else {
            DriveRequest::FaultReset
        };
        let cmd = hold(&fb, req);
        let ((), n) = count_allocations(|| {
            let _ = b.exchange(t(k, 1.0), &cmd, &mut fb);
        });
        if off && ctl.network().powered(6) {
            left_out += 1;
        } else {
            rejoin += n;
        }
    }
    assert_eq!(left_out, 1, "power came back once");
    let n = tracking + fault + rejoin;
    assert!(b.stats().frames_lost > 0, "the lost-frame path ran");
    assert!(b.stats().drive_faults > 0, "the fault path ran");
    assert_eq!(b.stats().rejoins_failed, 0, "{:?}", b.stats());
    assert_eq!(
        n, 0,
        "allocations on the control thread: {n} ({rejoin} in the rejoin)"
    );
}
