//! Preallocated SPSC rings between the real-time threads and the telemetry thread.

use crate::records::{CycleRecord, EventRecord, InferRecord};
use ringbuf::traits::{Consumer, Producer, Split};
use ringbuf::{HeapCons, HeapProd, HeapRb};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Ring drops, per ring, shared with the telemetry thread.
#[derive(Debug, Default)]
pub struct DropCounters {
    /// Cycle records that did not fit.
    pub cycle: AtomicU64,
    /// Inference records that did not fit.
    pub infer: AtomicU64,
    /// Event records that did not fit.
    pub event: AtomicU64,
}

macro_rules! producer {
    ($name:ident, $rec:ty, $field:ident, $doc:literal) => {
        #[doc = $doc]
        pub struct $name {
            prod: HeapProd<$rec>,
            drops: Arc<DropCounters>,
        }

        impl $name {
            /// Pushes a record; when the ring is full the record is counted as dropped.
            /// Never allocates, locks or blocks.
            #[inline]
            pub fn push(&mut self, rec: $rec) {
                if self.prod.try_push(rec).is_err() {
                    self.drops.$field.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    };
}

producer!(
    CycleProducer,
    CycleRecord,
    cycle,
    "The control thread's end of the cycle ring."
);
producer!(
    InferProducer,
    InferRecord,
    infer,
    "The inference thread's end of the inference ring."
);
producer!(
    EventProducer,
    EventRecord,
    event,
    "The control thread's end of the event ring."
);

/// The telemetry thread's ends of all rings.
pub struct RingConsumers {
    pub(crate) cycle: HeapCons<CycleRecord>,
    pub(crate) infer: HeapCons<InferRecord>,
    pub(crate) event: HeapCons<EventRecord>,
    pub(crate) drops: Arc<DropCounters>,
}

impl RingConsumers {
    /// Takes the next cycle record.
    pub fn pop_cycle(&mut self) -> Option<CycleRecord> {
        self.cycle.try_pop()
    }
    /// Takes the next inference record.
    pub fn pop_infer(&mut self) -> Option<InferRecord> {
        self.infer.try_pop()
    }
    /// Takes the next event record.
    pub fn pop_event(&mut self) -> Option<EventRecord> {
        self.event.try_pop()
    }
    /// Total records dropped so far (all rings).
    pub fn drops(&self) -> u64 {
        self.drops.cycle.load(Ordering::Relaxed)
            + self.drops.infer.load(Ordering::Relaxed)
            + self.drops.event.load(Ordering::Relaxed)
    }
    /// Cycle records dropped so far.
    pub fn cycle_drops(&self) -> u64 {
        self.drops.cycle.load(Ordering::Relaxed)
    }
    /// Inference records dropped so far.
    pub fn infer_drops(&self) -> u64 {
        self.drops.infer.load(Ordering::Relaxed)
    }
    /// Event records dropped so far.
    pub fn event_drops(&self) -> u64 {
        self.drops.event.load(Ordering::Relaxed)
    }
}

/// Allocates the three rings (`capacity` records each) and splits them once.
pub fn rings(capacity: usize) -> (CycleProducer, EventProducer, InferProducer, RingConsumers) {
    let drops = Arc::new(DropCounters::default());
    let (cp, cc) = HeapRb::<CycleRecord>::new(capacity).split();
    let (ip, ic) = HeapRb::<InferRecord>::new(capacity).split();
    let (ep, ec) = HeapRb::<EventRecord>::new(capacity).split();
    (
        CycleProducer {
            prod: cp,
            drops: drops.clone(),
        },
        EventProducer {
            prod: ep,
            drops: drops.clone(),
        },
        InferProducer {
            prod: ip,
            drops: drops.clone(),
        },
        RingConsumers {
            cycle: cc,
            infer: ic,
            event: ec,
            drops,
        },
    )
}

/// A producer's end of a ring of records other than the three above (chunks, camera
/// records, camera images): a push that does not fit is counted as dropped.
pub struct RecordProducer<T> {
    prod: HeapProd<T>,
    drops: Arc<AtomicU64>,
}

impl<T> RecordProducer<T> {
    /// Pushes a record; when the ring is full it is counted as dropped. Never
    /// allocates, locks or blocks.
    pub fn push(&mut self, rec: T) {
        if self.prod.try_push(rec).is_err() {
            self.drops.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The telemetry thread's end of such a ring.
pub struct RecordConsumer<T> {
    cons: HeapCons<T>,
    drops: Arc<AtomicU64>,
}

impl<T> RecordConsumer<T> {
    /// Takes the next record.
    pub fn pop(&mut self) -> Option<T> {
        self.cons.try_pop()
    }
    /// Records dropped so far (ring full).
    pub fn drops(&self) -> u64 {
        self.drops.load(Ordering::Relaxed)
    }
}

/// Allocates a ring of `capacity` records and splits it.
pub fn record_ring<T>(capacity: usize) -> (RecordProducer<T>, RecordConsumer<T>) {
    let drops = Arc::new(AtomicU64::new(0));
    let (prod, cons) = HeapRb::<T>::new(capacity).split();
    (
        RecordProducer {
            prod,
            drops: drops.clone(),
        },
        RecordConsumer { cons, drops },
    )
}

/// The inference thread's end of the chunk ring: a copy of every published chunk,
/// for the recording (the control thread never touches it).
pub type ChunkProducer = RecordProducer<chunkrt_core::Chunk>;
/// The telemetry thread's end of the chunk ring.
pub type ChunkConsumer = RecordConsumer<chunkrt_core::Chunk>;

/// Allocates the chunk ring (`capacity` chunks, about 8 KiB each) and splits it.
pub fn chunk_ring(capacity: usize) -> (ChunkProducer, ChunkConsumer) {
    record_ring(capacity)
}

/// The camera thread's end of the camera ring: a record per frame and, when the run
/// records images, the frame itself on a ring of its own.
pub struct CameraProducer {
    records: RecordProducer<crate::records::CameraRecord>,
    images: Option<RecordProducer<crate::records::ImageRecord>>,
}

impl CameraProducer {
    /// Pushes a record; when the ring is full it is counted as dropped. Never
    /// allocates, locks or blocks.
    pub fn push(&mut self, rec: crate::records::CameraRecord) {
        self.records.push(rec);
    }

    /// Whether the run records images ([`CameraProducer::push_image`] keeps them).
    pub fn records_images(&self) -> bool {
        self.images.is_some()
    }

    /// Pushes a copy of a frame given to the policy (dropped and counted when the
    /// ring is full; nothing without image recording). Never allocates or blocks.
    pub fn push_image(&mut self, image: &crate::records::ImageRecord) {
        if let Some(p) = self.images.as_mut() {
            p.push(*image);
        }
    }
}

/// The telemetry thread's end of the camera ring (and of its image ring).
pub struct CameraConsumer {
    records: RecordConsumer<crate::records::CameraRecord>,
    pub(crate) images: Option<RecordConsumer<crate::records::ImageRecord>>,
}

impl CameraConsumer {
    /// Takes the next record.
    pub fn pop(&mut self) -> Option<crate::records::CameraRecord> {
        self.records.pop()
    }
    /// Records dropped so far (ring full).
    pub fn drops(&self) -> u64 {
        self.records.drops()
    }
}

/// Allocates the camera ring (`capacity` records) and splits it; with `images` > 0 a
/// ring of that many camera images beside it (about 48 KiB each).
pub fn camera_ring(capacity: usize, images: usize) -> (CameraProducer, CameraConsumer) {
    let (records, records_c) = record_ring(capacity);
    let (images, images_c) = if images > 0 {
        let (p, c) = record_ring(images);
        (Some(p), Some(c))
    } else {
        (None, None)
    };
    (
        CameraProducer { records, images },
        CameraConsumer {
            records: records_c,
            images: images_c,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_ring_counts_drops_instead_of_blocking() {
        let (mut cp, _ep, _ip, mut cons) = rings(4);
        for i in 0..10 {
            cp.push(CycleRecord {
                cycle: i,
                ..Default::default()
            });
        }
        assert_eq!(cons.cycle_drops(), 6);
        let got: Vec<u64> = std::iter::from_fn(|| cons.pop_cycle())
            .map(|r| r.cycle)
            .collect();
        assert_eq!(got, vec![0, 1, 2, 3]);
    }
}
