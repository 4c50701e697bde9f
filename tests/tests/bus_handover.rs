//! No torque without process data: the whole runtime on the EtherCAT backend over the
//! in-process simulated chain of 7 CiA 402 drives. What the drives show (the simulated
//! drives' own statuswords and AL states, read from the simulator) is checked after
//! every call that changes their power: bring-up leaves every power stage off, the
//! drives are enabled only once the control thread runs them, and the stop, disable
//! and INIT run on that same thread right after the loop, so an enabled drive never
//! waits for another thread to start or finish.

use chunkrt_core::{Backend, BackendError, Command, Feedback, MonoTime};
use chunkrt_ecsim::{SimConfig, SimNetwork};
use chunkrt_ethercat::{EthercatBackend, EthercatParams, SimControl};
use chunkrt_rt::{RunOptions, Runtime};
use chunkrt_tests::faulty::out_dir;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One call into the backend as the drives saw it.
#[derive(Clone, Debug)]
struct Call {
    what: &'static str,
    /// The calling thread's name.
    thread: String,
    /// After the call: drives whose power stage is on (switched on, operation
    /// enabled or quick stop active), by their own statusword.
    powered: usize,
    /// After the call: drives not in INIT, by their own AL state.
    not_init: usize,
}

/// The EtherCAT backend with every power-changing call recorded, and the first exchange
/// of each thread that exchanges.
struct Witness {
    inner: EthercatBackend,
    ctl: SimControl,
    calls: Arc<Mutex<Vec<Call>>>,
    exchanging_thread: Option<String>,
}

impl Witness {
    fn note(&self, what: &'static str) {
        let net = self.ctl.network();
        let drives: Vec<_> = (0..net.len()).map(|i| net.device(i).unwrap()).collect();
        let powered = drives
            .iter()
            .filter(|d| matches!(d.drive().statusword() & 0x6F, 0x23 | 0x27 | 0x07))
            .count();
        let not_init = drives.iter().filter(|d| d.al_state() != 1).count();
        drop(net);
        self.calls.lock().unwrap().push(Call {
            what,
            thread: thread_name(),
            powered,
            not_init,
        });
    }
}

fn thread_name() -> String {
    std::thread::current().name().unwrap_or("?").to_string()
}

impl Backend for Witness {
    fn dof(&self) -> usize {
        self.inner.dof()
    }
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn start(
        &mut self,
        now: MonoTime,
        fb: &mut Feedback,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let r = self.inner.start(now, fb);
        self.note("start");
        r
    }
    fn enable(
        &mut self,
        now: MonoTime,
        fb: &mut Feedback,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let r = self.inner.enable(now, fb);
        self.note("enable");
        r
    }
    fn exchange(
        &mut self,
        now: MonoTime,
        cmd: &Command,
        fb: &mut Feedback,
    ) -> Result<(), BackendError> {
        let r = self.inner.exchange(now, cmd, fb);
        let name = std::thread::current();
        let name = name.name().unwrap_or("?");
        if self.exchanging_thread.as_deref() != Some(name) {
            self.exchanging_thread = Some(name.to_string());
            self.note("exchange");
        }
        r
    }
    fn shutdown(&mut self, now: MonoTime) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let r = self.inner.shutdown(now);
        self.note("shutdown");
        r
    }
    fn counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        self.inner.counters(out)
    }
}

#[test]
fn drives_get_power_only_while_the_control_thread_runs_them() {
    let cfg = chunkrt_tests::veth_config();
    let mut sim = SimConfig::virtual_chain(7);
    sim.cycle_us = (cfg.control.period_ms * 1000.0).round() as u64;
    let mut params = EthercatParams::from_config(&cfg).expect("ethercat section");
    params.dc_static_sync_iterations = 20;
    params.frame_timeout = Duration::from_millis(20);
    params.frame_late = Duration::from_millis(10);
    let net = SimNetwork::new(sim).expect("valid simulator config");
    let (inner, ctl) = EthercatBackend::simulated(params, net);
    let calls = Arc::new(Mutex::new(Vec::new()));
    let witness = Witness {
        inner,
        ctl,
        calls: calls.clone(),
        exchanging_thread: None,
    };
    let policy = chunkrt_rt::build::policy(&cfg).expect("scripted policy");
    let opts = RunOptions {
        duration: Some(Duration::from_secs(2)),
        out_dir: Some(out_dir("bus_handover")),
        ..RunOptions::default()
    };
    let out = Runtime::with_parts(&cfg, Box::new(witness), policy)
        .run(&opts)
        .expect("the run completes");
    assert_eq!(out.shutdown_error, None, "the shutdown failed");
    let calls = calls.lock().unwrap().clone();
    let what: Vec<_> = calls.iter().map(|c| c.what).collect();
    assert_eq!(
        what,
        ["start", "enable", "exchange", "shutdown"],
        "calls into the backend, in order (exchange: once per exchanging thread): {calls:#?}"
    );
    for c in &calls {
        assert_eq!(
            c.thread, "chunkrt-control",
            "{} ran on another thread than the control loop: {calls:#?}",
            c.what
        );
    }
    let n = 7;
    assert_eq!(
        (calls[0].powered, calls[0].not_init),
        (0, n),
        "bring-up must end in OP with every power stage off: {calls:#?}"
    );
    assert_eq!(
        calls[1].powered, n,
        "enable must switch every drive on: {calls:#?}"
    );
    assert_eq!(
        (calls[3].powered, calls[3].not_init),
        (0, 0),
        "after shutdown every drive is off and in INIT: {calls:#?}"
    );
}
