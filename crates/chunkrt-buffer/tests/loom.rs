//! Loom model of the triple buffer: every interleaving of one publisher and one
//! subscriber thread, under the C11 memory model. Loom's cells flag any read of a slot
//! that is not ordered after its write (a torn or stale value), and the assertions check
//! what the reader sees. Compiled only with `--cfg loom`:
//!
//! `CARGO_TARGET_DIR=target/loom RUSTFLAGS="--cfg loom" cargo test -p chunkrt-buffer --release --test loom`
#![cfg(loom)]

use loom::thread;

/// Two words written separately (in place, through `publish_with`): a torn read would
/// show them unequal.
type Payload = [u32; 2];

#[test]
fn reader_sees_whole_values_in_publication_order() {
    loom::model(|| {
        let (mut publisher, mut subscriber) = chunkrt_buffer::channel::<Payload>([0, 0]);
        let writer = thread::spawn(move || {
            for i in 1..=4u32 {
                publisher.publish_with(|slot| {
                    slot[0] = i;
                    slot[1] = i;
                });
            }
        });
        // Reading the initial value, then giving its slot back, checks that reads are
        // ordered before the publisher's next write of that slot, not only after its last.
        assert_eq!(subscriber.peek_with(|v| *v), [0, 0]);
        let mut last = 0;
        for _ in 0..3 {
            if subscriber.update() {
                let value = subscriber.peek_with(|v| *v);
                assert_eq!(value[0], value[1], "torn read {value:?}");
                assert!(value[0] > last, "{} read after {last}", value[0]);
                last = value[0];
            }
        }
        writer.join().expect("writer thread");
        // Once the publisher is done, the reader gets the final value (or already has it).
        subscriber.update();
        assert_eq!(subscriber.peek_with(|v| *v), [4, 4]);
        assert!(!subscriber.update());
    });
}

#[test]
fn publish_by_copy_and_latest_agree() {
    loom::model(|| {
        let (mut publisher, mut subscriber) = chunkrt_buffer::channel::<Payload>([0, 0]);
        let writer = thread::spawn(move || {
            publisher.publish(&[1, 1]);
            publisher.publish(&[2, 2]);
        });
        assert_eq!(*subscriber.peek(), [0, 0]);
        let first = subscriber.latest().copied();
        if let Some(value) = first {
            assert!(value == [1, 1] || value == [2, 2], "unexpected {value:?}");
        }
        writer.join().expect("writer thread");
        match subscriber.latest().copied() {
            Some(value) => assert_eq!(value, [2, 2]),
            None => assert_eq!(first, Some([2, 2]), "the final value was never delivered"),
        }
    });
}
