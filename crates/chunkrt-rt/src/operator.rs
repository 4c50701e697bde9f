//! The operator's command channel (`[operator]`): a UNIX socket (`socket`) and or the
//! process's standard input (`stdin = true`), one command per line (the word, or its key:
//! `s`, `i`, `r`), answered `ok` or why not (on the connection; on stderr for stdin):
//! - `stop`: the policy loses authority now and stays without it (`OperatorHold`, every
//!   cycle) until `rearm`: the arm is brought to rest by the gate; in an episode, the
//!   episode ends as `operator_stop`; the run goes on;
//! - `intervene`: marks the running episode as intervened (counted in its record, an
//!   intervention record of its own);
//! - `rearm`: lifts a `stop` and re-arms the executor, as SIGUSR1 does.
//!
//! Each listener is a thread of its own; the control loop polls the flags they set
//! (lock-free, no allocation), as it polls the signals. What a listener reads is bounded
//! per line: an endless input is read in pieces, each refused, never held whole.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

static HOLD: AtomicBool = AtomicBool::new(false);
static MARKS: AtomicU32 = AtomicU32::new(0);

/// Whether an operator's `stop` holds the policy off.
pub fn held() -> bool {
    HOLD.load(Ordering::Relaxed)
}

/// Takes the `intervene` marks given since the last call.
pub fn take_marks() -> u32 {
    if MARKS.load(Ordering::Relaxed) == 0 {
        return 0;
    }
    MARKS.swap(0, Ordering::AcqRel)
}

/// Carries out one command line; the answer.
pub fn command(line: &str) -> &'static str {
    match line.trim() {
        "stop" | "s" => {
            HOLD.store(true, Ordering::SeqCst);
            "ok: the policy holds off until rearm"
        }
        "intervene" | "i" => {
            MARKS.fetch_add(1, Ordering::SeqCst);
            "ok: the running episode is marked intervened"
        }
        "rearm" | "r" => {
            HOLD.store(false, Ordering::SeqCst);
            crate::signals::request_rearm();
            "ok: re-armed"
        }
        _ => "error: unknown command (stop, intervene, rearm; or s, i, r)",
    }
}

/// Listens on `path` (a stale socket file there is replaced) on a thread of its own,
/// for as long as the process lives.
pub fn serve(path: &Path) -> std::io::Result<()> {
    if path.exists() {
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    std::thread::Builder::new()
        .name("chunkrt-operator".into())
        .spawn(move || {
            for conn in listener.incoming().flatten() {
                // One client at a time: commands are short; a client that hangs keeps
                // only this thread waiting, never the control loop.
                let _ = session(conn);
            }
        })?;
    Ok(())
}

/// Reads commands from standard input on a thread of its own, for as long as it is open
/// (its end closes the channel, not the run); each answer is a line on stderr.
pub fn serve_stdin() -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("chunkrt-operator-stdin".into())
        .spawn(|| {
            let mut input = std::io::stdin().lock();
            let mut line = Vec::with_capacity(LINE_MAX);
            loop {
                line.clear();
                match (&mut input)
                    .take(LINE_MAX as u64)
                    .read_until(b'\n', &mut line)
                {
                    Ok(0) | Err(_) => return,
                    Ok(_) if line.iter().all(u8::is_ascii_whitespace) => {}
                    Ok(_) => {
                        let answer = command(&String::from_utf8_lossy(&line));
                        eprintln!("chunkrt: operator: {answer}");
                    }
                }
            }
        })?;
    Ok(())
}

/// The longest command line read whole from standard input.
const LINE_MAX: usize = 1024;

fn session(conn: UnixStream) -> std::io::Result<()> {
    let mut out = conn.try_clone()?;
    // A bound on what one connection may send: an endless line is cut off.
    for line in BufReader::new(Read::take(conn, 64 * 1024)).lines() {
        let answer = command(&line?);
        writeln!(out, "{answer}")?;
    }
    Ok(())
}
