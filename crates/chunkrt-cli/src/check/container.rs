//! Rows of `chunkrt check` for what a container or a cgroup can take away from the
//! loop even when the host is ready: an RT group-scheduling budget of 0, a device
//! left out of the container, capabilities not granted.
//!
//! On kernels with RT group scheduling (`CONFIG_RT_GROUP_SCHED`, cgroup v1
//! `cpu.rt_runtime_us`), a cgroup without a budget refuses SCHED_FIFO whatever the
//! capabilities; container engines create the container's cgroup with a budget of 0
//! unless asked (`--cpu-rt-runtime`), and can only grant one their parent has.
//! Everything is read through [`Sys`], so the tests run on a fake tree.

use super::item::{item, Item, Level};
use std::path::{Path, PathBuf};

/// The file system the rows read: `/` on a real host, a fake tree in tests.
pub(super) struct Sys {
    root: PathBuf,
}

impl Sys {
    /// The running system.
    pub(super) fn host() -> Self {
        Sys { root: "/".into() }
    }

    /// `path` (absolute, as on the system) under this tree.
    fn path(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }

    fn read(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(self.path(path)).ok()
    }

    fn exists(&self, path: &str) -> bool {
        self.path(path).exists()
    }
}

/// The container engine this process runs under, from the files engines leave
/// (`/run/.containerenv` podman, `/.dockerenv` docker) or the `container` variable
/// (podman, systemd-nspawn); `None` on a host.
pub(super) fn container_engine(sys: &Sys, env_container: Option<&str>) -> Option<String> {
    if sys.exists("/run/.containerenv") {
        Some("podman".into())
    } else if sys.exists("/.dockerenv") {
        Some("docker".into())
    } else {
        env_container
            .filter(|v| !v.is_empty())
            .map(|v| v.to_string())
    }
}

/// This process's cgroup as the checks need it.
#[derive(Debug, PartialEq)]
enum CpuCgroup {
    /// cgroup v1 `cpu` hierarchy: the cgroup's path in the hierarchy and its
    /// directory in this mount namespace.
    V1 { path: String, dir: PathBuf },
    /// cgroup v2 (unified): the cgroup's path and directory.
    V2 { path: String, dir: PathBuf },
}

/// Finds this process's cpu cgroup from `/proc/self/cgroup` and
/// `/proc/self/mountinfo`. A container sees its own cgroup mounted as the root of
/// the hierarchy (mountinfo's root field), while `/proc/self/cgroup` may give the
/// host's path: the directory is the mount point plus the path below that root.
fn cpu_cgroup(proc_cgroup: &str, mountinfo: &str) -> Option<CpuCgroup> {
    let mut v2_path = None;
    for line in proc_cgroup.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            v2_path = Some(path.to_string());
        } else if controllers.split(',').any(|c| c == "cpu") {
            let (root, mount) = cgroup_mount(mountinfo, |fs, opts| {
                fs == "cgroup" && opts.split(',').any(|o| o == "cpu")
            })?;
            return Some(CpuCgroup::V1 {
                dir: below(&mount, &root, path),
                path: path.to_string(),
            });
        }
    }
    let path = v2_path?;
    let (root, mount) = cgroup_mount(mountinfo, |fs, _| fs == "cgroup2")?;
    Some(CpuCgroup::V2 {
        dir: below(&mount, &root, &path),
        path,
    })
}

/// `(root, mount point)` of the first mount whose file system type and super
/// options satisfy `want`.
fn cgroup_mount(mountinfo: &str, want: impl Fn(&str, &str) -> bool) -> Option<(String, String)> {
    mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mut r = right.split_whitespace();
        let (fs, _source, opts) = (r.next()?, r.next()?, r.next().unwrap_or(""));
        if !want(fs, opts) {
            return None;
        }
        let l: Vec<&str> = left.split_whitespace().collect();
        Some((l.get(3)?.to_string(), l.get(4)?.to_string()))
    })
}

/// Directory of cgroup `path` in a hierarchy whose `root` is mounted at `mount`.
fn below(mount: &str, root: &str, path: &str) -> PathBuf {
    let rel = if root == "/" {
        path
    } else {
        // Outside the mounted subtree (cannot be seen here): the mount itself is
        // the nearest directory this process can read.
        path.strip_prefix(root).unwrap_or("")
    };
    Path::new(mount).join(rel.trim_start_matches('/'))
}

/// Whether the running kernel was built with `CONFIG_RT_GROUP_SCHED`, from
/// `/boot/config-<release>` (`None`: no config file to read).
fn rt_group_sched_configured(sys: &Sys, release: &str) -> Option<bool> {
    let config = sys.read(&format!("/boot/config-{release}"))?;
    Some(
        config
            .lines()
            .any(|l| l.trim() == "CONFIG_RT_GROUP_SCHED=y"),
    )
}

const BUDGET: &str = "RT group budget";

/// The RT group-scheduling budget of this process's cgroup: a budget of 0 makes
/// the kernel refuse SCHED_FIFO, whatever the capabilities.
pub(super) fn rt_budget(sys: &Sys, engine: Option<&str>, release: &str) -> Item {
    // What cannot be read is not a pass: the budget is unknown.
    let (Some(proc_cgroup), Some(mountinfo)) = (
        sys.read("/proc/self/cgroup"),
        sys.read("/proc/self/mountinfo"),
    ) else {
        return item(
            BUDGET,
            Level::Warn,
            "cannot read /proc/self/cgroup or /proc/self/mountinfo: the RT group budget is \
             unknown",
            "run chunkrt check where /proc is mounted (as the loop will run)",
        );
    };
    match cpu_cgroup(&proc_cgroup, &mountinfo) {
        Some(CpuCgroup::V1 { path, dir }) => v1_budget(sys, engine, &path, &dir),
        Some(CpuCgroup::V2 { path, dir }) => v2_budget(sys, engine, release, &path, &dir),
        None => item(
            BUDGET,
            Level::Pass,
            "no cpu cgroup found (/proc/self/cgroup, /proc/self/mountinfo)",
            "",
        ),
    }
}

fn v1_budget(sys: &Sys, engine: Option<&str>, path: &str, dir: &Path) -> Item {
    let file = dir.join("cpu.rt_runtime_us");
    let runtime = sys
        .read(&file.to_string_lossy())
        .and_then(|s| s.trim().parse::<i64>().ok());
    let period = sys
        .read(&dir.join("cpu.rt_period_us").to_string_lossy())
        .and_then(|s| s.trim().parse::<i64>().ok());
    match runtime {
        None => item(
            BUDGET,
            Level::Pass,
            format!("cgroup {path}: no cpu.rt_runtime_us (kernel without RT group scheduling)"),
            "",
        ),
        Some(0) => {
            let parent = Path::new(path)
                .parent()
                .map_or("/".into(), |p| p.display().to_string());
            let fix = match engine {
                Some(engine) => format!(
                    "on the host, give the container's parent cgroup a budget: \
                     echo 900000 > /sys/fs/cgroup/cpu{parent}/cpu.rt_runtime_us \
                     (podman: libpod_parent; docker: dockerd --cpu-rt-runtime=900000), then \
                     run the {engine} container with --cpu-rt-runtime=800000 \
                     --cpu-rt-period=1000000 (compose: cpu_rt_runtime, cpu_rt_period)"
                ),
                None => format!(
                    "give this cgroup a budget (its parents first): echo 800000 > \
                     /sys/fs/cgroup/cpu{path}/cpu.rt_runtime_us, or start the loop in the \
                     root cgroup"
                ),
            };
            item(
                BUDGET,
                Level::Fail,
                format!(
                    "cgroup {path}: cpu.rt_runtime_us = 0: the kernel refuses SCHED_FIFO here \
                     whatever the capabilities"
                ),
                fix,
            )
        }
        Some(v) => item(
            BUDGET,
            Level::Pass,
            format!(
                "cgroup {path}: RT threads may run {v} us{}",
                period.map_or(String::new(), |p| format!(" per {p} us"))
            ),
            "",
        ),
    }
}

fn v2_budget(sys: &Sys, engine: Option<&str>, release: &str, path: &str, dir: &Path) -> Item {
    // cgroup v2 has no RT budget to give: with RT group scheduling in the kernel,
    // a non-root cgroup under the cpu controller refuses SCHED_FIFO.
    let file = dir.join("cgroup.controllers");
    let Some(controllers) = sys.read(&file.to_string_lossy()) else {
        if path == "/" {
            return item(BUDGET, Level::Pass, "cgroup v2 /: the root cgroup", "");
        }
        // Unread is not a pass: whether the cpu controller is on is unknown.
        return item(
            BUDGET,
            Level::Warn,
            format!(
                "cgroup v2 {path}: cannot read {}: whether the cpu controller (and so \
                 SCHED_FIFO) is allowed is unknown",
                file.display()
            ),
            "run chunkrt check where the cgroup file system is mounted (as the loop will run)",
        );
    };
    let cpu_controlled = path != "/" && controllers.split_whitespace().any(|c| c == "cpu");
    if !cpu_controlled {
        return item(
            BUDGET,
            Level::Pass,
            format!("cgroup v2 {path}: not under the cpu controller"),
            "",
        );
    }
    let fix = format!(
        "cgroup v2 cannot give a cgroup an RT budget: boot a kernel without \
         CONFIG_RT_GROUP_SCHED (or with rt_group_sched=0 where the kernel has it), or run {} \
         where the cpu controller is not enabled",
        if engine.is_some() {
            "the container with --cgroupns=host in a cgroup"
        } else {
            "the loop in a cgroup"
        }
    );
    match rt_group_sched_configured(sys, release) {
        Some(false) => item(
            BUDGET,
            Level::Pass,
            format!("cgroup v2 {path}: kernel without RT group scheduling"),
            "",
        ),
        Some(true) => item(
            BUDGET,
            Level::Fail,
            format!(
                "cgroup v2 {path} under the cpu controller on a kernel with \
                 CONFIG_RT_GROUP_SCHED: SCHED_FIFO is refused here"
            ),
            fix,
        ),
        None => item(
            BUDGET,
            Level::Warn,
            format!(
                "cgroup v2 {path} under the cpu controller; whether the kernel has RT group \
                 scheduling is unknown (no /boot/config-{release}): if it does, SCHED_FIFO \
                 is refused here (see the SCHED_FIFO row)"
            ),
            fix,
        ),
    }
}

/// `/dev/cpu_dma_latency` inside a container: engines leave host devices out
/// unless given them.
pub(super) fn dma_device(sys: &Sys, engine: &str) -> Item {
    let name = "container devices";
    if sys.exists("/dev/cpu_dma_latency") {
        item(name, Level::Pass, "/dev/cpu_dma_latency present", "")
    } else {
        item(
            name,
            Level::Warn,
            format!(
                "/dev/cpu_dma_latency missing in this {engine} container: deep C-states \
                 cannot be held off while the loop runs"
            ),
            "run it with --device /dev/cpu_dma_latency (compose: devices: \
             [\"/dev/cpu_dma_latency:/dev/cpu_dma_latency\"])",
        )
    }
}

/// Capability numbers (linux/capability.h).
const CAP_NET_ADMIN: u32 = 12;
const CAP_NET_RAW: u32 = 13;
const CAP_IPC_LOCK: u32 = 14;
const CAP_SYS_NICE: u32 = 23;

/// The effective capability set (`CapEff:` of `/proc/self/status`, hexadecimal).
fn cap_eff(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
}

/// What the loop needs besides the limits: which capabilities are effective.
pub(super) struct CapsNeed {
    /// RLIMIT_RTPRIO already allows the configured priority (then CAP_SYS_NICE is
    /// not needed).
    pub rtprio_allows: bool,
    /// RLIMIT_MEMLOCK is unlimited (then CAP_IPC_LOCK is not needed).
    pub memlock_unlimited: bool,
    /// The configuration drives an EtherCAT bus (raw frames, NIC settings).
    pub ethercat: bool,
}

/// The capabilities the loop needs that this process lacks, each with what it is
/// for; FAIL when the loop cannot get what it asks for without one.
pub(super) fn capabilities(sys: &Sys, engine: Option<&str>, need: &CapsNeed) -> Item {
    let name = "capabilities";
    let Some(eff) = sys.read("/proc/self/status").as_deref().and_then(cap_eff) else {
        return item(
            name,
            Level::Warn,
            "CapEff unreadable in /proc/self/status",
            "check the capabilities by hand: grep Cap /proc/self/status; capsh --decode=...",
        );
    };
    let has = |cap: u32| eff & (1u64 << cap) != 0;
    let mut missing: Vec<(&str, Level, &str)> = Vec::new();
    if !has(CAP_SYS_NICE) && !need.rtprio_allows {
        missing.push((
            "SYS_NICE",
            Level::Fail,
            "SCHED_FIFO (RLIMIT_RTPRIO too low)",
        ));
    }
    if !has(CAP_IPC_LOCK) && !need.memlock_unlimited {
        missing.push(("IPC_LOCK", Level::Fail, "mlockall (RLIMIT_MEMLOCK limited)"));
    }
    if need.ethercat && !has(CAP_NET_RAW) {
        missing.push(("NET_RAW", Level::Fail, "raw EtherCAT frames"));
    }
    if need.ethercat && !has(CAP_NET_ADMIN) {
        missing.push((
            "NET_ADMIN",
            Level::Warn,
            "NIC interrupt coalescing (ethtool -C)",
        ));
    }
    if missing.is_empty() {
        return item(
            name,
            Level::Pass,
            format!("CapEff {eff:016x}: the loop's capabilities are effective"),
            "",
        );
    }
    let level = missing.iter().map(|m| m.1).max().unwrap_or(Level::Pass);
    let found = missing
        .iter()
        .map(|(cap, _, why)| format!("CAP_{cap} missing ({why})"))
        .collect::<Vec<_>>()
        .join(", ");
    let fix = match engine {
        Some(_) => format!(
            "run the container with {} (compose: cap_add)",
            missing
                .iter()
                .map(|(cap, _, _)| format!("--cap-add {cap}"))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        None => format!(
            "run as root, or grant them to the binary: setcap {}+ep $(command -v chunkrt)",
            missing
                .iter()
                .map(|(cap, _, _)| format!("cap_{}", cap.to_lowercase()))
                .collect::<Vec<_>>()
                .join(",")
        ),
    };
    item(name, level, found, fix)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake system tree in a fresh temporary directory.
    struct Fake {
        dir: PathBuf,
    }

    impl Fake {
        fn new(tag: &str) -> Self {
            let dir = std::env::temp_dir().join(format!(
                "chunkrt-check-{tag}-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("temp dir");
            Fake { dir }
        }

        fn write(&self, path: &str, text: &str) -> &Self {
            let p = self.dir.join(path.trim_start_matches('/'));
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(p, text).expect("write");
            self
        }

        fn sys(&self) -> Sys {
            Sys {
                root: self.dir.clone(),
            }
        }
    }

    impl Drop for Fake {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    const POD: &str = "/libpod_parent/libpod-936b228068c1";

    /// What podman on a cgroup v1 host shows inside the container (seen here).
    fn podman_v1(fake: &Fake, runtime_us: &str) {
        fake.write(
            "/proc/self/cgroup",
            &format!("3:cpuset:{POD}\n2:cpuacct:{POD}\n1:cpu:{POD}\n0::/\n"),
        )
        .write(
            "/proc/self/mountinfo",
            &format!(
                "89 81 0:46 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs rw,mode=755\n\
                 90 89 0:29 {POD} /sys/fs/cgroup/cpu ro,nosuid - cgroup cgroup rw,cpu\n\
                 91 89 0:30 {POD} /sys/fs/cgroup/cpuacct ro,nosuid - cgroup cgroup rw,cpuacct\n"
            ),
        )
        .write("/sys/fs/cgroup/cpu/cpu.rt_runtime_us", runtime_us)
        .write("/sys/fs/cgroup/cpu/cpu.rt_period_us", "1000000\n")
        .write("/run/.containerenv", "");
    }

    #[test]
    fn an_unreadable_cgroup_file_is_never_a_pass() {
        // Nothing under the fake root: /proc/self/cgroup cannot be read.
        let fake = Fake::new("unreadable");
        let it = rt_budget(&fake.sys(), None, "6.1.0");
        assert_eq!(it.level, Level::Warn, "{it:?}");
        assert!(it.found.contains("cannot read /proc/self/cgroup"), "{it:?}");
        // Readable but holding no cpu cgroup: said as it is.
        fake.write("/proc/self/cgroup", "0::/\n")
            .write("/proc/self/mountinfo", "");
        let it = rt_budget(&fake.sys(), None, "6.1.0");
        assert!(it.found.contains("no cpu cgroup found"), "{it:?}");
    }

    #[test]
    fn a_container_without_an_rt_budget_fails_with_the_host_fix() {
        let fake = Fake::new("nobudget");
        podman_v1(&fake, "0\n");
        let sys = fake.sys();
        let engine = container_engine(&sys, None);
        assert_eq!(engine.as_deref(), Some("podman"));
        let it = rt_budget(&sys, engine.as_deref(), "6.1.0");
        assert_eq!(it.level, Level::Fail, "{it:?}");
        assert!(it.found.contains("cpu.rt_runtime_us = 0"), "{it:?}");
        assert!(
            it.fix
                .contains("/sys/fs/cgroup/cpu/libpod_parent/cpu.rt_runtime_us"),
            "{it:?}"
        );
        assert!(it.fix.contains("--cpu-rt-runtime"), "{it:?}");
    }

    #[test]
    fn a_container_with_an_rt_budget_passes_and_shows_it() {
        let fake = Fake::new("budget");
        podman_v1(&fake, "800000\n");
        let it = rt_budget(&fake.sys(), Some("podman"), "6.1.0");
        assert_eq!(it.level, Level::Pass, "{it:?}");
        assert!(it.found.contains("800000 us per 1000000 us"), "{it:?}");
    }

    #[test]
    fn a_host_cgroup_is_read_below_the_hierarchy_root() {
        let fake = Fake::new("host");
        fake.write("/proc/self/cgroup", "1:cpu,cpuacct:/user.slice\n0::/\n")
            .write(
                "/proc/self/mountinfo",
                "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n",
            )
            .write(
                "/sys/fs/cgroup/cpu,cpuacct/user.slice/cpu.rt_runtime_us",
                "0\n",
            );
        let it = rt_budget(&fake.sys(), None, "6.1.0");
        assert_eq!(it.level, Level::Fail, "{it:?}");
        assert!(it.fix.contains("/sys/fs/cgroup/cpu/user.slice"), "{it:?}");
        // Without RT group scheduling the file is absent: nothing to fix.
        let fake = Fake::new("norgs");
        fake.write("/proc/self/cgroup", "1:cpu:/\n").write(
            "/proc/self/mountinfo",
            "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n",
        );
        assert_eq!(rt_budget(&fake.sys(), None, "6.1.0").level, Level::Pass);
    }

    #[test]
    fn cgroup_v2_under_the_cpu_controller_depends_on_the_kernel_config() {
        let fake = Fake::new("v2");
        fake.write("/proc/self/cgroup", "0::/system.slice/chunkrt.service\n")
            .write(
                "/proc/self/mountinfo",
                "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n",
            )
            .write(
                "/sys/fs/cgroup/system.slice/chunkrt.service/cgroup.controllers",
                "cpuset cpu io memory pids\n",
            );
        let sys = fake.sys();
        assert_eq!(rt_budget(&sys, None, "6.9.0").level, Level::Warn);
        fake.write("/boot/config-6.9.0", "CONFIG_RT_GROUP_SCHED=y\n");
        assert_eq!(rt_budget(&sys, None, "6.9.0").level, Level::Fail);
        fake.write("/boot/config-6.9.0", "# CONFIG_RT_GROUP_SCHED is not set\n");
        assert_eq!(rt_budget(&sys, None, "6.9.0").level, Level::Pass);
        // A cgroup whose cgroup.controllers cannot be read is not a pass (it was:
        // "not under the cpu controller").
        let fake = Fake::new("v2-unread");
        fake.write("/proc/self/cgroup", "0::/system.slice/chunkrt.service\n")
            .write(
                "/proc/self/mountinfo",
                "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n",
            );
        let it = rt_budget(&fake.sys(), None, "6.9.0");
        assert_eq!(it.level, Level::Warn, "{it:?}");
        assert!(it.found.contains("cannot read"), "{it:?}");
    }

    #[test]
    fn missing_capabilities_are_named_with_the_container_flag() {
        let fake = Fake::new("caps");
        // Docker's default set: no SYS_NICE, no IPC_LOCK, no NET_ADMIN, NET_RAW yes.
        fake.write(
            "/proc/self/status",
            "Name:\tchunkrt\nCapEff:\t00000000a80425fb\n",
        );
        let need = CapsNeed {
            rtprio_allows: false,
            memlock_unlimited: false,
            ethercat: true,
        };
        let it = capabilities(&fake.sys(), Some("podman"), &need);
        assert_eq!(it.level, Level::Fail, "{it:?}");
        assert!(it.found.contains("CAP_SYS_NICE missing"), "{it:?}");
        assert!(it.found.contains("CAP_IPC_LOCK missing"), "{it:?}");
        assert!(!it.found.contains("NET_RAW"), "{it:?}");
        assert!(it.found.contains("CAP_NET_ADMIN missing"), "{it:?}");
        assert!(
            it.fix.contains("--cap-add SYS_NICE --cap-add IPC_LOCK"),
            "{it:?}"
        );
        let host = capabilities(&fake.sys(), None, &need);
        assert!(
            host.fix.contains("setcap cap_sys_nice,cap_ipc_lock"),
            "{host:?}"
        );
        // Limits that already allow it need no capability.
        let limits = CapsNeed {
            rtprio_allows: true,
            memlock_unlimited: true,
            ethercat: false,
        };
        assert_eq!(capabilities(&fake.sys(), None, &limits).level, Level::Pass);
        // All granted.
        fake.write("/proc/self/status", "CapEff:\t000001fffeffffff\n");
        assert_eq!(capabilities(&fake.sys(), None, &need).level, Level::Pass);
    }

    #[test]
    fn a_container_without_the_dma_device_warns_with_the_device_flag() {
        let fake = Fake::new("dma");
        let it = dma_device(&fake.sys(), "docker");
        assert_eq!(it.level, Level::Warn);
        assert!(it.fix.contains("--device /dev/cpu_dma_latency"));
        fake.write("/dev/cpu_dma_latency", "");
        assert_eq!(dma_device(&fake.sys(), "docker").level, Level::Pass);
        assert_eq!(container_engine(&fake.sys(), Some("")), None);
        assert_eq!(
            container_engine(&fake.sys(), Some("systemd-nspawn")).as_deref(),
            Some("systemd-nspawn")
        );
    }
}
