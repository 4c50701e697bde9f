//! The V4L2 buffer timestamp to capture time mapping, and frame numbering, without
//! a device.

use chunkrt_camera::v4l2::{
    capture_time, SequenceTracker, TimestampSource, Timeval, TIMESTAMP_COPY, TIMESTAMP_MONOTONIC,
    TIMESTAMP_UNKNOWN, TSTAMP_SRC_EOF, TSTAMP_SRC_SOE,
};
use chunkrt_core::MonoTime;

const MS: u64 = 1_000_000;
/// 30 fps.
const INTERVAL: u64 = 33_333_333;
/// Flags a dequeued buffer also carries (MAPPED | DONE | KEYFRAME): ignored.
const OTHER: u32 = 0x1 | 0x4 | 0x8;

fn tv(ms: u64) -> Timeval {
    Timeval {
        sec: (ms / 1000) as i64,
        usec: ((ms % 1000) * 1000) as i64,
    }
}

fn at(ms: u64) -> MonoTime {
    MonoTime::from_ns(ms * MS)
}

#[test]
fn the_mapping_table() {
    use TimestampSource::*;
    let deq = at(10_020);
    // (case, flags, timestamp, dequeue time, want time, want source)
    let cases: &[(&str, u32, Timeval, MonoTime, MonoTime, TimestampSource)] = &[
        (
            "monotonic, start of exposure: the timestamp",
            TIMESTAMP_MONOTONIC | TSTAMP_SRC_SOE,
            tv(10_000),
            deq,
            at(10_000),
            DriverStartOfExposure,
        ),
        (
            "monotonic, SOE, other flags set",
            TIMESTAMP_MONOTONIC | TSTAMP_SRC_SOE | OTHER,
            tv(10_000),
            deq,
            at(10_000),
            DriverStartOfExposure,
        ),
        (
            "monotonic, end of frame: one interval earlier",
            TIMESTAMP_MONOTONIC | TSTAMP_SRC_EOF,
            tv(10_000),
            deq,
            MonoTime::from_ns(10_000 * MS - INTERVAL),
            DriverEndOfFrame,
        ),
        (
            "monotonic, a source this code does not know (0x20000): as EOF",
            TIMESTAMP_MONOTONIC | 0x2_0000,
            tv(10_000),
            deq,
            MonoTime::from_ns(10_000 * MS - INTERVAL),
            DriverEndOfFrame,
        ),
        (
            "monotonic, timestamp equal to the dequeue time: believed",
            TIMESTAMP_MONOTONIC | TSTAMP_SRC_SOE,
            tv(10_020),
            deq,
            at(10_020),
            DriverStartOfExposure,
        ),
        (
            "copy: dequeue time minus one interval",
            TIMESTAMP_COPY | OTHER,
            tv(10_000),
            deq,
            MonoTime::from_ns(10_020 * MS - INTERVAL),
            DequeueTime,
        ),
        (
            "copy with SOE: still not a capture time",
            TIMESTAMP_COPY | TSTAMP_SRC_SOE,
            tv(10_000),
            deq,
            MonoTime::from_ns(10_020 * MS - INTERVAL),
            DequeueTime,
        ),
        (
            "unknown timestamp type",
            TIMESTAMP_UNKNOWN,
            tv(10_000),
            deq,
            MonoTime::from_ns(10_020 * MS - INTERVAL),
            DequeueTime,
        ),
        (
            "a timestamp type this code does not know (0x6000)",
            0x6000 | TSTAMP_SRC_SOE,
            tv(10_000),
            deq,
            MonoTime::from_ns(10_020 * MS - INTERVAL),
            DequeueTime,
        ),
        (
            "monotonic but zero: not believed",
            TIMESTAMP_MONOTONIC | TSTAMP_SRC_SOE,
            tv(0),
            deq,
            MonoTime::from_ns(10_020 * MS - INTERVAL),
            DequeueTime,
        ),
        (
            "monotonic but after the dequeue time (another clock): not believed",
            TIMESTAMP_MONOTONIC | TSTAMP_SRC_SOE,
            tv(1_700_000_000_000),
            deq,
            MonoTime::from_ns(10_020 * MS - INTERVAL),
            DequeueTime,
        ),
        (
            "monotonic but usec out of range: not believed",
            TIMESTAMP_MONOTONIC,
            Timeval {
                sec: 10,
                usec: 1_000_000,
            },
            deq,
            MonoTime::from_ns(10_020 * MS - INTERVAL),
            DequeueTime,
        ),
        (
            "monotonic but negative: not believed",
            TIMESTAMP_MONOTONIC,
            Timeval { sec: -1, usec: 0 },
            deq,
            MonoTime::from_ns(10_020 * MS - INTERVAL),
            DequeueTime,
        ),
        (
            "EOF near the clock's start: saturates at zero",
            TIMESTAMP_MONOTONIC | TSTAMP_SRC_EOF,
            tv(10),
            at(12),
            MonoTime::ZERO,
            DriverEndOfFrame,
        ),
        (
            "fallback near the clock's start: saturates at zero",
            TIMESTAMP_COPY,
            tv(0),
            at(12),
            MonoTime::ZERO,
            DequeueTime,
        ),
    ];
    for &(case, flags, t, dequeued, want, source) in cases {
        assert_eq!(
            capture_time(flags, t, dequeued, INTERVAL),
            (want, source),
            "{case}"
        );
    }
}

#[test]
fn microseconds_are_kept() {
    let (t, _) = capture_time(
        TIMESTAMP_MONOTONIC | TSTAMP_SRC_SOE,
        Timeval {
            sec: 5,
            usec: 123_456,
        },
        at(6_000),
        INTERVAL,
    );
    assert_eq!(t.as_ns(), 5_123_456_000);
}

#[test]
fn frame_numbers_start_at_one_always_increase_and_gaps_are_drops() {
    let mut s = SequenceTracker::default();
    assert_eq!(s.next(0), 1);
    assert_eq!(s.next(1), 2);
    assert_eq!(s.dropped(), 0);
    // The driver skipped sequence 2 and 3.
    assert_eq!(s.next(4), 5);
    assert_eq!(s.dropped(), 2);
    assert_eq!(s.next(5), 6);
    assert_eq!(s.dropped(), 2);
    // A restart (sequence back to 0) counts no drops and the numbering goes on.
    assert_eq!(s.next(0), 7);
    assert_eq!(s.dropped(), 2);
    assert_eq!(s.next(1), 8);
    // A repeated sequence neither.
    assert_eq!(s.next(1), 9);
    assert_eq!(s.dropped(), 2);
    assert_eq!(s.next(3), 11);
    assert_eq!(s.dropped(), 3);
    // A driver that starts counting elsewhere: no drops before the first frame.
    let mut s = SequenceTracker::default();
    assert_eq!(s.next(41), 42);
    assert_eq!(s.dropped(), 0);
    assert_eq!(s.next(42), 43);
    assert_eq!(s.dropped(), 0);
}
