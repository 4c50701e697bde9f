//! What every protocol's connection to a policy server shares: where it is, how it is
//! reached (TLS and its authorities, a token, bounded waits and sizes), and the rule that
//! observations and a token cross a network in clear text only when asked for.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

/// How to reach a policy server. Its `Debug` leaves the token out.
#[derive(Clone, PartialEq)]
pub struct ServerConfig {
    /// openpi: `ws://host:port[/path]` or `wss://...`; OIP over gRPC: `http://host:port`
    /// or `https://...`.
    pub url: String,
    /// The server's API token: openpi sends it as `Authorization: Api-Key <token>`, OIP as
    /// `authorization: Bearer <token>` (KServe's and Triton's gateways' form).
    pub token: Option<String>,
    /// PEM file of the certificate authorities a TLS server's certificate must chain to;
    /// `None`: the Mozilla roots (webpki-roots).
    pub ca_file: Option<PathBuf>,
    /// Allows plain text to a server that is not on this host. Off by default: an
    /// observation and a token in clear text across a network must be asked for.
    pub allow_plaintext_remote: bool,
    /// Longest wait for the connection (TCP, TLS, handshake, the server's metadata).
    pub connect_timeout: Duration,
    /// Longest wait for a reply once the request is sent.
    pub reply_timeout: Duration,
    /// Largest message accepted (a reply larger is refused, never buffered).
    pub max_message_bytes: usize,
    /// Whether the server must prove that it serves the manifest's model (its SHA-256 in
    /// openpi's metadata, among an OIP model's versions). On by default; off only when
    /// the configuration says `verify_model = false`, and the run's report then says the
    /// model was not verified. A server that names another digest is refused either way.
    pub verify_model: bool,
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("url", &self.url)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("ca_file", &self.ca_file)
            .field("allow_plaintext_remote", &self.allow_plaintext_remote)
            .field("connect_timeout", &self.connect_timeout)
            .field("reply_timeout", &self.reply_timeout)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("verify_model", &self.verify_model)
            .finish()
    }
}

impl ServerConfig {
    /// `url` with the defaults: no token, Mozilla roots, loopback-only plain text, 2 s to
    /// connect, 1 s per reply, 16 MiB per message, the model's digest verified.
    pub fn new(url: impl Into<String>) -> ServerConfig {
        ServerConfig {
            url: url.into(),
            token: None,
            ca_file: None,
            allow_plaintext_remote: false,
            connect_timeout: Duration::from_secs(2),
            reply_timeout: Duration::from_secs(1),
            max_message_bytes: 16 << 20,
            verify_model: true,
        }
    }
}

/// Why the server could not be used.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The URL is not one this client takes.
    #[error("policy server URL {url:?}: {why}")]
    Url {
        /// The URL.
        url: String,
        /// What is wrong.
        why: String,
    },
    /// No connection (refused, unreachable, handshake or TLS failed).
    #[error("cannot connect to the policy server at {url}: {why}")]
    Connect {
        /// The URL.
        url: String,
        /// What failed.
        why: String,
    },
    /// No reply in time.
    #[error("the policy server at {url} did not answer within {ms} ms")]
    Timeout {
        /// The URL.
        url: String,
        /// The wait.
        ms: u128,
    },
    /// The connection ended.
    #[error("the policy server at {url} closed the connection: {why}")]
    Closed {
        /// The URL.
        url: String,
        /// How.
        why: String,
    },
    /// The server answered with its error (a text message: openpi sends its traceback).
    #[error("the policy server at {url} failed: {message}")]
    Server {
        /// The URL.
        url: String,
        /// What it said (cut to 2000 characters).
        message: String,
    },
    /// The server refused this request with its error, and the connection stands (an
    /// OIP server's gRPC status: an input it does not take, a model it does not have).
    #[error("the policy server at {url} refused the request: {message}")]
    Refused {
        /// The URL.
        url: String,
        /// What it said (cut to 2000 characters).
        message: String,
    },
    /// A reply that was read but does not hold a usable chunk (a missing output, a shape
    /// that is not the manifest's, a value that is not finite); the connection stands.
    #[error("the policy server at {url} sent no usable chunk: {why}")]
    Reply {
        /// The URL.
        url: String,
        /// What is wrong with it.
        why: String,
    },
    /// A reply this client cannot read.
    #[error("the policy server at {url} sent a reply this client cannot read: {why}")]
    Protocol {
        /// The URL.
        url: String,
        /// What is wrong with it.
        why: String,
    },
}

impl RemoteError {
    /// Whether the connection is gone (or in an unknown state) and must be made again.
    pub fn needs_reconnect(&self) -> bool {
        !matches!(
            self,
            RemoteError::Url { .. } | RemoteError::Refused { .. } | RemoteError::Reply { .. }
        )
    }
}

/// The schemes of one protocol: plain text and TLS.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Schemes {
    pub(crate) plain: &'static str,
    pub(crate) tls: &'static str,
}

/// The parts of a checked URL.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Target {
    pub(crate) tls: bool,
    pub(crate) host: String,
    pub(crate) port: u16,
}

/// Checks `cfg.url`: one of `schemes`, a host, and TLS for any host that is not this one
/// unless plain text is explicitly allowed.
pub(crate) fn target(cfg: &ServerConfig, schemes: Schemes) -> Result<Target, RemoteError> {
    let bad = |why: &str| RemoteError::Url {
        url: cfg.url.clone(),
        why: why.into(),
    };
    let uri: tonic::codegen::http::Uri = cfg.url.parse().map_err(|e| bad(&format!("{e}")))?;
    let (plain, tls) = (schemes.plain, schemes.tls);
    let tls = match uri.scheme_str() {
        Some(s) if s == plain => false,
        Some(s) if s == tls => true,
        _ => return Err(bad(&format!("the scheme must be {plain}:// or {tls}://"))),
    };
    let host = uri
        .host()
        .ok_or_else(|| bad("no host"))?
        .trim_matches(|c| c == '[' || c == ']')
        .to_string();
    let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
    let loopback = host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if !tls && !loopback && !cfg.allow_plaintext_remote {
        return Err(bad(&format!(
            "{host} is not this host, and {plain}:// sends observations and the token in clear \
             text: use {}:// (policy.remote.ca_file for a private CA), or set \
             policy.remote.allow_plaintext_remote = true on a network you trust",
            schemes.tls
        )));
    }
    Ok(Target { tls, host, port })
}

/// Largest CA file read (Mozilla's whole bundle is about 220 KB): anything larger is
/// refused before a byte is read.
pub const CA_FILE_LIMIT_BYTES: u64 = 4 << 20;

/// A CA file's bytes and the certificates they hold.
#[derive(Clone)]
pub(crate) struct CaFile {
    /// The PEM text as read (tonic takes it whole).
    pub(crate) pem: Vec<u8>,
    /// Its certificates.
    pub(crate) certs: Vec<rustls_pki_types::CertificateDer<'static>>,
}

/// Reads a CA file (PEM) with a bound, through `chunkrt-files` as every file a user
/// names: a FIFO, a device or a file over [`CA_FILE_LIMIT_BYTES`] is refused at once.
/// Checks that it holds at least one certificate.
pub fn check_ca_file(path: &std::path::Path) -> Result<(), String> {
    read_ca_file(path).map(|_| ())
}

pub(crate) fn read_ca_file(path: &std::path::Path) -> Result<CaFile, String> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::CertificateDer;
    let pem = chunkrt_files::read_bounded(path, CA_FILE_LIMIT_BYTES, "CA file")
        .map_err(|e| e.to_string())?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .map(|c| c.map(CertificateDer::into_owned))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("CA file {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("CA file {} holds no certificate", path.display()));
    }
    Ok(CaFile { pem, certs })
}

#[cfg(test)]
mod tests {
    use super::*;

    const WS: Schemes = Schemes {
        plain: "ws",
        tls: "wss",
    };

    #[test]
    fn plain_text_to_another_host_must_be_asked_for() {
        let mut cfg = ServerConfig::new("ws://10.0.0.7:8000");
        let e = target(&cfg, WS).unwrap_err().to_string();
        assert!(
            e.contains("wss://") && e.contains("allow_plaintext_remote"),
            "{e}"
        );
        cfg.allow_plaintext_remote = true;
        target(&cfg, WS).unwrap();
        for ok in [
            "ws://127.0.0.1:8000",
            "ws://localhost:8000/x",
            "wss://10.0.0.7",
            "ws://[::1]:9000",
        ] {
            target(&ServerConfig::new(ok), WS).unwrap();
        }
        let e = target(&ServerConfig::new("http://127.0.0.1:8000"), WS)
            .unwrap_err()
            .to_string();
        assert!(e.contains("ws:// or wss://"), "{e}");
        let grpc = Schemes {
            plain: "http",
            tls: "https",
        };
        let e = target(&ServerConfig::new("http://10.0.0.7:8081"), grpc)
            .unwrap_err()
            .to_string();
        assert!(e.contains("use https://"), "{e}");
        let t = target(&ServerConfig::new("https://10.0.0.7"), grpc).unwrap();
        assert_eq!((t.tls, t.port), (true, 443));
    }

    #[test]
    fn the_token_is_never_in_debug_output() {
        let mut cfg = ServerConfig::new("wss://policy.example:443");
        cfg.token = Some("s3cret-Token".into());
        for shown in [format!("{cfg:?}"), format!("{cfg:#?}")] {
            assert!(!shown.contains("s3cret"), "{shown}");
            assert!(shown.contains("policy.example"), "{shown}");
        }
    }
}
