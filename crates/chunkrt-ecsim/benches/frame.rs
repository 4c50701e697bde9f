//! Cost of one cyclic frame through the simulated chain: an LRW over the process image of 7
//! drives in OP plus an AL status check per drive, as ethercrab's `tx_rx` sends it. This bounds
//! how short a bus period the simulator can serve on one core.

use chunkrt_ecsim::esc::cmd;
use chunkrt_ecsim::network::{build_frame, parse_reply};
use chunkrt_ecsim::{SimConfig, SimNetwork};
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;

const DRIVES: usize = 7;
const IN: usize = 14;
const OUT: usize = 6;

fn fp(station: u16, reg: u16) -> [u8; 4] {
    let (a, r) = (station.to_le_bytes(), reg.to_le_bytes());
    [a[0], a[1], r[0], r[1]]
}

fn send(net: &mut SimNetwork, pdus: &[(u8, [u8; 4], &[u8])]) -> Vec<(Vec<u8>, u16)> {
    let mut reply = Vec::new();
    net.process_frame(&build_frame(pdus), &mut reply);
    parse_reply(&reply)
}

/// Configure the chain by hand the way a master does and bring it to OP.
fn chain_in_op() -> SimNetwork {
    let mut net = SimNetwork::new(SimConfig::virtual_chain(DRIVES)).expect("config");
    for i in 0..DRIVES {
        let adp = 0u16.wrapping_sub(i as u16);
        send(
            &mut net,
            &[(cmd::APWR, fp(adp, 0x10), &(0x1000 + i as u16).to_le_bytes())],
        );
    }
    for i in 0..DRIVES {
        let st = 0x1000 + i as u16;
        let mut sm = Vec::new();
        for (addr, len, ctl) in [
            (0x1000u16, 128u16, 0x26u8),
            (0x1080, 128, 0x22),
            (0x1100, OUT as u16, 0x64),
            (0x1180, IN as u16, 0x20),
        ] {
            sm.extend_from_slice(&addr.to_le_bytes());
            sm.extend_from_slice(&len.to_le_bytes());
            sm.extend_from_slice(&[ctl, 0, 1, 0]);
        }
        let fmmu = |log: usize, len: usize, phys: u16, ty: u8| {
            let mut f = Vec::new();
            f.extend_from_slice(&(log as u32).to_le_bytes());
            f.extend_from_slice(&(len as u16).to_le_bytes());
            f.extend_from_slice(&[0, 7]);
            f.extend_from_slice(&phys.to_le_bytes());
            f.extend_from_slice(&[0, ty, 1, 0, 0, 0]);
            f
        };
        let mut fm = fmmu(DRIVES * IN + OUT * i, OUT, 0x1100, 2);
        fm.extend(fmmu(IN * i, IN, 0x1180, 1));
        send(
            &mut net,
            &[
                (cmd::FPWR, fp(st, 0x0800), &sm),
                (cmd::FPWR, fp(st, 0x0600), &fm),
            ],
        );
    }
    for state in [2u8, 4, 8] {
        send(&mut net, &[(cmd::BWR, fp(0, 0x0120), &[state, 0])]);
    }
    net
}

fn cyclic_frame() -> Vec<u8> {
    let image = vec![0u8; DRIVES * (IN + OUT)];
    let mut pdus: Vec<(u8, [u8; 4], &[u8])> = vec![(cmd::LRW, [0; 4], &image)];
    for i in 0..DRIVES {
        pdus.push((cmd::FPRD, fp(0x1000 + i as u16, 0x0130), &[0, 0]));
    }
    build_frame(&pdus)
}

fn bench(c: &mut Criterion) {
    let mut net = chain_in_op();
    let frame = cyclic_frame();
    let mut reply = Vec::with_capacity(2048);
    net.process_frame(&frame, &mut reply);
    let r = parse_reply(&reply);
    assert_eq!(
        r[0].1,
        3 * DRIVES as u16,
        "all drives exchange process data"
    );
    assert!(r[1..].iter().all(|(d, _)| d[0] == 8), "all drives in OP");
    c.bench_function("ecsim_cyclic_frame_7_drives", |b| {
        b.iter(|| black_box(net.process_frame(black_box(&frame), &mut reply)))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
