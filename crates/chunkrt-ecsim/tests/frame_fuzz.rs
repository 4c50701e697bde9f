//! Robustness: random and mutated frames never panic or wedge the simulator. After any sequence
//! of garbage, a plain BRD is still answered by every drive. Case count: PROPTEST_CASES
//! (default 256).

use chunkrt_ecsim::esc::cmd;
use chunkrt_ecsim::network::{build_frame, parse_reply};
use chunkrt_ecsim::{FrameOutcome, SimConfig, SimNetwork};
use proptest::prelude::*;

/// Valid frames of the kinds a master sends, to be mutated.
fn seeds() -> Vec<Vec<u8>> {
    let sm = [
        0x00, 0x10, 0x80, 0x00, 0x26, 0x00, 0x01, 0x00, 0x80, 0x10, 0x80, 0x00, 0x22, 0x00, 0x01,
        0x00,
    ];
    let fmmu = [0, 0, 0, 0, 6, 0, 0, 7, 0x00, 0x11, 0, 2, 1, 0, 0, 0];
    let mut sdo = [0u8; 128];
    sdo[..16].copy_from_slice(&[
        10, 0, 0, 0, 0, 0x13, 0, 0x20, 0x23, 0x00, 0x16, 0x01, 0x20, 0, 0x7A, 0x60,
    ]);
    vec![
        build_frame(&[(cmd::BRD, [0; 4], &[0, 0])]),
        build_frame(&[
            (cmd::APWR, [0, 0, 0x10, 0], &[0x00, 0x10]),
            (cmd::APWR, [0xFF, 0xFF, 0x10, 0], &[0x01, 0x10]),
        ]),
        build_frame(&[(cmd::FPWR, [0x00, 0x10, 0x00, 0x08], &sm)]),
        build_frame(&[(cmd::FPWR, [0x00, 0x10, 0x20, 0x01], &[0x02, 0x00])]),
        build_frame(&[(
            cmd::FPWR,
            [0x00, 0x10, 0x02, 0x05],
            &[0x00, 0x01, 0x40, 0x00, 0, 0],
        )]),
        build_frame(&[(cmd::FPWR, [0x00, 0x10, 0x00, 0x10], &sdo)]),
        build_frame(&[
            (cmd::FPWR, [0x00, 0x10, 0x00, 0x06], &fmmu),
            (cmd::LRW, [0; 4], &[0; 20]),
        ]),
        build_frame(&[
            (cmd::FRMW, [0x00, 0x10, 0x10, 0x09], &[0; 8]),
            (cmd::BWR, [0, 0, 0, 0x09], &[0; 4]),
        ]),
    ]
}

fn mutated() -> impl Strategy<Value = Vec<u8>> {
    let n = seeds().len();
    (
        0..n,
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
        any::<Option<prop::sample::Index>>(),
    )
        .prop_map(|(k, flips, cut)| {
            let mut f = seeds()[k].clone();
            for (at, v) in flips {
                let i = at.index(f.len());
                f[i] = v;
            }
            if let Some(c) = cut {
                f.truncate(c.index(f.len() + 1));
            }
            f
        })
}

fn random_frame() -> impl Strategy<Value = Vec<u8>> {
    (prop::collection::vec(any::<u8>(), 0..1600), any::<bool>()).prop_map(|(mut f, ecat)| {
        if ecat && f.len() >= 14 {
            f[12] = 0x88;
            f[13] = 0xA4;
            f[6] &= !0x02;
        }
        f
    })
}

/// Well-formed frames of random PDUs aimed at the registers and memory that have side effects.
fn structured_frame() -> impl Strategy<Value = Vec<u8>> {
    let reg = prop_oneof![
        Just(0x0010u16),
        Just(0x0120),
        Just(0x0300),
        Just(0x0500),
        Just(0x0502),
        (0x0600u16..0x0700),
        (0x0800u16..0x0880),
        Just(0x0900),
        Just(0x0910),
        Just(0x0920),
        Just(0x0981),
        (0x0F00u16..0x2100),
        any::<u16>(),
    ];
    let adp = prop_oneof![
        Just(0u16),
        Just(0xFFFF),
        Just(0x1000),
        Just(0x1001),
        Just(0x1002),
        any::<u16>()
    ];
    let pdu = (
        0u8..0x10,
        adp,
        reg,
        prop::collection::vec(any::<u8>(), 0..160),
    );
    prop::collection::vec(pdu, 1..5).prop_map(|pdus| {
        let refs: Vec<(u8, [u8; 4], &[u8])> = pdus
            .iter()
            .map(|(c, adp, ado, d)| {
                let (a, r) = (adp.to_le_bytes(), ado.to_le_bytes());
                (*c, [a[0], a[1], r[0], r[1]], d.as_slice())
            })
            .collect();
        build_frame(&refs)
    })
}

proptest! {
    #[test]
    fn garbage_never_wedges_the_chain(
        frames in prop::collection::vec(prop_oneof![mutated(), random_frame(), structured_frame()], 1..24)
    ) {
        let mut net = SimNetwork::new(SimConfig::virtual_chain(3)).unwrap();
        let mut reply = Vec::new();
        // Give the drives addresses and a path to PRE-OP so the fuzz reaches deeper states.
        for f in seeds().iter().take(4) {
            let _ = net.process_frame(f, &mut reply);
        }
        for f in &frames {
            if let FrameOutcome::Reply { .. } = net.process_frame(f, &mut reply) {
                // An ESC never changes a frame's length, only its contents.
                prop_assert_eq!(reply.len(), f.len());
            }
        }
        let probe = build_frame(&[(cmd::BRD, [0; 4], &[0])]);
        prop_assert_eq!(net.process_frame(&probe, &mut reply), FrameOutcome::Reply { delay_ns: 0 });
        prop_assert_eq!(parse_reply(&reply)[0].1, 3);
    }
}
