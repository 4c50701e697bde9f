//! `chunkrt check`: is this host ready for a real-time control loop?
//!
//! Each item is PASS, WARN (works, but latency will suffer, or could not be
//! determined) or FAIL (the loop will not get what it asks for), with the fix.
//! Exit 1 when an item fails. What this host does not expose is never a PASS.

use crate::paths;
use chunkrt_config::Config;
use clap::Parser;
use std::path::PathBuf;
use std::process::Command;

mod container;
mod item;

use item::item;
pub use item::{Item, Level};

/// `chunkrt check`.
#[derive(Parser, Debug, Clone)]
pub struct CheckArgs {
    /// Configuration file (default: rt-config/sim.toml): its priority, CPUs and
    /// EtherCAT interface are checked.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Network interface of the EtherCAT bus (default: the configuration's, if any).
    #[arg(long)]
    pub interface: Option<String>,
}

/// What the checks need from the configuration.
struct Target {
    priority: u8,
    control_cpu: Option<usize>,
    inference_cpu: Option<usize>,
    interface: Option<String>,
    hold_cpu_dma_latency: bool,
}

/// Runs the checks; returns the exit status.
pub fn check(args: &CheckArgs) -> anyhow::Result<u8> {
    let path = match &args.config {
        Some(p) => p.clone(),
        None => paths::default_config()?,
    };
    let cfg = crate::setup::load_config(&path)?;
    let target = Target {
        priority: cfg.control.priority,
        control_cpu: usize::try_from(cfg.control.cpu).ok(),
        inference_cpu: usize::try_from(cfg.inference.cpu).ok(),
        interface: args
            .interface
            .clone()
            .or_else(|| configured_interface(&cfg)),
        hold_cpu_dma_latency: cfg.control.hold_cpu_dma_latency,
    };
    outln!("chunkrt check: {}", path.display());
    let items = run_checks(&target);
    for it in &items {
        let tag = match it.level {
            Level::Pass => "PASS",
            Level::Warn => "WARN",
            Level::Fail => "FAIL",
        };
        outln!("{tag}  {:<22} {}", it.name, it.found);
        if it.level != Level::Pass && !it.fix.is_empty() {
            outln!("      {:<22} fix: {}", "", it.fix);
        }
    }
    let fails = items.iter().filter(|i| i.level == Level::Fail).count();
    let warns = items.iter().filter(|i| i.level == Level::Warn).count();
    outln!(
        "check: {fails} FAIL, {warns} WARN, {} PASS",
        items.len() - fails - warns
    );
    Ok(if fails > 0 { crate::EXIT_FAIL } else { 0 })
}

/// The EtherCAT interface of the configuration, when it drives an EtherCAT bus.
fn configured_interface(cfg: &Config) -> Option<String> {
    cfg.ethercat.as_ref().map(|e| e.interface.clone())
}

fn run_checks(t: &Target) -> Vec<Item> {
    let mut items = vec![
        kernel(),
        rtprio(t.priority),
        memlock(),
        sched_fifo(t.priority),
    ];
    items.push(mlockall());
    items.push(rt_throttling());
    items.push(isolation("control CPU", t.control_cpu));
    if t.inference_cpu.is_some() {
        items.push(isolation("inference CPU", t.inference_cpu));
    }
    items.push(governor(t.control_cpu));
    items.push(smt(t.control_cpu));
    items.push(dma_latency(t.hold_cpu_dma_latency));
    items.push(clocksource());
    if let Some(iface) = &t.interface {
        items.push(coalescing(iface));
    }
    items.extend(container_checks(t));
    items
}

/// What a container or cgroup can take away (see `check/container.rs`): the RT
/// group budget and the capabilities always, the devices inside a container.
fn container_checks(t: &Target) -> Vec<Item> {
    let sys = container::Sys::host();
    let engine = container::container_engine(&sys, std::env::var("container").ok().as_deref());
    let (release, _, _) = chunkrt_rt::os::kernel_info();
    let (rtprio, _) = rlimit(libc::RLIMIT_RTPRIO);
    let (memlock, _) = rlimit(libc::RLIMIT_MEMLOCK);
    let need = container::CapsNeed {
        rtprio_allows: rtprio.is_none_or(|v| v >= t.priority as u64),
        memlock_unlimited: memlock.is_none(),
        ethercat: t.interface.is_some(),
    };
    let mut items = vec![
        container::rt_budget(&sys, engine.as_deref(), &release),
        container::capabilities(&sys, engine.as_deref(), &need),
    ];
    if let Some(engine) = &engine {
        items.push(container::dma_device(&sys, engine));
    }
    items
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn kernel() -> Item {
    let (release, preempt, rt) = chunkrt_rt::os::kernel_info();
    let found = format!("{release}, {preempt}");
    let fix = "boot a PREEMPT_RT kernel (Debian: apt install linux-image-rt-amd64; Ubuntu: \
               Ubuntu Pro real-time kernel); with PREEMPT_DYNAMIC at least boot with preempt=full";
    if rt {
        item("kernel", Level::Pass, found, "")
    } else if preempt.contains("none") || preempt.contains("voluntary") {
        item(
            "kernel",
            Level::Fail,
            format!("{found}: kernel code is not preemptible, ms latencies expected"),
            fix,
        )
    } else {
        let unknown = if preempt == "PREEMPT_DYNAMIC" {
            " (mode unknown: mount debugfs to read /sys/kernel/debug/sched/preempt)"
        } else {
            ""
        };
        item(
            "kernel",
            Level::Warn,
            format!("{found}: not PREEMPT_RT{unknown}"),
            fix,
        )
    }
}

/// `(soft, hard)` limit of a resource; `None` means unlimited.
fn rlimit(resource: libc::__rlimit_resource_t) -> (Option<u64>, Option<u64>) {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid, writable rlimit struct.
    let rc = unsafe { libc::getrlimit(resource, &mut r) };
    if rc != 0 {
        return (Some(0), Some(0));
    }
    let f = |v: libc::rlim_t| (v != libc::RLIM_INFINITY).then_some(v);
    (f(r.rlim_cur), f(r.rlim_max))
}

fn rtprio(priority: u8) -> Item {
    let (soft, _) = rlimit(libc::RLIMIT_RTPRIO);
    let shown = soft.map_or("unlimited".to_string(), |v| v.to_string());
    let fix =
        "add `@realtime - rtprio 99` to /etc/security/limits.d/chunkrt.conf and put the user \
               in group realtime; in docker: --cap-add SYS_NICE --ulimit rtprio=99";
    if is_root() || soft.is_none_or(|v| v >= priority as u64) {
        item(
            "RT priority limit",
            Level::Pass,
            format!(
                "RLIMIT_RTPRIO {shown}{}, need {priority}",
                if is_root() { " (root)" } else { "" }
            ),
            "",
        )
    } else {
        item(
            "RT priority limit",
            Level::Fail,
            format!("RLIMIT_RTPRIO {shown} < configured priority {priority}"),
            fix,
        )
    }
}

fn memlock() -> Item {
    let (soft, _) = rlimit(libc::RLIMIT_MEMLOCK);
    match soft {
        None => item("memlock limit", Level::Pass, "RLIMIT_MEMLOCK unlimited", ""),
        Some(v) if is_root() => item(
            "memlock limit",
            Level::Pass,
            format!("RLIMIT_MEMLOCK {} KiB (root is exempt)", v / 1024),
            "",
        ),
        Some(v) => item(
            "memlock limit",
            Level::Warn,
            format!(
                "RLIMIT_MEMLOCK {} KiB: mlockall of the whole process may fail",
                v / 1024
            ),
            "add `@realtime - memlock unlimited` to /etc/security/limits.d/chunkrt.conf; \
             in docker: --cap-add IPC_LOCK --ulimit memlock=-1",
        ),
    }
}

fn sched_fifo(priority: u8) -> Item {
    // In a thread of its own, so this process's main thread keeps its policy.
    let r =
        std::thread::spawn(move || chunkrt_rt::os::set_fifo(priority).map_err(|e| e.to_string()))
            .join()
            .unwrap_or_else(|_| Err("the probe thread panicked".into()));
    match r {
        Ok(()) => item(
            "SCHED_FIFO",
            Level::Pass,
            format!("a thread became SCHED_FIFO {priority}"),
            "",
        ),
        Err(e) => item(
            "SCHED_FIFO",
            Level::Fail,
            e,
            "run as root, or grant CAP_SYS_NICE (setcap cap_sys_nice+ep) and an rtprio limit",
        ),
    }
}

fn mlockall() -> Item {
    match chunkrt_rt::os::lock_memory() {
        Ok(()) => {
            // SAFETY: munlockall has no preconditions; this process needs no locking.
            unsafe { libc::munlockall() };
            item(
                "mlockall",
                Level::Pass,
                "mlockall(MCL_CURRENT|MCL_FUTURE) succeeded",
                "",
            )
        }
        Err(e) => item(
            "mlockall",
            Level::Fail,
            e.to_string(),
            "raise the memlock limit (see memlock limit) or grant CAP_IPC_LOCK",
        ),
    }
}

fn rt_throttling() -> Item {
    rt_throttling_from(read("/proc/sys/kernel/sched_rt_runtime_us"))
}

fn rt_throttling_from(runtime_us: Option<String>) -> Item {
    match runtime_us.and_then(|s| s.parse::<i64>().ok()) {
        Some(-1) => item(
            "RT throttling",
            Level::Pass,
            "off (sched_rt_runtime_us = -1)",
            "",
        ),
        Some(v) => item(
            "RT throttling",
            Level::Pass,
            format!(
                "sched_rt_runtime_us = {v}: RT threads may use {:.0} % of each second",
                v as f64 / 1e4
            ),
            "",
        ),
        None => item(
            "RT throttling",
            Level::Warn,
            "unknown: /proc/sys/kernel/sched_rt_runtime_us cannot be read",
            "check on the host: cat /proc/sys/kernel/sched_rt_runtime_us (-1 or 950000)",
        ),
    }
}

/// Parses a kernel CPU list (`1-3,5`).
fn cpu_list(s: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        // isolcpus may carry flags: `isolcpus=domain,managed_irq,2-3`.
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                    out.extend(a..=b);
                }
            }
            None => {
                if let Ok(v) = part.parse() {
                    out.push(v);
                }
            }
        }
    }
    out
}

/// The value of `key=` on the kernel command line.
fn cmdline_param(cmdline: &str, key: &str) -> Option<String> {
    cmdline
        .split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('=').map(str::to_string))
}

fn isolation(what: &'static str, cpu: Option<usize>) -> Item {
    let Some(cpu) = cpu else {
        return item(
            what,
            Level::Warn,
            "not pinned (cpu = -1)",
            "pin it: set `cpu = N` in the configuration to an isolated CPU",
        );
    };
    let online = read("/sys/devices/system/cpu/online").map(|s| cpu_list(&s));
    if online.as_ref().is_some_and(|o| !o.contains(&cpu)) {
        return item(
            what,
            Level::Fail,
            format!("CPU {cpu} is not online"),
            "configure a CPU that exists (see /sys/devices/system/cpu/online)",
        );
    }
    let isolated = read("/sys/devices/system/cpu/isolated")
        .map(|s| cpu_list(&s))
        .unwrap_or_default();
    let cmdline = read("/proc/cmdline").unwrap_or_default();
    let nohz = cmdline_param(&cmdline, "nohz_full")
        .map(|s| cpu_list(&s))
        .unwrap_or_default();
    let rcu = cmdline_param(&cmdline, "rcu_nocbs")
        .map(|s| cpu_list(&s))
        .unwrap_or_default();
    let fix = format!(
        "boot with isolcpus={cpu} nohz_full={cpu} rcu_nocbs={cpu} (or a cpuset/cgroup \
         partition) and move IRQs off it (irqaffinity=)"
    );
    let flags = format!(
        "isolated {}, nohz_full {}, rcu_nocbs {}",
        yes(isolated.contains(&cpu)),
        yes(nohz.contains(&cpu)),
        yes(rcu.contains(&cpu))
    );
    if isolated.contains(&cpu) && nohz.contains(&cpu) {
        item(what, Level::Pass, format!("CPU {cpu}: {flags}"), "")
    } else {
        item(what, Level::Warn, format!("CPU {cpu}: {flags}"), fix)
    }
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn governor(cpu: Option<usize>) -> Item {
    let cpu = cpu.unwrap_or(0);
    governor_from(
        cpu,
        read(&format!(
            "/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"
        )),
    )
}

fn governor_from(cpu: usize, governor: Option<String>) -> Item {
    match governor {
        Some(g) if g == "performance" => item(
            "CPU governor",
            Level::Pass,
            format!("CPU {cpu}: performance"),
            "",
        ),
        Some(g) => item(
            "CPU governor",
            Level::Warn,
            format!("CPU {cpu}: {g}: frequency changes add wake-up latency"),
            "cpupower frequency-set -g performance (or echo performance > \
             /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor)",
        ),
        None => item(
            "CPU governor",
            Level::Warn,
            format!(
                "CPU {cpu}: unknown: no cpufreq governor exposed (firmware or a hypervisor \
                 may still scale the frequency)"
            ),
            "on bare metal, load the cpufreq driver and set the performance governor; in a VM, \
             ask for fixed-frequency vCPUs",
        ),
    }
}

fn smt(cpu: Option<usize>) -> Item {
    let active = read("/sys/devices/system/cpu/smt/active");
    let siblings = cpu.and_then(|c| {
        read(&format!(
            "/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list"
        ))
    });
    smt_from(active, siblings)
}

fn smt_from(active: Option<String>, siblings: Option<String>) -> Item {
    match active.as_deref() {
        Some("1") => item(
            "SMT",
            Level::Warn,
            format!(
                "on{}: a sibling thread shares the control CPU's core",
                siblings
                    .map(|s| format!(" (siblings {s})"))
                    .unwrap_or_default()
            ),
            "boot with nosmt, or isolate the sibling too and leave it idle",
        ),
        Some(_) => item("SMT", Level::Pass, "off", ""),
        None => item(
            "SMT",
            Level::Warn,
            "unknown: /sys/devices/system/cpu/smt/active is not exposed",
            "check the CPU's topology (lscpu: Thread(s) per core) and boot with nosmt if it is 2",
        ),
    }
}

fn dma_latency(hold: bool) -> Item {
    let writable = std::fs::OpenOptions::new()
        .write(true)
        .open(chunkrt_rt::os::CPU_DMA_LATENCY)
        .map(drop);
    dma_latency_from(writable, chunkrt_rt::os::cpu_dma_latency_now(), hold)
}

/// The C-state hold: whether this host lets `chunkrt run` hold
/// `/dev/cpu_dma_latency` at 0, and whether the configuration asks it to.
fn dma_latency_from(writable: std::io::Result<()>, current_us: Option<i32>, hold: bool) -> Item {
    let name = "/dev/cpu_dma_latency";
    let now = match current_us {
        Some(v) if v >= 2_000_000_000 => "not held now".to_string(),
        Some(v) => format!("held at {v} us now"),
        None => "current value unreadable".to_string(),
    };
    match (writable, hold) {
        (Ok(()), true) => item(
            name,
            Level::Pass,
            format!("writable: `chunkrt run` holds it at 0 while the loop runs ({now})"),
            "",
        ),
        (Ok(()), false) => item(
            name,
            Level::Warn,
            format!(
                "writable, but control.hold_cpu_dma_latency = false: deep C-states add \
                 wake-up latency ({now})"
            ),
            "set control.hold_cpu_dma_latency = true (the default)",
        ),
        (Err(e), _) => item(
            name,
            Level::Warn,
            format!(
                "cannot open for writing: {e}: deep C-states cannot be held off, runs go on \
                 without ({now})"
            ),
            "run as root; in docker: --device /dev/cpu_dma_latency; or boot with \
             processor.max_cstate=1 intel_idle.max_cstate=0",
        ),
    }
}

fn clocksource() -> Item {
    clocksource_from(read(
        "/sys/devices/system/clocksource/clocksource0/current_clocksource",
    ))
}

fn clocksource_from(current: Option<String>) -> Item {
    match current {
        Some(c) if c == "tsc" => item("clocksource", Level::Pass, "tsc", ""),
        Some(c) => item(
            "clocksource",
            Level::Warn,
            format!("{c}: reading the clock is slower than with tsc"),
            "use a CPU with an invariant TSC, boot with tsc=reliable if the TSC is stable",
        ),
        None => item(
            "clocksource",
            Level::Warn,
            "unknown: current_clocksource is not exposed",
            "check /sys/devices/system/clocksource/clocksource0/current_clocksource on the host",
        ),
    }
}

/// Interrupt coalescing of the EtherCAT NIC: any delay here adds to every bus round trip.
fn coalescing(iface: &str) -> Item {
    let name = "NIC coalescing";
    if !std::path::Path::new(&format!("/sys/class/net/{iface}")).exists() {
        return item(
            name,
            Level::Fail,
            format!("{iface}: no such interface"),
            "set the EtherCAT interface to an existing NIC (ip link)",
        );
    }
    let out = match Command::new("ethtool").arg("-c").arg(iface).output() {
        Ok(o) => o,
        Err(e) => {
            return item(
                name,
                Level::Warn,
                format!("{iface}: cannot run ethtool: {e}"),
                "apt-get install ethtool",
            )
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        if err.contains("not supported") {
            return item(
                name,
                Level::Pass,
                format!("{iface}: the driver has no interrupt coalescing"),
                "",
            );
        }
        return item(
            name,
            Level::Warn,
            format!("{iface}: ethtool -c: {}", err.trim()),
            "",
        );
    }
    let coal = parse_coalescing(&text);
    let fix = format!(
        "ethtool -C {iface} adaptive-rx off adaptive-tx off rx-usecs 0 rx-frames 1 tx-usecs 0"
    );
    let delayed: Vec<String> = coal
        .iter()
        .filter(|(k, v)| match k.as_str() {
            "Adaptive RX" | "Adaptive TX" => v == "on",
            "rx-usecs" | "tx-usecs" => v.parse::<u64>().is_ok_and(|n| n > 0),
            "rx-frames" | "tx-frames" => v.parse::<u64>().is_ok_and(|n| n > 1),
            _ => false,
        })
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    if delayed.is_empty() {
        item(
            name,
            Level::Pass,
            format!("{iface}: no coalescing delay"),
            "",
        )
    } else {
        item(
            name,
            Level::Warn,
            format!("{iface}: {}", delayed.join(", ")),
            fix,
        )
    }
}

/// `key: value` pairs of `ethtool -c` (`Adaptive RX: on  TX: off` yields both).
fn parse_coalescing(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("Adaptive RX:") {
            let mut it = rest.split_whitespace();
            if let Some(rx) = it.next() {
                out.push(("Adaptive RX".into(), rx.to_string()));
            }
            if let (Some("TX:"), Some(tx)) = (it.next(), it.next()) {
                out.push(("Adaptive TX".into(), tx.to_string()));
            }
        } else if let Some((k, v)) = line.split_once(':') {
            out.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_and_cmdline_parameters_parse() {
        assert_eq!(cpu_list("1-3,5"), vec![1, 2, 3, 5]);
        assert_eq!(cpu_list(""), Vec::<usize>::new());
        assert_eq!(cpu_list("domain,managed_irq,2-3"), vec![2, 3]);
        let cmd = "BOOT_IMAGE=/vmlinuz root=/dev/sda1 isolcpus=2,3 nohz_full=2-3 quiet";
        assert_eq!(cmdline_param(cmd, "nohz_full").as_deref(), Some("2-3"));
        assert_eq!(cmdline_param(cmd, "rcu_nocbs"), None);
    }

    #[test]
    fn coalescing_output_parses_including_the_adaptive_line() {
        let text = "Coalesce parameters for eth0:\nAdaptive RX: on  TX: off\n\
                    stats-block-usecs: n/a\nrx-usecs: 3\nrx-frames: 1\ntx-usecs: 0\n";
        let c = parse_coalescing(text);
        let get = |k: &str| c.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str());
        assert_eq!(get("Adaptive RX"), Some("on"));
        assert_eq!(get("Adaptive TX"), Some("off"));
        assert_eq!(get("rx-usecs"), Some("3"));
        assert_eq!(get("tx-usecs"), Some("0"));
    }

    #[test]
    fn what_the_host_does_not_expose_is_a_warning_not_a_pass() {
        let unknown = [
            rt_throttling_from(None),
            rt_throttling_from(Some("garbage".into())),
            governor_from(1, None),
            smt_from(None, None),
            clocksource_from(None),
            dma_latency_from(
                Err(std::io::Error::from_raw_os_error(libc::ENOENT)),
                None,
                true,
            ),
        ];
        for it in &unknown {
            assert_eq!(it.level, Level::Warn, "{}: {}", it.name, it.found);
            assert!(!it.fix.is_empty(), "{}: a WARN needs a fix", it.name);
        }
        // Known answers stay what they were.
        assert_eq!(rt_throttling_from(Some("-1".into())).level, Level::Pass);
        assert_eq!(
            governor_from(1, Some("performance".into())).level,
            Level::Pass
        );
        assert_eq!(smt_from(Some("0".into()), None).level, Level::Pass);
        assert_eq!(clocksource_from(Some("tsc".into())).level, Level::Pass);
    }

    #[test]
    fn the_dma_latency_item_says_whether_the_run_will_hold_it() {
        let held = dma_latency_from(Ok(()), Some(2_000_000_000), true);
        assert_eq!(held.level, Level::Pass);
        assert!(
            held.found.contains("`chunkrt run` holds it at 0"),
            "{}",
            held.found
        );
        let off = dma_latency_from(Ok(()), Some(2_000_000_000), false);
        assert_eq!(off.level, Level::Warn);
        assert!(
            off.found.contains("hold_cpu_dma_latency = false"),
            "{}",
            off.found
        );
        let denied = dma_latency_from(
            Err(std::io::Error::from_raw_os_error(libc::EACCES)),
            None,
            true,
        );
        assert_eq!(denied.level, Level::Warn);
        assert!(
            denied.found.contains("Permission denied (os error 13)"),
            "{}",
            denied.found
        );
    }

    #[test]
    fn every_check_runs_on_this_host_without_panicking() {
        let items = run_checks(&Target {
            priority: 80,
            control_cpu: Some(0),
            inference_cpu: None,
            interface: Some("lo".into()),
            hold_cpu_dma_latency: true,
        });
        assert!(items.len() >= 11);
        assert!(items.iter().all(|i| !i.found.is_empty()));
        assert!(items
            .iter()
            .all(|i| i.level == Level::Pass || !i.fix.is_empty() || i.name == "NIC coalescing"));
        let missing = coalescing("chunkrt-no-such-nic0");
        assert_eq!(missing.level, Level::Fail);
    }
}
