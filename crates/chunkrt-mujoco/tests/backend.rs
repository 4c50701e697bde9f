//! The MuJoCo arm as a backend: what it refuses (a model that is not the configured
//! one, one that does not fit), what it repeats (a run to the bit), what its drives do
//! with requests, faults and a transport delay, and that `exchange` allocates nothing,
//! in Rust or in MuJoCo.

mod common;

use chunkrt_alloc_count::{count_allocations, CountingAllocator};
use chunkrt_core::{Backend, BackendError, DriveRequest, DriveState, Feedback, MonoTime};
use chunkrt_mujoco::{file_sha256, MujocoArm, MujocoError, MujocoParams};
use common::{cycle, panda_at, started, track, T0};

const START: [f64; 7] = [0.0, -0.4, 0.0, -1.6, 0.0, 1.2, 0.8];

fn tmp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("chunkrt-mujoco-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_model_whose_digest_is_not_the_configured_one_is_refused_by_name() {
    let mut p = panda_at(&START);
    let real = file_sha256(&p.model_path).unwrap();
    p.model_sha256 = Some(real.clone());
    assert!(
        MujocoArm::new(p.clone()).is_ok(),
        "the right digest is taken"
    );
    p.model_sha256 = Some("ab".repeat(32));
    let err = MujocoArm::new(p).err().expect("a wrong digest is refused");
    let msg = err.to_string();
    assert!(matches!(err, MujocoError::Digest { .. }), "{msg}");
    assert!(msg.contains("panda.xml") && msg.contains(&real), "{msg}");
    assert!(msg.contains(&"ab".repeat(32)), "{msg}");
}

#[test]
fn a_model_that_does_not_fit_is_refused_with_what_is_wrong() {
    let mut p = panda_at(&START);
    p.joints = 6;
    let msg = MujocoArm::new(p).err().unwrap().to_string();
    assert!(
        msg.contains("has 7 joints, the configuration drives 6"),
        "{msg}"
    );

    let dir = tmp_dir("fit");
    let slider = dir.join("slider.xml");
    std::fs::write(
        &slider,
        r#"<mujoco><worldbody><body><joint type="slide" actuatorfrcrange="-5 5"/>
           <inertial mass="1" pos="0 0 0" diaginertia="1 1 1"/></body></worldbody></mujoco>"#,
    )
    .unwrap();
    let mut p = MujocoParams::panda(slider.clone());
    p.joints = 1;
    let msg = MujocoArm::new(p).err().unwrap().to_string();
    assert!(msg.contains("joint 0 is not a hinge"), "{msg}");

    let broken = dir.join("broken.xml");
    std::fs::write(&broken, "<mujoco><worldbody><body>").unwrap();
    let mut p = MujocoParams::panda(broken);
    p.joints = 1;
    let msg = MujocoArm::new(p).err().unwrap().to_string();
    // Refused where chunkrt reads it for the files it names, before MuJoCo sees it.
    assert!(
        msg.contains("broken.xml is not XML: the root node was opened but never closed"),
        "{msg}"
    );

    let mut p = MujocoParams::panda(dir.join("missing.xml"));
    p.joints = 1;
    let msg = MujocoArm::new(p).err().unwrap().to_string();
    assert!(
        msg.contains("missing.xml: cannot open the MuJoCo model"),
        "{msg}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn parameters_out_of_range_are_named() {
    let mut p = panda_at(&START);
    p.bandwidth_hz = 500.0;
    let msg = MujocoArm::new(p).err().unwrap().to_string();
    assert!(
        msg.contains("bandwidth_hz") && msg.contains("too fast"),
        "{msg}"
    );
    let mut p = panda_at(&START);
    p.max_torque_nm = Some([-1.0; chunkrt_core::MAX_DOF]);
    let msg = MujocoArm::new(p).err().unwrap().to_string();
    assert!(msg.contains("max_torque_nm of joint 0"), "{msg}");
    let mut p = panda_at(&START);
    p.transport_delay_ns = 200_000_000;
    let msg = MujocoArm::new(p).err().unwrap().to_string();
    assert!(
        msg.contains("transport_delay") && msg.contains("at most 100 ms"),
        "{msg}"
    );
}

/// A motion every joint takes part in: each joint swings about the start pose.
fn swing(k: u64) -> [f64; 7] {
    let t = k as f64 * 1e-3;
    let mut q = START;
    for (j, x) in q.iter_mut().enumerate() {
        *x += 0.3 * (2.0 * std::f64::consts::PI * (0.5 + 0.1 * j as f64) * t).sin();
    }
    q
}

/// `cycles` exchanges of the swing from an arm started at `t_start`, on the deadlines
/// `T0 + k ms`; every feedback field of every cycle, as bits.
fn run_bits(t_start: MonoTime, cycles: u64) -> Vec<u64> {
    let mut arm = MujocoArm::new(panda_at(&START)).unwrap();
    let mut fb = Feedback::default();
    arm.start(t_start, &mut fb).unwrap();
    let mut bits = Vec::new();
    for k in 1..=cycles {
        arm.exchange(cycle(k), &track(&swing(k)), &mut fb).unwrap();
        for j in 0..7 {
            bits.extend([fb.pos_rad[j], fb.vel_rad_s[j], fb.torque_nm[j]].map(f64::to_bits));
        }
    }
    bits
}

/// Two runs of the same commands on the same deadlines repeat to the bit, wherever
/// before the first deadline the arm was started (it rests on its brakes until then).
#[test]
fn a_run_repeats_to_the_bit_wherever_it_was_started() {
    let a = run_bits(T0, 400);
    let b = run_bits(T0, 400);
    assert!(a == b, "two identical runs differ");
    for late in [37_000, 999_999] {
        let c = run_bits(T0.add_ns(late), 400);
        assert!(
            a == c,
            "a run started {late} ns later on the same deadlines differs"
        );
    }
}

#[test]
fn the_swing_is_tracked_by_every_joint_within_the_loops_lag() {
    let (mut arm, mut fb) = started(panda_at(&START));
    let mut worst = [0.0f64; 7];
    for k in 1..=3_000 {
        let target = swing(k);
        arm.exchange(cycle(k), &track(&target), &mut fb).unwrap();
        if k > 1_000 {
            let was = swing(k - 1);
            for (j, w) in worst.iter_mut().enumerate() {
                *w = w.max((fb.pos_rad[j] - was[j]).abs());
            }
        }
    }
    // A 20 Hz position loop tracking a 0.3 rad swing at 0.5-1.1 Hz (no velocity feed-
    // forward here: the commands carry no velocity) lags by about 0.3 x 2 pi f / (2 pi
    // 20): 8-17 mrad. Every joint must follow: none may be stuck, none run away.
    for (j, w) in worst.iter().enumerate() {
        assert!(
            *w > 1e-3 && *w < 0.03,
            "joint {}: worst error {w} rad",
            j + 1
        );
    }
}

#[test]
fn an_invalid_command_is_refused_and_changes_nothing() {
    let (mut arm, mut fb) = started(panda_at(&START));
    arm.exchange(cycle(1), &track(&START), &mut fb).unwrap();
    let mut bad = track(&swing(500));
    bad.pos_rad[3] = f64::NAN;
    let err = arm.exchange(cycle(2), &bad, &mut fb).unwrap_err();
    assert_eq!(err, BackendError::InvalidCommand { joint: 3 });
    for k in 3..=200 {
        arm.exchange(cycle(k), &track(&START), &mut fb).unwrap();
    }
    let moved = (0..7)
        .map(|j| (fb.pos_rad[j] - START[j]).abs())
        .fold(0.0, f64::max);
    assert!(
        moved < 1e-4,
        "the refused command moved the arm by {moved} rad"
    );
}

#[test]
fn a_drive_fault_is_reported_until_reset_and_a_quick_stop_brings_the_arm_to_rest() {
    let (mut arm, mut fb) = started(panda_at(&START));
    for k in 1..=500 {
        arm.exchange(cycle(k), &track(&swing(k)), &mut fb).unwrap();
    }
    arm.inject_drive_fault(4, 0x2310).unwrap();
    let err = arm
        .exchange(cycle(501), &track(&swing(501)), &mut fb)
        .unwrap_err();
    assert_eq!(
        err,
        BackendError::DriveFault {
            joint: 4,
            code: 0x2310
        }
    );
    assert_eq!(fb.state[4], DriveState::Fault);
    assert_eq!(fb.torque_nm[4], 0.0, "a faulted drive applies no torque");
    let mut reset = track(&swing(502));
    reset.request = DriveRequest::FaultReset;
    arm.exchange(cycle(502), &reset, &mut fb).unwrap();
    assert_eq!(fb.state[4], DriveState::Enabled);

    let mut stop = track(&swing(503));
    stop.request = DriveRequest::QuickStop;
    for k in 503..=3_000 {
        arm.exchange(cycle(k), &stop, &mut fb).unwrap();
    }
    assert!(
        fb.state[..7].iter().all(|s| *s == DriveState::QuickStop),
        "{:?}",
        fb.state
    );
    assert!(
        arm.at_rest(),
        "the quick stop left the arm moving: {:?}",
        &fb.vel_rad_s[..7]
    );
    arm.shutdown(cycle(3_001)).unwrap();
    let mut off = Feedback::default();
    arm.fill_feedback(cycle(3_001), &mut off);
    assert!(off.state[..7].iter().all(|s| *s == DriveState::Disabled));
}

/// The drive acts on a setpoint the transport delay after it arrived, not before:
/// the torque of the arm given a step at cycle 100 is the undelayed arm's torque,
/// shifted by the delay, to the bit (both run on the same physics steps).
#[test]
fn a_transport_delay_shifts_the_drives_response_by_exactly_the_delay() {
    let run = |delay_ns: u64| {
        let mut p = panda_at(&START);
        p.transport_delay_ns = delay_ns;
        // At rest on target to the bit until the step, delayed or not: no gravity, an
        // exact encoder.
        p.gravity = false;
        p.encoder_counts_per_rev = 0;
        let (mut arm, mut fb) = started(p);
        let mut target = START;
        let mut torque = Vec::new();
        for k in 1..=400u64 {
            if k == 100 {
                target[1] += 0.05;
            }
            arm.exchange(cycle(k), &track(&target), &mut fb).unwrap();
            torque.push(fb.torque_nm[1]);
        }
        torque
    };
    let prompt = run(0);
    let late = run(7_000_000);
    // The feedback of exchange k carries the torque of the steps before it: the step
    // latched at exchange 100 (index 99) shows from exchange 101 on.
    assert_eq!(prompt[..100], [0.0; 100][..], "at rest before the step");
    assert!(
        prompt[100].abs() > 1.0,
        "the step moves the shoulder: {}",
        prompt[100]
    );
    assert_eq!(
        late[..107],
        [0.0; 107][..],
        "nothing before the delay has passed"
    );
    assert_eq!(
        late[107..],
        prompt[100..393],
        "the delayed response is the prompt one, 7 ms later"
    );
}

// --- No allocation in exchange, by Rust or by MuJoCo -----------------------------

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

thread_local! {
    /// MuJoCo allocations made on this thread while the hook is set (other tests load
    /// models on other threads meanwhile).
    static MUJOCO_ALLOCATIONS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn mujoco_allocations() -> u64 {
    MUJOCO_ALLOCATIONS.with(std::cell::Cell::get)
}

unsafe extern "C" fn counting_malloc(size: usize) -> *mut std::ffi::c_void {
    MUJOCO_ALLOCATIONS.with(|c| c.set(c.get() + 1));
    // SAFETY: plain malloc; MuJoCo frees it through `counting_free`.
    unsafe { libc::malloc(size) }
}

unsafe extern "C" fn counting_free(ptr: *mut std::ffi::c_void) {
    // SAFETY: `ptr` came from malloc (ours, or MuJoCo's default before the hook).
    unsafe { libc::free(ptr) }
}

#[test]
fn exchange_allocates_nothing_in_rust_or_in_mujoco() {
    // The plate model with its wrist sensor read every exchange.
    let mut p = panda_at(&START);
    p.model_path = p.model_path.with_file_name("panda-plate.xml");
    p.ft_site = Some("ft".into());
    p.transport_delay_ns = 3_000_000;
    let (mut arm, mut fb) = started(p);
    // SAFETY: MuJoCo's allocation hooks, plain malloc and free: what other threads of
    // this test binary allocate through them meanwhile is valid and not counted here.
    unsafe {
        mujoco_rs::mujoco_c::mju_user_malloc = Some(counting_malloc);
        mujoco_rs::mujoco_c::mju_user_free = Some(counting_free);
    }
    let mut bad = track(&START);
    bad.pos_rad[0] = f64::INFINITY;
    let before = mujoco_allocations();
    let ((), rust) = count_allocations(|| {
        for k in 1..=2_000u64 {
            let mut cmd = track(&swing(k));
            cmd.request = match k % 500 {
                100 => DriveRequest::QuickStop,
                101 => DriveRequest::FaultReset,
                300 => DriveRequest::Disable,
                _ => DriveRequest::Track,
            };
            let cmd = if k % 700 == 0 { bad } else { cmd };
            let _ = arm.exchange(cycle(k), &cmd, &mut fb);
        }
    });
    let mujoco = mujoco_allocations() - before;
    unsafe {
        mujoco_rs::mujoco_c::mju_user_malloc = None;
        mujoco_rs::mujoco_c::mju_user_free = None;
    }
    assert!(fb.wrench.is_some(), "the sensor was read");
    assert_eq!(rust, 0, "Rust allocations in exchange");
    assert_eq!(mujoco, 0, "MuJoCo allocations in exchange");
    // The hook sees MuJoCo's allocations: building an arm makes some.
    unsafe { mujoco_rs::mujoco_c::mju_user_malloc = Some(counting_malloc) };
    let seen = mujoco_allocations();
    let arm2 = MujocoArm::new(panda_at(&START)).unwrap();
    let made = mujoco_allocations() - seen;
    unsafe { mujoco_rs::mujoco_c::mju_user_malloc = None };
    drop(arm2);
    assert!(
        made > 0,
        "the hook counts MuJoCo's allocations (loading a model made {made})"
    );
}

/// A drive that faults mid-motion drops its torque; its holding brake keeps the joint
/// where it was instead of letting the arm fall. The same fault on an arm without brakes
/// lets the shoulder fall by more than 0.1 rad in the same half second.
#[test]
fn a_faulted_drive_leaves_its_joint_on_the_brake_not_falling() {
    let fall = |brakes: bool| {
        let mut p = panda_at(&START);
        p.brakes = brakes;
        let (mut arm, mut fb) = started(p);
        for k in 1..=500 {
            arm.exchange(cycle(k), &track(&swing(k)), &mut fb).unwrap();
        }
        arm.inject_drive_fault(1, 0x2310).unwrap();
        let _ = arm.exchange(cycle(501), &track(&swing(501)), &mut fb);
        let at_fault = arm.joint(1).unwrap().pos_rad;
        let mut worst: f64 = 0.0;
        for k in 502..=1_000 {
            let _ = arm.exchange(cycle(k), &track(&swing(k)), &mut fb);
            worst = worst.max((arm.joint(1).unwrap().pos_rad - at_fault).abs());
        }
        assert_eq!(fb.torque_nm[1], 0.0, "the faulted drive reports no torque");
        worst
    };
    let braked = fall(true);
    let unbraked = fall(false);
    println!("shoulder after its drive faulted: {braked:.2e} rad on the brake, {unbraked:.3} rad without");
    // Measured: the brake, engaging on the shoulder in mid-swing, holds it within 0.77
    // mrad of where it engaged (gated at 3 mrad); without it the shoulder fell 1.4 rad.
    assert!(
        braked < 0.003,
        "on the brake the shoulder moved {braked} rad"
    );
    assert!(
        unbraked > 0.1,
        "without a brake the shoulder fell only {unbraked} rad"
    );
}
