//! Run the simulated drive chain on a network interface (AF_PACKET, needs root/CAP_NET_RAW):
//!
//! ```text
//! ecsim_afpacket --iface IF [--drives N] [--config FILE]
//! ```
//!
//! Stands in for `chunkrt ecsim` until the CLI wires [`chunkrt_ecsim::run_af_packet`]. Stops
//! on SIGINT/SIGTERM and prints the wire counters.

use chunkrt_ecsim::{run_af_packet_with, SimConfig, SimNetwork};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Release);
}

fn usage() -> ExitCode {
    eprintln!("usage: ecsim_afpacket --iface IF [--drives N] [--config FILE]");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut iface = None;
    let mut drives = None;
    let mut config = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--iface", Some(v)) => iface = Some(v),
            ("--drives", Some(v)) => match v.parse::<usize>() {
                Ok(n) => drives = Some(n),
                Err(_) => {
                    eprintln!("--drives {v:?}: not a number");
                    return usage();
                }
            },
            ("--config", Some(v)) => config = Some(PathBuf::from(v)),
            _ => return usage(),
        }
    }
    let Some(iface) = iface else { return usage() };
    let mut cfg = match &config {
        Some(p) => match SimConfig::load(p) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("ecsim: {e}");
                return ExitCode::from(2);
            }
        },
        None => SimConfig::default(),
    };
    if let Some(n) = drives {
        cfg.drives = n;
    }
    let net = match SimNetwork::new(cfg) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("ecsim: {e}");
            return ExitCode::from(2);
        }
    };
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    eprintln!("ecsim: {} drives on {iface}", net.len());
    match run_af_packet_with(&iface, net, &STOP) {
        Ok(stats) => {
            eprintln!("ecsim: stopped; {stats:?}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ecsim: {e}");
            ExitCode::from(2)
        }
    }
}
