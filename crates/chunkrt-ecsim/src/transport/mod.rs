//! Ways to put a [`SimNetwork`](crate::SimNetwork) on a wire.

pub mod af_packet;
pub mod in_process;
