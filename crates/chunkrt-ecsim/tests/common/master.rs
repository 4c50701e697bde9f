//! Master-side helpers shared by the integration tests and the `master_veth` example: a CiA 402
//! enable sequence and a tracking run on a real ethercrab group, counting working-counter
//! errors. Kept free of test-only crates so the example can include it with `#[path]`.

#![allow(dead_code)]

use ethercrab::subdevice_group::Op;
use ethercrab::{DefaultLock, MainDevice, SubDeviceGroup};
use std::time::Duration;

/// Inputs of one drive with the default TxPDO layout at the start of its image.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DriveInputs {
    /// 0x6041.
    pub statusword: u16,
    /// 0x6064.
    pub position: i32,
    /// 0x606C.
    pub velocity: i32,
    /// 0x6077.
    pub torque: i16,
    /// 0x603F.
    pub error_code: u16,
}

/// Decode the default TxPDO layout.
pub fn decode_inputs(b: &[u8]) -> DriveInputs {
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
    let i32_at = |o: usize| i32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    DriveInputs {
        statusword: u16_at(0),
        position: i32_at(2),
        velocity: i32_at(6),
        torque: u16_at(10) as i16,
        error_code: u16_at(12),
    }
}

/// Encode the default RxPDO layout (controlword, target position) at the start of `b`.
pub fn encode_outputs(b: &mut [u8], controlword: u16, target: i32) {
    b[0..2].copy_from_slice(&controlword.to_le_bytes());
    b[2..6].copy_from_slice(&target.to_le_bytes());
}

/// Is the statusword "operation enabled"?
pub fn op_enabled(sw: u16) -> bool {
    sw & 0x6F == 0x27
}

/// Is the statusword "fault"?
pub fn faulted(sw: u16) -> bool {
    sw & 0x4F == 0x08
}

/// The next controlword of the CiA 402 enable sequence for a drive showing `sw`, given the
/// controlword sent last cycle (fault reset needs a rising edge of bit 7).
pub fn next_controlword(sw: u16, last_cw: u16) -> u16 {
    if faulted(sw) {
        if last_cw & 0x80 != 0 {
            0x00
        } else {
            0x80
        }
    } else if sw & 0x4F == 0x40 {
        0x06
    } else if sw & 0x6F == 0x21 {
        0x07
    } else if sw & 0x6F == 0x23 || op_enabled(sw) {
        0x0F
    } else {
        // Quick stop active or a transient state: ask to leave it cleanly.
        0x06
    }
}

/// Result of a tracking run.
#[derive(Clone, Debug, Default)]
pub struct RunReport {
    /// Cycles run.
    pub cycles: u64,
    /// Cycles whose LRW working counter differed from the expected one.
    pub wkc_errors: u64,
    /// Cycles whose exchange failed (timeout, lost frame).
    pub exchange_errors: u64,
    /// First cycle at which every drive was operation enabled.
    pub all_enabled_at: Option<u64>,
    /// Largest |commanded - actual| once all drives were enabled, over all drives (counts),
    /// comparing with the target sent two cycles earlier (the process-data pipeline delay).
    pub max_tracking_error: i64,
    /// Final inputs of each drive.
    pub last_inputs: Vec<DriveInputs>,
    /// Working counter of the last answered exchange.
    pub last_wkc: u16,
    /// (drive, 0x603F) each time a drive newly showed fault.
    pub faults_seen: Vec<(usize, u16)>,
    /// Cycle at which each fault in `faults_seen` was seen.
    pub fault_cycles: Vec<u64>,
}

/// Enable every drive of `group` and let them follow a sine of `amplitude` counts at `freq_hz`
/// around their enable position for `cycles` cycles. `period` paces the loop (None: as fast as
/// the wire answers, with the simulator's virtual clock standing in for time). Every cycle the
/// LRW working counter must equal 3 per drive (+1 read inputs, +2 write outputs).
pub async fn enable_and_track<const N: usize, const P: usize>(
    md: &MainDevice<'_>,
    group: &SubDeviceGroup<N, P, DefaultLock, Op>,
    cycles: u64,
    period: Option<Duration>,
    amplitude: f64,
    freq_hz: f64,
) -> RunReport {
    let n = group.len();
    let expected_wkc = 3 * n as u16;
    let mut report = RunReport {
        last_inputs: vec![DriveInputs::default(); n],
        ..RunReport::default()
    };
    let mut last_cw = vec![0u16; n];
    let mut origin = vec![None::<i32>; n];
    let mut history = vec![[0i32; 3]; n];
    let mut tick = period.map(async_io::Timer::interval);
    let mut t_enabled = 0u64;
    for cycle in 0..cycles {
        if let Some(t) = tick.as_mut() {
            futures_lite::StreamExt::next(t).await;
        }
        let mut all_enabled = true;
        for (i, sd) in group.iter(md).enumerate() {
            let mut io = sd.io_raw_mut();
            let inp = decode_inputs(io.inputs());
            if faulted(inp.statusword) && !faulted(report.last_inputs[i].statusword) {
                report.faults_seen.push((i, inp.error_code));
                report.fault_cycles.push(cycle);
            }
            report.last_inputs[i] = inp;
            let cw = next_controlword(inp.statusword, last_cw[i]);
            let enabled = op_enabled(inp.statusword);
            all_enabled &= enabled;
            let target = match (enabled, origin[i]) {
                (true, Some(p0)) => {
                    let t = t_enabled as f64 * 1e-3;
                    p0 + (amplitude * (2.0 * std::f64::consts::PI * freq_hz * t).sin()) as i32
                }
                (true, None) => {
                    origin[i] = Some(inp.position);
                    inp.position
                }
                (false, _) => {
                    origin[i] = None;
                    inp.position
                }
            };
            if report.all_enabled_at.is_some() && enabled {
                let err = i64::from(history[i][1]) - i64::from(inp.position);
                report.max_tracking_error = report.max_tracking_error.max(err.abs());
            }
            history[i] = [target, history[i][0], history[i][1]];
            encode_outputs(io.outputs(), cw, target);
            last_cw[i] = cw;
        }
        if all_enabled {
            if report.all_enabled_at.is_none() {
                report.all_enabled_at = Some(cycle);
            }
            t_enabled += 1;
        }
        match group.tx_rx(md).await {
            Ok(r) => {
                report.last_wkc = r.working_counter;
                if r.working_counter != expected_wkc {
                    report.wkc_errors += 1;
                }
            }
            Err(_) => report.exchange_errors += 1,
        }
        report.cycles += 1;
    }
    report
}
