//! The operating system's real-time facilities, each wrapped once.
//!
//! Everything here may fail on an ordinary machine (no root, no RT limits); callers
//! get the reason as text, warn loudly, and run anyway.

use chunkrt_core::MonoTime;

/// Reads `CLOCK_MONOTONIC`.
#[inline]
pub fn now() -> MonoTime {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    MonoTime(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// Sleeps until the absolute time `t` on `CLOCK_MONOTONIC` (`TIMER_ABSTIME`), so
/// that the schedule never drifts by the time spent working. Retries on EINTR.
#[inline]
pub fn sleep_until(t: MonoTime) {
    let ts = libc::timespec {
        tv_sec: (t.0 / 1_000_000_000) as libc::time_t,
        tv_nsec: (t.0 % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: `ts` is a valid timespec; a null remainder is allowed with TIMER_ABSTIME.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if rc != libc::EINTR {
            return;
        }
    }
}

/// A real-time facility of the host that was refused: what, the OS's words, and
/// what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// SCHED_FIFO at that priority refused.
    #[error(
        "SCHED_FIFO priority {priority} refused: {cause} (run as root or grant \
         CAP_SYS_NICE / an rtprio limit)"
    )]
    Fifo {
        /// The priority asked for.
        priority: u8,
        /// The OS error in words.
        cause: String,
    },
    /// `/dev/cpu_dma_latency` could not be opened for writing.
    #[error("{CPU_DMA_LATENCY}: cannot open for writing: {0}")]
    DmaLatencyOpen(std::io::Error),
    /// Writing 0 to `/dev/cpu_dma_latency` was refused.
    #[error("{CPU_DMA_LATENCY}: writing 0 refused: {0}")]
    DmaLatencyWrite(std::io::Error),
    /// `mlockall` refused.
    #[error("mlockall refused: {0} (raise `ulimit -l` or run as root)")]
    Mlock(std::io::Error),
}

/// Makes the calling thread SCHED_FIFO at `priority`.
pub fn set_fifo(priority: u8) -> Result<(), HostError> {
    use thread_priority::{
        set_thread_priority_and_policy, thread_native_id, RealtimeThreadSchedulePolicy,
        ThreadPriority, ThreadSchedulePolicy,
    };
    let prio = ThreadPriority::from_posix(thread_priority::ScheduleParams {
        sched_priority: priority as i32,
    });
    set_thread_priority_and_policy(
        thread_native_id(),
        prio,
        ThreadSchedulePolicy::Realtime(RealtimeThreadSchedulePolicy::Fifo),
    )
    .map_err(|e| HostError::Fifo {
        priority,
        cause: priority_error_text(&e),
    })
}

/// A scheduling error in words: the OS's errno as the OS says it ("Operation not
/// permitted (os error 1)"), not the crate's `OS(1)`.
fn priority_error_text(e: &thread_priority::Error) -> String {
    match e {
        thread_priority::Error::OS(code) => std::io::Error::from_raw_os_error(*code).to_string(),
        other => other.to_string(),
    }
}

/// The PM QoS device through which a process keeps the CPUs out of deep C-states.
pub const CPU_DMA_LATENCY: &str = "/dev/cpu_dma_latency";

/// Keeps `/dev/cpu_dma_latency` at 0 µs while it lives: no CPU enters a C-state
/// whose exit latency is above 0, so a sleeping control thread wakes in µs, not
/// the hundreds of µs a deep C-state costs (cyclictest holds the same). The
/// kernel drops the request when the file is closed, i.e. when this is dropped
/// (or the process dies).
#[derive(Debug)]
pub struct DmaLatencyHold {
    _file: std::fs::File,
}

/// Opens `/dev/cpu_dma_latency` and writes a 4-byte 0; the returned hold keeps
/// the file open. Fails without the device or the permission to write it.
pub fn hold_cpu_dma_latency() -> Result<DmaLatencyHold, HostError> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(CPU_DMA_LATENCY)
        .map_err(HostError::DmaLatencyOpen)?;
    file.write_all(&0i32.to_ne_bytes())
        .map_err(HostError::DmaLatencyWrite)?;
    Ok(DmaLatencyHold { _file: file })
}

/// The latency limit the kernel applies now (µs; 2,000,000,000 means no process
/// holds one); `None` when the device cannot be read.
pub fn cpu_dma_latency_now() -> Option<i32> {
    let b = std::fs::read(CPU_DMA_LATENCY).ok()?;
    let b: [u8; 4] = b.get(..4)?.try_into().ok()?;
    Some(i32::from_ne_bytes(b))
}

/// A thread's CPU affinity that could not be set.
#[derive(Debug, thiserror::Error)]
pub enum AffinityError {
    /// The OS refused to pin the thread to the CPU.
    #[error("pinning to CPU {0} refused")]
    PinRefused(usize),
    /// The CPU is not one this process may use.
    #[error("CPU {0} is not available to this process")]
    Unavailable(usize),
    /// The CPU number is past what a CPU set holds.
    #[error("CPU {0} is out of range")]
    OutOfRange(usize),
    /// Keeping off the CPU would leave the thread none.
    #[error("CPU {0} is the only CPU this thread may use")]
    OnlyCpu(usize),
    /// `sched_getaffinity` failed.
    #[error("reading the affinity: {0}")]
    Read(std::io::Error),
    /// `sched_setaffinity` failed.
    #[error("setting the affinity: {0}")]
    Set(std::io::Error),
}

/// Pins the calling thread to `cpu`.
pub fn pin_to(cpu: usize) -> Result<(), AffinityError> {
    let ids = core_affinity::get_core_ids().unwrap_or_default();
    match ids.into_iter().find(|c| c.id == cpu) {
        Some(id) if core_affinity::set_for_current(id) => Ok(()),
        Some(_) => Err(AffinityError::PinRefused(cpu)),
        None => Err(AffinityError::Unavailable(cpu)),
    }
}

/// Keeps the current thread off `cpu`: its affinity becomes the CPUs it may use now
/// minus `cpu` (the control thread's), so that the thread never has to be preempted
/// there when the control thread wakes. Refused (and nothing changed) when `cpu` is
/// the only CPU it may use.
pub fn keep_off(cpu: usize) -> Result<(), AffinityError> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `set` is a valid cpu_set_t of `size` bytes; pid 0 is this thread.
    if unsafe { libc::sched_getaffinity(0, size, &mut set) } != 0 {
        return Err(AffinityError::Read(std::io::Error::last_os_error()));
    }
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(AffinityError::OutOfRange(cpu));
    }
    // SAFETY: `cpu` is below CPU_SETSIZE and `set` is initialised.
    unsafe { libc::CPU_CLR(cpu, &mut set) };
    // SAFETY: as above.
    if unsafe { libc::CPU_COUNT(&set) } == 0 {
        return Err(AffinityError::OnlyCpu(cpu));
    }
    // SAFETY: `set` is a valid, non-empty cpu_set_t of `size` bytes.
    if unsafe { libc::sched_setaffinity(0, size, &set) } != 0 {
        return Err(AffinityError::Set(std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Locks current and future memory (`mlockall(MCL_CURRENT | MCL_FUTURE)`).
pub fn lock_memory() -> Result<(), HostError> {
    // SAFETY: mlockall has no memory-safety preconditions.
    let rc = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) };
    if rc == 0 {
        Ok(())
    } else {
        Err(HostError::Mlock(std::io::Error::last_os_error()))
    }
}

/// Touches `bytes` of stack so that the pages exist (and are locked) before the
/// first deadline: no page fault on the real-time path.
#[inline(never)]
pub fn prefault_stack(bytes: usize) {
    const CHUNK: usize = 16 * 1024;
    fn touch(depth: usize) {
        let mut buf = [0u8; CHUNK];
        // SAFETY: a volatile write to a local array is always valid; it keeps the
        // compiler from removing the touch.
        unsafe { std::ptr::write_volatile(buf.as_mut_ptr(), 1) };
        if depth > 1 {
            touch(depth - 1);
        }
        std::hint::black_box(&buf);
    }
    touch(bytes.div_ceil(CHUNK));
}

/// Kernel release and preemption model, read from the running kernel.
pub fn kernel_info() -> (String, String, bool) {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string();
    let version = std::fs::read_to_string("/proc/sys/kernel/version").unwrap_or_default();
    let rt = std::fs::read_to_string("/sys/kernel/realtime")
        .map(|s| s.trim() == "1")
        .unwrap_or(false)
        || version.contains("PREEMPT_RT");
    let preempt = if rt {
        "PREEMPT_RT".to_string()
    } else if version.contains("PREEMPT_DYNAMIC") {
        let mode = std::fs::read_to_string("/sys/kernel/debug/sched/preempt")
            .ok()
            .and_then(|s| {
                s.split_whitespace()
                    .find(|w| w.starts_with('('))
                    .map(|w| w.trim_matches(|c| c == '(' || c == ')').to_string())
            });
        match mode {
            Some(m) => format!("PREEMPT_DYNAMIC ({m})"),
            None => "PREEMPT_DYNAMIC".to_string(),
        }
    } else if version.contains("PREEMPT") {
        "PREEMPT".to_string()
    } else {
        "none/voluntary".to_string()
    };
    (release, preempt, rt)
}

/// Number of online CPUs.
pub fn cpu_count() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_errors_are_given_in_words() {
        let t = priority_error_text(&thread_priority::Error::OS(libc::EPERM));
        assert!(t.contains("Operation not permitted (os error 1)"), "{t}");
        assert!(!t.contains("OS(1)"), "{t}");
        // A refused SCHED_FIFO (an unprivileged thread asking for priority 99, when
        // this test does not run as root) reads the same way.
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            let e = std::thread::spawn(|| set_fifo(99)).join().unwrap();
            if let Err(e) = e {
                assert!(!e.to_string().contains("OS("), "{e}");
            }
        }
    }

    #[test]
    fn the_dma_latency_hold_reads_back_as_zero_while_it_lives() {
        match hold_cpu_dma_latency() {
            Ok(hold) => {
                assert_eq!(
                    cpu_dma_latency_now(),
                    Some(0),
                    "held, but the kernel reports otherwise"
                );
                drop(hold);
            }
            Err(e) => {
                // No device or no permission: the reason names the device and the error.
                let e = e.to_string();
                assert!(e.contains(CPU_DMA_LATENCY) && e.contains("os error"), "{e}");
            }
        }
    }

    #[test]
    fn the_clock_moves_forward_and_sleep_until_reaches_its_deadline() {
        let t0 = now();
        let deadline = t0.add_ns(2_000_000);
        sleep_until(deadline);
        assert!(now() >= deadline);
        // A deadline in the past returns at once.
        sleep_until(t0);
        prefault_stack(256 * 1024);
        let (release, preempt, _) = kernel_info();
        assert!(!release.is_empty() && !preempt.is_empty());
    }
}
