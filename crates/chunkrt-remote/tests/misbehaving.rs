//! The openpi client against servers that misbehave on purpose
//! (`chunkrt_testkit::openpi_server`, in this process): a dribbling server cannot stretch
//! a reply, the handshake or the metadata past its deadline; a reply of many tiny
//! elements is refused without being built into a tree; a stale reply, a second reply to
//! one request and a reply that does not say which request it answers are refused; a
//! server that names no model digest is refused unless `verify_model` is off.
//!
//! Judged as a user of the client sees it: what `sample` returns, how many connections
//! the server saw, whether the server had sent its last byte when the client gave up,
//! and (for memory) the bytes the client's thread held at its peak.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use chunkrt_remote::{OpenpiSampler, RemoteError, ServerConfig};
use chunkrt_testkit::openpi_server::{serve, Behaviour, Dribble, OpenpiServer, ReplyKind};
use common::Request;

#[global_allocator]
static GLOBAL: chunkrt_alloc_count::CountingAllocator = chunkrt_alloc_count::CountingAllocator;

/// A server of the flow policy's chunk shape and digest (values near its home pose),
/// changed by `f`.
fn server(f: impl FnOnce(&mut Behaviour)) -> OpenpiServer {
    let m = chunkrt_policy::Manifest::load(&common::manifest("flow.toml")).unwrap();
    let mut b = Behaviour::new(Some(&m.model_sha256), m.horizon, m.d_a, 0.1);
    f(&mut b);
    serve(b)
}

fn sampler(cfg: ServerConfig) -> Result<OpenpiSampler, RemoteError> {
    common::flow_sampler(cfg)
}

/// Each reply sent a byte every 10 ms (the chunk's 1.8 kB would take 18 s), each read
/// of it well within any per-read timeout: the request fails by its 300 ms deadline,
/// while the server is still sending, and the next chunk connects anew. Before, the
/// client read on until the frame was complete.
#[test]
fn a_dribbled_reply_ends_by_its_deadline_and_the_next_chunk_reconnects() {
    let s = server(|b| b.dribble = Dribble::Replies(Duration::from_millis(10)));
    let mut cfg = ServerConfig::new(s.url.clone());
    cfg.reply_timeout = Duration::from_millis(300);
    let mut sampler = sampler(cfg).expect("the metadata is not dribbled");
    let mut r = Request::flow();
    let e = r.sample(&mut sampler).unwrap_err();
    assert!(e.0.contains("did not answer within 300 ms"), "{e}");
    let c = &s.counts;
    assert_eq!(c.dribbles_begun.load(Ordering::SeqCst), 1);
    assert_eq!(
        c.dribbles_done.load(Ordering::SeqCst),
        0,
        "the client waited for the last byte"
    );
    // The connection was given up (a frame half read is never read on): the next
    // chunk is asked on a new one.
    let e = r.sample(&mut sampler).unwrap_err();
    assert!(e.0.contains("did not answer within 300 ms"), "{e}");
    assert_eq!(c.connections.load(Ordering::SeqCst), 2);
    assert_eq!(sampler.stats().reconnects, 1);
}

/// The WebSocket handshake's HTTP response or the metadata message sent a byte at a
/// time: the connection fails by `connect_timeout` (300 ms) while the server is still
/// sending. Before, a dribbled metadata message took 42 s against a 2 s timeout.
#[test]
fn a_dribbled_handshake_or_metadata_ends_by_the_connect_deadline() {
    for dribble in [
        Dribble::Handshake(Duration::from_millis(20)),
        Dribble::Metadata(Duration::from_millis(10)),
    ] {
        let s = server(|b| b.dribble = dribble);
        let mut cfg = ServerConfig::new(s.url.clone());
        cfg.connect_timeout = Duration::from_millis(300);
        let e = sampler(cfg).expect_err("dribbled").to_string();
        assert!(
            e.contains("cannot connect") && e.contains("not connected within 300 ms"),
            "{dribble:?}: {e}"
        );
        let c = &s.counts;
        assert_eq!(c.dribbles_begun.load(Ordering::SeqCst), 1, "{dribble:?}");
        assert_eq!(c.dribbles_done.load(Ordering::SeqCst), 0, "{dribble:?}");
    }
}

/// A reply that answers the request before (the server one request behind), a second
/// reply to one request, a reply that names no request: each refused, never a chunk.
#[test]
fn stale_repeated_and_unnamed_replies_are_refused() {
    let mut r = Request::flow();
    for kind in [ReplyKind::Stale, ReplyKind::Twice] {
        let s = server(|b| b.reply = kind);
        let mut sampler = sampler(ServerConfig::new(s.url.clone())).unwrap();
        r.sample(&mut sampler)
            .expect("the first reply is the first request's");
        let e = r.sample(&mut sampler).unwrap_err();
        assert!(
            e.0.contains("answers request 1, not request 2"),
            "{kind:?}: {e}"
        );
        // Out of step: the connection is made again, and on it the third is answered
        // (the stale server answers its first request on a connection in time).
        r.sample(&mut sampler)
            .expect("the first reply on a new connection");
        assert_eq!(s.counts.connections.load(Ordering::SeqCst), 2, "{kind:?}");
    }
    let s = server(|b| b.reply = ReplyKind::NoId);
    let mut sampler = sampler(ServerConfig::new(s.url.clone())).unwrap();
    let e = r.sample(&mut sampler).unwrap_err();
    assert!(
        e.0.contains("does not echo the request's \"request_id\""),
        "{e}"
    );
}

/// A reply just under 16 MiB, nearly all of it one-byte nils under a key the client does
/// not read: refused by its element count, and the client's thread never holds more
/// than 4 times the message (the WebSocket's buffers). Before, the reply became a
/// tree of 16 million values (over 500 MB) before `actions` was looked up.
#[test]
fn a_reply_of_many_tiny_elements_is_refused_without_a_tree() {
    let s = server(|b| b.reply = ReplyKind::ManyTinyElements);
    let mut sampler = sampler(ServerConfig::new(s.url.clone())).unwrap();
    let mut r = Request::flow();
    let (result, peak) = chunkrt_alloc_count::peak_bytes(|| r.sample(&mut sampler));
    let e = result.unwrap_err();
    eprintln!(
        "many tiny elements: peak {:.1} MiB on the client's thread",
        peak as f64 / 1048576.0
    );
    assert!(e.0.contains("more than 65536 msgpack elements"), "{e}");
    assert!(
        peak < 64 << 20,
        "the client's thread held {peak} bytes at once"
    );
}

/// A server whose metadata names no model digest cannot prove it serves the manifest's
/// model: refused, with the key that would let it through; with `verify_model = false`
/// it is taken and serves. A server naming another digest is refused either way (the
/// Python server test covers that).
#[test]
fn a_server_that_names_no_digest_is_refused_unless_verify_model_is_off() {
    let s = server(|b| b.model_sha256 = None);
    let mut cfg = ServerConfig::new(s.url.clone());
    let e = sampler(cfg.clone()).expect_err("no digest").to_string();
    assert!(
        e.contains("names no model_sha256") && e.contains("verify_model = false"),
        "{e}"
    );
    cfg.verify_model = false;
    let mut sampler = sampler(cfg).expect("unverified, as asked");
    Request::flow().sample(&mut sampler).expect("served");
}
