//! The process image as the backend writes and reads it, with faults the wire cannot
//! cause (a drive's image shorter than its layout): a command that did not go out and a
//! measurement that was not read are bus errors, never a clean cycle with stale data.

use super::*;
use chunkrt_core::backend::BusErrorKind;
use chunkrt_ecsim::{SimConfig, SimNetwork};

/// Seven simulated drives as in `rt-config/arm-ethercat-veth.toml`, enabled, after 20
/// clean cycles; the feedback and the cycle count.
fn running() -> (EthercatBackend, SimControl, Feedback, u64) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../rt-config/arm-ethercat-veth.toml");
    let cfg = chunkrt_config::Config::load(&path).expect("the veth config loads");
    let mut p = EthercatParams::from_config(&cfg).expect("ethercat section");
    p.dc_static_sync_iterations = 20;
    p.frame_timeout = Duration::from_millis(20);
    p.frame_late = Duration::from_millis(10);
    let mut sim = SimConfig::virtual_chain(7);
    sim.cycle_us = 1000;
    let (mut b, ctl) = EthercatBackend::simulated(p, SimNetwork::new(sim).unwrap());
    let mut fb = Feedback::default();
    b.start(MonoTime::from_ms(1000), &mut fb).expect("bring-up");
    b.enable(MonoTime::from_ms(1001), &mut fb).expect("enable");
    let mut k = 2;
    for _ in 0..20 {
        k += 1;
        b.exchange(MonoTime::from_ms(1000 + k), &track(&fb), &mut fb)
            .expect("nominal");
    }
    (b, ctl, fb, k)
}

fn track(fb: &Feedback) -> Command {
    Command {
        dof: fb.dof,
        pos_rad: fb.pos_rad,
        request: DriveRequest::Track,
        ..Command::default()
    }
}

#[test]
fn inputs_that_cannot_be_read_are_a_bus_error_and_the_feedback_is_held() {
    let (mut b, _ctl, mut fb, mut k) = running();
    // Drive 3's image is shorter than its layout says.
    b.layouts[3].in_len = 1000;
    for _ in 0..3 {
        k += 1;
        let r = b.exchange(MonoTime::from_ms(1000 + k), &track(&fb), &mut fb);
        assert_eq!(
            r,
            Err(BackendError::Bus {
                kind: BusErrorKind::InputImage { joint: 3 }
            })
        );
        assert!(fb.held, "stale inputs are never marked fresh");
    }
    assert_eq!(b.stats().bus_errors, 3);
}

#[test]
fn outputs_that_cannot_be_written_are_a_bus_error_even_when_the_frame_is_lost() {
    let (mut b, ctl, mut fb, mut k) = running();
    b.layouts[3].out_len = 1000;
    let want = Err(BackendError::Bus {
        kind: BusErrorKind::OutputImage { joint: 3 },
    });
    k += 1;
    let r = b.exchange(MonoTime::from_ms(1000 + k), &track(&fb), &mut fb);
    assert_eq!(r, want);
    // With the frame lost too, the command that did not go out is still reported: a lost
    // frame would be ridden through.
    ctl.network().cut_link(0);
    k += 1;
    let r = b.exchange(MonoTime::from_ms(1000 + k), &track(&fb), &mut fb);
    assert_eq!(r, want);
    assert!(fb.held);
    assert_eq!(b.stats().frames_lost, 0);
}
