//! Done-when test of issue 5: the real ethercrab master brings 7 simulated drives INIT -> OP
//! in-process, reads 0x1018 over SDO, remaps a PDO in PRE-OP, enables all drives via CiA 402
//! and tracks a moving target for 10 000 cycles with zero working-counter errors.

mod common;

use chunkrt_ecsim::{DriveParams, SimConfig};
use common::master::{decode_inputs, enable_and_track};
use ethercrab::std::ethercat_now;
use futures_lite::future::block_on;
use std::time::Duration;

static STORAGE: common::Storage = common::Storage::new();

#[test]
fn seven_drives_to_op_sdo_remap_enable_and_track() {
    let (md, sim) = common::start(
        &STORAGE,
        SimConfig::virtual_chain(7),
        common::timeouts(Duration::from_secs(5), Duration::from_millis(100)),
    );
    let p = DriveParams::default();
    block_on(async {
        let group = md
            .init_single_group::<8, 256>(ethercat_now)
            .await
            .expect("init to PRE-OP");
        assert_eq!(group.len(), 7);

        for (i, sd) in group.iter(&md).enumerate() {
            let id = sd.identity();
            assert_eq!(
                (id.vendor_id, id.product_id),
                (p.vendor_id, p.product_code),
                "SII identity"
            );
            assert_eq!(sd.name(), "ECSIM-CSP-1");
            let vendor: u32 = sd.sdo_read(0x1018, 1).await.expect("SDO 0x1018:01");
            let product: u32 = sd.sdo_read(0x1018, 2).await.expect("SDO 0x1018:02");
            let serial: u32 = sd.sdo_read(0x1018, 4).await.expect("SDO 0x1018:04");
            assert_eq!(
                (vendor, product, serial),
                (p.vendor_id, p.product_code, p.serial_base + i as u32)
            );
            sd.sdo_write(0x6060, 0, 8u8).await.expect("mode CSP");
            assert_eq!(sd.sdo_read::<u8>(0x6061, 0).await.unwrap(), 8);
        }

        // Remap drive 0 in PRE-OP: append the mode of operation display to its TxPDO.
        let sd0 = group.subdevice(&md, 0).unwrap();
        sd0.sdo_write(0x1C13, 0, 0u8).await.expect("unassign TxPDO");
        sd0.sdo_write(0x1A00, 0, 0u8).await.expect("clear 0x1A00");
        for (k, e) in [
            0x6041_0010u32,
            0x6064_0020,
            0x606C_0020,
            0x6077_0010,
            0x603F_0010,
            0x6061_0008,
        ]
        .iter()
        .enumerate()
        {
            sd0.sdo_write(0x1A00, k as u8 + 1, *e)
                .await
                .expect("map entry");
        }
        sd0.sdo_write(0x1A00, 0, 6u8).await.expect("6 entries");
        sd0.sdo_write(0x1C13, 1, 0x1A00u16).await.expect("assign");
        sd0.sdo_write(0x1C13, 0, 1u8).await.expect("assign count");
        assert_eq!(sd0.sdo_read::<u8>(0x1A00, 0).await.unwrap(), 6);

        let group = group.into_op(&md).await.expect("PRE-OP -> SAFE-OP -> OP");
        {
            let sd0 = group.subdevice(&md, 0).unwrap();
            let io = sd0.io_raw();
            assert_eq!(
                (io.inputs().len(), io.outputs().len()),
                (15, 6),
                "remapped image of drive 0"
            );
            let sd1 = group.subdevice(&md, 1).unwrap();
            let io1 = sd1.io_raw();
            assert_eq!(
                (io1.inputs().len(), io1.outputs().len()),
                (14, 6),
                "default image"
            );
        }

        let report = enable_and_track(&md, &group, 10_000, None, 200_000.0, 2.0).await;
        eprintln!(
            "tracking run: {} cycles, enabled at {:?}, max error {} counts, wkc errors {}",
            report.cycles, report.all_enabled_at, report.max_tracking_error, report.wkc_errors
        );
        assert_eq!(report.wkc_errors, 0, "{report:?}");
        assert_eq!(report.exchange_errors, 0, "{report:?}");
        let enabled_at = report
            .all_enabled_at
            .expect("all drives reached operation enabled");
        assert!(enabled_at < 20, "enable took {enabled_at} cycles");
        // 200 000 counts at 2 Hz peaks at 2.5 M counts/s: a 40 Hz loop with feed-forward follows
        // within a few thousand counts.
        assert!(
            report.max_tracking_error < 5_000,
            "tracking error {}",
            report.max_tracking_error
        );
        assert!(report.max_tracking_error > 0, "the targets moved");
        for inp in &report.last_inputs {
            assert_eq!(inp.statusword & 0x6F, 0x27, "{inp:?}");
            assert_eq!(inp.error_code, 0);
        }
        // The remapped byte carries 0x6061 = 8.
        let sd0 = group.subdevice(&md, 0).unwrap();
        assert_eq!(sd0.io_raw().inputs()[14], 8);
        assert_eq!(decode_inputs(sd0.io_raw().inputs()).statusword & 0x6F, 0x27);
    });
    let net = sim.network();
    assert_eq!(net.stats().dropped, 0);
    for i in 0..7 {
        assert_eq!(net.device(i).unwrap().al_state(), 8);
    }
}
