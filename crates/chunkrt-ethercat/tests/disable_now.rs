//! An operator's third stop request (`Backend::disable_now`): moving drives are
//! disabled at once, without the shutdown's quick stop and its wait for rest, and the
//! bus goes back to INIT. Judged by the simulated drives' own state.

mod common;

use chunkrt_core::Backend;
use common::{any_sim_drive_enabled, backend, config, moving, sim_config, t};

/// Frames the simulated chain has received so far.
fn frames(ctl: &chunkrt_ethercat::SimControl) -> u64 {
    ctl.network().stats().frames
}

#[test]
fn disable_now_disables_moving_drives_without_waiting_for_rest() {
    let cfg = config();
    let (mut b, ctl) = backend(&cfg, sim_config(&cfg, 7));
    let k = moving(&mut b, 500);
    let before = frames(&ctl);
    b.disable_now(t(k, 1.0)).expect("disabled at once");
    let at_once = frames(&ctl) - before;
    assert!(!any_sim_drive_enabled(&ctl), "a drive still enabled");
    let net = ctl.network();
    for i in 0..7 {
        assert_eq!(
            net.device(i).unwrap().al_state(),
            1,
            "drive {i} back in INIT"
        );
    }
    drop(net);
    // Disable voltage is acknowledged within a few frames; leave OP and INIT follow.
    eprintln!("frames from the disable to INIT: {at_once}");
    assert!(at_once > 0, "nothing sent");
}
