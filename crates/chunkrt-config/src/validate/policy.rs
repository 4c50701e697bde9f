//! `[policy]` and `[policy.remote]`: the chunk's shape and timing, the sampler, the
//! goals and the schedules of goals and draws, what each kind of policy needs.

use super::{fail, range, Check};
use crate::schema::{Config, PolicyKind};
use chunkrt_core::MAX_HORIZON;

impl Config {
    /// `[policy]`: its numbers, its goals, its schedules, then what its kind needs.
    pub(super) fn validate_policy(&self, n: usize) -> Check {
        self.check_policy_numbers()?;
        self.check_policy_goals(n)?;
        self.check_policy_schedules()?;
        self.check_policy_kind()
    }

    /// The chunk's shape and timing, the sampler and the inference settings.
    fn check_policy_numbers(&self) -> Check {
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
        Ok(())
    }

    /// `policy.goals_rad`: one finite position per joint in each goal.
    fn check_policy_goals(&self, n: usize) -> Check {
        let p = &self.policy;
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
        Ok(())
    }

    /// `policy.goal_schedule` and `policy.draw_schedule`: ascending cycles, draws
    /// within the candidates, a chunk played after its observation.
    fn check_policy_schedules(&self) -> Check {
        let p = &self.policy;
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
        Ok(())
    }

    /// What the policy's kind needs and allows: a goal schedule only for a learned
    /// policy, `[policy.remote]` exactly for a remote one, goals, gain or manifest.
    fn check_policy_kind(&self) -> Check {
        let p = &self.policy;
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

    pub(super) fn validate_executor(&self) -> Check {
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
}

impl crate::RemoteConfig {
    pub(super) fn validate(&self) -> Check {
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
