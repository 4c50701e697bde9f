//! The imported policy's own work per chunk touches no heap after load: assembling the
//! observation, the history, LeRobot's normalisation, the diffusers scheduler and the
//! de-normalisation. What allocates is the `ort` wrapper, a fixed few per graph call.

mod common;

use chunkrt_core::{Chunk, MonoTime, Observation, Policy};
use chunkrt_policy::{ImportedModel, ImportedPolicy, ImportedPolicyConfig, SessionOptions};
use common::policies;

#[global_allocator]
static GLOBAL: chunkrt_alloc_count::CountingAllocator = chunkrt_alloc_count::CountingAllocator;

#[test]
fn history_normalisation_and_scheduler_allocate_nothing() {
    let path = policies().join("lerobot-diffusion-ddpm.toml");
    let mut model = ImportedModel::load(&path, &SessionOptions::default()).unwrap();
    let obs = model.domain().mean().to_vec();
    let init = vec![0.1f32; model.manifest().raw.sequence_len()];
    let mut out = vec![0.0; model.manifest().raw.action.len * model.manifest().raw.d_a];
    model.push_observation(&obs);
    model
        .run(&init, 10, &mut |z| z.fill(0.0), &mut |_| {})
        .unwrap();
    let ((), allocations) = chunkrt_alloc_count::count_allocations(|| {
        for _ in 0..100 {
            model.push_observation(&obs);
            model.replace_newest(&obs);
            model.actions_into(&obs, &mut out);
        }
        model.reset_history();
        model.push_observation(&obs);
    });
    assert_eq!(allocations, 0);
}

/// A whole chunk through `ImportedPolicy::infer` at `steps` steps: the allocations the
/// watching thread made.
fn chunk_allocations(steps: usize) -> u64 {
    let mut cfg = ImportedPolicyConfig::new(policies().join("lerobot-diffusion-ddpm.toml"));
    cfg.steps = Some(steps);
    cfg.min_steps = Some(1);
    let mut policy = ImportedPolicy::new(&cfg).unwrap();
    let mean = policy.model().domain().mean().to_vec();
    let mut obs = Observation {
        dof: 7,
        ..Observation::default()
    };
    obs.plan_pos_rad[..7].copy_from_slice(&mean[..7]);
    let mut chunk = Chunk::default();
    obs.t_capture = MonoTime::from_ms(1000);
    policy.infer(&obs, &mut chunk).unwrap();
    obs.seq = 1;
    obs.t_capture = MonoTime::from_ms(1050);
    let (r, allocations) =
        chunkrt_alloc_count::count_allocations(|| policy.infer(&obs, &mut chunk));
    r.unwrap();
    allocations
}

/// The `ort` wrapper allocates a few small values per graph call (its outputs' map); every
/// allocation of a chunk is one of those: the count is a multiple of the graph calls with
/// nothing left over (history, normalisation, scheduler, de-normalisation, goals).
#[test]
fn a_whole_chunk_allocates_only_per_graph_call() {
    let (a10, a5) = (chunk_allocations(10), chunk_allocations(5));
    eprintln!("one chunk: {a10} allocations at 10 steps, {a5} at 5");
    let per_call = (a10 - a5) / 5;
    assert_eq!(
        a10,
        10 * per_call,
        "{a10} allocations at 10 steps, {a5} at 5"
    );
    assert_eq!(a5, 5 * per_call, "{a10} allocations at 10 steps, {a5} at 5");
}
