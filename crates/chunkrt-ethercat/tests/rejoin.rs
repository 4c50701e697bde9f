//! A drive that loses power mid-OP: the backend reports it missing while it is off and after
//! it is back (it restarts in INIT, with nothing of its configuration), and the others run on.

mod common;

use chunkrt_core::{Backend, BackendError, DriveRequest, DriveState};
use common::*;

#[test]
fn a_power_cycled_drive_is_missing_while_off_and_not_in_op_once_back() {
    let cfg = config();
    let (mut b, ctl) = backend(&cfg, sim_config(&cfg, 7));
    let fb0 = start(&mut b);
    let mut fb = fb0;
    let cmd = hold(&fb0, DriveRequest::Track);
    let mut k = 1;
    b.exchange(t(k, 1.0), &cmd, &mut fb).expect("nominal");

    // The last drive: the line behind it is empty, so only it goes.
    assert!(ctl.network().power_cycle(6, 30_000_000));
    let mut missing = 0;
    while !ctl.network().powered(6) {
        k += 1;
        assert!(k < 100, "power never came back");
        let r = b.exchange(t(k, 1.0), &cmd, &mut fb);
        assert_eq!(r, Err(BackendError::DriveMissing { joint: 6 }));
        assert_eq!(fb.state[6], DriveState::Missing);
        assert!(fb.state[..6].iter().all(|s| *s == DriveState::Enabled));
        missing += 1;
    }
    assert!(missing >= 25, "off for 30 ms of 1 ms cycles: {missing}");

    // Back, but in INIT at station address 0: still not in OP for the master.
    for _ in 0..20 {
        k += 1;
        let r = b.exchange(t(k, 1.0), &cmd, &mut fb);
        assert_eq!(r, Err(BackendError::DriveMissing { joint: 6 }));
        assert_eq!(fb.state[6], DriveState::Missing);
    }
    let net = ctl.network();
    let d = net.device(6).unwrap();
    assert_eq!((d.al_state(), d.al_error()), (1, false), "INIT, no error");
    assert_eq!(d.esc.station_address(), 0);
    for i in 0..6 {
        assert_eq!(
            net.device(i).unwrap().al_state(),
            8,
            "drive {i} stays in OP"
        );
    }
    assert_eq!(net.stats().power_cycles, 1);
    drop(net);
    assert!(b.stats().drive_missing >= 45, "{:?}", b.stats());
}
