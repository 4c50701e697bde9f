//! Bus errors that are not lost frames (issue 36): a reply that comes back but cannot be
//! read is a `Bus` error of its kind, reported at once (never ridden through as a lost
//! frame), and the feedback of such a cycle is held, never passed off as fresh. Only a
//! frame with no reply it can be matched to within the timeout is lost. Each fault is
//! injected on the simulated wire (`SimNetwork::garble_replies`, or `frames.garble`).

mod common;

use chunkrt_core::backend::BusErrorKind;
use chunkrt_core::{Backend, BackendError, DriveRequest, Feedback};
use chunkrt_ecsim::Garble;
use chunkrt_ethercat::{EthercatBackend, SimControl};
use common::*;

/// A backend on 7 drives, enabled and past 20 nominal cycles; the cycle counter.
fn running() -> (EthercatBackend, SimControl, Feedback, u64) {
    let cfg = config();
    let (mut b, ctl) = backend(&cfg, sim_config(&cfg, 7));
    let mut fb = start(&mut b);
    let cmd = hold(&fb, DriveRequest::Track);
    let mut k = 1;
    for _ in 0..20 {
        k += 1;
        b.exchange(t(k, 1.0), &cmd, &mut fb).expect("nominal");
        assert!(!fb.held);
    }
    (b, ctl, fb, k)
}

/// Exchanges `n` cycles with the replies garbled as `how`; returns each cycle's result
/// and checks that none of them hands stale data over as fresh.
fn garbled(
    b: &mut EthercatBackend,
    ctl: &SimControl,
    fb: &mut Feedback,
    k: &mut u64,
    n: u32,
    how: Garble,
) -> Vec<Result<(), BackendError>> {
    ctl.network().garble_replies(n, how);
    let mut out = Vec::new();
    for _ in 0..n {
        *k += 1;
        let before = *fb;
        // A moving command: the drives take it (they processed the frame), so a
        // measurement passed off as fresh would be a stale one.
        let mut cmd = hold(&before, DriveRequest::Track);
        cmd.pos_rad[0] += 1e-4;
        let r = b.exchange(t(*k, 1.0), &cmd, fb);
        if r.is_err() || fb.held {
            assert!(fb.held, "cycle {k}: {r:?} with feedback not marked held");
            assert_eq!(
                fb.pos_rad, before.pos_rad,
                "cycle {k}: held feedback changed"
            );
            assert_eq!(fb.t_capture, before.t_capture, "cycle {k}");
            assert_eq!(fb.bus_rtt_ns, 0, "cycle {k}: no round trip measured");
        }
        out.push(r);
    }
    out
}

#[test]
fn a_reply_with_a_malformed_pdu_is_a_bus_error_reported_at_once() {
    let (mut b, ctl, mut fb, mut k) = running();
    // Fewer than `max_consecutive_lost` (10): lost frames this many would all be ridden
    // through.
    let r = garbled(&mut b, &ctl, &mut fb, &mut k, 5, Garble::PduLength);
    let want = Err(BackendError::Bus {
        kind: BusErrorKind::MalformedReply,
    });
    assert_eq!(r, vec![want; 5], "every malformed reply is reported");
    assert_eq!(ctl.network().stats().garbled, 5);
    let s = b.stats();
    assert_eq!(
        (s.frames_lost, s.frames_ridden_through, s.bus_errors),
        (0, 0, 5),
        "{s:?}"
    );
    let mut counters = std::collections::BTreeMap::new();
    b.counters(&mut |name, v| {
        counters.insert(name, v);
    });
    assert_eq!(counters["bus_errors"], 5);
    // The next reply is whole: fresh feedback again.
    let before = fb;
    k += 1;
    b.exchange(t(k, 1.0), &hold(&fb, DriveRequest::Track), &mut fb)
        .expect("the bus answers again");
    assert!(!fb.held);
    assert!(fb.bus_rtt_ns > 0);
    assert!(fb.t_capture > before.t_capture);
}

#[test]
fn a_reply_whose_frame_header_does_not_fit_is_a_bus_error_not_a_lost_frame() {
    let (mut b, ctl, mut fb, mut k) = running();
    let r = garbled(&mut b, &ctl, &mut fb, &mut k, 2, Garble::FrameLength);
    let want = Err(BackendError::Bus {
        kind: BusErrorKind::MalformedReply,
    });
    assert_eq!(r, vec![want; 2]);
    let s = b.stats();
    assert_eq!((s.frames_lost, s.bus_errors), (0, 2), "{s:?}");
}

#[test]
fn a_reply_that_matches_no_frame_sent_is_a_lost_frame_ridden_through() {
    // A reply whose index the master never sent is what a reply to a frame given up
    // long ago looks like: ethercrab cannot match it, so the cycle's frame has no reply.
    let (mut b, ctl, mut fb, mut k) = running();
    let r = garbled(&mut b, &ctl, &mut fb, &mut k, 2, Garble::Index);
    assert_eq!(r, vec![Ok(()); 2], "ridden through");
    assert!(fb.held);
    let s = b.stats();
    assert_eq!(
        (s.frames_lost, s.frames_ridden_through, s.bus_errors),
        (2, 2, 0),
        "{s:?}"
    );
}

#[test]
fn seeded_malformed_replies_are_each_reported_and_never_fresh() {
    // `frames.garble` on the seeded wire: every garbled reply is one bus error, every
    // other cycle is clean, and no error cycle carries feedback marked fresh.
    let cfg = config();
    let mut sim = sim_config(&cfg, 7);
    sim.frames.garble = 0.02;
    sim.seed = 7;
    let (mut b, ctl) = backend(&cfg, sim);
    let mut fb = start(&mut b);
    let base = hold(&fb, DriveRequest::Track);
    let mut errors = 0u64;
    for k in 2..2002u64 {
        let before = fb;
        let r = b.exchange(t(k, 1.0), &base, &mut fb);
        match r {
            Ok(()) => assert!(!fb.held, "cycle {k}: nothing was lost"),
            Err(e) => {
                assert_eq!(
                    e,
                    BackendError::Bus {
                        kind: BusErrorKind::MalformedReply
                    },
                    "cycle {k}"
                );
                assert!(fb.held, "cycle {k}");
                assert_eq!(fb.t_capture, before.t_capture, "cycle {k}");
                errors += 1;
            }
        }
    }
    let garbled = ctl.network().stats().garbled;
    assert!((10..=80).contains(&garbled), "about 2 % of 2000: {garbled}");
    assert_eq!(errors, garbled, "one bus error per garbled reply");
    assert_eq!(b.stats().frames_lost, 0);
}
