//! What the interop tests of both protocols share: the repository's policies, a Python
//! with a server's packages, a server started from one of the scripts and killed when
//! dropped, a path of observations through the flow policy's domain, and a private CA
//! with a server certificate it signs.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use chunkrt_core::{MonoTime, Observation};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn manifest(name: &str) -> PathBuf {
    repo().join("rt-config/policies").join(name)
}

/// A Python that imports `modules`, or the skip's reason.
fn python(modules: &str) -> Result<PathBuf, String> {
    let py = std::env::var_os("CHUNKRT_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".venv/bin/python"));
    let ok = Command::new(&py)
        .args(["-c", &format!("import {modules}")])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        Ok(py)
    } else {
        Err(format!(
            "{} cannot import {modules}: run ./scripts/setup.sh",
            py.display()
        ))
    }
}

/// ONNX Runtime and a Python that imports `modules`, or `None` after saying what is
/// missing.
pub fn prerequisites(test: &str, modules: &str) -> Option<PathBuf> {
    if let Err(e) = chunkrt_policy::find_ort_library(None) {
        chunkrt_testkit::missing_prerequisite(test, &e.to_string());
        return None;
    }
    match python(modules) {
        Ok(py) => Some(py),
        Err(why) => {
            chunkrt_testkit::missing_prerequisite(test, &why);
            None
        }
    }
}

/// A running server script; killed when dropped.
pub struct Server {
    child: Child,
    pub url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `script` (in scripts/) on `manifest` with `extra` arguments after `--port 0`
/// (a later `--port` wins); waits for its `listening on URL`.
pub fn serve(py: &Path, script: &str, manifest: &Path, extra: &[&str]) -> Server {
    let mut child = Command::new(py)
        .arg(repo().join("scripts").join(script))
        .arg("--manifest")
        .arg(manifest)
        .args(["--port", "0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("python starts");
    let out = child.stdout.take().unwrap();
    let mut line = String::new();
    BufReader::new(out).read_line(&mut line).unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("{script} said {line:?}"))
        .to_string();
    Server { child, url }
}

/// A free port on this host.
pub fn free_port() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port().to_string()
}

/// Observation `k` of a path through the flow policy's domain.
pub fn observation(k: u64) -> Observation {
    let mut o = Observation {
        seq: k,
        t_capture: MonoTime::from_ns(1_000_000_000 + k * 50_000_000),
        dof: 7,
        ..Observation::default()
    };
    let start = [0.0, -0.4, 0.0, -1.6, 0.0, 1.2, 0.8];
    for (j, q0) in start.iter().enumerate() {
        let x = q0 + 0.05 * ((k as f64) * 0.3 + j as f64).sin();
        o.pos_rad[j] = x;
        o.cmd_pos_rad[j] = x;
        o.plan_pos_rad[j] = x;
    }
    o
}

/// Files of a private CA and a server certificate for localhost it signs.
pub struct Certificates {
    pub dir: PathBuf,
    pub ca: String,
    pub cert: String,
    pub key: String,
}

impl Drop for Certificates {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Makes a private CA and a server certificate it signs (webpki takes no CA certificate
/// as a server's own) with openssl, or `None` after saying it is missing.
pub fn certificates(test: &str) -> Option<Certificates> {
    let dir = std::env::temp_dir().join(format!("chunkrt-remote-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = |f: &str| dir.join(f).to_str().unwrap().to_string();
    let (ca, ca_key, cert, key, csr, ext) = (
        p("ca.pem"),
        p("ca.key"),
        p("cert.pem"),
        p("key.pem"),
        p("req.csr"),
        p("ext.cnf"),
    );
    std::fs::write(
        &ext,
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
         keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    let steps: [Vec<&str>; 3] = [
        vec![
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=chunkrt test CA",
            "-keyout",
            &ca_key,
            "-out",
            &ca,
        ],
        vec![
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            &key,
            "-out",
            &csr,
        ],
        vec![
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            &ext,
            "-out",
            &cert,
        ],
    ];
    for args in &steps {
        let made = Command::new("openssl")
            .args(args)
            .stderr(Stdio::null())
            .status();
        if !made.is_ok_and(|s| s.success()) {
            chunkrt_testkit::missing_prerequisite(test, "no openssl to make certificates");
            return None;
        }
    }
    Some(Certificates { dir, ca, cert, key })
}

/// A sampler of the flow policy's chunks (flow.toml's horizon, joints and digest) on the
/// server `cfg` names.
pub fn flow_sampler<L: chunkrt_remote::Link>(
    cfg: L::Config,
) -> Result<chunkrt_remote::ServedSampler<L>, chunkrt_remote::RemoteError> {
    let m = chunkrt_policy::Manifest::load(&manifest("flow.toml")).unwrap();
    chunkrt_remote::ServedSampler::connect(
        cfg,
        chunkrt_remote::MessageKeys::default(),
        chunkrt_remote::ActionsAre::Absolute,
        m.horizon,
        m.d_a,
        Some(m.model_sha256.clone()),
    )
}

/// 40 chunks of the flow policy sampled by the host and served by `remote`, on the same
/// observations: the same goals and shapes, the server's time read each time; the
/// largest difference of a setpoint (rad).
pub fn served_against_local(remote: Box<dyn chunkrt_policy::RemoteSampler>) -> f64 {
    use chunkrt_core::{Chunk, Policy};
    let cfg = chunkrt_policy::OnnxPolicyConfig::new(manifest("flow.toml"));
    let mut local = chunkrt_policy::OnnxPolicy::new(&cfg).expect("the flow policy loads");
    let mut served = chunkrt_policy::OnnxPolicy::remote(&cfg, remote).expect("warm-up served");
    let (mut a, mut b) = (Chunk::default(), Chunk::default());
    let mut worst = 0.0f64;
    for k in 0..40 {
        let o = observation(k);
        let ia = local.infer(&o, &mut a).unwrap();
        let ib = served.infer(&o, &mut b).unwrap();
        assert_eq!(ia.goal, ib.goal, "chunk {k}: the same goal");
        assert_eq!((a.len, a.dof), (b.len, b.dof), "chunk {k}: the same shape");
        for i in 0..a.len as usize {
            for j in 0..7 {
                worst = worst.max((a.pos_rad[i][j] - b.pos_rad[i][j]).abs());
            }
        }
        assert!(
            served.last_server_ns().is_some_and(|ns| ns > 0),
            "chunk {k}: the server's time read"
        );
    }
    worst
}

/// One chunk's inputs at the middle of the flow policy's domain, and room for its output.
pub struct Request {
    pub obs: Vec<f64>,
    pub noise: Vec<f32>,
    pub out: Vec<f64>,
}

impl Request {
    pub fn flow() -> Request {
        let m = chunkrt_policy::Manifest::load(&manifest("flow.toml")).unwrap();
        Request {
            obs: m.domain.mean.clone(),
            noise: vec![0.0; m.horizon * m.d_a],
            out: vec![0.0; m.horizon * m.d_a],
        }
    }

    /// One chunk from `s` (Euler, 4 steps).
    pub fn sample(
        &mut self,
        s: &mut dyn chunkrt_policy::RemoteSampler,
    ) -> Result<chunkrt_policy::Served, chunkrt_core::PolicyError> {
        let method = chunkrt_policy::SamplerMethod::Euler;
        s.sample(&self.obs, &self.noise, method, 4, &mut self.out)
    }

    /// With the server gone: three attempts back to back; how many were answered by the
    /// pause before the next connection attempt (not by a connection attempt).
    pub fn paused_attempts(&mut self, s: &mut dyn chunkrt_policy::RemoteSampler) -> usize {
        (0..3)
            .filter(|_| {
                self.sample(s)
                    .is_err_and(|e| e.0.contains("next attempt in"))
            })
            .count()
    }

    /// Asks for chunks until one is served (the server is back), for at most `within`.
    pub fn until_served(
        &mut self,
        s: &mut dyn chunkrt_policy::RemoteSampler,
        within: std::time::Duration,
    ) {
        let deadline = std::time::Instant::now() + within;
        loop {
            match self.sample(s) {
                Ok(_) => return,
                Err(e) if std::time::Instant::now() > deadline => panic!("not back: {e}"),
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(50)),
            }
        }
    }
}
