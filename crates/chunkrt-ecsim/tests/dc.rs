//! Distributed clocks: ethercrab's DC init (port latches, offsets, static drift compensation),
//! SYNC0 configuration and `tx_rx_dc` against the simulated chain.

mod common;

use chunkrt_ecsim::SimConfig;
use ethercrab::std::ethercat_now;
use ethercrab::subdevice_group::DcConfiguration;
use ethercrab::{Command, DcSync};
use futures_lite::future::block_on;
use std::time::Duration;

static STORAGE: common::Storage = common::Storage::new();

#[test]
fn sync0_configuration_and_tx_rx_dc() {
    let timeouts = common::timeouts(Duration::from_secs(5), Duration::from_millis(100));
    let (md, sim) = common::start(&STORAGE, SimConfig::virtual_chain(3), timeouts);
    block_on(async {
        let mut group = md
            .init_single_group::<4, 128>(ethercat_now)
            .await
            .expect("init");
        for mut sd in group.iter_mut(&md) {
            assert!(sd.dc_support().any(), "drives offer DC");
            sd.set_dc_sync(DcSync::Sync0);
        }
        // Propagation delays came from the port receive-time latches: downstream drives are
        // further from the master.
        let delays: Vec<u32> = group.iter(&md).map(|sd| sd.propagation_delay()).collect();
        assert!(delays[0] < delays[1] && delays[1] < delays[2], "{delays:?}");
        // As ethercrab's DC example does: map the PDI first (a drive refuses SAFE-OP with
        // unconfigured process-data sync managers), then configure SYNC0.
        let group = group.into_pre_op_pdi(&md).await.expect("PDI");
        let group = group
            .configure_dc_sync(
                &md,
                DcConfiguration {
                    start_delay: Duration::from_millis(10),
                    sync0_period: Duration::from_micros(500),
                    sync0_shift: Duration::ZERO,
                },
            )
            .await
            .expect("configure SYNC0");
        let group = group.into_op(&md).await.expect("to OP");
        let act = Command::fprd(0x1001, 0x0981)
            .receive::<u8>(&md)
            .await
            .unwrap();
        assert_eq!(act & 0x03, 0x03, "cyclic unit and SYNC0 active");
        let cycle = Command::fprd(0x1001, 0x09A0)
            .receive::<u32>(&md)
            .await
            .unwrap();
        assert_eq!(cycle, 500_000);
        let mut last = None;
        for _ in 0..200 {
            let r = group.tx_rx_dc(&md).await.expect("tx_rx_dc");
            assert_eq!(r.working_counter, 9);
            let t = r.extra.dc_system_time;
            if let Some(prev) = last {
                // The virtual clock runs one SYNC0 period per process-data frame.
                assert_eq!(t - prev, 500_000, "system time step");
            }
            last = Some(t);
            assert!(r.extra.next_cycle_wait <= Duration::from_micros(500));
        }
    });
    assert_eq!(
        sim.network().device(0).unwrap().esc.sync0_cycle_ns(),
        Some(500_000)
    );
}
