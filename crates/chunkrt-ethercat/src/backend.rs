//! `EthercatBackend`: the `Backend` the control loop calls once per cycle.

use crate::bus::{Io, Stall, Storage};
use crate::cia402::{self, PowerState};
use crate::group::{CycleResult, OpGroup};
use crate::loss::{LossPolicy, Verdict};
use crate::params::{DriveParams, EthercatParams, PdoLayout, MAX_DRIVES};
use crate::rejoin::snapshot::DriveSnapshot;
use crate::rejoin::{access, Context as RejoinContext, Rejoin, RejoinFailure};
use crate::wire::raw::RawSocket;
#[cfg(any(test, feature = "sim"))]
use crate::wire::sim::{SimControl, SimWire};
use crate::wire::Wire;
use crate::BringUpError;
use chunkrt_core::backend::BusErrorKind;
use chunkrt_core::{
    Backend, BackendError, Command, DriveRequest, DriveState, Feedback, MonoTime, MAX_DOF,
};
use ethercrab::{MainDevice, MainDeviceConfig, RetryBehaviour, Timeouts};
use std::future::{poll_fn, Future};
use std::pin::pin;
use std::task::Poll;
use std::time::{Duration, Instant};

/// The host's view of one drive, updated every cycle (bus order).
#[derive(Clone, Copy, Debug)]
pub(crate) struct DriveIo {
    pub power: PowerState,
    pub statusword: u16,
    pub last_cw: u16,
    pub actual: i32,
    pub vel: i32,
    pub torque: i16,
    pub error_code: u16,
    /// 0x6061 modes of operation display, when mapped (else 0).
    pub mode_display: i8,
    /// 0x60FD digital inputs, when mapped (else 0).
    pub inputs: u32,
    /// Target held while the drive is not following commands (enabling, fault reset, a
    /// refused resume): the actual position when it was last not enabled.
    pub hold: i32,
    /// Whether commands are followed (false until the first command close to `hold`).
    pub tracking: bool,
}

impl Default for DriveIo {
    fn default() -> Self {
        DriveIo {
            power: PowerState::NotReady,
            statusword: 0,
            last_cw: 0,
            actual: 0,
            vel: 0,
            torque: 0,
            error_code: 0,
            mode_display: 0,
            inputs: 0,
            hold: 0,
            tracking: false,
        }
    }
}

/// What the bus did so far (read between runs or in tests; not touched by the runtime).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BusStats {
    /// Exchanges.
    pub cycles: u64,
    /// Frames that never came back.
    pub frames_lost: u64,
    /// Frames back after the late threshold.
    pub frames_late: u64,
    /// Lost frames ridden through (not reported: the last feedback held).
    pub frames_ridden_through: u64,
    /// Lost frames reported to the runtime (the loss policy's limits passed).
    pub frames_reported: u64,
    /// Longest run of lost frames in a row.
    pub longest_loss_run: u32,
    /// Working-counter mismatches.
    pub wkc_errors: u64,
    /// Bus errors that are not lost frames (`BackendError::Bus`): a reply the master could
    /// not read, a frame it could not send, a process image not written or read.
    pub bus_errors: u64,
    /// Cycles with a drive gone or out of OP.
    pub drive_missing: u64,
    /// Cycles with a drive in fault.
    pub drive_faults: u64,
    /// Commands refused (not finite, wrong dof, a resume too far from the held position).
    pub refused_commands: u64,
    /// Largest round trip seen, ns.
    pub max_rtt_ns: u64,
    /// Drives that left OP or the bus and that the backend set out to bring back.
    pub rejoins_started: u64,
    /// ... that are back in OP.
    pub rejoins_completed: u64,
    /// ... that were given up (`DriveLost`: timeout, another identity, a mapping refused).
    pub rejoins_failed: u64,
    /// Longest time from a rejoin's start to the drive back in OP, ns (the runtime's clock).
    pub longest_rejoin_ns: u64,
}

/// CiA 402 drives in CSP on one EtherCAT bus.
pub struct EthercatBackend {
    pub(crate) p: EthercatParams,
    pub(crate) md: MainDevice<'static>,
    pub(crate) io: Io,
    pub(crate) group: Option<OpGroup>,
    pub(crate) expected_wkc: u16,
    pub(crate) drv: [DriveIo; MAX_DRIVES],
    pub(crate) stats: BusStats,
    /// Drives (bit = bus position) not in OP at the last exchange.
    pub(crate) not_op: u32,
    /// A fault reset is taking the group through quick stop, reset and re-enable.
    pub(crate) recovering: bool,
    /// Drives (bit = bus position) without a CoE mailbox: their SII mapping stands.
    pub(crate) no_coe: u32,
    /// Which lost frames are ridden through.
    pub(crate) loss: LossPolicy,
    /// The `log` level before the cyclic exchange began (restored at shutdown).
    pub(crate) log_level: Option<log::LevelFilter>,
    /// With DC: the last exchange's phase error against SYNC0 + shift (see
    /// `Feedback::sync_phase_ns`).
    pub(crate) sync_phase_ns: Option<i32>,
    /// Per drive (bus order), what bringing it back needs; taken after bring-up.
    pub(crate) snapshots: Vec<DriveSnapshot>,
    /// The drive being brought back, if any (boxed once: it holds the mailbox buffers).
    pub(crate) rejoin: Box<Rejoin>,
    /// Drives (bit = bus position) given up: `DriveLost` from then on.
    pub(crate) lost: u32,
    /// Why each lost drive was given up.
    pub(crate) lost_why: [Option<RejoinFailure>; MAX_DRIVES],
    /// Per drive (bus order), where its objects sit in its process image: from the mapping
    /// it runs, read at bring-up (padding included), so it may differ from drive to drive
    /// and from `p.layout` (the config's lists packed without gaps).
    pub(crate) layouts: [PdoLayout; MAX_DRIVES],
    /// The first joint (bus order) whose outputs `encode` could not write this cycle.
    pub(crate) output_failed: Option<u16>,
    /// Whether the last cycle's reply was decoded (false: nothing was measured).
    pub(crate) decoded: bool,
    /// Whether the last decoded cycle measured every drive: all in OP, the working
    /// counter as expected, every drive's inputs read. `Feedback::held` is its negation.
    pub(crate) inputs_fresh: bool,
    /// Per drive (bus order), its SII identity at bring-up: vendor ID, product code,
    /// revision and serial number (the wear ledger's hardware id).
    pub(crate) identities: Vec<[u32; 4]>,
}

/// Below this a drive counts as at rest (leaving quick stop, shutdown).
pub(crate) const REST_VEL_RAD_S: f64 = 0.01;

impl EthercatBackend {
    /// Opens a raw socket on `params.interface` (CAP_NET_RAW). Bring-up happens in
    /// [`Backend::start`].
    pub fn open(params: EthercatParams) -> Result<EthercatBackend, BringUpError> {
        let sock = RawSocket::open(&params.interface)?;
        Ok(EthercatBackend::with_wire(params, Box::new(sock)))
    }

    /// Runs on the in-process simulated chain `net` (tests, no root); the returned handle
    /// shares the chain for fault injection and inspection.
    #[cfg(any(test, feature = "sim"))]
    pub fn simulated(
        params: EthercatParams,
        net: chunkrt_ecsim::SimNetwork,
    ) -> (EthercatBackend, SimControl) {
        let (wire, ctl) = SimWire::new(net);
        (EthercatBackend::with_wire(params, Box::new(wire)), ctl)
    }

    /// Runs on any wire.
    pub fn with_wire(params: EthercatParams, wire: Box<dyn Wire>) -> EthercatBackend {
        assert!(
            (1..=MAX_DRIVES).contains(&params.dof()),
            "1 to {MAX_DRIVES} drives"
        );
        // ethercrab's PDU storage must outlive the TX/RX halves and the MainDevice that
        // borrow it. One backend per process in production; each test leaks ~18 kB.
        let storage: &'static Storage = Box::leak(Box::new(Storage::new()));
        let (tx, rx, pdu_loop) = storage.try_split().expect("a fresh storage splits");
        let timeouts = Timeouts {
            state_transition: params.state_timeout,
            // Bring-up frames; a cycle's frame has its own, shorter deadline.
            pdu: Duration::from_millis(50),
            eeprom: Duration::from_millis(100),
            wait_loop_delay: Duration::from_millis(1),
            mailbox_echo: params.sdo_timeout,
            mailbox_response: params.sdo_timeout,
        };
        let md = MainDevice::new(
            pdu_loop,
            timeouts,
            MainDeviceConfig {
                dc_static_sync_iterations: params.dc_static_sync_iterations,
                // A frame lost during bring-up is sent again rather than failing the
                // bring-up; a cycle's frame never waits that long (its own deadline drops it).
                retry_behaviour: RetryBehaviour::Count(2),
            },
        );
        EthercatBackend {
            md,
            io: Io::new(tx, rx, wire),
            group: None,
            expected_wkc: 0,
            drv: [DriveIo::default(); MAX_DRIVES],
            stats: BusStats::default(),
            not_op: 0,
            recovering: false,
            no_coe: 0,
            loss: LossPolicy::new(
                params.max_consecutive_lost,
                params.min_success_rate,
                params.success_window,
            ),
            log_level: None,
            sync_phase_ns: None,
            snapshots: Vec::new(),
            rejoin: Box::new(Rejoin::new()),
            lost: 0,
            lost_why: [None; MAX_DRIVES],
            layouts: [params.layout; MAX_DRIVES],
            output_failed: None,
            decoded: false,
            inputs_fresh: true,
            identities: Vec::new(),
            p: params,
        }
    }

    /// Bus counters so far.
    pub fn stats(&self) -> BusStats {
        let loss = self.loss.counts();
        BusStats {
            frames_ridden_through: loss.ridden_through,
            frames_reported: loss.reported,
            longest_loss_run: loss.longest_run,
            ..self.stats
        }
    }

    /// ethercrab logs an ERROR line per lost frame, from the thread that polls it: the
    /// control thread. While the loop runs, `log`'s level is off (one atomic load per
    /// call site, nothing formatted or written); lost frames are counted instead and
    /// reach the report. Bring-up and shutdown keep ethercrab's messages.
    pub(crate) fn quiet_logs(&mut self, quiet: bool) {
        if quiet {
            self.log_level.get_or_insert_with(log::max_level);
            log::set_max_level(log::LevelFilter::Off);
        } else if let Some(level) = self.log_level.take() {
            log::set_max_level(level);
        }
    }

    /// Why the drive at bus position `i` was given up (None: it was not).
    pub fn rejoin_failure(&self, i: usize) -> Option<RejoinFailure> {
        self.lost_why.get(i).copied().flatten()
    }

    /// The last statusword of each drive (bus order), for tests and diagnostics.
    pub fn statuswords(&self) -> Vec<u16> {
        self.drv[..self.p.dof()]
            .iter()
            .map(|d| d.statusword)
            .collect()
    }

    /// Writes every drive's outputs for `request` (bus order). `cmd` is the runtime's
    /// command when it may be followed (checked by the caller), else None: hold.
    /// Returns the joint whose resume was refused, if any.
    pub(crate) fn encode(&mut self, request: DriveRequest, cmd: Option<&Command>) -> Option<u16> {
        self.output_failed = None;
        let group = self.group.as_ref()?;
        let window = self.p.resume_window_rad;
        let n = self.p.dof();
        let any_fault = self.drv[..n].iter().any(|d| d.power.is_fault());
        // A fault reset takes the whole group through quick stop, reset and re-enable: a
        // joint that cannot follow takes the arm down with it.
        match request {
            DriveRequest::FaultReset if any_fault => self.recovering = true,
            DriveRequest::FaultReset => {}
            _ => self.recovering = false,
        }
        if self.recovering
            && self.drv[..n]
                .iter()
                .all(|d| d.power == PowerState::OperationEnabled)
        {
            self.recovering = false;
        }
        let stopping_group = self.recovering && any_fault;
        let mut refused = None;
        for (i, dp) in self.p.drives.iter().enumerate() {
            let d = &mut self.drv[i];
            let layout = self.layouts[i];
            // A drive out of OP takes no outputs; the first it takes once back in OP keep
            // its power stage off (disable voltage, target = actual), then the CiA 402 path
            // below brings it up.
            let missing = self.not_op & (1 << i) != 0;
            let follow = matches!(request, DriveRequest::Track | DriveRequest::FaultReset)
                && d.power == PowerState::OperationEnabled
                && !self.recovering
                && !missing;
            let (cw, target, vel) = if follow {
                let c = cmd.filter(|_| request == DriveRequest::Track);
                follow_outputs(d, dp, c, window, &mut refused)
            } else {
                let at_rest = layout.velocity_actual.is_none()
                    || dp.scale.vel_rad_s(d.vel).abs() <= REST_VEL_RAD_S;
                hold_outputs(d, request, missing, stopping_group, at_rest)
            };
            d.last_cw = cw;
            let written = group.write_outputs(&self.md, i, |out| {
                write_outputs(out, &layout, cw, target, vel)
            });
            if written != Some(true) {
                // Its part of the image keeps last cycle's outputs: `cycle` reports it.
                self.output_failed.get_or_insert(dp.joint as u16);
            }
        }
        refused
    }

    /// One process-data exchange and the decoding of its inputs into `drv`. On a lost
    /// frame `drv` keeps the last values. With `rejoin_now` (the control loop's exchange:
    /// the runtime's clock) a drive out of OP is brought back meanwhile, one access per
    /// cycle beside the LRW (see [`crate::rejoin`]); without (bring-up, shutdown) not.
    ///
    /// Stages: the rejoin's access prepared, the frame exchanged (`exchange_frame`), its
    /// outcome (`frame_result`), the inputs decoded (`decode_inputs`), the rejoin
    /// advanced, the cycle judged (`judge`).
    pub(crate) fn cycle(&mut self, rejoin_now: Option<MonoTime>) -> Result<(), BackendError> {
        self.decoded = false;
        let out_failed = self.output_failed.take();
        if self.group.is_none() {
            return Err(BackendError::DriveMissing { joint: 0 });
        }
        let rejoining = rejoin_now.is_some() && self.prepare_rejoin();
        let Some(group) = self.group.as_ref() else {
            return Err(BackendError::DriveMissing { joint: 0 });
        };
        let x = exchange_frame(
            group,
            &self.md,
            &mut self.rejoin,
            &mut self.io,
            rejoining,
            self.p.frame_timeout,
        );
        self.sync_phase_ns = None;
        let res = self.frame_result(x.stall, x.lrw, out_failed)?;
        self.decoded = true;
        let unread = self.decode_inputs(&res);
        self.sync_phase_ns = res
            .next_cycle_wait
            .map(|wait| sync_phase_error_ns(self.p.period, wait));
        self.not_op = res.not_op;
        self.inputs_fresh = unread.is_none() && res.not_op == 0 && res.wkc == self.expected_wkc;
        if let Some(now) = rejoin_now {
            self.rejoin_step(now, rejoining.then_some(x.access), res.not_op);
        }
        self.judge(&res, out_failed, unread, rejoin_now.is_some())
    }

    /// Readies the rejoin's access(es) for this cycle's frame; whether one is under way.
    fn prepare_rejoin(&mut self) -> bool {
        let Some(j) = self.rejoin.drive else {
            return false;
        };
        let Some(snap) = self.snapshots.get(j) else {
            return false;
        };
        let cx = rejoin_context(
            &self.p,
            &self.snapshots,
            j,
            self.not_op,
            self.rejoin.no_time_source,
        );
        self.rejoin.prepare(snap, &cx);
        true
    }

    /// The LRW's reply, or the error the frame ended in: a wire error; a command that did
    /// not go out (never ridden through as a lost frame); the LRW's own error; no reply
    /// by the deadline (lost, unless the reply came back unreadable).
    fn frame_result(
        &mut self,
        stall: Result<(), Stall>,
        lrw: Option<Result<CycleResult, ethercrab::error::Error>>,
        out_failed: Option<u16>,
    ) -> Result<CycleResult, BackendError> {
        match (stall, lrw) {
            (Err(Stall::Wire(e)), _) => Err(BackendError::Io { errno: e.errno }),
            (_, Some(Ok(r))) => Ok(r),
            _ if out_failed.is_some() => Err(self.output_error(out_failed)),
            (_, Some(Err(e))) => Err(self.lrw_error(e)),
            (_, None) => Err(match self.io.malformed_reply() {
                Some(e) => self.lrw_error(e),
                None => BackendError::FrameLost,
            }),
        }
    }

    /// Decodes every counting drive's inputs into `drv`; the first joint whose inputs
    /// could not be read (its fields keep last cycle's values).
    fn decode_inputs(&mut self, res: &CycleResult) -> Option<u16> {
        let group = self.group.as_ref()?;
        let mut unread = None;
        for (i, dp) in self.p.drives.iter().enumerate() {
            let d = &mut self.drv[i];
            let layout = self.layouts[i];
            if res.counting & (1 << i) != 0 {
                let read = group.read_inputs(&self.md, i, |inp| read_inputs(inp, &layout, d));
                if read != Some(true) {
                    unread.get_or_insert(dp.joint as u16);
                }
            } else {
                // Its inputs are not its own (it did not take part): nothing is known of
                // its power stage until it is back in SAFE-OP.
                d.power = PowerState::NotReady;
            }
        }
        unread
    }

    /// The cycle's verdict, first cause first: outputs not written, inputs not read, the
    /// working counter (in the loop, of the drives that count while one is out of OP), a
    /// drive lost for good (in the loop), a drive out of OP.
    fn judge(
        &mut self,
        res: &CycleResult,
        out_failed: Option<u16>,
        unread: Option<u16>,
        in_loop: bool,
    ) -> Result<(), BackendError> {
        if out_failed.is_some() {
            return Err(self.output_error(out_failed));
        }
        if let Some(joint) = unread {
            return Err(self.bus_error(BusErrorKind::InputImage { joint }));
        }
        if res.not_op != 0 {
            self.stats.drive_missing += 1;
        }
        if !in_loop {
            if res.not_op != 0 {
                return Err(self.missing(res.not_op));
            }
            return self.check_wkc(res.wkc, self.expected_wkc);
        }
        let expected = if res.not_op != 0 {
            // The drives not in SAFE-OP or OP do not count: the others are judged alone.
            self.snapshots
                .iter()
                .enumerate()
                .filter(|(i, _)| res.counting & (1 << i) != 0)
                .map(|(_, s)| s.contribution)
                .sum()
        } else {
            self.expected_wkc
        };
        self.check_wkc(res.wkc, expected)?;
        if self.lost != 0 {
            let i = self.lost.trailing_zeros() as usize;
            let joint = self.p.drives.get(i).map_or(i, |d| d.joint) as u16;
            return Err(BackendError::DriveLost { joint });
        }
        if res.not_op != 0 {
            return Err(self.missing(res.not_op));
        }
        Ok(())
    }

    /// A bus error of `kind`, counted.
    fn bus_error(&mut self, kind: BusErrorKind) -> BackendError {
        self.stats.bus_errors += 1;
        BackendError::Bus { kind }
    }

    fn output_error(&mut self, joint: Option<u16>) -> BackendError {
        self.bus_error(BusErrorKind::OutputImage {
            joint: joint.unwrap_or_default(),
        })
    }

    /// What an error of the cyclic exchange is: a timeout is a lost frame (the loss policy
    /// decides whether it is ridden through); anything else came back, or failed on this
    /// side, and is reported as what it is.
    fn lrw_error(&mut self, e: ethercrab::error::Error) -> BackendError {
        use ethercrab::error::{Error, PduError};
        let kind = match e {
            Error::Timeout(_) => return BackendError::FrameLost,
            Error::WorkingCounter { expected, received } => {
                self.stats.wkc_errors += 1;
                return BackendError::WorkingCounter { expected, received };
            }
            // The master's own frame slots, not the wire.
            Error::Pdu(
                PduError::SwapState | PduError::InvalidFrameState | PduError::CreateFrame,
            ) => BusErrorKind::Master,
            // In the cyclic exchange ethercrab says `Internal` where a reply's datagram is
            // missing or shorter than the one sent.
            Error::Pdu(_) | Error::ReceiveFrame | Error::Internal => BusErrorKind::MalformedReply,
            Error::Wire(_) => BusErrorKind::Decode,
            Error::SendFrame | Error::PartialSend { .. } => BusErrorKind::Send,
            Error::Mailbox(_) => BusErrorKind::Mailbox,
            Error::SubDevice(_) | Error::StateTransition | Error::InvalidState { .. } => {
                BusErrorKind::SubDevice
            }
            _ => BusErrorKind::Master,
        };
        self.bus_error(kind)
    }

    fn missing(&self, not_op: u32) -> BackendError {
        let i = not_op.trailing_zeros() as usize;
        let joint = self.p.drives.get(i).map_or(i, |d| d.joint) as u16;
        BackendError::DriveMissing { joint }
    }

    fn check_wkc(&mut self, received: u16, expected: u16) -> Result<(), BackendError> {
        if received == expected {
            return Ok(());
        }
        self.stats.wkc_errors += 1;
        Err(BackendError::WorkingCounter { expected, received })
    }

    /// The rejoin's part of a cycle: the outcome of its access (`done`, None when none
    /// was made), completion once the drive shows OP, give-up, and the start of the next
    /// one for the lowest drive out of OP.
    fn rejoin_step(
        &mut self,
        now: MonoTime,
        done: Option<[Option<Result<(), ethercrab::error::Error>>; 2]>,
        not_op: u32,
    ) {
        if let Some(j) = self.rejoin.drive {
            if not_op & (1 << j) == 0 {
                self.stats.rejoins_completed += 1;
                let took = now.saturating_since(self.rejoin.started);
                self.stats.longest_rejoin_ns = self.stats.longest_rejoin_ns.max(took);
                self.rejoin.drive = None;
            } else {
                let failed = match (done, self.snapshots.get(j)) {
                    (Some(done), Some(snap)) => {
                        let cx = rejoin_context(
                            &self.p,
                            &self.snapshots,
                            j,
                            not_op,
                            self.rejoin.no_time_source,
                        );
                        self.rejoin.advance(done, snap, &cx)
                    }
                    _ => None,
                };
                let timeout = self.p.rejoin_timeout.as_nanos() as u64;
                let late = now.saturating_since(self.rejoin.started) > timeout;
                match failed {
                    Some(f) => self.give_up(j, f),
                    None if late => self.give_up(j, RejoinFailure::Timeout),
                    None => {}
                }
            }
        }
        let waiting = not_op & !self.lost;
        if self.rejoin.drive.is_none() && waiting != 0 {
            let j = waiting.trailing_zeros() as usize;
            self.stats.rejoins_started += 1;
            match self.snapshots.get(j) {
                Some(s) if !s.unsupported => self.rejoin.start(j, now),
                _ => self.give_up(j, RejoinFailure::Unsupported),
            }
        }
    }

    fn give_up(&mut self, j: usize, why: RejoinFailure) {
        self.stats.rejoins_failed += 1;
        self.lost |= 1 << j;
        if let Some(w) = self.lost_why.get_mut(j) {
            *w = Some(why);
        }
        self.rejoin.drive = None;
    }

    /// Fills `fb` from `drv` (joint order).
    pub(crate) fn fill_feedback(&self, t_capture: MonoTime, rtt_ns: u64, fb: &mut Feedback) {
        fb.t_capture = t_capture;
        fb.dof = self.p.dof() as u16;
        fb.bus_rtt_ns = rtt_ns;
        fb.held = !self.inputs_fresh;
        fb.sync_phase_ns = self.sync_phase_ns;
        for j in self.p.dof()..MAX_DOF {
            fb.pos_rad[j] = 0.0;
            fb.vel_rad_s[j] = 0.0;
            fb.torque_nm[j] = 0.0;
            fb.state[j] = DriveState::Disabled;
            fb.error_code[j] = 0;
            fb.digital_inputs[j] = 0;
        }
        for (i, dp) in self.p.drives.iter().enumerate() {
            let d = &self.drv[i];
            let j = dp.joint;
            fb.pos_rad[j] = dp.scale.pos_rad(d.actual);
            fb.vel_rad_s[j] = dp.scale.vel_rad_s(d.vel);
            fb.torque_nm[j] = dp.scale.torque_nm(d.torque, dp.rated_torque_nm);
            fb.state[j] = if self.not_op & (1 << i) != 0 {
                DriveState::Missing
            } else {
                d.power.drive_state()
            };
            fb.error_code[j] = d.error_code;
            fb.digital_inputs[j] = d.inputs;
        }
    }

    /// The first drive (bus order) in fault, as the error the runtime gets.
    pub(crate) fn first_fault(&self) -> Option<BackendError> {
        self.p.drives.iter().enumerate().find_map(|(i, dp)| {
            let d = &self.drv[i];
            d.power.is_fault().then_some(BackendError::DriveFault {
                joint: dp.joint as u16,
                code: d.error_code,
            })
        })
    }

    /// The exchange's result once the frame is accounted for: a command refused before
    /// or during encoding.
    fn refusal(
        &mut self,
        refused: Option<u16>,
        checked: Result<(), BackendError>,
    ) -> Result<(), BackendError> {
        if let Some(joint) = refused {
            self.stats.refused_commands += 1;
            return Err(BackendError::InvalidCommand { joint });
        }
        if checked.is_err() {
            self.stats.refused_commands += 1;
        }
        checked
    }

    fn check(&self, cmd: &Command) -> Result<(), BackendError> {
        let n = self.p.dof();
        if usize::from(cmd.dof) != n {
            return Err(BackendError::InvalidCommand {
                joint: cmd.dof.min(n as u16),
            });
        }
        if matches!(cmd.request, DriveRequest::Track) {
            for j in 0..n {
                if !(cmd.pos_rad[j].is_finite() && cmd.vel_rad_s[j].is_finite()) {
                    return Err(BackendError::InvalidCommand { joint: j as u16 });
                }
            }
        }
        Ok(())
    }
}

/// What a rejoin of drive `j` needs from the bus: its expected identity, and a DC
/// reference to take the time from (the first drive in OP with a DC unit, not `j`).
fn rejoin_context(
    p: &EthercatParams,
    snaps: &[DriveSnapshot],
    j: usize,
    not_op: u32,
    no_time_source: u32,
) -> RejoinContext {
    // A drive in OP first, else any other that may still keep the bus's time.
    let candidates = || {
        snaps
            .iter()
            .enumerate()
            .filter(move |(i, s)| *i != j && s.dc && no_time_source & (1 << i) == 0)
    };
    let reference = candidates()
        .find(|(i, _)| not_op & (1 << i) == 0)
        .or_else(|| candidates().next())
        .map(|(i, s)| (i, s.addr));
    RejoinContext {
        vendor: p.drives.get(j).map_or(0, |d| d.vendor_id),
        product: p.drives.get(j).map_or(0, |d| d.product_code),
        reference,
    }
}

/// The phase error of a frame from ethercrab's `next_cycle_wait` (the wait from the
/// frame's arrival at the reference clock to the next SYNC0 + shift): a frame exactly on
/// time leaves a whole period to wait; less is late. Wrapped into half a period either
/// side, so a frame just before its instant reads as early, not as a period late.
pub fn sync_phase_error_ns(period: Duration, next_cycle_wait: Duration) -> i32 {
    let t = period.as_nanos() as i64;
    if t <= 0 {
        return 0;
    }
    let late = (t - next_cycle_wait.as_nanos() as i64).rem_euclid(t);
    let wrapped = if late >= t / 2 { late - t } else { late };
    wrapped.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
}

/// Writes one drive's outputs; false (nothing written) when its image is shorter than
/// the layout (checked at bring-up: never, unless the group changed under us).
fn write_outputs(out: &mut [u8], l: &PdoLayout, cw: u16, target: i32, vel: i32) -> bool {
    if out.len() < l.out_len {
        return false;
    }
    out[l.controlword..l.controlword + 2].copy_from_slice(&cw.to_le_bytes());
    out[l.target_position..l.target_position + 4].copy_from_slice(&target.to_le_bytes());
    if let Some(o) = l.velocity_offset {
        out[o..o + 4].copy_from_slice(&vel.to_le_bytes());
    }
    if let Some(o) = l.mode_of_operation {
        out[o] = 8; // CSP
    }
    true
}

/// Decodes one drive's inputs into `d`; false (`d` untouched) when its image is shorter
/// than the layout (checked at bring-up: never, unless the group changed under us).
fn read_inputs(inp: &[u8], l: &PdoLayout, d: &mut DriveIo) -> bool {
    if inp.len() < l.in_len {
        return false;
    }
    let u16_at = |o: usize| u16::from_le_bytes([inp[o], inp[o + 1]]);
    let i32_at = |o: usize| i32::from_le_bytes([inp[o], inp[o + 1], inp[o + 2], inp[o + 3]]);
    d.statusword = u16_at(l.statusword);
    d.power = PowerState::from_statusword(d.statusword);
    d.actual = i32_at(l.position_actual);
    d.vel = l.velocity_actual.map_or(0, i32_at);
    d.torque = l.torque_actual.map_or(0, |o| u16_at(o) as i16);
    d.error_code = l.error_code.map_or(0, u16_at);
    d.mode_display = l.mode_display.map_or(0, |o| inp[o] as i8);
    d.inputs = l.digital_inputs.map_or(0, |o| i32_at(o) as u32);
    true
}

impl Backend for EthercatBackend {
    fn dof(&self) -> usize {
        self.p.dof()
    }

    fn name(&self) -> &'static str {
        "ethercat"
    }

    /// Bus scan, identity check, PDO mapping and CSP mode over CoE, SAFE-OP, OP; ends with
    /// process data running clean and every drive's power stage off (no drive is
    /// enabled here: see [`Backend::enable`]). On failure every drive is disabled and the
    /// bus is put back to INIT before the error is returned.
    fn start(
        &mut self,
        now: MonoTime,
        fb: &mut Feedback,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        match self.bring_up() {
            Ok(()) => {
                self.fill_feedback(now, 0, fb);
                Ok(())
            }
            Err(e) => Err(self.aborted(e)),
        }
    }

    /// The CiA 402 enable sequence with target = actual, one frame per bus period, then
    /// ethercrab's per-frame logging off for the loop (see `quiet_logs`). On failure
    /// every drive is disabled and the bus put back to INIT.
    fn enable(
        &mut self,
        now: MonoTime,
        fb: &mut Feedback,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        match self.enable_all() {
            Ok(()) => {
                self.fill_feedback(now, 0, fb);
                self.quiet_logs(true);
                Ok(())
            }
            Err(e) => Err(self.aborted(e)),
        }
    }

    /// Encodes `cmd`, exchanges one frame, decodes the inputs into `fb`. Never allocates.
    ///
    /// - A command that is not valid (wrong dof, non-finite setpoint in `Track`) is not
    ///   sent: every drive holds its last target, and `InvalidCommand` is returned.
    /// - `Track` enables drives that are not enabled (target = actual) and follows the
    ///   command once a drive is enabled, provided the first followed setpoint is within
    ///   `resume_window_rad` of where it was enabled (else `InvalidCommand` and the drive
    ///   holds). `FaultReset` takes the group through recovery: while a drive is in
    ///   fault, the others quick-stop (a joint that cannot follow stops the arm) and the
    ///   faulted ones get the rising edge of bit 7; then every drive is enabled again with
    ///   target = actual and held there until the runtime tracks again. `QuickStop` and
    ///   `Disable` send the CiA 402 commands; a drive still ramping down in quick stop is
    ///   not disabled by a `Track` or `FaultReset` until it is at rest.
    /// - Lost frame (not back within the frame timeout): `fb` keeps the last measurement
    ///   (bus_rtt_ns 0, `held` set); it is ridden through (`Ok`, counted) unless the loss
    ///   policy ([`crate::loss`]: `max_consecutive_lost`, `min_success_rate` over
    ///   `success_window`) says to report it: then `FrameLost`. Late frame (back after
    ///   `frame_late` but within the timeout): `fb` is filled and the frame counts as
    ///   answered: it passed the drives before the timeout, which by default (timeout and
    ///   SYNC0 shift half the period each) is before the next SYNC0, and without DC the
    ///   drives take it on arrival. Its command was applied in its cycle, so a late frame
    ///   is only counted (`frames_late`, the round trip in `bus_rtt`). Every cycle
    ///   rewrites every drive's outputs, so the next frame never carries a stale
    ///   command; meanwhile the drives hold the last one they got. A drive not in OP:
    ///   `DriveMissing`; working counter off: `WorkingCounter`; a drive in fault:
    ///   `DriveFault` with 0x603F.
    /// - Only a frame with no reply by the deadline is lost. A reply that came back but
    ///   could not be read (a malformed datagram, a frame header that does not fit), any
    ///   other error of the exchange, and a drive's outputs not written or inputs not read
    ///   are `Bus { kind }`, returned at once and never ridden through (`bus_errors`).
    /// - `fb.held` is set whenever some joint was not measured this cycle: nothing decoded
    ///   (a lost frame, a wire or bus error: `fb` keeps the last measurement, bus_rtt_ns
    ///   0), or a drive out of OP, a working counter off, a drive's inputs not read (the
    ///   others' fields are this cycle's).
    fn exchange(
        &mut self,
        now: MonoTime,
        cmd: &Command,
        fb: &mut Feedback,
    ) -> Result<(), BackendError> {
        let entry = Instant::now();
        self.stats.cycles += 1;
        let checked = self.check(cmd);
        let refused = match checked {
            Ok(()) => self.encode(cmd.request, Some(cmd)),
            // Not sent: hold (a stop request holds through its own path).
            Err(_) => self.encode(
                match cmd.request {
                    DriveRequest::QuickStop | DriveRequest::Disable => cmd.request,
                    _ => DriveRequest::FaultReset,
                },
                None,
            ),
        };
        let cycled = self.cycle(Some(now));
        if !self.decoded {
            // Nothing was measured: the last feedback stands, held, with no round trip.
            fb.bus_rtt_ns = 0;
            fb.held = true;
            fb.sync_phase_ns = None;
            if cycled != Err(BackendError::FrameLost) {
                // A wire error, a reply that could not be read, a command that did not go
                // out: reported at once, never ridden through.
                return cycled;
            }
            self.stats.frames_lost += 1;
            if self.loss.record(false) == Verdict::Report {
                return Err(BackendError::FrameLost);
            }
            return self.refusal(refused, checked);
        }
        let rtt = self.io.last_rtt().unwrap_or_default();
        let rtt_ns = rtt.as_nanos() as u64;
        let late = rtt > self.p.frame_late;
        if late {
            self.stats.frames_late += 1;
        }
        // Answered: whether late or not, the drives got this cycle's command.
        self.loss.record(true);
        self.stats.max_rtt_ns = self.stats.max_rtt_ns.max(rtt_ns);
        // The drives latched their inputs about half a round trip after the send.
        let sent_after = self
            .io
            .sent_at()
            .map_or(0, |s| s.saturating_duration_since(entry).as_nanos() as u64);
        self.fill_feedback(now.add_ns(sent_after + rtt_ns / 2), rtt_ns, fb);
        // A drive gone or a working counter off: reported first (the inputs of the drives
        // that did not answer are last cycle's).
        cycled?;
        if let Some(e) = self.first_fault() {
            self.stats.drive_faults += 1;
            return Err(e);
        }
        self.refusal(refused, checked)
    }

    /// Quick stop until the drives are at rest, disable voltage, then OP -> INIT.
    fn shutdown(&mut self, _now: MonoTime) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.quiet_logs(false);
        self.stop_and_disable().map_err(|e| e.into())
    }

    fn disable_now(
        &mut self,
        _now: MonoTime,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.quiet_logs(false);
        self.disable_at_once().map_err(|e| e.into())
    }

    /// `bus_*`: exchanges, frames lost / late / ridden through / reported, the longest
    /// run of lost frames, working-counter errors, other bus errors (`bus_errors`), the
    /// largest round trip (ns),
    /// drives brought back (started, completed, failed) and the longest rejoin (ns).
    fn hardware(&self, out: &mut dyn FnMut(&str, std::ops::Range<usize>)) {
        for (i, [vendor, product, revision, serial]) in self.identities.iter().enumerate() {
            let joint = self.p.drives.get(i).map_or(i, |d| d.joint);
            out(
                &format!("ethercat:{vendor:#010x}:{product:#010x}:rev{revision:#010x}:sn{serial}"),
                joint..joint + 1,
            );
        }
    }

    fn counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        let s = self.stats();
        out("bus_exchanges", s.cycles);
        out("bus_frames_lost", s.frames_lost);
        out("bus_frames_late", s.frames_late);
        out("bus_frames_ridden_through", s.frames_ridden_through);
        out("bus_frames_reported", s.frames_reported);
        out("bus_longest_loss_run", u64::from(s.longest_loss_run));
        out("bus_wkc_errors", s.wkc_errors);
        out("bus_errors", s.bus_errors);
        out("bus_max_rtt_ns", s.max_rtt_ns);
        out("bus_rejoins_started", s.rejoins_started);
        out("bus_rejoins_completed", s.rejoins_completed);
        out("bus_rejoins_failed", s.rejoins_failed);
        out("bus_longest_rejoin_ns", s.longest_rejoin_ns);
    }
}

impl Drop for EthercatBackend {
    fn drop(&mut self) {
        self.quiet_logs(false);
    }
}

/// Outputs of an enabled drive that follows: the runtime's command `c` once the drive
/// tracks (the first followed command must be within `window` of the position the drive
/// was enabled at, else its joint goes into `refused` and the drive holds), else hold.
fn follow_outputs(
    d: &mut DriveIo,
    dp: &DriveParams,
    c: Option<&Command>,
    window: f64,
    refused: &mut Option<u16>,
) -> (u16, i32, i32) {
    let Some(c) = c else {
        return (cia402::CW_ENABLE_OPERATION, d.hold, 0);
    };
    let pos = c.pos_rad[dp.joint];
    if !d.tracking {
        // Nothing jumps on resume.
        d.tracking = (pos - dp.scale.pos_rad(d.hold)).abs() <= window;
        if !d.tracking {
            refused.get_or_insert(dp.joint as u16);
            return (cia402::CW_ENABLE_OPERATION, d.hold, 0);
        }
    }
    d.hold = dp.scale.pos_counts(pos);
    let v = dp.scale.vel_counts_s(c.vel_rad_s[dp.joint]);
    (cia402::CW_ENABLE_OPERATION, d.hold, v)
}

/// Outputs of a drive that does not follow: target = actual, so nothing moves when it
/// enables, and the CiA 402 controlword for `request`, except that a drive out of OP
/// gets disable voltage, the group stops while a drive is in fault, and a drive still
/// ramping down in quick stop is not disabled mid-motion.
fn hold_outputs(
    d: &mut DriveIo,
    request: DriveRequest,
    missing: bool,
    stopping_group: bool,
    at_rest: bool,
) -> (u16, i32, i32) {
    d.tracking = false;
    d.hold = d.actual;
    let cw = match d.power {
        _ if missing => cia402::CW_DISABLE_VOLTAGE,
        PowerState::OperationEnabled if stopping_group => cia402::CW_QUICK_STOP,
        PowerState::QuickStopActive
            if (stopping_group || !at_rest) && !matches!(request, DriveRequest::Disable) =>
        {
            cia402::CW_QUICK_STOP
        }
        _ => cia402::controlword(request, d.power, d.last_cw),
    };
    (cw, d.actual, 0)
}

/// What one frame brought back: how the wait ended, the LRW's result (None: not back
/// by the deadline) and the rejoin's accesses (None: not made, or not back).
struct Exchanged {
    stall: Result<(), Stall>,
    lrw: Option<Result<CycleResult, ethercrab::error::Error>>,
    access: [Option<Result<(), ethercrab::error::Error>>; 2],
}

/// The LRW and the rejoin's access(es) in flight together: the cycle is over when the
/// LRW is back and the accesses too, or at the frame deadline. An access not back by
/// then is dropped (its frame slot released) and made again next cycle; the LRW's result
/// is kept either way, so a slow access never costs the cycle its frame.
fn exchange_frame(
    group: &OpGroup,
    md: &MainDevice<'_>,
    rj: &mut Rejoin,
    io: &mut Io,
    rejoining: bool,
    frame_timeout: Duration,
) -> Exchanged {
    let deadline = Instant::now() + frame_timeout;
    let acc = if rejoining { rj.acc } else { [None; 2] };
    let [tx0, tx1] = &rj.tx;
    let [rx0, rx1] = &mut rj.rx;
    let mut lrw_out = None;
    let mut out = [None, None];
    let stall = {
        let mut lrw = pin!(group.tx_rx(md));
        let mut s0 = pin!(acc[0].map(|a| access(md, a, tx0, rx0)));
        let mut s1 = pin!(acc[1].map(|a| access(md, a, tx1, rx1)));
        let both = poll_fn(|cx| {
            if out[0].is_none() {
                if let Some(Poll::Ready(v)) = s0.as_mut().as_pin_mut().map(|f| f.poll(cx)) {
                    out[0] = Some(v);
                }
            }
            if out[1].is_none() {
                if let Some(Poll::Ready(v)) = s1.as_mut().as_pin_mut().map(|f| f.poll(cx)) {
                    out[1] = Some(v);
                }
            }
            if lrw_out.is_none() {
                if let Poll::Ready(v) = lrw.as_mut().poll(cx) {
                    lrw_out = Some(v);
                }
            }
            let steps_done =
                (acc[0].is_none() || out[0].is_some()) && (acc[1].is_none() || out[1].is_some());
            if lrw_out.is_some() && steps_done {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        });
        io.block_on(both, Some(deadline), frame_timeout)
    };
    Exchanged {
        stall,
        lrw: lrw_out,
        access: out,
    }
}

#[cfg(test)]
#[path = "backend_tests.rs"]
mod tests;
