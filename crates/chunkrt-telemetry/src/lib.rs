//! chunkrt-telemetry: what the threads record, and what the report says.
//!
//! The control and inference threads push fixed-size `Copy` records into
//! preallocated single-producer single-consumer rings (`ringbuf`); pushing never
//! allocates, locks or blocks, and a full ring counts a drop instead of waiting.
//! A telemetry thread drains the rings into HDR histograms created with fixed
//! bounds, prints a live status line, writes the event logs, and at the end builds
//! the text table and the JSON report.

pub mod age_check;
pub mod baseline;
pub mod budget;
pub mod collector;
pub mod episodes;
pub mod hgrm;
pub mod interventions;
pub mod ledger;
pub mod live;
pub mod logfile;
pub mod metrics;
pub mod names;
pub mod oracle;
pub mod outdir;
pub mod plot;
pub mod readback;
pub mod recording;
pub mod records;
pub mod report;
pub mod rings;
pub mod wear;

pub use collector::Collector;
pub use metrics::{Metric, MetricSet, METRICS};
pub use records::{
    CameraRecord, CameraStatus, CycleRecord, EventRecord, ImageRecord, InferRecord, InferStatus,
    OutOfBounds,
};
pub use report::{HostInfo, MetricSummary, Report};
pub use rings::{
    camera_ring, chunk_ring, record_ring, rings, CameraConsumer, CameraProducer, ChunkConsumer,
    ChunkProducer, CycleProducer, EventProducer, InferProducer, RecordConsumer, RecordProducer,
    RingConsumers,
};
