//! Range and consistency checks, and conversion into the core's typed settings.

use crate::schema::*;
use crate::PerJoint;
use chunkrt_core::{
    ms_to_ns, DomainBox, ExecutorConfig, JointLimit, JointLimits, Resume, SeamMode, MAX_DOF,
    MAX_HORIZON,
};

type Check = Result<(), (String, String)>;

/// Lowest cutoff of the action filter (`limits.action_filter_hz`): a time constant of
/// 1.6 s, longer than any chunk's horizon; below it the filter holds the arm back for
/// seconds (at `5e-324` its coefficient is 0 and the arm never moved).
pub const MIN_ACTION_FILTER_HZ: f64 = 0.1;
/// Smallest continuous torque rating (`limits.thermal.continuous_torque_nm`): no drive
/// is rated below a milli-newton-metre, and the load is the measured torque squared
/// over the rating squared.
pub const MIN_RATED_TORQUE_NM: f64 = 1e-3;

/// Shortest bus period (`control.period_ms`) a run accepts.
pub const MIN_PERIOD_MS: f64 = 1.0;
/// Longest bus period a run accepts.
pub const MAX_PERIOD_MS: f64 = 20.0;

/// `ms` rounded up to whole control periods of `period_ms` (`ms` itself for a
/// non-positive period).
pub fn ticks_ms(period_ms: f64, ms: f64) -> f64 {
    if period_ms > 0.0 && ms.is_finite() {
        (ms / period_ms - 1e-9).ceil().max(0.0) * period_ms
    } else {
        ms
    }
}

/// The smallest sound `max_chunk_age_ms`: the inference thread observes on the first
/// control tick at or after each chunk period's slot (`next_slot`), so successive
/// chunks' observations lie up to `chunk_period_ms` rounded up to control periods
/// apart; the successor arrives `inference_ms` later (at least one control period is
/// assumed when none is known) and is spliced on the first control tick after that.
/// The playing chunk must not have expired until then.
pub fn min_chunk_age_ms(period_ms: f64, chunk_period_ms: f64, inference_ms: f64) -> f64 {
    ticks_ms(period_ms, chunk_period_ms) + ticks_ms(period_ms, inference_ms).max(period_ms.max(0.0))
}

fn fail(path: &str, message: impl Into<String>) -> Check {
    Err((path.to_string(), message.into()))
}

/// The largest `limits.thermal.initial_load`: twice the rating, past any drive's own
/// I²t trip.
const MAX_INITIAL_LOAD: f64 = 2.0;

/// A listener's `listen` (`[metrics]`, `[live_view]`): an address and port, loopback
/// unless `allow_remote`.
fn check_listen(section: &str, listen: &str, allow_remote: bool) -> Check {
    let path = format!("{section}.listen");
    let addr: std::net::SocketAddr = listen.parse().map_err(|_| {
        (
            path.clone(),
            format!(
                "`{listen}` is not an address and port: expected e.g. \"127.0.0.1:9464\" or \"[::1]:9464\""
            ),
        )
    })?;
    if !addr.ip().is_loopback() && !allow_remote {
        return fail(
            &path,
            format!(
                "`{listen}` is not a loopback address: anyone who reaches it reads what \
                 it serves; set allow_remote = true to mean it, or listen on 127.0.0.1"
            ),
        );
    }
    Ok(())
}

fn range(path: &str, v: f64, lo: f64, hi: f64) -> Check {
    if v.is_finite() && v >= lo && v <= hi {
        Ok(())
    } else {
        fail(path, format!("expected a value in [{lo}, {hi}], got {v}"))
    }
}

impl Config {
    /// Checks ranges and cross-field consistency; returns `(key path, message)`.
    pub(crate) fn validate(&self) -> Check {
        // Every number first, by one rule (`numbers`): finite, 0 or of a physical
        // magnitude, a duration not negative; then each key's own range.
        crate::numbers::check_all(self)?;
        let n = self.control.joints;
        if n == 0 || n > MAX_DOF {
            return fail(
                "control.joints",
                format!("expected 1 to {MAX_DOF} joints, got {n}"),
            );
        }
        // The documented bus period range: below 1 ms the loop cannot keep its
        // deadlines on the hosts chunkrt targets (0.05 ms ran at 20 kHz with
        // thousands of overruns and exit 0).
        let period_ms = self.control.period_ms;
        if !(period_ms.is_finite() && (MIN_PERIOD_MS..=MAX_PERIOD_MS).contains(&period_ms)) {
            return fail(
                "control.period_ms",
                format!(
                    "expected a bus period of {MIN_PERIOD_MS} to {MAX_PERIOD_MS} ms, got {period_ms}"
                ),
            );
        }
        self.check_wear()?;
        let q = self.control.quick_stop_timeout_ms;
        if !(q.is_finite() && (10.0..=10_000.0).contains(&q)) {
            return fail(
                "control.quick_stop_timeout_ms",
                format!("expected 10 to 10000 ms, got {q}"),
            );
        }
        if !(1..=99).contains(&self.control.priority) {
            return fail(
                "control.priority",
                format!(
                    "expected a SCHED_FIFO priority 1-99, got {}",
                    self.control.priority
                ),
            );
        }
        range(
            "inference.chunk_period_ms",
            self.inference.chunk_period_ms,
            1.0,
            10_000.0,
        )?;
        range(
            "inference.start_offset_ms",
            self.inference.start_offset_ms,
            -1000.0,
            1000.0,
        )?;
        self.validate_policy(n)?;
        self.validate_executor()?;
        self.validate_limits(n)?;
        self.check_episodes()?;
        if let Some(op) = &self.operator {
            if op.socket.is_none() && !op.stdin {
                return fail(
                    "operator",
                    "opens no channel: set socket = \"PATH\" and/or stdin = true",
                );
            }
            if op.group.is_some() && op.socket.is_none() {
                return fail(
                    "operator.group",
                    "names who may use the socket, and there is none: set socket = \"PATH\"",
                );
            }
        }
        if let Some(m) = &self.metrics {
            check_listen("metrics", &m.listen, m.allow_remote)?;
            range("metrics.linger_ms", m.linger_ms, 0.0, 600_000.0)?;
        }
        if let Some(v) = &self.live_view {
            check_listen("live_view", &v.listen, v.allow_remote)?;
            range("live_view.rate_hz", v.rate_hz, 0.1, 1000.0)?;
            if !(1..=64).contains(&v.max_clients) {
                return fail(
                    "live_view.max_clients",
                    format!("expected 1 to 64, got {}", v.max_clients),
                );
            }
            if !self.telemetry.record {
                return fail(
                    "live_view",
                    "shows the recording's channels, and telemetry.record = false makes none",
                );
            }
        }
        if let Some(d) = &self.domain {
            d.pos_min_rad
                .check("domain.pos_min_rad", n, |_| true, "a finite number")?;
            d.pos_max_rad
                .check("domain.pos_max_rad", n, |_| true, "a finite number")?;
            for j in 0..n {
                if d.pos_min_rad.get(j) >= d.pos_max_rad.get(j) {
                    return fail(
                        "domain.pos_max_rad",
                        format!("joint {j}: upper bound must exceed the lower bound"),
                    );
                }
            }
        }
        match self.backend.kind {
            BackendKind::Sim => {
                let sim = self.sim.clone().unwrap_or_default();
                sim.validate(n)?;
                sim.check_start_pose(n, &self.limits)?;
            }
            BackendKind::Ethercat => match &self.ethercat {
                Some(ec) => {
                    if self.limits.thermal.is_some()
                        && !ec.pdo.tx.contains(&crate::ethercat::PdoEntry::TorqueActual)
                    {
                        return fail(
                            "limits.thermal",
                            "the thermal monitor reads the drives' torque: ethercat.pdo.tx \
                             must map torque_actual (0x6077)",
                        );
                    }
                    let l = &self.limits;
                    ec.validate(n, self.control.period_ms, |j| {
                        l.pos_min_rad.get(j).abs().max(l.pos_max_rad.get(j).abs())
                    })?
                }
                None => {
                    return fail(
                        "ethercat",
                        "`backend.kind = \"ethercat\"` needs an [ethercat] section \
                         (interface and one [[ethercat.drive]] per joint)",
                    )
                }
            },
            BackendKind::Mujoco if self.mujoco.is_none() => {
                return fail(
                    "mujoco",
                    "`backend.kind = \"mujoco\"` needs a [mujoco] section (model and \
                     model_sha256 at least)",
                )
            }
            BackendKind::Mujoco => {}
        }
        // Checked whatever the backend: with `kind = "ethercat"` it is the arm that
        // `chunkrt ecsim --arm` puts behind the simulated drives.
        if let Some(m) = &self.mujoco {
            m.validate(n, &self.limits)?;
        }
        if self.telemetry.ring_capacity < 64 || self.telemetry.ring_capacity > 1 << 22 {
            return fail(
                "telemetry.ring_capacity",
                format!(
                    "expected 64 to {} records, got {}",
                    1 << 22,
                    self.telemetry.ring_capacity
                ),
            );
        }
        range(
            "telemetry.drain_interval_ms",
            self.telemetry.drain_interval_ms,
            1.0,
            1000.0,
        )?;
        range(
            "telemetry.status_interval_ms",
            self.telemetry.status_interval_ms,
            0.0,
            60_000.0,
        )?;
        for (key, v, lo) in [
            (
                "telemetry.gate_log_max_mb",
                self.telemetry.gate_log_max_mb,
                0.0,
            ),
            (
                "telemetry.record_segment_mb",
                self.telemetry.record_segment_mb,
                0.01,
            ),
            (
                "telemetry.record_segment_s",
                self.telemetry.record_segment_s,
                1.0,
            ),
            ("telemetry.record_max_mb", self.telemetry.record_max_mb, 0.0),
        ] {
            range(key, v, lo, 1_000_000.0)?;
        }
        range(
            "telemetry.intervention_before_s",
            self.telemetry.intervention_before_s,
            0.0,
            30.0,
        )?;
        range(
            "telemetry.intervention_after_s",
            self.telemetry.intervention_after_s,
            0.0,
            30.0,
        )?;
        self.inject.validate(self.control.period_ms)?;
        if let Some(b) = &self.inject.feedback_bias_rad {
            b.check(
                "inject.feedback_bias_rad",
                self.control.joints,
                |v| v.abs() <= 0.5,
                "an offset within +-0.5 rad",
            )?;
        }
        if let Some(c) = &self.camera {
            c.validate()?;
        } else if self.inject.camera_is_disturbed() {
            return fail(
                "inject.camera_delay",
                "camera delay or stall injected, but the config has no [camera]",
            );
        }
        self.validate_probe()?;
        self.validate_playable()
    }

    /// The probe of `[inject.probe]` against the arm and the gate's limits: a probe
    /// whose own speed, acceleration or jerk would take more than a quarter of the
    /// probed joint's limit is refused before anything moves (the gate would clamp
    /// it, and a clamped probe measures the gate, not the loop).
    pub(crate) fn validate_probe(&self) -> Check {
        let Some(p) = &self.inject.probe else {
            return Ok(());
        };
        p.validate(self.control.period_ms, self.control.joints)?;
        let [_, v, a, jk] = p.peaks();
        let l = &self.limits;
        let j = p.joint;
        let share = crate::inject::PROBE_LIMIT_SHARE;
        for (what, peak, limit, key) in [
            ("speed", v, l.max_vel_rad_s.get(j), "max_vel_rad_s"),
            ("acceleration", a, l.max_acc_rad_s2.get(j), "max_acc_rad_s2"),
            ("jerk", jk, l.max_jerk_rad_s3.get(j), "max_jerk_rad_s3"),
        ] {
            if peak > share * limit {
                return fail(
                    "inject.probe.amplitude_rad",
                    format!(
                        "the probe's peak {what} {peak:.4} (sum over its {} components of \
                         amplitude x (2 pi f)^k) is more than {}% of joint {j}'s \
                         limits.{key} ({limit}): lower the amplitude or the frequencies",
                        p.freqs_hz.len(),
                        share * 100.0
                    ),
                );
            }
        }
        Ok(())
    }

    /// Cross-field checks: settings each in range that together leave no chunk
    /// able to play (every one expired, rejected or run out before its successor).
    fn validate_playable(&self) -> Check {
        let e = &self.executor;
        let p = &self.policy;
        let chunk_period = self.inference.chunk_period_ms;
        let min_age = min_chunk_age_ms(self.control.period_ms, chunk_period, p.deadline_ms);
        if e.max_chunk_age_ms < min_age {
            let period = self.control.period_ms;
            let inference = if p.deadline_ms > 0.0 {
                format!("policy.deadline_ms {}", p.deadline_ms)
            } else {
                "one tick of inference (no policy.deadline_ms)".to_string()
            };
            return fail(
                "executor.max_chunk_age_ms",
                format!(
                    "{} ms expires chunks before their successors play; set it to {min_age} \
                     or more: inference.chunk_period_ms {chunk_period} and {inference}, each \
                     rounded up to control.period_ms {period} ticks ({} + {})",
                    e.max_chunk_age_ms,
                    ticks_ms(period, chunk_period),
                    min_age - ticks_ms(period, chunk_period),
                ),
            );
        }
        let offset = self.inference.start_offset_ms;
        if offset.abs() > e.max_time_offset_ms {
            return fail(
                "inference.start_offset_ms",
                format!(
                    "{offset} ms puts every chunk's start further from now than \
                     executor.max_time_offset_ms {}: every chunk would be rejected",
                    e.max_time_offset_ms
                ),
            );
        }
        if matches!(p.kind, PolicyKind::Scripted | PolicyKind::Servo) {
            // ONNX models take horizon and dt from their manifest, checked at bring-up.
            if p.dt_ms < e.dt_min_ms || p.dt_ms > e.dt_max_ms {
                return fail(
                    "policy.dt_ms",
                    format!(
                        "{} ms is outside the executor's accepted chunk dt \
                         [executor.dt_min_ms {}, executor.dt_max_ms {}]: every chunk would be rejected",
                        p.dt_ms, e.dt_min_ms, e.dt_max_ms
                    ),
                );
            }
            if p.horizon < e.min_len {
                return fail(
                    "policy.horizon",
                    format!(
                        "{} setpoints is below executor.min_len {}: every chunk would be rejected",
                        p.horizon, e.min_len
                    ),
                );
            }
            let span = (p.horizon - 1) as f64 * p.dt_ms;
            if span <= chunk_period + e.lookahead_ms {
                return fail(
                    "policy.horizon",
                    format!(
                        "a chunk of {} setpoints {} ms apart spans {span} ms, which runs out \
                         before the next one (inference.chunk_period_ms {chunk_period} + \
                         executor.lookahead_ms {}): expected a span above {} ms",
                        p.horizon,
                        p.dt_ms,
                        e.lookahead_ms,
                        chunk_period + e.lookahead_ms
                    ),
                );
            }
        }
        Ok(())
    }

    fn validate_policy(&self, n: usize) -> Check {
        let p = &self.policy;
        if p.horizon < 2 || p.horizon > MAX_HORIZON {
            return fail(
                "policy.horizon",
                format!("expected 2 to {MAX_HORIZON} setpoints, got {}", p.horizon),
            );
        }
        range("policy.dt_ms", p.dt_ms, 1.0, 100.0)?;
        range("policy.max_vel_rad_s", p.max_vel_rad_s, 1e-3, 100.0)?;
        range("policy.deadline_ms", p.deadline_ms, 0.0, 10_000.0)?;
        if !matches!(
            p.state_source.as_str(),
            "manifest" | "measured" | "commanded" | "planned"
        ) {
            return fail(
                "policy.state_source",
                format!(
                    "expected \"manifest\", \"measured\", \"commanded\" or \"planned\", got {:?}",
                    p.state_source.chars().take(40).collect::<String>()
                ),
            );
        }
        if p.candidates == 0 || p.candidates > 32 {
            return fail(
                "policy.candidates",
                format!("expected 1 to 32 candidates, got {}", p.candidates),
            );
        }
        if p.smoothing_modes > chunkrt_core::MAX_HORIZON {
            return fail(
                "policy.smoothing_modes",
                format!(
                    "expected 0 (off) to {} modes, got {}",
                    chunkrt_core::MAX_HORIZON,
                    p.smoothing_modes
                ),
            );
        }
        if p.threads == 0 || p.threads > 64 {
            return fail(
                "policy.threads",
                format!("expected 1 to 64, got {}", p.threads),
            );
        }
        if !matches!(p.execution_provider.as_str(), "cpu" | "cuda" | "tensorrt") {
            return fail(
                "policy.execution_provider",
                format!(
                    "expected one of `cpu`, `cuda`, `tensorrt`, got `{}`",
                    p.execution_provider
                ),
            );
        }
        if let Some(s) = &p.sampler {
            if !matches!(s.as_str(), "euler" | "heun" | "ddim") {
                return fail(
                    "policy.sampler",
                    format!("expected one of `euler`, `heun`, `ddim`, got `{s}`"),
                );
            }
        }
        if let Some(k) = p.steps {
            if k == 0 || k > 1000 {
                return fail("policy.steps", format!("expected 1 to 1000, got {k}"));
            }
        }
        for (i, g) in p.goals_rad.iter().enumerate() {
            if g.len() != n {
                return fail(
                    &format!("policy.goals_rad[{i}]"),
                    format!("expected {n} joint positions, got {}", g.len()),
                );
            }
            if let Some(v) = g.iter().find(|v| !v.is_finite()) {
                return fail(
                    &format!("policy.goals_rad[{i}]"),
                    format!("expected finite numbers, got {v}"),
                );
            }
        }
        if let Some(i) =
            (1..p.goal_schedule.len()).find(|&i| p.goal_schedule[i][0] <= p.goal_schedule[i - 1][0])
        {
            return fail(
                &format!("policy.goal_schedule[{i}]"),
                format!(
                    "cycles must ascend: {} follows {}",
                    p.goal_schedule[i][0],
                    p.goal_schedule[i - 1][0]
                ),
            );
        }
        if let Some(i) =
            (1..p.draw_schedule.len()).find(|&i| p.draw_schedule[i][0] <= p.draw_schedule[i - 1][0])
        {
            return fail(
                &format!("policy.draw_schedule[{i}]"),
                format!(
                    "cycles must ascend: {} follows {}",
                    p.draw_schedule[i][0],
                    p.draw_schedule[i - 1][0]
                ),
            );
        }
        if let Some((i, d)) = p
            .draw_schedule
            .iter()
            .enumerate()
            .find(|(_, d)| d[1] == 0 || d[1] > p.candidates as u64 || d[2] >= d[1])
        {
            return fail(
                &format!("policy.draw_schedule[{i}]"),
                format!(
                    "expected 1 to policy.candidates ({}) drawn and a chosen one below that, \
                     got {} drawn, candidate {}",
                    p.candidates, d[1], d[2]
                ),
            );
        }
        if let Some((i, d)) = p
            .draw_schedule
            .iter()
            .enumerate()
            .find(|(_, d)| d[3] != 0 && d[3] <= d[0])
        {
            return fail(
                &format!("policy.draw_schedule[{i}]"),
                format!(
                    "a chunk plays after the cycle of its observation: played in cycle {} \
                     from the observation of cycle {} (0: as it arrives)",
                    d[3], d[0]
                ),
            );
        }
        if !p.kind.is_learned() && !p.goal_schedule.is_empty() {
            return fail(
                "policy.goal_schedule",
                "applies to an `onnx` or `remote` policy with a goal list only",
            );
        }
        match (&p.remote, p.kind) {
            (Some(r), PolicyKind::Remote) => r.validate()?,
            (None, PolicyKind::Remote) => {
                return fail(
                    "policy.remote",
                    "a `remote` policy needs its server: [policy.remote] with url = \
                     \"ws://127.0.0.1:8765\" (or wss://...)",
                )
            }
            (Some(_), _) => {
                return fail(
                    "policy.remote",
                    "is read only with policy.kind = \"remote\": remove it, or set the kind",
                )
            }
            (None, _) => {}
        }
        match p.kind {
            PolicyKind::Scripted if p.goals_rad.is_empty() => fail(
                "policy.goals_rad",
                "the scripted policy needs at least one goal pose",
            ),
            PolicyKind::Servo
                if !(p.gain_per_s.is_finite() && p.gain_per_s > 0.0 && p.gain_per_s <= 1000.0) =>
            {
                fail(
                    "policy.gain_per_s",
                    format!("expected a gain in (0, 1000] 1/s, got {}", p.gain_per_s),
                )
            }
            PolicyKind::Onnx | PolicyKind::Remote if p.manifest.is_none() => fail(
                "policy.manifest",
                "an `onnx` or `remote` policy needs the path of its manifest (a remote \
                 policy's says what the server serves: shapes, goals, domain)",
            ),
            _ => Ok(()),
        }
    }

    fn validate_executor(&self) -> Check {
        let e = &self.executor;
        range(
            "executor.max_chunk_age_ms",
            e.max_chunk_age_ms,
            1.0,
            10_000.0,
        )?;
        range("executor.blend_ms", e.blend_ms, 0.0, 1000.0)?;
        range("executor.ensemble_coeff", e.ensemble_coeff, -5.0, 5.0)?;
        if !(1..=12).contains(&e.ensemble_chunks) {
            return fail(
                "executor.ensemble_chunks",
                format!("expected 1 to 12, got {}", e.ensemble_chunks),
            );
        }
        range("executor.lookahead_ms", e.lookahead_ms, 0.0, 1000.0)?;
        range(
            "executor.safe_stop_after_ms",
            e.safe_stop_after_ms,
            0.0,
            600_000.0,
        )?;
        range("executor.dt_min_ms", e.dt_min_ms, 0.1, 1000.0)?;
        range("executor.dt_max_ms", e.dt_max_ms, e.dt_min_ms, 1000.0)?;
        range(
            "executor.max_time_offset_ms",
            e.max_time_offset_ms,
            1.0,
            600_000.0,
        )?;
        range(
            "executor.gate_saturated_event_ms",
            e.gate_saturated_event_ms,
            self.control.period_ms,
            600_000.0,
        )?;
        range(
            "executor.gate_saturated_fallback_ms",
            e.gate_saturated_fallback_ms,
            e.gate_saturated_event_ms,
            600_000.0,
        )?;
        if e.min_len < 2 || e.min_len > MAX_HORIZON {
            return fail(
                "executor.min_len",
                format!("expected 2 to {MAX_HORIZON}, got {}", e.min_len),
            );
        }
        Ok(())
    }

    fn validate_limits(&self, n: usize) -> Check {
        let l = &self.limits;
        let pos = |v: f64| v > 0.0;
        l.pos_min_rad
            .check("limits.pos_min_rad", n, |_| true, "a finite number")?;
        l.pos_max_rad
            .check("limits.pos_max_rad", n, |_| true, "a finite number")?;
        l.pos_margin_rad
            .check("limits.pos_margin_rad", n, |v| v >= 0.0, "a margin >= 0")?;
        l.max_vel_rad_s
            .check("limits.max_vel_rad_s", n, pos, "a positive number")?;
        l.max_acc_rad_s2
            .check("limits.max_acc_rad_s2", n, pos, "a positive number")?;
        l.max_jerk_rad_s3
            .check("limits.max_jerk_rad_s3", n, pos, "a positive number")?;
        l.brake_acc_rad_s2
            .check("limits.brake_acc_rad_s2", n, pos, "a positive number")?;
        if let Some(f) = &l.max_following_error_rad {
            f.check(
                "limits.max_following_error_rad",
                n,
                pos,
                "a positive number",
            )?;
        }
        if let Some(t) = &l.thermal {
            t.continuous_torque_nm.check(
                "limits.thermal.continuous_torque_nm",
                n,
                |v| v >= MIN_RATED_TORQUE_NM,
                &format!("a drive's rated torque, at least {MIN_RATED_TORQUE_NM} N m"),
            )?;
            t.time_constant_s
                .check("limits.thermal.time_constant_s", n, pos, "a positive time")?;
            range("limits.thermal.derate_at", t.derate_at, 0.05, 0.99)?;
            range("limits.thermal.withdraw_at", t.withdraw_at, 0.05, 0.99)?;
            range("limits.thermal.min_derate", t.min_derate, 0.05, 1.0)?;
            self.check_initial_load(&t.initial_load)?;
            if t.withdraw_at <= t.derate_at {
                return fail(
                    "limits.thermal.withdraw_at",
                    format!(
                        "{} must be above derate_at = {} (derate first, then take authority)",
                        t.withdraw_at, t.derate_at
                    ),
                );
            }
        }
        self.check_action_filter()?;
        self.check_torque_slew()?;
        self.check_residual()?;
        for j in 0..n {
            // The gate's braking bounds assume the limits can be met together: a
            // joint must be able to reach its acceleration limit before its speed
            // limit (v >= a^2 / j), and brake no harder than it may accelerate.
            let (v, a, jk) = (
                l.max_vel_rad_s.get(j),
                l.max_acc_rad_s2.get(j),
                l.max_jerk_rad_s3.get(j),
            );
            if v < a * a / jk {
                return fail(
                    "limits.max_jerk_rad_s3",
                    format!(
                        "joint {j}: max_vel_rad_s {v} is below max_acc^2 / max_jerk = {:.4}: \
                         raise max_jerk_rad_s3 to at least {:.1} or lower max_acc_rad_s2",
                        a * a / jk,
                        a * a / v
                    ),
                );
            }
            if l.brake_acc_rad_s2.get(j) > a {
                return fail(
                    "limits.brake_acc_rad_s2",
                    format!(
                        "joint {j}: {} exceeds max_acc_rad_s2 {a}: the braking envelope must \
                         be reachable within the acceleration limit",
                        l.brake_acc_rad_s2.get(j)
                    ),
                );
            }
            let span = l.pos_max_rad.get(j) - l.pos_min_rad.get(j);
            if span <= 2.0 * l.pos_margin_rad.get(j) {
                return fail(
                    "limits.pos_max_rad",
                    format!(
                        "joint {j}: the range [{}, {}] leaves no room inside a margin of {}",
                        l.pos_min_rad.get(j),
                        l.pos_max_rad.get(j),
                        l.pos_margin_rad.get(j)
                    ),
                );
            }
        }
        Ok(())
    }

    /// `limits.thermal.initial_load`: a load per joint from 0 to [`MAX_INITIAL_LOAD`],
    /// not a denormal (5e-324 is a typo, not a load; shown as written, not in 300 digits).
    fn check_initial_load(&self, v: &crate::PerJoint) -> Check {
        let key = "limits.thermal.initial_load";
        v.check(key, self.control.joints, |_| true, "a load")?;
        for j in 0..self.control.joints {
            let x = v.get(j);
            if !((x == 0.0 || x.is_normal()) && (0.0..=MAX_INITIAL_LOAD).contains(&x)) {
                return fail(
                    key,
                    format!(
                        "joint {j}: expected a load from 0 (cold) to {MAX_INITIAL_LOAD} (twice \
                         the rating), got {x:e}"
                    ),
                );
            }
        }
        Ok(())
    }

    /// `[wear]`: a ledger path, and a hardware id a ledger line can carry.
    fn check_wear(&self) -> Check {
        let Some(w) = &self.wear else {
            return Ok(());
        };
        if w.ledger.as_os_str().is_empty() {
            return fail("wear.ledger", "expected the ledger file's path, got \"\"");
        }
        if let Some(id) = &w.hardware_id {
            if id.trim().is_empty() || id.chars().any(char::is_control) {
                return fail(
                    "wear.hardware_id",
                    format!("expected a non-empty id without control characters, got {id:?}"),
                );
            }
        }
        Ok(())
    }

    /// `limits.action_filter_hz`: within the design table's 20 Hz (below the Nyquist
    /// frequency of every control period, 25 Hz at the longest, 20 ms), and at least
    /// [`MIN_ACTION_FILTER_HZ`].
    fn check_action_filter(&self) -> Check {
        let Some(fc) = self.limits.action_filter_hz else {
            return Ok(());
        };
        let max = chunkrt_core::MAX_CUTOFF_HZ;
        if !(fc.is_finite() && (MIN_ACTION_FILTER_HZ..=max).contains(&fc)) {
            return fail(
                "limits.action_filter_hz",
                format!(
                    "expected a cutoff in [{MIN_ACTION_FILTER_HZ}, {max}] Hz, got {fc} (below \
                     {MIN_ACTION_FILTER_HZ} Hz the filter's time constant, 1 / (2 pi fc), \
                     is over 1.6 s: the arm trails every proposal by seconds, or never moves)"
                ),
            );
        }
        Ok(())
    }

    /// `[policy.residual]`: an ONNX base (the residual is bound to its model's digest),
    /// bounds that are non-negative, rates below the speed limit, a region whose box
    /// holds its fade band from both faces.
    fn check_residual(&self) -> Check {
        let Some(r) = &self.policy.residual else {
            return Ok(());
        };
        if !matches!(self.policy.kind, PolicyKind::Onnx | PolicyKind::Remote) {
            return fail(
                "policy.residual",
                "a residual is bound to its base model's SHA-256: policy.kind must be \
                 \"onnx\" or \"remote\"",
            );
        }
        let n = self.control.joints;
        r.bound_rad.check(
            "policy.residual.bound_rad",
            n,
            |v| v >= 0.0,
            "a bound >= 0 rad",
        )?;
        r.rate_rad_s.check(
            "policy.residual.rate_rad_s",
            n,
            |v| v > 0.0,
            "a positive rate",
        )?;
        for j in 0..n {
            let (rate, vmax) = (r.rate_rad_s.get(j), self.limits.max_vel_rad_s.get(j));
            if rate >= vmax {
                return fail(
                    "policy.residual.rate_rad_s",
                    format!("joint {j}: {rate} rad/s must be below limits.max_vel_rad_s = {vmax}"),
                );
            }
        }
        self.check_residual_smoothness(r)?;
        let Some(g) = &r.region else {
            return Ok(());
        };
        g.lo_rad.check(
            "policy.residual.region.lo_rad",
            n,
            |_| true,
            "a finite number",
        )?;
        g.hi_rad.check(
            "policy.residual.region.hi_rad",
            n,
            |_| true,
            "a finite number",
        )?;
        if !(g.fade_rad.is_finite() && g.fade_rad > 0.0) {
            return fail(
                "policy.residual.region.fade_rad",
                format!("expected a positive depth, got {}", g.fade_rad),
            );
        }
        for j in 0..n {
            let (lo, hi) = (g.lo_rad.get(j), g.hi_rad.get(j));
            if hi - lo < 2.0 * g.fade_rad {
                return fail(
                    "policy.residual.region.hi_rad",
                    format!(
                        "joint {j}: the box [{lo}, {hi}] is narrower than twice fade_rad = {}",
                        g.fade_rad
                    ),
                );
            }
        }
        Ok(())
    }

    /// `[policy.residual] acc_rad_s2` and `jerk_rad_s3`: positive and at most the
    /// joint's own limits (the correction rides on the base inside them).
    fn check_residual_smoothness(&self, r: &ResidualConfig) -> Check {
        let n = self.control.joints;
        let keys = [
            (
                "acc_rad_s2",
                &r.acc_rad_s2,
                &self.limits.max_acc_rad_s2,
                "max_acc_rad_s2",
            ),
            (
                "jerk_rad_s3",
                &r.jerk_rad_s3,
                &self.limits.max_jerk_rad_s3,
                "max_jerk_rad_s3",
            ),
        ];
        for (key, value, limit, limit_key) in keys {
            let Some(v) = value else {
                continue;
            };
            let path = format!("policy.residual.{key}");
            v.check(&path, n, |x| x > 0.0 && x.is_normal(), "a positive number")?;
            for j in 0..n {
                let (x, max) = (v.get(j), limit.get(j));
                if x > max {
                    return fail(
                        &path,
                        format!("joint {j}: {x} must be at most limits.{limit_key} = {max}"),
                    );
                }
            }
        }
        Ok(())
    }

    /// `[episodes]`: poses of the arm's joints inside its position limits, at most
    /// `chunkrt_core::episodes::MAX_POSES` of each, positive times and tolerances; a
    /// residual budget needs episodes.
    fn check_episodes(&self) -> Check {
        let budget = self
            .policy
            .residual
            .as_ref()
            .and_then(|r| r.budget.as_ref());
        let Some(e) = &self.episodes else {
            if budget.is_some() {
                return fail(
                    "policy.residual.budget",
                    "the budget is judged per episode: the config needs [episodes]",
                );
            }
            return Ok(());
        };
        let n = self.control.joints;
        let max = chunkrt_core::episodes::MAX_POSES;
        for (key, poses) in [
            ("episodes.starts_rad", &e.starts_rad),
            ("episodes.goals_rad", &e.goals_rad),
        ] {
            if poses.is_empty() || poses.len() > max {
                return fail(
                    key,
                    format!("expected 1 to {max} poses, got {}", poses.len()),
                );
            }
            for (i, p) in poses.iter().enumerate() {
                if p.len() != n {
                    return fail(
                        key,
                        format!("pose {i}: expected {n} joint positions, got {}", p.len()),
                    );
                }
                for (j, q) in p.iter().enumerate() {
                    let (lo, hi) = (
                        self.limits.pos_min_rad.get(j),
                        self.limits.pos_max_rad.get(j),
                    );
                    if !(q.is_finite() && *q > lo && *q < hi) {
                        return fail(key, format!("pose {i} joint {j}: {q} is outside the position limits [{lo}, {hi}]"));
                    }
                }
            }
        }
        if !e.held_out.is_empty() && e.held_out.len() != e.starts_rad.len() {
            return fail(
                "episodes.held_out",
                format!(
                    "expected one flag per start pose ({}), got {}",
                    e.starts_rad.len(),
                    e.held_out.len()
                ),
            );
        }
        if e.count == Some(0) {
            return fail("episodes.count", "expected at least 1 episode");
        }
        range("episodes.time_limit_s", e.time_limit_s, 0.1, 3600.0)?;
        range("episodes.reset_limit_s", e.reset_limit_s, 0.1, 3600.0)?;
        range("episodes.tolerance_rad", e.tolerance_rad, 1e-4, 1.0)?;
        if let Some(t) = e.reset_tolerance_rad {
            range("episodes.reset_tolerance_rad", t, 1e-4, 1.0)?;
        }
        range("episodes.settle_vel_rad_s", e.settle_vel_rad_s, 1e-4, 10.0)?;
        range("episodes.settle_ms", e.settle_ms, 0.0, 60_000.0)?;
        range("episodes.reset_vel_rad_s", e.reset_vel_rad_s, 0.01, 10.0)?;
        if let Some(b) = budget {
            if b.max_gate_interventions.is_none()
                && b.max_operator_stops.is_none()
                && b.max_tracking_error_p99_rad.is_none()
            {
                return fail("policy.residual.budget", "sets no figure: expected max_gate_interventions, max_operator_stops or max_tracking_error_p99_rad");
            }
            if !(1..=64).contains(&b.window_episodes) {
                return fail(
                    "policy.residual.budget.window_episodes",
                    format!("expected 1 to 64 episodes, got {}", b.window_episodes),
                );
            }
            if let Some(t) = b.max_tracking_error_p99_rad {
                range(
                    "policy.residual.budget.max_tracking_error_p99_rad",
                    t,
                    0.0,
                    10.0,
                )?;
            }
        }
        Ok(())
    }

    /// The episode plan of `[episodes]` (none without one).
    pub fn episode_plan(&self) -> Option<chunkrt_core::EpisodePlan> {
        let e = self.episodes.as_ref()?;
        let max = chunkrt_core::episodes::MAX_POSES;
        let mut plan = chunkrt_core::EpisodePlan {
            dof: self.control.joints.min(MAX_DOF),
            count: e.count.unwrap_or(e.starts_rad.len() as u32),
            starts: [[0.0; MAX_DOF]; chunkrt_core::episodes::MAX_POSES],
            n_starts: e.starts_rad.len().min(max),
            held_out: [false; chunkrt_core::episodes::MAX_POSES],
            goals: [[0.0; MAX_DOF]; chunkrt_core::episodes::MAX_POSES],
            n_goals: e.goals_rad.len().min(max),
            time_limit_ns: (e.time_limit_s * 1e9) as u64,
            reset_limit_ns: (e.reset_limit_s * 1e9) as u64,
            tolerance_rad: e.tolerance_rad,
            reset_tolerance_rad: e.reset_tolerance_rad.unwrap_or(e.tolerance_rad),
            settle_vel_rad_s: e.settle_vel_rad_s,
            settle_ns: (e.settle_ms * 1e6) as u64,
        };
        for (k, p) in e.starts_rad.iter().take(max).enumerate() {
            plan.starts[k][..p.len().min(MAX_DOF)].copy_from_slice(&p[..p.len().min(MAX_DOF)]);
            plan.held_out[k] = e.held_out.get(k).copied().unwrap_or(false);
        }
        for (k, p) in e.goals_rad.iter().take(max).enumerate() {
            plan.goals[k][..p.len().min(MAX_DOF)].copy_from_slice(&p[..p.len().min(MAX_DOF)]);
        }
        Some(plan)
    }

    /// The residual's budget of `[policy.residual.budget]` (an unlimited one without).
    pub fn residual_budget(&self) -> chunkrt_core::Budget {
        let b = self
            .policy
            .residual
            .as_ref()
            .and_then(|r| r.budget.as_ref());
        b.map_or(chunkrt_core::Budget::default(), |b| chunkrt_core::Budget {
            max_gate_cycles: b.max_gate_interventions,
            max_operator_stops: b.max_operator_stops,
            window_episodes: b.window_episodes,
            max_track_p99_rad: b.max_tracking_error_p99_rad,
        })
    }

    /// The enable switch of `[ethercat.enable_input]` on an EtherCAT run: the joint whose
    /// drive's digital inputs carry it and its bit (none otherwise).
    pub fn enable_input(&self) -> Option<(usize, u8)> {
        self.ethercat
            .as_ref()
            .filter(|_| self.backend.kind == BackendKind::Ethercat)
            .and_then(|e| e.enable_input.as_ref())
            .map(|e| (e.joint, e.bit))
    }

    /// The residual gate's limits from `[policy.residual]` (none without one).
    pub fn residual_limits(&self) -> Option<chunkrt_core::ResidualLimits> {
        let r = self.policy.residual.as_ref()?;
        let n = self.control.joints.min(MAX_DOF);
        let mut out = chunkrt_core::ResidualLimits {
            dof: n,
            bound_rad: [0.0; MAX_DOF],
            rate_rad_s: [0.0; MAX_DOF],
            acc_rad_s2: [0.0; MAX_DOF],
            jerk_rad_s3: [0.0; MAX_DOF],
            region: None,
        };
        let or_tenth = |v: &Option<PerJoint>, limit: &PerJoint, j: usize| {
            v.as_ref().map_or(0.1 * limit.get(j), |v| v.get(j))
        };
        for j in 0..n {
            out.bound_rad[j] = r.bound_rad.get(j);
            out.rate_rad_s[j] = r.rate_rad_s.get(j);
            out.acc_rad_s2[j] = or_tenth(&r.acc_rad_s2, &self.limits.max_acc_rad_s2, j);
            out.jerk_rad_s3[j] = or_tenth(&r.jerk_rad_s3, &self.limits.max_jerk_rad_s3, j);
        }
        out.region = r.region.as_ref().map(|g| {
            let mut region = chunkrt_core::ActivityRegion {
                lo_rad: [0.0; MAX_DOF],
                hi_rad: [0.0; MAX_DOF],
                fade_rad: g.fade_rad,
            };
            for j in 0..n {
                region.lo_rad[j] = g.lo_rad.get(j);
                region.hi_rad[j] = g.hi_rad.get(j);
            }
            region
        });
        Some(out)
    }

    /// `[limits.torque_slew]`: positive values, and a jerk it implies that still meets
    /// the speed and acceleration limits together (the gate's braking bounds).
    fn check_torque_slew(&self) -> Check {
        let Some(s) = &self.limits.torque_slew else {
            return Ok(());
        };
        let n = self.control.joints;
        let pos = |v: f64| v.is_finite() && v > 0.0;
        s.max_torque_nm.check(
            "limits.torque_slew.max_torque_nm",
            n,
            pos,
            "a positive torque",
        )?;
        s.inertia_kg_m2.check(
            "limits.torque_slew.inertia_kg_m2",
            n,
            pos,
            "a positive inertia",
        )?;
        if !pos(s.rise_time_ms) {
            return fail(
                "limits.torque_slew.rise_time_ms",
                format!("expected a positive time, got {}", s.rise_time_ms),
            );
        }
        let jerk = self.torque_slew_jerk().unwrap_or([f64::INFINITY; MAX_DOF]);
        let l = &self.limits;
        for (j, jk) in jerk.iter().enumerate().take(n.min(MAX_DOF)) {
            let (v, a) = (l.max_vel_rad_s.get(j), l.max_acc_rad_s2.get(j));
            if *jk < a * a / v {
                return fail(
                    "limits.torque_slew",
                    format!(
                        "joint {j}: the slew limit allows a jerk of {jk:.1} rad/s^3 \
                         (max_torque_nm / (rise_time * inertia)), below max_acc^2 / max_vel = \
                         {:.1}: the joint could not reach its acceleration limit before its \
                         speed limit; shorten rise_time_ms or lower max_acc_rad_s2",
                        a * a / v
                    ),
                );
            }
        }
        Ok(())
    }

    /// The joint limits for the gate and the fallback.
    pub fn joint_limits(&self) -> JointLimits {
        let l = &self.limits;
        let mut out = JointLimits::uniform(self.control.joints, JointLimit::default());
        for j in 0..self.control.joints {
            out.joint[j] = JointLimit {
                pos_min_rad: l.pos_min_rad.get(j),
                pos_max_rad: l.pos_max_rad.get(j),
                pos_margin_rad: l.pos_margin_rad.get(j),
                max_vel_rad_s: l.max_vel_rad_s.get(j),
                max_acc_rad_s2: l.max_acc_rad_s2.get(j),
                max_jerk_rad_s3: l.max_jerk_rad_s3.get(j),
                brake_acc_rad_s2: l.brake_acc_rad_s2.get(j),
            };
        }
        out
    }

    /// The executor settings.
    pub fn executor_config(&self) -> ExecutorConfig {
        let e = &self.executor;
        ExecutorConfig {
            dof: self.control.joints,
            max_chunk_age_ns: ms_to_ns(e.max_chunk_age_ms),
            blend_ns: ms_to_ns(e.blend_ms),
            seam: match e.seam {
                SeamKind::Crossfade => SeamMode::Crossfade,
                SeamKind::Transition => SeamMode::Transition,
                SeamKind::Ensemble => SeamMode::Ensemble,
            },
            lookahead_ns: ms_to_ns(e.lookahead_ms),
            safe_stop_after_ns: ms_to_ns(e.safe_stop_after_ms),
            resume: match e.resume {
                ResumeMode::Auto => Resume::Auto,
                ResumeMode::Manual => Resume::Manual,
            },
            dt_min_ns: ms_to_ns(e.dt_min_ms),
            dt_max_ns: ms_to_ns(e.dt_max_ms),
            min_len: e.min_len,
            max_time_offset_ns: ms_to_ns(e.max_time_offset_ms),
            ensemble_coeff: e.ensemble_coeff,
            ensemble_chunks: e.ensemble_chunks,
        }
    }

    /// Per-joint following-error limits (`limits.max_following_error_rad`), when set.
    pub fn following_error_limits(&self) -> Option<[f64; MAX_DOF]> {
        let f = self.limits.max_following_error_rad.as_ref()?;
        let mut out = [f64::INFINITY; MAX_DOF];
        for (j, v) in out
            .iter_mut()
            .enumerate()
            .take(self.control.joints.min(MAX_DOF))
        {
            *v = f.get(j);
        }
        Some(out)
    }

    /// The action filter's cutoff (`limits.action_filter_hz`), when set.
    pub fn action_filter_hz(&self) -> Option<f64> {
        self.limits.action_filter_hz
    }

    /// The jerk per joint that keeps `[limits.torque_slew]`, when set (rad/s^3;
    /// infinite past the arm's joints).
    pub fn torque_slew_jerk(&self) -> Option<[f64; MAX_DOF]> {
        let s = self.limits.torque_slew.as_ref()?;
        let mut out = [f64::INFINITY; MAX_DOF];
        let rise_s = s.rise_time_ms * 1e-3;
        for (j, v) in out
            .iter_mut()
            .enumerate()
            .take(self.control.joints.min(MAX_DOF))
        {
            *v = s.max_torque_nm.get(j) / (rise_s * s.inertia_kg_m2.get(j));
        }
        Some(out)
    }

    /// Each joint's declared worst-case starting load (`limits.thermal.initial_load`),
    /// when the thermal monitor is on.
    pub fn thermal_initial_load(&self) -> Option<chunkrt_core::JointVec> {
        let t = self.limits.thermal.as_ref()?;
        let mut out = [0.0; MAX_DOF];
        for (j, o) in out
            .iter_mut()
            .enumerate()
            .take(self.control.joints.min(MAX_DOF))
        {
            *o = t.initial_load.get(j);
        }
        Some(out)
    }

    /// The thermal monitor's limits (`limits.thermal`), when set.
    pub fn thermal_limits(&self) -> Option<chunkrt_core::ThermalLimits> {
        let t = self.limits.thermal.as_ref()?;
        let n = self.control.joints.min(MAX_DOF);
        let mut l = chunkrt_core::ThermalLimits {
            dof: n,
            continuous_nm: [f64::INFINITY; MAX_DOF],
            time_constant_s: [1.0; MAX_DOF],
            derate_at: t.derate_at,
            withdraw_at: t.withdraw_at,
            min_derate: t.min_derate,
        };
        for j in 0..n {
            l.continuous_nm[j] = t.continuous_torque_nm.get(j);
            l.time_constant_s[j] = t.time_constant_s.get(j);
        }
        Some(l)
    }

    /// `(event, fallback)` thresholds of gate saturation in control cycles (see
    /// `executor.gate_saturated_*_ms`), at least one cycle each.
    pub fn gate_saturation_cycles(&self) -> (u32, u32) {
        let cycles = |ms: f64| {
            let n = (ms / self.control.period_ms).ceil();
            if n.is_finite() {
                n.clamp(1.0, u32::MAX as f64) as u32
            } else {
                u32::MAX
            }
        };
        (
            cycles(self.executor.gate_saturated_event_ms),
            cycles(self.executor.gate_saturated_fallback_ms),
        )
    }

    /// Control period in nanoseconds.
    pub fn period_ns(&self) -> u64 {
        ms_to_ns(self.control.period_ms)
    }

    /// The support monitor's box on observed positions, when configured.
    pub fn domain_box(&self) -> Option<DomainBox> {
        self.domain.as_ref().map(|d| {
            let mut b = DomainBox {
                dof: self.control.joints,
                lo_rad: [f64::NEG_INFINITY; MAX_DOF],
                hi_rad: [f64::INFINITY; MAX_DOF],
            };
            for j in 0..self.control.joints {
                b.lo_rad[j] = d.pos_min_rad.get(j);
                b.hi_rad[j] = d.pos_max_rad.get(j);
            }
            b
        })
    }
}

impl SimConfig {
    fn validate(&self, n: usize) -> Check {
        range("sim.substep_us", self.substep_us, 1.0, 10_000.0)?;
        range("sim.bandwidth_hz", self.bandwidth_hz, 0.1, 1000.0)?;
        let pos = |v: f64| v > 0.0;
        let nonneg = |v: f64| v >= 0.0;
        if let Some(v) = &self.inertia_kg_m2 {
            v.check("sim.inertia_kg_m2", n, pos, "a positive inertia")?;
        }
        if let Some(v) = &self.viscous_nm_s_rad {
            v.check("sim.viscous_nm_s_rad", n, nonneg, "a friction >= 0")?;
        }
        if let Some(v) = &self.coulomb_nm {
            v.check("sim.coulomb_nm", n, nonneg, "a friction >= 0")?;
        }
        if let Some(v) = &self.max_torque_nm {
            v.check("sim.max_torque_nm", n, pos, "a positive torque")?;
        }
        if let Some(v) = &self.initial_pos_rad {
            v.check("sim.initial_pos_rad", n, |_| true, "a finite number")?;
        }
        if let Some(v) = &self.backlash_rad {
            v.check(
                "sim.backlash_rad",
                n,
                |b| (0.0..=0.1).contains(&b),
                "a play in [0, 0.1] rad",
            )?;
        }
        Ok(())
    }
}

impl SimConfig {
    /// The simulated arm starts at `initial_pos_rad`, between its hard stops (the
    /// position limits); outside them the arm refuses to be built at `run`.
    fn check_start_pose(&self, n: usize, limits: &crate::LimitsConfig) -> Check {
        let Some(v) = &self.initial_pos_rad else {
            return Ok(());
        };
        for j in 0..n {
            let (pos, lo, hi) = (
                v.get(j),
                limits.pos_min_rad.get(j),
                limits.pos_max_rad.get(j),
            );
            if !(lo..=hi).contains(&pos) {
                return Err((
                    "sim.initial_pos_rad".into(),
                    format!(
                        "joint {j}: the start pose {pos} rad is outside the joint's stops \
                         [{lo}, {hi}] rad (limits.pos_min_rad / limits.pos_max_rad): the \
                         simulated arm cannot start there; give a pose inside the stops"
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl crate::MujocoConfig {
    fn validate(&self, n: usize, limits: &crate::LimitsConfig) -> Check {
        let digest = &self.model_sha256;
        if digest.len() != 64 || !digest.chars().all(|c| c.is_ascii_hexdigit()) {
            return fail(
                "mujoco.model_sha256",
                format!(
                    "{digest:?} is not a SHA-256 (64 hex digits); `sha256sum` of the model \
                     file gives it"
                ),
            );
        }
        if let Some(d) = &self.model_files_sha256 {
            if d.len() != 64 || !d.chars().all(|c| c.is_ascii_hexdigit()) {
                return fail(
                    "mujoco.model_files_sha256",
                    format!(
                        "{d:?} is not a SHA-256 (64 hex digits); `validate` names the digest \
                         of the files the model names"
                    ),
                );
            }
        }
        range("mujoco.bandwidth_hz", self.bandwidth_hz, 0.1, 1000.0)?;
        range(
            "mujoco.velocity_filter_hz",
            self.velocity_filter_hz,
            1.0,
            100_000.0,
        )?;
        range(
            "mujoco.transport_delay_ms",
            self.transport_delay_ms,
            0.0,
            100.0,
        )?;
        let pos = |v: f64| v > 0.0;
        if let Some(v) = &self.inertia_kg_m2 {
            v.check("mujoco.inertia_kg_m2", n, pos, "a positive inertia")?;
        }
        if let Some(v) = &self.max_torque_nm {
            v.check("mujoco.max_torque_nm", n, pos, "a positive torque")?;
        }
        self.validate_gears(n)?;
        if let Some(v) = &self.initial_pos_rad {
            v.check("mujoco.initial_pos_rad", n, |_| true, "a finite number")?;
            for j in 0..n {
                let (q, lo, hi) = (
                    v.get(j),
                    limits.pos_min_rad.get(j),
                    limits.pos_max_rad.get(j),
                );
                if !(lo..=hi).contains(&q) {
                    return fail(
                        "mujoco.initial_pos_rad",
                        format!(
                            "joint {j}: the start pose {q} rad is outside the joint's limits \
                             [{lo}, {hi}] rad (limits.pos_min_rad / limits.pos_max_rad)"
                        ),
                    );
                }
            }
        }
        Ok(())
    }
}

impl crate::MujocoConfig {
    /// The gears: values in range, and a rigid joint (no stiffness) given none of what
    /// only a compliant one has, a compliant one given its motor inertia.
    fn validate_gears(&self, n: usize) -> Check {
        let nonneg = |v: f64| v >= 0.0;
        let gear = [
            (
                "mujoco.joint_stiffness_nm_rad",
                &self.joint_stiffness_nm_rad,
            ),
            (
                "mujoco.joint_damping_nm_s_rad",
                &self.joint_damping_nm_s_rad,
            ),
            ("mujoco.backlash_rad", &self.backlash_rad),
            ("mujoco.motor_inertia_kg_m2", &self.motor_inertia_kg_m2),
        ];
        for (key, v) in gear {
            if let Some(v) = v {
                v.check(key, n, nonneg, "a number >= 0")?;
            }
        }
        let at = |v: &Option<crate::PerJoint>, j: usize| v.as_ref().map_or(0.0, |v| v.get(j));
        for j in 0..n {
            let stiffness = at(&self.joint_stiffness_nm_rad, j);
            if stiffness == 0.0 {
                for (key, v) in &gear[1..] {
                    if at(v, j) != 0.0 {
                        return fail(
                            key,
                            format!(
                                "joint {j}: {} on a rigid joint (mujoco.joint_stiffness_nm_rad \
                                 absent or 0): a gear's damping, backlash and motor inertia act \
                                 through its stiffness; give the stiffness too",
                                at(v, j)
                            ),
                        );
                    }
                }
            } else if at(&self.motor_inertia_kg_m2, j) == 0.0 {
                return fail(
                    "mujoco.motor_inertia_kg_m2",
                    format!(
                        "joint {j} is compliant (joint_stiffness_nm_rad = {stiffness}): its \
                         motor side needs an inertia (the rotor's, reflected through the gear)"
                    ),
                );
            }
        }
        Ok(())
    }
}

impl crate::RemoteConfig {
    fn validate(&self) -> Check {
        let (plain, tls) = match self.protocol.as_str() {
            "openpi" => ("ws", "wss"),
            "oip" => ("http", "https"),
            other => {
                return fail(
                    "policy.remote.protocol",
                    format!("{other:?}: expected \"openpi\" or \"oip\""),
                )
            }
        };
        let scheme_ok = [plain, tls]
            .iter()
            .any(|s| self.url.starts_with(&format!("{s}://")));
        if !scheme_ok {
            return fail(
                "policy.remote.url",
                format!(
                    "{:?}: with protocol = {:?} the URL is {plain}://host:port or \
                     {tls}://host:port",
                    self.url, self.protocol
                ),
            );
        }
        match (self.protocol.as_str(), &self.model) {
            ("oip", None) => {
                return fail(
                    "policy.remote.model",
                    "an OIP server needs the model's name (its model-settings name)",
                )
            }
            ("oip", Some(m)) if m.is_empty() || m.contains('/') => {
                return fail(
                    "policy.remote.model",
                    format!("{m:?} is not a model's name"),
                )
            }
            ("openpi", Some(_)) => {
                return fail(
                    "policy.remote.model",
                    "is read only with protocol = \"oip\" (an openpi server serves one policy)",
                )
            }
            _ => {}
        }
        range(
            "policy.remote.connect_timeout_ms",
            self.connect_timeout_ms,
            1.0,
            60_000.0,
        )?;
        range(
            "policy.remote.reply_timeout_ms",
            self.reply_timeout_ms,
            1.0,
            60_000.0,
        )?;
        range(
            "policy.remote.max_message_mb",
            self.max_message_mb,
            0.01,
            1024.0,
        )?;
        if !matches!(self.actions.as_str(), "absolute" | "delta") {
            return fail(
                "policy.remote.actions",
                format!("{:?}: expected \"absolute\" or \"delta\"", self.actions),
            );
        }
        if let Some(v) = &self.token_env {
            if v.is_empty() || v.contains('=') {
                return fail(
                    "policy.remote.token_env",
                    format!("{v:?} is not an environment variable's name"),
                );
            }
        }
        Ok(())
    }
}

impl crate::CameraConfig {
    fn validate(&self) -> Check {
        range("camera.fps", self.fps, 0.5, 1000.0)?;
        range("camera.max_age_ms", self.max_age_ms, 1.0, 10_000.0)?;
        range("camera.latency_ms", self.latency_ms, 0.0, 1000.0)?;
        range("camera.tolerance_rad", self.tolerance_rad, 1e-4, 1.0)?;
        range(
            "camera.settle_speed_rad_s",
            self.settle_speed_rad_s,
            1e-4,
            10.0,
        )?;
        range("camera.settle_s", self.settle_s, 0.0, 60.0)?;
        if !(8..=128).contains(&self.size) {
            return fail(
                "camera.size",
                format!("expected 8 to 128 pixels, got {}", self.size),
            );
        }
        if self.cpu < -1 {
            return fail(
                "camera.cpu",
                format!("expected a CPU number or -1, got {}", self.cpu),
            );
        }
        match self.kind {
            crate::CameraKind::Synthetic => {
                for (key, set) in [
                    ("camera.device", self.device.is_some()),
                    ("camera.pixel_format", self.pixel_format.is_some()),
                    ("camera.width", self.width.is_some()),
                    ("camera.height", self.height.is_some()),
                ] {
                    if set {
                        return fail(key, "a V4L2 key, but camera.kind = \"synthetic\"");
                    }
                }
            }
            crate::CameraKind::V4l2 => {
                if self.device.is_none() {
                    return fail(
                        "camera.device",
                        "camera.kind = \"v4l2\" needs a device (e.g. \"/dev/video0\")",
                    );
                }
                match self.pixel_format.as_deref() {
                    None | Some("YUYV") | Some("MJPG") => {}
                    Some(f) => {
                        return fail(
                            "camera.pixel_format",
                            format!("expected \"YUYV\" or \"MJPG\", got \"{f}\""),
                        )
                    }
                }
                for (key, v) in [("camera.width", self.width), ("camera.height", self.height)] {
                    if let Some(v) = v {
                        if !(16..=8192).contains(&v) {
                            return fail(key, format!("expected 16 to 8192 pixels, got {v}"));
                        }
                    }
                }
            }
        }
        if let Some([_, _, w, h]) = self.crop {
            if w == 0 || h == 0 {
                return fail(
                    "camera.crop",
                    "expected a crop of positive width and height",
                );
            }
        }
        Ok(())
    }
}
