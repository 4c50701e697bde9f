//! The way down when one reply goes wrong: a drive's answer to the OP -> INIT transition
//! that does not decode (a late frame's answer taken for another, a mangled datagram)
//! must not turn a shutdown that reached its end into "the shutdown failed": the bus is
//! sent to INIT and each drive's AL status read back. Judged by the simulated drives'
//! own AL state and power stage, not by what the backend says of them.

mod common;

use chunkrt_core::Backend;
use chunkrt_ecsim::network::Garble;
use common::{any_sim_drive_enabled, backend, config, moving, sim_config, t};

fn all_in_init(ctl: &chunkrt_ethercat::SimControl) -> Vec<u8> {
    let net = ctl.network();
    (0..7).map(|i| net.device(i).unwrap().al_state()).collect()
}

#[test]
fn a_garbled_reply_while_leaving_op_still_ends_in_init_with_the_drives_disabled() {
    for how in [Garble::Index, Garble::PduLength] {
        for disable_at_once in [false, true] {
            let cfg = config();
            let (mut b, ctl) = backend(&cfg, sim_config(&cfg, 7));
            let k = moving(&mut b, 200);
            // The stop's process data is untouched; the first register access after it
            // (leaving OP) comes back malformed.
            let garbled_before = ctl.network().stats().garbled;
            ctl.network().garble_other_replies(1, how);
            let r = if disable_at_once {
                b.disable_now(t(k, 1.0))
            } else {
                b.shutdown(t(k, 1.0))
            };
            let garbled = ctl.network().stats().garbled - garbled_before;
            assert_eq!(garbled, 1, "{how:?}: the fault was not injected");
            assert!(
                r.is_ok(),
                "{how:?}, disable at once {disable_at_once}: {}",
                r.unwrap_err()
            );
            assert!(
                !any_sim_drive_enabled(&ctl),
                "{how:?}: a drive still enabled"
            );
            assert_eq!(all_in_init(&ctl), vec![1; 7], "{how:?}: AL states");
        }
    }
}
