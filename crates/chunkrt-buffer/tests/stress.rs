//! Two real threads hammer one channel: the payload carries a sequence number and a
//! checksum over 4 KiB, so the reader detects any torn read and any step backwards.
//! Bounded by a publication count, not by time.

use std::thread;

/// 4 KiB of payload (512 bytes under miri, which interprets every word it checks).
const WORDS: usize = if cfg!(miri) { 64 } else { 512 };

#[derive(Clone, Copy)]
struct Payload {
    seq: u64,
    data: [u64; WORDS],
    checksum: u64,
}

/// Deterministic content for `seq`: every word depends on `seq` and its position.
fn fill(seq: u64, p: &mut Payload) {
    p.seq = seq;
    let mut x = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for word in p.data.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *word = x;
    }
    p.checksum = checksum(p);
}

fn checksum(p: &Payload) -> u64 {
    p.data.iter().fold(p.seq, |acc, &w| acc.rotate_left(5) ^ w)
}

/// Runs one writer publishing `count` values (by copy or in place) against one reader.
/// Returns how many distinct values the reader saw.
fn run(count: u64, in_place: bool) -> u64 {
    let init = Payload {
        seq: 0,
        data: [0; WORDS],
        checksum: 0,
    };
    let mut init = init;
    init.checksum = checksum(&init);
    let (mut publisher, mut subscriber) = chunkrt_buffer::channel(init);

    let writer = thread::spawn(move || {
        let mut scratch = init;
        for seq in 1..=count {
            if in_place {
                publisher.publish_with(|slot| fill(seq, slot));
            } else {
                fill(seq, &mut scratch);
                publisher.publish(&scratch);
            }
        }
    });

    let mut last = 0u64;
    let mut seen = 0u64;
    while last < count {
        match subscriber.latest() {
            Some(p) => {
                assert_eq!(p.checksum, checksum(p), "torn read at seq {}", p.seq);
                assert!(p.seq > last, "seq went from {last} to {}", p.seq);
                assert!(p.seq <= count, "seq {} was never published", p.seq);
                last = p.seq;
                seen += 1;
            }
            // Yield rather than spin: on a loaded 2-core CI machine (and under miri) the
            // writer needs the CPU to make progress.
            None => thread::yield_now(),
        }
        // `peek` keeps returning the value read last, untouched by the writer.
        let p = subscriber.peek();
        assert_eq!((p.seq, p.checksum), (last, checksum(p)));
    }
    writer.join().expect("writer thread panicked");
    assert!(!subscriber.has_update());
    seen
}

/// Fewer publications under miri, which is orders of magnitude slower.
const COUNT: u64 = if cfg!(miri) { 100 } else { 100_000 };

#[test]
fn no_torn_or_stale_reads_publishing_by_copy() {
    let seen = run(COUNT, false);
    assert!(seen >= 1);
}

#[test]
fn no_torn_or_stale_reads_publishing_in_place() {
    let seen = run(COUNT, true);
    assert!(seen >= 1);
}
