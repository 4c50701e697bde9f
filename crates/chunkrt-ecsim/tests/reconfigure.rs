//! Bringing ONE drive back to OP while the real ethercrab master keeps exchanging process data
//! with the rest of its group in OP (the experiment behind the backend's recovery design).
//!
//! Only ethercrab's public API is used: `Command::aprd/apwr/fprd/fpwr`, one PDU per cycle,
//! polled together with the cycle's `group.tx_rx` (two frames in flight, both awaited), from
//! register values read back from the drive right after bring-up. A power-cycled drive needs
//! all of them again except the DC offset, which must be computed afresh (its local clock
//! restarted); a drive that dropped to SAFE-OP on its SM watchdog needs only the AL
//! acknowledge.

mod common;

use chunkrt_ecsim::SimConfig;
use ethercrab::std::ethercat_now;
use ethercrab::subdevice_group::Op;
use ethercrab::{Command, DefaultLock, MainDevice, SubDeviceGroup, SubDeviceState};
use futures_lite::future::{block_on, zip};
use std::future::Future;
use std::time::Duration;

type Group = SubDeviceGroup<4, 128, DefaultLock, Op>;

/// What ethercrab wrote during bring-up and a power cycle clears, read back from the drive.
#[derive(Clone, Copy, Debug)]
struct Snapshot {
    /// SM0..SM3 (0x0800..0x081F): mailbox and process-data sync managers.
    sm: [u8; 32],
    /// FMMU0..FMMU1 (0x0600..0x061F).
    fmmu: [u8; 32],
    /// 0x0920 system time offset (stale after a power cycle: the local clock restarts).
    dc_offset: u64,
    /// 0x0928 system time delay (propagation delay from the reference clock).
    dc_delay: u32,
}

async fn snapshot(md: &MainDevice<'_>, addr: u16) -> Snapshot {
    Snapshot {
        sm: Command::fprd(addr, 0x0800).receive(md).await.unwrap(),
        fmmu: Command::fprd(addr, 0x0600).receive(md).await.unwrap(),
        dc_offset: Command::fprd(addr, 0x0920).receive(md).await.unwrap(),
        dc_delay: Command::fprd(addr, 0x0928).receive(md).await.unwrap(),
    }
}

/// One control cycle: the group's LRW (plus its AL status reads) and one recovery PDU, both in
/// flight at once. Checks that the drives that are not recovering keep running.
async fn cycle<F: Future>(md: &MainDevice<'_>, group: &Group, step: F, out: usize) -> F::Output {
    let (r, v) = zip(group.tx_rx(md), step).await;
    let r = r.expect("the cycle's frame");
    for (i, s) in r.subdevice_states.iter().enumerate() {
        if i != out {
            assert_eq!(*s, SubDeviceState::Op, "drive {i} left OP");
        }
    }
    let full = 3 * r.subdevice_states.len() as u16;
    assert!(r.working_counter >= full - 3, "wkc {}", r.working_counter);
    v
}

/// An expedited SDO download written straight into the output mailbox (`len` bytes, as
/// ethercrab's `with_len` pads it), CoE counter `counter`.
fn sdo_download_1(index: u16, sub: u8, value: u8, counter: u8) -> [u8; 128] {
    let mut m = [0u8; 128];
    m[0] = 10;
    m[5] = 0x03 | (counter << 4);
    m[6..8].copy_from_slice(&(2u16 << 12).to_le_bytes());
    m[8] = 0x2F;
    m[9..11].copy_from_slice(&index.to_le_bytes());
    m[11] = sub;
    m[12] = value;
    m
}

fn start(storage: &'static common::Storage) -> (MainDevice<'static>, chunkrt_ecsim::SimHandle) {
    let timeouts = common::timeouts(Duration::from_secs(5), Duration::from_millis(50));
    common::start(storage, SimConfig::virtual_chain(3), timeouts)
}

async fn to_op(md: &MainDevice<'_>) -> Group {
    let group = md
        .init_single_group::<4, 128>(ethercat_now)
        .await
        .expect("init");
    for sd in group.iter(md) {
        sd.sdo_write(0x6060, 0, 8u8).await.expect("mode CSP");
    }
    group.into_op(md).await.expect("to OP")
}

#[test]
fn a_power_cycled_drive_is_brought_back_to_op_while_the_others_exchange() {
    static STORAGE: common::Storage = common::Storage::new();
    let (md, sim) = start(&STORAGE);
    block_on(async {
        let md = &md;
        let group = to_op(md).await;
        let (pos, addr) = (2u16, 0x1002u16);
        let snap = snapshot(md, addr).await;
        for _ in 0..10 {
            let r = group.tx_rx(md).await.unwrap();
            assert_eq!(r.working_counter, 9);
        }
        sim.network().power_cycle(usize::from(pos), 20_000_000);

        let mut k = 0;
        let mut log = Vec::new();
        let mut mark = |name: &'static str, k: usize| log.push((name, k));
        // 1. Poll by position until it answers (one APRD per cycle).
        loop {
            k += 1;
            let r = cycle(md, &group, Command::aprd(pos, 0x0130).receive::<u16>(md), 2).await;
            if let Ok(st) = r {
                assert_eq!(st, 0x0001, "back in INIT");
                break;
            }
            assert!(k < 100);
        }
        mark("answers again (INIT)", k);
        // 2. Station address, mailbox SMs, PRE-OP. `send` ignores the working counter;
        //    `send_receive` checks it, so every write here is a send_receive.
        let w = Command::apwr(pos, 0x0010).send_receive::<u16>(md, addr);
        cycle(md, &group, w, 2).await.expect("station address");
        let sm01: [u8; 16] = snap.sm[..16].try_into().unwrap();
        let w = Command::fpwr(addr, 0x0800).send_receive::<[u8; 16]>(md, sm01);
        cycle(md, &group, w, 2).await.expect("mailbox SMs");
        let w = Command::fpwr(addr, 0x0120).send_receive::<u16>(md, 0x0002u16);
        cycle(md, &group, w, 2).await.expect("request PRE-OP");
        k += 3;
        loop {
            k += 1;
            let r = cycle(
                md,
                &group,
                Command::fprd(addr, 0x0130).receive::<u16>(md),
                2,
            )
            .await;
            if r == Ok(0x0002) {
                break;
            }
        }
        mark("PRE-OP", k);
        // 3. The SDOs of the backend's configure_drive (here only the mode), through the
        //    mailbox by hand: write SM0, poll SM1's status (0x080D bit 3), read SM1.
        let w = Command::fpwr(addr, 0x1000)
            .send_receive::<[u8; 128]>(md, sdo_download_1(0x6060, 0, 8, 1));
        cycle(md, &group, w, 2).await.expect("mailbox write");
        k += 1;
        loop {
            k += 1;
            let r = cycle(md, &group, Command::fprd(addr, 0x080D).receive::<u8>(md), 2).await;
            if r.is_ok_and(|s| s & 0x08 != 0) {
                break;
            }
        }
        k += 1;
        // Reading up to SM1's last byte empties it.
        let reply = cycle(
            md,
            &group,
            Command::fprd(addr, 0x1080).receive::<[u8; 128]>(md),
            2,
        )
        .await
        .expect("mailbox read");
        assert_eq!(reply[8], 0x60, "SDO download response: {:?}", &reply[..16]);
        mark("0x6060 = 8 over SDO", k);
        // 4. Process-data SMs and FMMUs as ethercrab computed them at bring-up.
        let sm23: [u8; 16] = snap.sm[16..].try_into().unwrap();
        let w = Command::fpwr(addr, 0x0810).send_receive::<[u8; 16]>(md, sm23);
        cycle(md, &group, w, 2).await.expect("PD SMs");
        let w = Command::fpwr(addr, 0x0600).send_receive::<[u8; 32]>(md, snap.fmmu);
        cycle(md, &group, w, 2).await.expect("FMMUs");
        k += 2;
        // 5. DC: the old offset is stale (the local clock restarted); a new one from the
        //    reference's system time and this drive's local time, read in one cycle.
        let reads = zip(
            Command::fprd(0x1000, 0x0910).receive::<u64>(md),
            Command::fprd(addr, 0x0910).receive::<u64>(md),
        );
        let (t_ref, t_local) = cycle(md, &group, reads, 2).await;
        let (t_ref, t_local) = (t_ref.unwrap(), t_local.unwrap());
        let stale = t_local.wrapping_add(snap.dc_offset).abs_diff(t_ref);
        assert!(
            stale > 1_000_000_000,
            "the snapshot offset is {stale} ns off"
        );
        let offset = t_ref.wrapping_sub(t_local);
        let w = Command::fpwr(addr, 0x0920).send_receive::<u64>(md, offset);
        cycle(md, &group, w, 2).await.expect("DC offset");
        let w = Command::fpwr(addr, 0x0928).send_receive::<u32>(md, snap.dc_delay);
        cycle(md, &group, w, 2).await.expect("DC delay");
        let reads = zip(
            Command::fprd(0x1000, 0x0910).receive::<u64>(md),
            Command::fprd(addr, 0x0910).receive::<u64>(md),
        );
        let (a, b) = cycle(md, &group, reads, 2).await;
        let skew = a.unwrap().abs_diff(b.unwrap());
        assert!(
            skew < 100_000,
            "system times agree within 100 us: {skew} ns"
        );
        k += 4;
        mark("DC offset + delay", k);
        // 6. SAFE-OP, OP.
        for (state, name) in [(0x0004u16, "SAFE-OP"), (0x0008, "OP")] {
            let w = Command::fpwr(addr, 0x0120).send_receive::<u16>(md, state);
            cycle(md, &group, w, 2).await.expect("AL request");
            k += 1;
            loop {
                k += 1;
                let r = cycle(
                    md,
                    &group,
                    Command::fprd(addr, 0x0130).receive::<u16>(md),
                    2,
                )
                .await;
                if r == Ok(state) {
                    break;
                }
                assert_ne!(r.unwrap_or(0) & 0x10, 0x10, "refused: {r:?}");
            }
            mark(name, k);
        }
        let r = group.tx_rx(md).await.unwrap();
        assert_eq!(r.working_counter, 9, "the whole group counts again");
        assert!(r.all_op());
        eprintln!("recovery steps (cycle reached): {log:?}");
    });
}

#[test]
fn a_drive_in_safe_op_with_the_watchdog_error_is_acknowledged_back_to_op() {
    static STORAGE: common::Storage = common::Storage::new();
    let (md, sim) = start(&STORAGE);
    block_on(async {
        let md = &md;
        let group = to_op(md).await;
        sim.network().cut_link(2);
        for _ in 0..150 {
            let _ = group.tx_rx(md).await.unwrap();
        }
        sim.network().cut_link(3);
        let r = group.tx_rx(md).await.unwrap();
        assert_eq!(r.subdevice_states[2], SubDeviceState::SafeOp);
        assert_eq!(r.working_counter, 9, "in SAFE-OP its SMs still count");
        let code = cycle(
            md,
            &group,
            Command::fprd(0x1002, 0x0134).receive::<u16>(md),
            2,
        )
        .await;
        assert_eq!(code, Ok(0x001B));
        // Acknowledge in the current state (0x10 | SAFE-OP), then request OP.
        let w = Command::fpwr(0x1002, 0x0120).send_receive::<u16>(md, 0x0014u16);
        cycle(md, &group, w, 2).await.unwrap();
        let st = cycle(
            md,
            &group,
            Command::fprd(0x1002, 0x0130).receive::<u16>(md),
            2,
        )
        .await;
        assert_eq!(st, Ok(0x0004), "error flag cleared");
        let w = Command::fpwr(0x1002, 0x0120).send_receive::<u16>(md, 0x0008u16);
        cycle(md, &group, w, 2).await.unwrap();
        let r = group.tx_rx(md).await.unwrap();
        assert!(r.all_op(), "{:?}", r.subdevice_states);
    });
}
