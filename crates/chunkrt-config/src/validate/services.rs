//! `[operator]`, `[metrics]`, `[live_view]` and `[telemetry]`: the run's channels
//! beside the arm (listeners private unless meant otherwise) and its records.

use super::{fail, range, Check};
use crate::schema::Config;

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

impl Config {
    /// `[operator]`, `[metrics]` and `[live_view]`.
    pub(super) fn validate_services(&self) -> Check {
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
        Ok(())
    }

    /// `[telemetry]`: ring size, drain and status intervals, log and recording sizes,
    /// the intervention records' windows.
    pub(super) fn validate_telemetry(&self) -> Check {
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
        Ok(())
    }
}
