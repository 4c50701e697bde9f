//! The openpi client against a server no one here wrote the protocol of: a server built
//! as openpi's own (the `websockets` package, `openpi_client.msgpack_numpy`) serving the
//! bundled flow policy through onnxruntime (scripts/policy_server.py). The chunks it
//! serves are the ones the host computes itself; openpi_client's own
//! `WebsocketClientPolicy` is served by it too (so the server is faithful); a server of
//! another model is refused; a stalled one times out, a crashed one is reconnected to; a
//! `wss://` server is reached through its CA, and refused without it.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use chunkrt_remote::{OpenpiSampler, RemoteError, ServerConfig};
use common::{manifest, Request, Server};

const MODULES: &str = "openpi_client.msgpack_numpy, websockets, onnxruntime";

fn prerequisites(test: &str) -> Option<PathBuf> {
    common::prerequisites(test, MODULES)
}

fn serve(py: &Path, manifest: &Path, extra: &[&str]) -> Server {
    common::serve(py, "policy_server.py", manifest, extra)
}

fn sampler(cfg: ServerConfig) -> Result<OpenpiSampler, RemoteError> {
    common::flow_sampler(cfg)
}

#[test]
fn the_server_gives_the_chunks_the_host_computes_itself() {
    let Some(py) = prerequisites("openpi-interop") else {
        return;
    };
    let server = serve(&py, &manifest("flow.toml"), &[]);
    let remote = sampler(ServerConfig::new(server.url.clone())).expect("the server answers");
    let worst = common::served_against_local(Box::new(remote));
    eprintln!("40 chunks, largest difference local vs served {worst:.3e} rad");
    // The same float32 sampler in Rust and in NumPy/onnxruntime: rounding only (measured
    // 3.6e-7 rad, the same on every run: the inputs are fixed).
    assert!(
        worst < 1e-6,
        "served chunks differ from the host's by {worst} rad"
    );
}

#[test]
fn openpi_clients_own_client_is_served() {
    let Some(py) = prerequisites("openpi-interop") else {
        return;
    };
    let server = serve(&py, &manifest("flow.toml"), &[]);
    let script = format!(
        r#"
import numpy as np
from openpi_client.websocket_client_policy import WebsocketClientPolicy
p = WebsocketClientPolicy(host={url:?})
meta = p.get_server_metadata()
obs = {{"observation/state": np.zeros(meta["d_obs"], dtype=np.float32),
        "noise": np.zeros((meta["horizon"], meta["d_a"]), dtype=np.float32)}}
r = p.infer(obs)
print(r["actions"].shape[0], r["actions"].shape[1], r["server_timing"]["infer_ms"] > 0)
"#,
        url = server.url
    );
    let out = Command::new(&py).args(["-c", &script]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = chunkrt_policy::Manifest::load(&manifest("flow.toml")).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("{} {} True", m.horizon, m.d_a)
    );
}

#[test]
fn a_server_of_another_model_is_refused_by_its_digest() {
    let Some(py) = prerequisites("openpi-interop") else {
        return;
    };
    let server = serve(&py, &manifest("ddim.toml"), &[]);
    let e = sampler(ServerConfig::new(server.url.clone()))
        .expect_err("another model")
        .to_string();
    assert!(
        e.contains("a different policy") && e.contains("SHA-256"),
        "{e}"
    );
}

#[test]
fn a_stalled_server_times_out_and_the_next_chunk_reconnects() {
    let Some(py) = prerequisites("openpi-interop") else {
        return;
    };
    // The second reply (and every second after it) is held back 1 s.
    let server = serve(
        &py,
        &manifest("flow.toml"),
        &["--stall-after", "2", "--stall-s", "1"],
    );
    let mut cfg = ServerConfig::new(server.url.clone());
    cfg.reply_timeout = Duration::from_millis(300);
    let mut s = sampler(cfg).unwrap();
    let mut r = Request::flow();
    r.sample(&mut s).expect("first served");
    let e = r.sample(&mut s).unwrap_err();
    assert!(e.0.contains("did not answer within 300 ms"), "{e}");
    // The next chunk connects again and is served.
    r.sample(&mut s).expect("served after reconnecting");
    let st = s.stats();
    assert_eq!((st.reconnects, st.failed_chunks), (1, 1), "{st:?}");
}

#[test]
fn a_crashed_server_is_reconnected_to_when_it_is_back() {
    let Some(py) = prerequisites("openpi-interop") else {
        return;
    };
    let port = common::free_port();
    let start = |extra: &[&str]| {
        let mut args = vec!["--port", port.as_str()];
        args.extend_from_slice(extra);
        // serve() adds --port 0 first; the later --port wins in argparse.
        serve(&py, &manifest("flow.toml"), &args)
    };
    let server = start(&["--exit-after", "2"]);
    let mut s = sampler(ServerConfig::new(server.url.clone())).unwrap();
    let mut r = Request::flow();
    // The warm-up connection's metadata, then two replies, then the process is gone.
    r.sample(&mut s).unwrap();
    r.sample(&mut s).unwrap();
    let e = r.sample(&mut s).unwrap_err();
    assert!(
        e.0.contains("closed the connection") || e.0.contains("did not answer"),
        "{e}"
    );
    drop(server);
    // While it is down, attempts fail, and between them the sampler waits without trying.
    assert!(
        r.paused_attempts(&mut s) >= 1,
        "no pause between failed attempts"
    );
    let _back = start(&[]);
    r.until_served(&mut s, Duration::from_secs(10));
    let st = s.stats();
    assert!(st.reconnects == 1 && st.failed_connects >= 1, "{st:?}");
}

#[test]
fn tls_reaches_a_server_through_its_ca_and_refuses_it_without() {
    let Some(py) = prerequisites("openpi-interop") else {
        return;
    };
    let Some(certs) = common::certificates("openpi-tls") else {
        return;
    };
    let (ca, cert, key) = (&certs.ca, &certs.cert, &certs.key);
    let server = serve(
        &py,
        &manifest("flow.toml"),
        &[
            "--host",
            "localhost",
            "--tls-cert",
            cert,
            "--tls-key",
            key,
            "--token",
            "s3cret",
        ],
    );
    assert!(server.url.starts_with("wss://localhost:"), "{}", server.url);
    let mut cfg = ServerConfig::new(server.url.clone());
    cfg.token = Some("s3cret".into());
    let e = sampler(cfg.clone()).expect_err("no CA").to_string();
    assert!(
        e.contains("cannot connect") && e.to_lowercase().contains("certificate"),
        "{e}"
    );
    cfg.ca_file = Some(PathBuf::from(ca));
    sampler(cfg.clone()).expect("through its CA");
    cfg.token = Some("wrong".into());
    let e = sampler(cfg).expect_err("a wrong token").to_string();
    assert!(e.contains("bad token") || e.contains("closed"), "{e}");
}
