//! CiA 402 behaviour through the real master: following-error fault with 0x603F, fault reset,
//! quick stop, and the transport/config errors the CLI reports.

mod common;

use chunkrt_ecsim::{EcsimError, SimConfig};
use common::master::{decode_inputs, encode_outputs, next_controlword, op_enabled};
use ethercrab::std::ethercat_now;
use futures_lite::future::block_on;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

static STORAGE: common::Storage = common::Storage::new();

#[test]
fn following_error_fault_reset_and_quick_stop() {
    let timeouts = common::timeouts(Duration::from_secs(5), Duration::from_millis(100));
    let (md, _sim) = common::start(&STORAGE, SimConfig::virtual_chain(2), timeouts);
    block_on(async {
        let group = md
            .init_single_group::<2, 64>(ethercat_now)
            .await
            .expect("init");
        for sd in group.iter(&md) {
            sd.sdo_write(0x6060, 0, 8u8).await.unwrap();
        }
        let group = group.into_op(&md).await.expect("OP");
        // Per-drive command: None = follow the enable sequence holding position.
        let mut last_cw = [0u16; 2];
        let mut hold = [0i32; 2];
        let mut cycle = |cw_override: [Option<u16>; 2], target_offset: [i32; 2]| {
            let mut out = [decode_inputs(&[0; 14]); 2];
            for (i, sd) in group.iter(&md).enumerate() {
                let mut io = sd.io_raw_mut();
                let inp = decode_inputs(io.inputs());
                let cw =
                    cw_override[i].unwrap_or_else(|| next_controlword(inp.statusword, last_cw[i]));
                if !op_enabled(inp.statusword) {
                    hold[i] = inp.position;
                }
                encode_outputs(io.outputs(), cw, hold[i] + target_offset[i]);
                last_cw[i] = cw;
                out[i] = inp;
            }
            out
        };
        for _ in 0..10 {
            cycle([None, None], [0, 0]);
            group.tx_rx(&md).await.unwrap();
        }
        let inp = cycle([None, None], [0, 0]);
        assert!(inp.iter().all(|i| op_enabled(i.statusword)), "{inp:?}");

        // Drive 1: a 10 M count target jump cannot be followed -> following error fault.
        let mut faulted_at = None;
        for k in 0..200 {
            let inp = cycle([Some(0x0F), Some(0x0F)], [0, 10_000_000]);
            group.tx_rx(&md).await.unwrap();
            if inp[1].statusword & 0x4F == 0x08 {
                assert_eq!(inp[1].error_code, 0x8611, "0x603F following error");
                assert_ne!(inp[1].statusword & 0x2000, 0, "statusword bit 13");
                faulted_at = Some(k);
                break;
            }
            assert!(op_enabled(inp[0].statusword), "drive 0 unaffected");
        }
        assert!(faulted_at.is_some(), "following error detected");
        let code: u16 = group
            .subdevice(&md, 1)
            .unwrap()
            .sdo_read(0x603F, 0)
            .await
            .unwrap();
        assert_eq!(code, 0x8611);

        // Fault reset (rising edge of bit 7) brings it to switch on disabled with 0x603F cleared.
        cycle([Some(0x0F), Some(0x80)], [0, 0]);
        group.tx_rx(&md).await.unwrap();
        group.tx_rx(&md).await.unwrap();
        let inp = cycle([Some(0x0F), Some(0x00)], [0, 0]);
        assert_eq!(inp[1].statusword & 0x4F, 0x40, "{:#06x}", inp[1].statusword);
        assert_eq!(inp[1].error_code, 0);

        // Quick stop on drive 0: quick stop active, then (option code 2) switch on disabled.
        let (mut seen_qsa, mut disabled) = (false, false);
        for _ in 0..10 {
            let inp = cycle([Some(0x02), Some(0x00)], [0, 0]);
            seen_qsa |= inp[0].statusword & 0x6F == 0x07;
            if inp[0].statusword & 0x4F == 0x40 {
                disabled = true;
                break;
            }
            group.tx_rx(&md).await.unwrap();
        }
        assert!(
            seen_qsa && disabled,
            "quick stop active ({seen_qsa}), then disabled ({disabled})"
        );
    });
}

#[test]
fn af_packet_errors_name_the_problem() {
    let stop = AtomicBool::new(true);
    let err = chunkrt_ecsim::run_af_packet("no-such-if0", 2, None, &stop).unwrap_err();
    assert!(matches!(err, EcsimError::InterfaceNotFound(_)), "{err}");
    assert!(err.to_string().contains("no-such-if0"), "{err}");
    let err = chunkrt_ecsim::run_af_packet("lo", 0, None, &stop).unwrap_err();
    assert!(matches!(err, EcsimError::DriveCount(0)), "{err}");
    let missing = std::path::Path::new("/nonexistent/ecsim.toml");
    let err = chunkrt_ecsim::run_af_packet("lo", 2, Some(missing), &stop).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/ecsim.toml"), "{err}");
}
