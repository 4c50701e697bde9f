//! Measures the two ways of driving the bus from a control thread, on a real interface
//! (e.g. the host end of a veth pair with `chunkrt ecsim` at the other):
//!
//! - `in-thread`: this crate's transport: the control thread sends the frame itself and
//!   waits in `ppoll` for the reply (`EthercatBackend::exchange`);
//! - `io-thread`: ethercrab's `tx_rx_task` on a thread of its own, the control thread
//!   awaiting `group.tx_rx()` (two cross-thread wake-ups per cycle).
//!
//! For each: the time the control thread spends per cycle, at a 1 ms period, as
//! percentiles. `cargo run --release -p chunkrt-ethercat --example transport_rtt --
//! IFACE [DRIVES] [CYCLES]` (root).

use chunkrt_config::PdoEntry;
use chunkrt_core::{Backend, Command, DriveRequest, Feedback, MonoTime};
use chunkrt_ethercat::{DriveParams, EthercatBackend, EthercatParams, JointScale, PdoLayout};
use ethercrab::std::{ethercat_now, tx_rx_task};
use ethercrab::{MainDevice, MainDeviceConfig, PduStorage, Timeouts};
use std::time::{Duration, Instant};

static STORAGE: PduStorage<16, { PduStorage::element_size(1100) }> = PduStorage::new();

fn percentiles(name: &str, mut v: Vec<u64>) {
    v.sort_unstable();
    let q = |p: f64| v[((v.len() - 1) as f64 * p) as usize] as f64 / 1000.0;
    println!(
        "{name:>10}: n={} p50 {:.1} us  p90 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}",
        v.len(),
        q(0.5),
        q(0.9),
        q(0.99),
        q(0.999),
        q(1.0)
    );
}

fn params(iface: &str, drives: usize) -> EthercatParams {
    let rx = vec![PdoEntry::Controlword, PdoEntry::TargetPosition];
    let tx = vec![
        PdoEntry::Statusword,
        PdoEntry::PositionActual,
        PdoEntry::VelocityActual,
        PdoEntry::TorqueActual,
        PdoEntry::ErrorCode,
    ];
    EthercatParams {
        interface: iface.into(),
        period: Duration::from_millis(1),
        dc_sync0: false,
        sync0_shift: Duration::ZERO,
        frame_timeout: Duration::from_micros(900),
        frame_late: Duration::from_micros(900),
        max_consecutive_lost: 10,
        min_success_rate: 0.9,
        success_window: 100,
        state_timeout: Duration::from_secs(5),
        enable_timeout: Duration::from_secs(2),
        sdo_timeout: Duration::from_secs(1),
        rejoin_timeout: Duration::from_secs(10),
        following_error_timeout_ms: 5,
        resume_window_rad: 0.05,
        write_pdo: true,
        layout: PdoLayout::new(&rx, &tx),
        rx,
        tx,
        drives: (0..drives)
            .map(|j| DriveParams {
                joint: j,
                scale: JointScale::new(166_886.0, 0, 1),
                vendor_id: 0x0000_0CE5,
                product_code: 0x0402_0001,
                rated_torque_nm: 1.0,
                following_error_window_rad: None,
            })
            .collect(),
        dc_static_sync_iterations: 100,
    }
}

fn in_thread(iface: &str, drives: usize, cycles: usize) {
    let mut b = EthercatBackend::open(params(iface, drives)).expect("open");
    let mut fb = Feedback::default();
    b.start(MonoTime::from_ms(1), &mut fb).expect("bring-up");
    b.enable(MonoTime::from_ms(2), &mut fb).expect("enable");
    let mut cmd = Command {
        dof: drives as u16,
        pos_rad: fb.pos_rad,
        request: DriveRequest::Track,
        ..Command::default()
    };
    cmd.pos_rad = fb.pos_rad;
    let (mut spent, mut rtt) = (Vec::with_capacity(cycles), Vec::with_capacity(cycles));
    let mut next = Instant::now();
    for _ in 0..cycles {
        next += Duration::from_millis(1);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        let t0 = Instant::now();
        let r = b.exchange(MonoTime::from_ms(2), &cmd, &mut fb);
        spent.push(t0.elapsed().as_nanos() as u64);
        if r.is_ok() {
            rtt.push(fb.bus_rtt_ns);
        }
    }
    b.shutdown(MonoTime::from_ms(3)).expect("shutdown");
    percentiles("in-thread", spent);
    percentiles("  wire rtt", rtt);
    println!("{:?}", b.stats());
}

fn io_thread(iface: &str, cycles: usize) {
    let (tx, rx, pdu_loop) = STORAGE.try_split().expect("split once");
    let md = MainDevice::new(
        pdu_loop,
        Timeouts::default(),
        MainDeviceConfig {
            dc_static_sync_iterations: 100,
            ..MainDeviceConfig::default()
        },
    );
    let task = tx_rx_task(iface, tx, rx).expect("open");
    std::thread::spawn(move || async_io::block_on(task));
    let group = async_io::block_on(md.init_single_group::<16, 1024>(ethercat_now)).expect("init");
    let group = async_io::block_on(group.into_op(&md)).expect("op");
    let mut spent = Vec::with_capacity(cycles);
    let mut lost = 0;
    let mut next = Instant::now();
    for _ in 0..cycles {
        next += Duration::from_millis(1);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        let t0 = Instant::now();
        if async_io::block_on(group.tx_rx(&md)).is_err() {
            lost += 1;
        }
        spent.push(t0.elapsed().as_nanos() as u64);
    }
    let _ = async_io::block_on(group.into_safe_op(&md));
    percentiles("io-thread", spent);
    println!("io-thread errors: {lost}");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let iface = args
        .get(1)
        .expect("usage: transport_rtt IFACE [DRIVES] [CYCLES]");
    let drives = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(7);
    let cycles = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(20_000);
    in_thread(iface, drives, cycles);
    std::thread::sleep(Duration::from_millis(500));
    io_thread(iface, cycles);
}
