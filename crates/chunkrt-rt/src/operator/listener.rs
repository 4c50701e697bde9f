//! The socket's listener: one thread, one `poll` over the listening socket and every
//! client, all non-blocking. No client waits on another: each turn reads at most one
//! piece from each client that has sent something and answers it at once, so a `stop`
//! is carried out in the turn it arrives, whatever the other clients do (idle, dribbling
//! a byte at a time, flooding). Each client must end a line within [`LINE_TIMEOUT`] of
//! connecting or of its last line, or is closed; past [`MAX_CLIENTS`] at once the
//! longest idle one is closed to make room, so a new operator is always heard. A client
//! that does not read its answers is closed.

use super::commands::{command, NOT_PERMITTED, TOO_LONG};
use super::line::{Line, LineReader};
use super::socket::{peer, Access, Peer};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a client may take for a line (from its connection or its last line).
pub const LINE_TIMEOUT: Duration = Duration::from_secs(10);
/// Clients served at once.
pub const MAX_CLIENTS: usize = 16;

/// The listener's bounds ([`LINE_TIMEOUT`], [`MAX_CLIENTS`]; tests take smaller ones).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// How long a client may take for a line.
    pub line_timeout: Duration,
    /// Clients served at once.
    pub max_clients: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            line_timeout: LINE_TIMEOUT,
            max_clients: MAX_CLIENTS,
        }
    }
}
/// The most read from one client in one turn.
const PIECE: usize = 1024;
/// The longest `poll` wait: how soon a stop request of the listener itself is seen.
const TURN_MAX: Duration = Duration::from_millis(200);

/// One connection.
struct Client {
    stream: UnixStream,
    peer: Peer,
    reader: LineReader,
    /// The next line is due by then.
    deadline: Instant,
    /// Its last bytes came then (the longest idle is closed first when full).
    last: Instant,
}

/// Serves `listener` (non-blocking) until `stop` is set.
pub fn run(listener: UnixListener, access: Access, limits: Limits, stop: Arc<AtomicBool>) {
    let mut clients: Vec<Client> = Vec::with_capacity(limits.max_clients);
    let mut piece = [0u8; PIECE];
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        let wait = clients
            .iter()
            .map(|c| c.deadline.saturating_duration_since(now))
            .fold(TURN_MAX, Duration::min);
        let ready = match wait_ready(&listener, &clients, wait) {
            Ok(r) => r,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => {
                tracing::error!("operator: poll: {e}");
                std::thread::sleep(TURN_MAX);
                continue;
            }
        };
        let mut open = vec![true; clients.len()];
        for (i, c) in clients.iter_mut().enumerate() {
            if ready[i + 1] {
                open[i] = serve(c, &mut piece, limits.line_timeout);
            }
        }
        let now = Instant::now();
        for (i, c) in clients.iter_mut().enumerate() {
            if open[i] && now >= c.deadline {
                let _ = answer(
                    c,
                    &format!(
                        "error: closed: no whole line within {:?}",
                        limits.line_timeout
                    ),
                );
                open[i] = false;
            }
        }
        let mut keep = open.into_iter();
        clients.retain(|_| keep.next().unwrap_or(false));
        if ready[0] {
            accept(&listener, access, limits, &mut clients);
        }
    }
}

/// Which of the listener (first) and the clients (then, in order) can be read.
fn wait_ready(
    listener: &UnixListener,
    clients: &[Client],
    wait: Duration,
) -> nix::Result<Vec<bool>> {
    let mut fds: Vec<PollFd> = std::iter::once(listener.as_fd())
        .chain(clients.iter().map(|c| c.stream.as_fd()))
        .map(|fd| PollFd::new(fd, PollFlags::POLLIN))
        .collect();
    let ms = u16::try_from(wait.as_millis()).unwrap_or(u16::MAX);
    poll(&mut fds, PollTimeout::from(ms))?;
    Ok(fds
        .iter()
        .map(|f| f.revents().is_some_and(|r| !r.is_empty()))
        .collect())
}

/// Reads one piece from `c` and carries out the lines it ends; whether `c` stays open.
fn serve(c: &mut Client, piece: &mut [u8], line_timeout: Duration) -> bool {
    let n = match c.stream.read(piece) {
        Ok(0) => return false,
        Ok(n) => n,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => return true,
        Err(_) => return false,
    };
    let now = Instant::now();
    c.last = now;
    let mut answers = String::new();
    let peer = &c.peer;
    c.reader.feed(&piece[..n], |line| {
        let said = match line {
            Line::TooLong => Some(TOO_LONG),
            Line::Text(t) => {
                let text = String::from_utf8_lossy(t);
                let said = (!text.trim().is_empty()).then(|| command(&text));
                if let Some(a) = said.filter(|a| a.starts_with("ok")) {
                    tracing::info!(
                        "operator: `{}` from uid {} (pid {}): {a}",
                        text.trim(),
                        peer.uid,
                        peer.pid
                    );
                }
                said
            }
        };
        if let Some(a) = said {
            answers.push_str(a);
            answers.push('\n');
        }
    });
    if piece[..n].contains(&b'\n') {
        c.deadline = now + line_timeout;
    }
    answers.is_empty() || answer_all(c, &answers)
}

/// Writes `text` whole without waiting; false when the client cannot take it (it does
/// not read its answers, or is gone).
fn answer_all(c: &mut Client, text: &str) -> bool {
    matches!(c.stream.write(text.as_bytes()), Ok(n) if n == text.len())
}

/// One line to `c`, without waiting.
fn answer(c: &mut Client, line: &str) -> bool {
    answer_all(c, &format!("{line}\n"))
}

/// Takes every waiting connection: a peer that may not use the socket is answered why
/// and closed; past `limits.max_clients` the longest idle client makes room.
fn accept(listener: &UnixListener, access: Access, limits: Limits, clients: &mut Vec<Client>) {
    loop {
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::warn!("operator: accept: {e}");
                return;
            }
        };
        let Ok(peer) = peer(&stream) else {
            continue;
        };
        if stream.set_nonblocking(true).is_err() {
            continue;
        }
        let now = Instant::now();
        let mut client = Client {
            stream,
            peer,
            reader: LineReader::default(),
            deadline: now + limits.line_timeout,
            last: now,
        };
        if !access.permits(&client.peer) {
            tracing::warn!(
                "operator: refused uid {} (pid {}): not chunkrt's user (uid {}), root or a \
                 member of its [operator] group",
                client.peer.uid,
                client.peer.pid,
                access.uid
            );
            let _ = answer(&mut client, NOT_PERMITTED);
            continue;
        }
        if clients.len() >= limits.max_clients {
            let idle = (0..clients.len())
                .min_by_key(|&i| clients[i].last)
                .unwrap_or(0);
            let mut gone = clients.swap_remove(idle);
            let _ = answer(
                &mut gone,
                &format!(
                    "error: closed: {} operator connections at once, this one the longest idle",
                    limits.max_clients
                ),
            );
        }
        clients.push(client);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;
    use std::path::PathBuf;

    /// A listener on a socket of its own, served on a thread until dropped.
    struct Served {
        path: PathBuf,
        stop: Arc<AtomicBool>,
        thread: Option<std::thread::JoinHandle<()>>,
    }

    impl Served {
        fn start(name: &str, limits: Limits) -> Served {
            let dir = std::env::temp_dir()
                .join(format!("chunkrt-rt-listener-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join("op.sock");
            let listener = UnixListener::bind(&path).unwrap();
            listener.set_nonblocking(true).unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let flag = stop.clone();
            let access = Access::this_user(None);
            let thread = std::thread::spawn(move || run(listener, access, limits, flag));
            Served {
                path,
                stop,
                thread: Some(thread),
            }
        }

        fn connect(&self) -> UnixStream {
            let s = UnixStream::connect(&self.path).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s
        }
    }

    impl Drop for Served {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::SeqCst);
            if let Some(t) = self.thread.take() {
                t.join().unwrap();
            }
            let _ = std::fs::remove_dir_all(self.path.parent().unwrap());
        }
    }

    /// The next line `s` is sent ("" at its end).
    fn line(s: &UnixStream) -> String {
        let mut text = String::new();
        std::io::BufReader::new(s).read_line(&mut text).unwrap();
        text
    }

    fn ask(s: &mut UnixStream, text: &str) -> String {
        s.write_all(format!("{text}\n").as_bytes()).unwrap();
        line(s)
    }

    const UNKNOWN: &str = "error: unknown command";

    #[test]
    fn past_the_cap_the_longest_idle_client_makes_room_and_the_new_one_is_heard() {
        let served = Served::start("cap", Limits::default());
        let mut old: Vec<UnixStream> = (0..MAX_CLIENTS)
            .map(|_| {
                let mut s = served.connect();
                assert!(ask(&mut s, "x").starts_with(UNKNOWN));
                s
            })
            .collect();
        let mut new = served.connect();
        assert!(ask(&mut new, "x").starts_with(UNKNOWN));
        let closed = line(&old[0]);
        assert!(
            closed.starts_with("error: closed: 16 operator connections at once"),
            "{closed}"
        );
        assert_eq!(line(&old[0]), "", "then closed");
        for s in &mut old[1..] {
            assert!(ask(s, "x").starts_with(UNKNOWN));
        }
    }

    #[test]
    fn a_client_without_a_whole_line_in_time_is_closed_and_others_are_served_meanwhile() {
        let limits = Limits {
            line_timeout: Duration::from_millis(300),
            max_clients: 4,
        };
        let served = Served::start("deadline", limits);
        let t0 = Instant::now();
        let mut dribbler = served.connect();
        dribbler.write_all(b"st").unwrap();
        let mut other = served.connect();
        assert!(ask(&mut other, "x").starts_with(UNKNOWN));
        // A whole line restarts the deadline; half of one does not.
        dribbler.write_all(b"o").unwrap();
        let closed = line(&dribbler);
        assert_eq!(closed, "error: closed: no whole line within 300ms\n");
        assert!(t0.elapsed() >= limits.line_timeout);
        assert_eq!(line(&dribbler), "");
    }

    #[test]
    fn a_client_that_does_not_read_its_answers_is_closed() {
        let served = Served::start("unread", Limits::default());
        let mut flood = served.connect();
        flood
            .set_write_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let lines = b"x\n".repeat(4096);
        let mut sent = 0usize;
        // Each 2-byte line earns an answer of ~60 bytes that is never read: the socket's
        // buffer fills within a few MB of lines, and the listener lets the client go.
        let gone = loop {
            match flood.write(&lines) {
                Ok(n) => sent += n,
                Err(e) => break e,
            }
            assert!(sent < 256 << 20, "still open after {sent} bytes");
        };
        assert!(
            matches!(
                gone.kind(),
                std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
            ),
            "{gone}"
        );
    }
}
