//! The OIP client against MLServer (PyPI), a server no one here wrote: its gRPC service
//! serves the bundled flow policy through scripts/oip_runtime.py (onnxruntime). The
//! chunks it serves are the ones the host computes itself; a server of another model is
//! refused by its version, a model it does not have by its status; a stalled server
//! times out and a crashed one is reconnected to when it is back; TLS (terminated in
//! front of MLServer, as an ingress does) is reached through its CA and refused without
//! it, and a wrong token is refused by the server.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use chunkrt_remote::{OipConfig, OipSampler, RemoteError, ServerConfig};
use common::{manifest, Request, Server};

const MODULES: &str = "mlserver, onnxruntime";

fn prerequisites(test: &str) -> Option<PathBuf> {
    common::prerequisites(test, MODULES)
}

fn serve(py: &Path, manifest: &Path, extra: &[&str]) -> Server {
    common::serve(py, "oip_server.py", manifest, extra)
}

fn config(url: &str, model: &str) -> OipConfig {
    let mut server = ServerConfig::new(url);
    // MLServer answers its first request after loading; a loaded machine is slow.
    server.connect_timeout = Duration::from_secs(10);
    server.reply_timeout = Duration::from_secs(5);
    OipConfig {
        server,
        model: model.into(),
    }
}

fn sampler(cfg: OipConfig) -> Result<OipSampler, RemoteError> {
    common::flow_sampler(cfg)
}

#[test]
fn mlserver_serves_the_chunks_the_host_computes_itself() {
    let Some(py) = prerequisites("oip-interop") else {
        return;
    };
    let server = serve(&py, &manifest("flow.toml"), &[]);
    let remote = sampler(config(&server.url, "chunkrt-policy")).expect("MLServer answers");
    let worst = common::served_against_local(Box::new(remote));
    eprintln!("40 chunks, largest difference local vs MLServer {worst:.3e} rad");
    // The same float32 sampler in Rust and in NumPy/onnxruntime: rounding only (measured
    // 3.6e-7 rad, the same on every run: the inputs are fixed).
    assert!(
        worst < 1e-6,
        "served chunks differ from the host's by {worst} rad"
    );
}

#[test]
fn a_server_of_another_model_or_without_the_model_is_refused() {
    let Some(py) = prerequisites("oip-interop") else {
        return;
    };
    let server = serve(&py, &manifest("ddim.toml"), &[]);
    let e = sampler(config(&server.url, "chunkrt-policy"))
        .expect_err("another model")
        .to_string();
    assert!(
        e.contains("a different policy") && e.contains("SHA-256"),
        "{e}"
    );
    let e = sampler(config(&server.url, "no-such-model"))
        .expect_err("no such model")
        .to_string();
    assert!(
        e.contains("no-such-model") && e.to_lowercase().contains("not found"),
        "{e}"
    );
}

#[test]
fn a_stalled_server_times_out_and_a_crashed_one_is_reconnected_to() {
    let Some(py) = prerequisites("oip-interop") else {
        return;
    };
    let port = common::free_port();
    // The second reply is held back 1.5 s, the process ends after the fourth.
    let server = serve(
        &py,
        &manifest("flow.toml"),
        &[
            "--port",
            &port,
            "--stall-after",
            "2",
            "--stall-s",
            "1.5",
            "--exit-after",
            "4",
        ],
    );
    let mut cfg = config(&server.url, "chunkrt-policy");
    cfg.server.reply_timeout = Duration::from_millis(500);
    let mut s = sampler(cfg).unwrap();
    let mut r = Request::flow();
    r.sample(&mut s).expect("first served");
    let e = r.sample(&mut s).unwrap_err();
    assert!(e.0.contains("did not answer within 500 ms"), "{e}");
    // The next chunk connects again (MLServer is busy until the stall ends: within the
    // connect timeout) and is served.
    r.sample(&mut s).expect("served after reconnecting");
    assert_eq!(s.stats().reconnects, 1, "{:?}", s.stats());
    // The fourth request ends the process before its reply.
    let e = r.sample(&mut s).unwrap_err();
    assert!(
        e.0.contains("closed the connection") || e.0.contains("did not answer"),
        "{e}"
    );
    drop(server);
    assert!(
        r.paused_attempts(&mut s) >= 1,
        "no pause between failed attempts"
    );
    let _back = serve(&py, &manifest("flow.toml"), &["--port", &port]);
    r.until_served(&mut s, Duration::from_secs(60));
    let st = s.stats();
    assert!(st.reconnects == 2 && st.failed_connects >= 1, "{st:?}");
    assert!(r.out.iter().all(|x| x.is_finite()));
}

#[test]
fn tls_reaches_mlserver_through_its_ca_and_a_wrong_token_is_refused() {
    let Some(py) = prerequisites("oip-interop") else {
        return;
    };
    let Some(certs) = common::certificates("oip-tls") else {
        return;
    };
    let server = serve(
        &py,
        &manifest("flow.toml"),
        &[
            "--host",
            "localhost",
            "--tls-cert",
            &certs.cert,
            "--tls-key",
            &certs.key,
            "--token",
            "s3cret",
        ],
    );
    assert!(
        server.url.starts_with("https://localhost:"),
        "{}",
        server.url
    );
    let mut cfg = config(&server.url, "chunkrt-policy");
    cfg.server.token = Some("s3cret".into());
    let e = sampler(cfg.clone()).expect_err("no CA").to_string();
    assert!(
        e.contains("cannot connect") && e.to_lowercase().contains("certificate"),
        "{e}"
    );
    cfg.server.ca_file = Some(PathBuf::from(&certs.ca));
    let mut r = Request::flow();
    let mut s = sampler(cfg.clone()).expect("through its CA");
    r.sample(&mut s).expect("served with the token");
    cfg.server.token = Some("wrong".into());
    let mut s = sampler(cfg).expect("the connection does not need the token");
    let e = r.sample(&mut s).unwrap_err();
    assert!(e.0.contains("bad token") && e.0.contains("refused"), "{e}");
    assert_eq!(s.stats().reconnects, 0, "a refusal keeps the connection");
}
