//! The operator's command channel through the binary (issues 40 and 56): `[operator]
//! socket`, and `stdin = true` with the keys, on a run of two episodes (the flow policy
//! on the simulated arm, frozen). Mid-way through the first episode an operator marks it
//! intervened and stops it; re-armed, the run goes on with the second.
//!
//! Judged on the records: the first episode ends as `operator_stop`, intervened once,
//! with a mode event `OperatorHold` and an intervention record of the mark; the second
//! episode, after the re-arm, reaches its goal; an unknown command is answered as such.
//!
//! And the channel as a door (issue 56), judged by what clients get back, the socket's
//! mode on disk, the run's mode events and the exit status: a stop is heard while another
//! client idles and another floods; the socket is private whatever the umask (0600, or
//! 0660 and the configured group), and a user who is neither chunkrt's, root nor in that
//! group is refused at the file and, where the file's mode lets them in, by their
//! credentials; no other file is ever replaced by the socket; an over-long line on
//! standard input is refused whole, its tail never a command.

mod common;

use common::{bin, flow_sim_config_text, output_text, temp_dir};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the socket answers `command` (a hang detector of 10 s on the answer).
fn ask(sock: &Path, command: &str) -> String {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    writeln!(s, "{command}").unwrap();
    let mut line = String::new();
    BufReader::new(s)
        .read_line(&mut line)
        .unwrap_or_else(|e| panic!("no answer to `{command}` within 10 s: {e}"));
    line
}

/// The run of `config` (text, written to `dir`) with `args`, started under umask 000
/// (the review's case: a socket that took the umask was open to every user).
fn spawn(dir: &Path, config: &str, args: &[&str]) -> Child {
    let path = dir.join("operator.toml");
    std::fs::write(&path, config).unwrap();
    let mut c = Command::new(bin());
    c.args(["run", "--quiet", "--no-plots", "--config"])
        .arg(&path)
        .arg("--out")
        .arg(dir.join("run"))
        .args(args)
        .env("CHUNKRT_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: umask is async-signal-safe and cannot fail.
    unsafe {
        c.pre_exec(|| {
            libc::umask(0);
            Ok(())
        })
    };
    c.spawn().unwrap()
}

/// The two-episode run with `[operator]` set to `operator` (a TOML body), started.
fn start(dir: &Path, operator: &str) -> Child {
    let text = flow_sim_config_text()
        + &format!(
            "\n[operator]\n{operator}\n\n[episodes]\ncount = 2\n\
             starts_rad = [[0.0, -0.4, 0.0, -1.6, 0.0, 1.2, 0.8]]\n\
             goals_rad = [[0.9, 0.1, -0.4, -1.2, 0.5, 1.0, 0.2]]\n\
             time_limit_s = 20.0\ntolerance_rad = 0.05\n"
        );
    spawn(dir, &text, &["--duration", "0"])
}

fn wait_for(path: &Path) {
    let t0 = Instant::now();
    while !path.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Until the run's events hold `what`.
fn wait_event(out: &Path, what: &str) {
    let t0 = Instant::now();
    while !std::fs::read_to_string(out.join("events.jsonl")).is_ok_and(|t| t.contains(what)) {
        assert!(t0.elapsed() < Duration::from_secs(60), "no {what} event");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The permission bits of `path` (the link itself).
fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

#[test]
fn an_operator_marks_and_stops_an_episode_and_the_run_goes_on_after_the_rearm() {
    let dir = temp_dir("operator", "stop");
    let sock = dir.join("operator.sock");
    let child = start(&dir, &format!("socket = \"{}\"", sock.display()));
    wait_for(&sock);
    // Private though the run's umask is 000.
    assert_eq!(mode(&sock), 0o600);
    // The first episode starts where the arm is (a reset of a few hundred ms) and
    // takes over two seconds to its goal: one second in, it runs.
    std::thread::sleep(Duration::from_millis(1000));
    assert!(ask(&sock, "intervene").starts_with("ok"));
    assert!(ask(&sock, "stop").starts_with("ok"));
    assert!(ask(&sock, "launch").starts_with("error: unknown command"));
    std::thread::sleep(Duration::from_millis(1000));
    assert!(ask(&sock, "rearm").starts_with("ok"));
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", output_text(&o));
    judge(&dir.join("run"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same through standard input, with the keys: `i`, `s`, then `r`. In between, lines
/// longer than 1024 bytes whose tails are commands (`r`, which re-armed a stopped arm in
/// the review, and `stop`) and an endless one: each refused whole, once, nothing of it
/// carried out.
#[test]
fn an_operator_at_the_terminal_does_the_same_with_keys_on_standard_input() {
    let dir = temp_dir("operator", "stdin");
    let mut child = start(&dir, "stdin = true");
    // The recording opens as the loop starts.
    wait_for(&dir.join("run/recording.mcap"));
    std::thread::sleep(Duration::from_millis(1000));
    let mut input = child.stdin.take().unwrap();
    writeln!(input, "i").unwrap();
    writeln!(input, "s").unwrap();
    for (fill, tail) in [(b'x', &b"r"[..]), (b'a', b"stop"), (b'z', b"")] {
        let mut line = vec![fill; if tail.is_empty() { 5000 } else { 1024 }];
        line.extend_from_slice(tail);
        line.push(b'\n');
        input.write_all(&line).unwrap();
    }
    std::thread::sleep(Duration::from_millis(1000));
    writeln!(input, "r").unwrap();
    drop(input); // the channel closes; the run goes on to its end
    let o = child.wait_with_output().unwrap();
    let text = output_text(&o);
    assert!(o.status.success(), "{text}");
    for (answer, n) in [
        ("operator: ok: the running episode is marked intervened", 1),
        ("operator: ok: the policy holds off until rearm", 1),
        ("operator: ok: re-armed", 1),
        (
            "operator: error: a line longer than 1024 bytes: refused whole",
            3,
        ),
        ("operator: error: unknown command", 0),
    ] {
        assert_eq!(text.matches(answer).count(), n, "{answer}: {text}");
    }
    judge(&dir.join("run"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The first episode ended as the operator's stop, marked once, with its records; the
/// second, after the re-arm, reached its goal.
fn judge(out: &Path) {
    let events = events(out);
    let eps: Vec<&Value> = events.iter().filter(|e| e["event"] == "episode").collect();
    assert_eq!(eps.len(), 2, "{events:?}");
    assert_eq!(eps[0]["outcome"], "operator_stop", "{}", eps[0]);
    assert_eq!(eps[0]["reason"], "OperatorHold", "{}", eps[0]);
    assert_eq!(eps[0]["intervened"], 1, "{}", eps[0]);
    assert_eq!(eps[1]["outcome"], "success", "{}", eps[1]);
    assert_eq!(eps[1]["intervened"], 0, "{}", eps[1]);
    assert!(events
        .iter()
        .any(|e| e["event"] == "operator_intervention" && e["episode"] == 0));
    let report: Value = common::read_json_checked(&out.join("report.json"));
    let records = report["interventions"].as_array().expect("records");
    assert!(
        records.iter().any(|r| r["kind"] == "operator_intervention"),
        "{records:?}"
    );
    assert!(
        records
            .iter()
            .any(|r| r["kind"] == "withdrawal" && r["detail"] == "OperatorHold"),
        "{records:?}"
    );
}

fn events(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The name of the group with id 65534 (`nogroup` on Debian, `nobody` elsewhere).
fn group_65534() -> Option<String> {
    std::fs::read_to_string("/etc/group")
        .ok()?
        .lines()
        .find(|l| l.split(':').nth(2) == Some("65534"))
        .and_then(|l| l.split(':').next().map(str::to_string))
}

/// One run without episodes, with `[operator] group` the group 65534: while one client
/// idles (half a command, no newline) and another floods (an endless line), a third's
/// `stop` is answered and holds the policy off; the socket is 0660 of that group under
/// umask 000; uid 65533 (no group of the socket's) cannot connect, and where the test opens
/// the socket's mode to everyone, its `rearm` and `stop` are refused by its credentials;
/// uid 65534 (in the group) re-arms; `intervene` with no episode is refused, not recorded.
#[test]
fn no_client_holds_up_a_stop_and_no_stranger_borrows_the_channel() {
    const TEST: &str = "no_client_holds_up_a_stop_and_no_stranger_borrows_the_channel";
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return chunkrt_testkit::missing_prerequisite(TEST, "root, to connect as other users");
    }
    let Some(group) = group_65534() else {
        return chunkrt_testkit::missing_prerequisite(TEST, "a group with id 65534");
    };
    let dir = temp_dir("operator", "door");
    let sock = dir.join("operator.sock");
    let config = flow_sim_config_text()
        + &format!(
            "\n[operator]\nsocket = \"{}\"\ngroup = \"{group}\"\n",
            sock.display()
        );
    let mut child = spawn(&dir, &config, &["--duration", "2.5s"]);
    wait_for(&sock);
    // The stop must find the policy playing to be seen as a mode event.
    wait_event(&dir.join("run"), "\"to\":\"Playing\"");
    let m = std::fs::symlink_metadata(&sock).unwrap();
    assert_eq!((mode(&sock), m.gid()), (0o660, 65534));
    let mut idle = UnixStream::connect(&sock).unwrap();
    idle.write_all(b"st").unwrap();
    let flooding = Arc::new(AtomicBool::new(true));
    let flood = flood(&sock, flooding.clone());
    std::thread::sleep(Duration::from_millis(200));
    let t0 = Instant::now();
    let answer = ask(&sock, "stop");
    let answered = t0.elapsed();
    assert_eq!(answer, "ok: the policy holds off until rearm\n");
    eprintln!("stop answered in {answered:?} while a client idled and another flooded");
    // Its effect in the records before anyone re-arms.
    wait_event(&dir.join("run"), "\"reason\":\"OperatorHold\"");
    assert_eq!(ask_as(65533, 65533, &sock, "rearm"), "connect: errno 13\n");
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777)).unwrap();
    for command in ["rearm", "stop"] {
        let got = ask_as(65533, 65533, &sock, command);
        assert!(got.starts_with("error: not permitted"), "{command}: {got}");
        if command == "rearm" {
            // The one who may: the hold is lifted by a member of the group.
            assert_eq!(ask_as(65534, 65534, &sock, "rearm"), "ok: re-armed\n");
        }
    }
    let answer = ask(&sock, "intervene");
    assert!(
        answer.starts_with("error: no episode is running"),
        "{answer}"
    );
    flooding.store(false, Ordering::SeqCst);
    flood.join().unwrap();
    drop(idle);
    let code = common::wait(&mut child, Duration::from_secs(60));
    let o = child.wait_with_output().unwrap();
    let text = output_text(&o);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(
        text.matches("operator: refused uid 65533").count(),
        2,
        "{text}"
    );
    // One hold (the stop), one re-arm (uid 65534's), and no hold after it: the
    // stranger's commands did nothing; no intervention without an episode.
    let events = events(&dir.join("run"));
    let reasons: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "mode")
        .filter_map(|e| e["reason"].as_str())
        .filter(|r| matches!(*r, "OperatorHold" | "Rearmed"))
        .collect();
    assert_eq!(reasons, ["OperatorHold", "Rearmed"], "{events:?}");
    assert!(
        !events.iter().any(|e| e["event"] == "operator_intervention"),
        "{events:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A client that sends one endless line, as fast as the socket takes it, until `on` is
/// cleared.
fn flood(sock: &Path, on: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_write_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    std::thread::spawn(move || {
        let piece = vec![b'x'; 64 * 1024];
        while on.load(Ordering::SeqCst) {
            if let Err(e) = s.write(&piece) {
                assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}");
            }
        }
    })
}

/// What a client of user `uid`, group `gid` (and no other group) gets from the socket for
/// `line`: the answer's first line, or `connect: errno N`. The client is a child process
/// whose ids are set as it starts (`Command::uid`); it then connects, asks and ends
/// without running any program.
fn ask_as(uid: u32, gid: u32, sock: &Path, line: &str) -> String {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: an all-zero sockaddr_un is valid; the path is copied in below.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let path = sock.as_os_str().as_bytes();
    assert!(path.len() < addr.sun_path.len());
    for (d, s) in addr.sun_path.iter_mut().zip(path) {
        *d = *s as libc::c_char;
    }
    let message = format!("{line}\n").into_bytes();
    let mut c = Command::new("/nonexistent-never-run");
    c.uid(uid)
        .gid(gid)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    // SAFETY: the closure runs in the forked child after its ids are set, and makes only
    // async-signal-safe system calls on memory prepared before the fork; it never returns.
    unsafe { c.pre_exec(move || client(&addr, &message)) };
    let out = c.output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The client, in the forked child: connect (10 s to answer), send, copy the answer's
/// first line to stdout, `_exit`. No allocation, no lock.
fn client(addr: &libc::sockaddr_un, message: &[u8]) -> ! {
    // SAFETY: every call gets valid pointers and lengths to memory this function owns or
    // borrows; all are async-signal-safe.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
        let tv = libc::timeval {
            tv_sec: 10,
            tv_usec: 0,
        };
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        );
        let at = (addr as *const libc::sockaddr_un).cast::<libc::sockaddr>();
        let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        if libc::connect(fd, at, len) != 0 {
            let e = *libc::__errno_location();
            let mut text = *b"connect: errno 000\n";
            for (i, d) in [e / 100, e / 10, e].into_iter().enumerate() {
                text[15 + i] = b'0' + (d % 10) as u8;
            }
            // "connect: errno " and the number without leading zeros.
            let start = if e < 10 {
                17
            } else if e < 100 {
                16
            } else {
                15
            };
            libc::write(1, text.as_ptr().cast(), 15);
            libc::write(1, text[start..].as_ptr().cast(), text.len() - start);
            libc::_exit(0);
        }
        libc::send(
            fd,
            message.as_ptr().cast(),
            message.len(),
            libc::MSG_NOSIGNAL,
        );
        let mut buf = [0u8; 512];
        loop {
            let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
            if n <= 0 {
                break;
            }
            let n = n as usize;
            libc::write(1, buf.as_ptr().cast(), n);
            if buf[..n].contains(&b'\n') {
                break;
            }
        }
        libc::_exit(0)
    }
}

/// `socket` naming a regular file (the review's `victim.txt`, which was deleted for the
/// socket) or a directory that does not exist: `validate` and `run` refuse the
/// configuration (exit 2, the file, line and key named), the file is left as it was,
/// nothing runs.
#[test]
fn a_socket_path_naming_another_file_or_no_directory_is_a_configuration_error() {
    let dir = temp_dir("operator", "path");
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, "the operator's notes").unwrap();
    for (socket, says) in [
        ("victim.txt", "is a regular file: only a socket"),
        ("no-such-dir/op.sock", "does not exist"),
    ] {
        let config = dir.join("operator.toml");
        let text = flow_sim_config_text() + &format!("\n[operator]\nsocket = \"{socket}\"\n");
        std::fs::write(&config, &text).unwrap();
        let line = text.lines().count();
        for args in [&["validate"][..], &["run", "--duration", "1s", "--config"]] {
            let mut c = Command::new(bin());
            c.args(args).arg(&config).env("CHUNKRT_LOG", "warn");
            if args[0] == "run" {
                c.arg("--out").arg(dir.join("run"));
            }
            let o = c.output().unwrap();
            let text = output_text(&o);
            assert_eq!(o.status.code(), Some(2), "{socket} {args:?}: {text}");
            let at = format!("operator.toml:{line}: key `operator.socket`");
            assert!(text.contains(&at) && text.contains(says), "{text}");
        }
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "the operator's notes"
        );
        assert!(!dir.join("run").exists());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
