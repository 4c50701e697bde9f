//! The operator's command channel (`[operator]`): a UNIX socket (`socket`) and or the
//! process's standard input (`stdin = true`), one command per line (the word, or its key:
//! `s`, `i`, `r`), answered `ok` or why not (on the connection; on stderr for stdin):
//! - `stop`: the policy loses authority now and stays without it (`OperatorHold`, every
//!   cycle) until `rearm`: the arm is brought to rest by the gate; in an episode, the
//!   episode ends as `operator_stop`; the run goes on;
//! - `intervene`: marks the running episode as intervened (counted in its record, an
//!   intervention record of its own); refused when no episode is running;
//! - `rearm`: lifts a `stop` and re-arms the executor, as SIGUSR1 does.
//!
//! Commands act on the run in progress ([`open`] to the end of the run); between runs
//! they are refused. The control loop polls the flags they set (lock-free, no
//! allocation), as it polls the signals; a `stop` holds from the cycle after it arrives.
//!
//! One socket listener per process (`listener`: every client served at once, none
//! able to hold up another), created private and checking who connects (`socket`);
//! standard input read by a thread of its own. A later run of the same process (`chunkrt
//! gap`, `margin`) keeps the listener its config names again. Every line is read with a
//! bound (`line`): an over-long line is refused whole, its tail never taken for a command.

mod commands;
mod line;
mod listener;
mod socket;

pub use commands::{command, held, publish_episode, take_marks, NOT_PERMITTED, TOO_LONG};
pub use line::LINE_MAX;
pub use listener::{LINE_TIMEOUT, MAX_CLIENTS};
pub use socket::{Access, Peer};

use chunkrt_config::Config;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// This run reads commands from standard input.
static STDIN_ON: AtomicBool = AtomicBool::new(false);
/// The standard-input reader has been started (once per process).
static STDIN_STARTED: AtomicBool = AtomicBool::new(false);
/// The socket this process serves.
static SERVED: Mutex<Option<Served>> = Mutex::new(None);

/// The operator's channel for one run, from [`open`]: commands act on the run until it
/// is dropped.
#[must_use = "commands act on the run only while the channel is held"]
pub struct RunChannel(());

impl Drop for RunChannel {
    fn drop(&mut self) {
        commands::end_run();
    }
}

/// Opens the channel of `cfg`'s `[operator]` for a run, before anything moves: no hold
/// and no mark from an earlier run; the socket served (created, or this process's own
/// kept when the config names it again), standard input read when asked. The error
/// says what is wrong with the socket (a configuration error).
pub fn open(cfg: &Config) -> Result<RunChannel, String> {
    let op = cfg.operator.as_ref();
    let wanted = match op.and_then(|o| o.socket.as_ref()) {
        Some(socket) => {
            let group = match op.and_then(|o| o.group.as_deref()) {
                Some(name) => Some(chunkrt_config::resolve_group(name)?),
                None => None,
            };
            Some((cfg.resolve(socket), Access::this_user(group)))
        }
        None => None,
    };
    serve(wanted)?;
    let stdin = op.is_some_and(|o| o.stdin);
    STDIN_ON.store(stdin, Ordering::SeqCst);
    if stdin && !STDIN_STARTED.swap(true, Ordering::SeqCst) {
        if let Err(e) = std::thread::Builder::new()
            .name("chunkrt-operator-stdin".into())
            .spawn(read_stdin)
        {
            STDIN_STARTED.store(false, Ordering::SeqCst);
            return Err(format!("standard input: {e}"));
        }
    }
    commands::begin_run();
    Ok(RunChannel(()))
}

/// The socket being served, and how to end its listener.
struct Served {
    path: PathBuf,
    id: socket::SocketId,
    access: Access,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

/// Makes the served socket the one `wanted` (none: no socket): this process's listener is
/// kept while it serves that path for the same users and its socket is still there;
/// otherwise it ends (its socket removed) and the wanted one is created.
fn serve(wanted: Option<(PathBuf, Access)>) -> Result<(), String> {
    let mut served = SERVED.lock().unwrap_or_else(|e| e.into_inner());
    if let (Some(s), Some((path, access))) = (served.as_ref(), wanted.as_ref()) {
        if &s.path == path
            && s.access == *access
            && !s.thread.is_finished()
            && socket::SocketId::at(path) == Some(s.id)
        {
            return Ok(());
        }
    }
    if let Some(old) = served.take() {
        old.stop.store(true, Ordering::SeqCst);
        let _ = old.thread.join();
        if socket::SocketId::at(&old.path) == Some(old.id) {
            let _ = std::fs::remove_file(&old.path);
        }
    }
    let Some((path, access)) = wanted else {
        return Ok(());
    };
    let (listener, id) = socket::bind_private(&path, access)?;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let thread = std::thread::Builder::new()
        .name("chunkrt-operator".into())
        .spawn(move || listener::run(listener, access, listener::Limits::default(), flag))
        .map_err(|e| format!("the listener thread: {e}"))?;
    *served = Some(Served {
        path,
        id,
        access,
        stop,
        thread,
    });
    Ok(())
}

/// Reads commands from standard input for as long as it is open (its end closes the
/// channel, not the run); each answer is a line on stderr. Blocking reads of whatever
/// has arrived, cut into lines with the bound.
fn read_stdin() {
    let mut input = std::io::stdin().lock();
    let mut reader = line::LineReader::default();
    let mut piece = [0u8; 1024];
    loop {
        let n = match input.read(&mut piece) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        reader.feed(&piece[..n], |l| {
            let answer = match l {
                line::Line::TooLong => TOO_LONG,
                line::Line::Text(t) if t.iter().all(u8::is_ascii_whitespace) => return,
                line::Line::Text(_) if !STDIN_ON.load(Ordering::SeqCst) => {
                    "error: standard input is not an operator channel of this run"
                }
                line::Line::Text(t) => command(&String::from_utf8_lossy(t)),
            };
            // Not `eprintln!`: a closed stderr must not end the channel with a panic.
            let _ = writeln!(std::io::stderr(), "chunkrt: operator: {answer}");
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_too_long_answer_names_the_bound() {
        assert!(TOO_LONG.contains(&format!(" {LINE_MAX} bytes")));
    }
}
