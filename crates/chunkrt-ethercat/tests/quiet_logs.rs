//! ethercrab logs an ERROR line per lost or late frame from the thread that polls it (the
//! control thread): none may reach a logger while the loop runs (it would format and
//! write on the control thread). Its own binary: the logger is process-wide.

mod common;

use chunkrt_core::{Backend, DriveRequest};
use common::*;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counts what reaches the logger, per phase.
struct Counting;

static RECORDS: AtomicU64 = AtomicU64::new(0);

impl log::Log for Counting {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }
    fn log(&self, _: &log::Record) {
        RECORDS.fetch_add(1, Ordering::Relaxed);
    }
    fn flush(&self) {}
}

#[test]
fn late_replies_log_nothing_during_the_cyclic_exchange_and_logging_comes_back_after() {
    log::set_logger(&Counting).expect("the only logger of this binary");
    log::set_max_level(log::LevelFilter::Trace);
    let cfg = config();
    let mut sim = sim_config(&cfg, 7);
    // Replies later than the frame timeout (20 ms in tests): ethercrab gets a reply for a
    // frame it has given up on, and says so.
    sim.frames.delay = 0.02;
    sim.frames.delay_us = 25_000;
    sim.seed = 7;
    let (mut b, ctl) = backend(&cfg, sim);
    let fb0 = start(&mut b);
    RECORDS.store(0, Ordering::Relaxed);
    let cmd = hold(&fb0, DriveRequest::Track);
    let mut fb = fb0;
    for k in 1..=400 {
        let _ = b.exchange(t(k, 1.0), &cmd, &mut fb);
    }
    let delayed = ctl.network().stats().delayed;
    assert!(delayed > 0, "the simulator delayed some replies");
    assert!(b.stats().frames_lost >= delayed / 2, "{:?}", b.stats());
    assert_eq!(
        RECORDS.load(Ordering::Relaxed),
        0,
        "log records on the control thread during the exchange ({delayed} late replies)"
    );
    // After shutdown the level is back: bring-up and shutdown messages are kept.
    b.shutdown(t(401, 1.0)).expect("shutdown");
    assert_eq!(log::max_level(), log::LevelFilter::Trace);
}
