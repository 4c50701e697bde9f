#!/usr/bin/env python3
"""Exports a LeRobot 0.6.1 DiffusionPolicy or ACTPolicy checkpoint (a local directory written
by policy.save_pretrained + the pre/post processors' save_pretrained) to ONNX + a chunkrt
policy manifest (format 2).

  export_lerobot.py CHECKPOINT_DIR --name NAME --out rt-config/policies [--scheduler ddpm|ddim|both] [--steps K]

Diffusion: NAME.onnx is one denoiser call, the U-Net with LeRobot's global conditioning
  inputs  x [1, horizon, d_a] f32 (noisy normalised action sequence), timestep [1] f32
          (integer values), observation.state [1, n_obs, S], observation.environment_state
          [1, n_obs, E] (normalised, oldest first)
  output  out [1, horizon, d_a]
  and one manifest per scheduler: NAME-ddpm.toml, NAME-ddim.toml (default: both). chunkrt runs
  the diffusers scheduler itself (settings in [scheduler]).
ACT: NAME.onnx maps observation.state [1, S], observation.environment_state [1, E]
  (normalised) to actions [1, chunk_size, d_a] (normalised); manifest NAME.toml.

Everything comes from the checkpoint: the shapes and the scheduler from config.json, the
normalisation statistics and modes from the saved preprocessor. What LeRobot does not store
(frame period, which arm state the observation is, goals, training data digest, operating
domain) comes from CHECKPOINT_DIR/chunkrt.json (train_lerobot.py writes it); for a
checkpoint without it give --dt-ms and --goals, and the domain is derived from the
normaliser's statistics (bounds from min/max, a diagonal covariance from std).
The exported graph is checked against torch with onnxruntime.
"""

import argparse
import hashlib
import json
import os
import sys
import warnings

import numpy as np
import torch

warnings.filterwarnings("ignore")

from lerobot.configs.policies import PreTrainedConfig  # noqa: E402
from lerobot.configs.types import FeatureType, NormalizationMode  # noqa: E402
from lerobot.policies.factory import get_policy_class, make_pre_post_processors  # noqa: E402
from lerobot.utils.constants import ACTION, OBS_ENV_STATE, OBS_STATE  # noqa: E402

SCRIPT = "scripts/lerobot/export_lerobot.py"
MODE_NAMES = {NormalizationMode.MIN_MAX: "min_max", NormalizationMode.MEAN_STD: "mean_std",
              NormalizationMode.IDENTITY: "identity"}


def load(ckpt, scheduler=None, steps=None):
    """Policy (eval) + pre/post processors from a local checkpoint. scheduler: "ddpm" | "ddim"
    overrides the diffusion config's noise_scheduler_type; steps its num_inference_steps."""
    cfg = PreTrainedConfig.from_pretrained(ckpt)
    cfg.device = "cpu"
    if cfg.type == "diffusion":
        if scheduler:
            cfg.noise_scheduler_type = scheduler.upper()
        if steps:
            cfg.num_inference_steps = steps
    policy = get_policy_class(cfg.type).from_pretrained(ckpt, config=cfg)
    policy.eval()
    pre, post = make_pre_post_processors(policy.config, pretrained_path=ckpt)
    return policy, pre, post


def normaliser(pre):
    steps = [s for s in pre.steps if type(s).__name__ == "NormalizerProcessorStep"]
    assert len(steps) == 1, "expected one NormalizerProcessorStep in the preprocessor"
    return steps[0]


def feature_norm(norm, key):
    """(mode name, {stat: np.float32 array}) of a feature, as LeRobot's normaliser applies it."""
    ft = norm.features[key].type
    mode = norm.norm_map.get(ft, NormalizationMode.IDENTITY)
    if mode not in MODE_NAMES:
        raise SystemExit(f"{key}: normalisation {mode} is not supported by chunkrt (min_max, mean_std, identity)")
    st = norm.stats.get(key, {})
    get = lambda k: np.asarray(torch.as_tensor(st[k]).float().numpy(), np.float32)  # noqa: E731
    if mode == NormalizationMode.MIN_MAX:
        return "min_max", {"min": get("min"), "max": get("max")}
    if mode == NormalizationMode.MEAN_STD:
        return "mean_std", {"mean": get("mean"), "std": get("std")}
    return "identity", {}


class DiffusionDenoiser(torch.nn.Module):
    """One U-Net call with LeRobot's global conditioning (DiffusionModel._prepare_global_conditioning:
    cat([state, env], -1) per step, flattened time-major, oldest first)."""

    def __init__(self, diffusion):
        super().__init__()
        self.diffusion = diffusion

    def forward(self, x, timestep, state, env):
        gc = self.diffusion._prepare_global_conditioning({OBS_STATE: state, OBS_ENV_STATE: env})
        return self.diffusion.unet(x, timestep, global_cond=gc)


class ActChunk(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, state, env):
        return self.model({OBS_STATE: state, OBS_ENV_STATE: env})[0]


def export_graph(policy, path):
    """Writes the ONNX graph (legacy exporter, opset 17, batch 1, no external data) and checks
    it against torch with onnxruntime. Returns (max abs diff, input names, output name)."""
    import onnx
    import onnxruntime as ort

    cfg = policy.config
    S = cfg.input_features[OBS_STATE].shape[0]
    E = cfg.input_features[OBS_ENV_STATE].shape[0]
    A = cfg.output_features[ACTION].shape[0]
    g = torch.Generator().manual_seed(0)
    if cfg.type == "diffusion":
        H, T = cfg.horizon, cfg.n_obs_steps
        module = DiffusionDenoiser(policy.diffusion).eval()
        names = ["x", "timestep", OBS_STATE, OBS_ENV_STATE]
        out_name = "out"

        def example(i):
            t = float((i * 37) % cfg.num_train_timesteps)
            return (torch.randn(1, H, A, generator=g), torch.tensor([t], dtype=torch.float32),
                    torch.rand(1, T, S, generator=g) * 2 - 1, torch.rand(1, T, E, generator=g) * 2 - 1)
    else:
        module = ActChunk(policy.model).eval()
        names = [OBS_STATE, OBS_ENV_STATE]
        out_name = "actions"

        def example(i):
            return torch.randn(1, S, generator=g), torch.randn(1, E, generator=g)
    ex = example(0)
    with torch.no_grad():
        torch.onnx.export(module, ex, path, dynamo=False, opset_version=17, input_names=names,
                          output_names=[out_name], do_constant_folding=True)
    m = onnx.load(path)
    onnx.checker.check_model(m)
    assert not any(t.data_location == onnx.TensorProto.EXTERNAL for t in m.graph.initializer)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    worst = 0.0
    with torch.no_grad():
        for i in range(8):
            inp = example(i)
            ref = module(*inp).numpy()
            got = sess.run([out_name], {n: v.numpy() for n, v in zip(names, inp)})[0]
            assert got.shape == ref.shape
            worst = max(worst, float(np.abs(ref - got).max()))
    shapes = {i.name: [dd.dim_value for dd in i.type.tensor_type.shape.dim] for i in m.graph.input}
    shapes[out_name] = [dd.dim_value for dd in m.graph.output[0].type.tensor_type.shape.dim]
    return worst, shapes


# ---------------------------------------------------------------- manifest


def f32(x):
    """Shortest decimal that round-trips the f32 value (a TOML float)."""
    s = str(np.float32(x))
    if not any(c in s for c in ".en"):
        s += ".0"
    return s


def f64(x):
    s = repr(float(x))
    if not any(c in s for c in ".en"):
        s += ".0"
    return s


def arr(v, fmt=f32, per_line=8, indent="    "):
    v = list(np.asarray(v).ravel())
    if len(v) <= per_line:
        return "[" + ", ".join(fmt(x) for x in v) + "]"
    lines = [indent + ", ".join(fmt(x) for x in v[i:i + per_line]) + "," for i in range(0, len(v), per_line)]
    return "[\n" + "\n".join(lines) + "\n]"


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def norm_lines(mode, st):
    out = [f'normalisation = "{mode}"']
    for k in ("min", "max", "mean", "std"):
        if k in st:
            out.append(f"{k} = {arr(st[k])}")
    return out


def side_info(ckpt, policy, args):
    p = os.path.join(ckpt, "chunkrt.json")
    if os.path.exists(p):
        with open(p) as f:
            return json.load(f), None
    # A checkpoint trained elsewhere: what LeRobot stores, plus the command line.
    if args.dt_ms is None or args.goals is None:
        raise SystemExit(f"{p} missing: give --dt-ms and --goals (JSON list of d_a-lists)")
    cfg = policy.config
    S = cfg.input_features[OBS_STATE].shape[0]
    A = cfg.output_features[ACTION].shape[0]
    src_state = ["joint_pos", "joint_vel"] if S == 2 * A else ["joint_pos"] if S == A else None
    if src_state is None:
        raise SystemExit(f"observation.state has {S} dims; chunkrt sources are joint_pos, joint_vel, goal ({A} each)")
    return {"dt_ms": args.dt_ms, "state": args.state, "goals": json.loads(args.goals),
            "goal_tolerance_rad": args.goal_tolerance,
            "sources": {OBS_STATE: src_state, OBS_ENV_STATE: ["goal"]},
            "training": None, "domain": None}, "no chunkrt.json"


def domain_from_stats(norm, keys):
    lo, hi, mean, var = [], [], [], []
    for k in keys:
        st = {n: np.asarray(torch.as_tensor(v).float().numpy(), np.float64) for n, v in norm.stats[k].items()}
        span = st["max"] - st["min"]
        lo.append(st["min"] - 0.1 * span - 0.02)
        hi.append(st["max"] + 0.1 * span + 0.02)
        mean.append(st["mean"])
        var.append(st["std"] ** 2)
    var = np.concatenate(var)
    d = len(var)
    return {"obs_min": np.concatenate(lo).tolist(), "obs_max": np.concatenate(hi).tolist(),
            "mean": np.concatenate(mean).tolist(), "ridge": 1e-4,
            "mahalanobis_max": float(1.5 * np.sqrt(d) * 3.0), "covariance": np.diag(var).tolist()}


def write_manifest(path, *, ckpt, policy, pre, side, model_file, sched_type, steps):
    cfg = policy.config
    norm = normaliser(pre)
    A = cfg.output_features[ACTION].shape[0]
    diffusion = cfg.type == "diffusion"
    history = cfg.n_obs_steps
    if diffusion:
        horizon, start = cfg.horizon, cfg.n_obs_steps - 1
    else:
        horizon, start = cfg.chunk_size, 0
    length = horizon - start
    ck = os.path.basename(os.path.normpath(ckpt))
    L = [
        f"# chunkrt policy manifest, written by {SCRIPT} from {ck}",
        "format = 2",
        f'kind = "{"diffusion" if diffusion else "chunk"}"',
        f'model_file = "{model_file}"',
        f'model_sha256 = "{sha256_file(os.path.join(os.path.dirname(path), model_file))}"',
        f"d_a = {A}",
        f"dt_ms = {f64(side['dt_ms'])}",
        "",
        "[origin]",
        'framework = "lerobot 0.6.1"',
        f'policy = "{cfg.type}"',
        f'checkpoint = "{ck}"',
        "",
        "[observation]",
        f"history = {history}",
        f'state = "{side["state"]}"',
    ]
    for key in (OBS_STATE, OBS_ENV_STATE):
        mode, st = feature_norm(norm, key)
        srcs = side["sources"][key]
        dim = cfg.input_features[key].shape[0]
        assert dim == A * len(srcs), (key, dim, srcs)
        L += ["", "[[observation.inputs]]", f'name = "{key}"',
              "sources = [" + ", ".join(f'"{s}"' for s in srcs) + "]"]
        L += norm_lines(mode, st)
    mode, st = feature_norm(norm, ACTION)
    L += ["", "[action]", f'encoding = "{side.get("action_encoding", "absolute")}"']
    L += norm_lines(mode, st)
    L += [f"horizon = {horizon}", f"start = {start}", f"len = {length}", "", "[io]"]
    if diffusion:
        L += ['x = "x"', 't = "timestep"', 'out = "out"']
    else:
        L += ['out = "actions"']
    if diffusion:
        sch = policy.diffusion.noise_scheduler
        sc = sch.config
        acp = sch.alphas_cumprod.numpy().astype(np.float32)
        assert len(acp) == cfg.num_train_timesteps
        assert not sc.get("thresholding", False)
        L += [
            "",
            "[scheduler]",
            f'type = "{sched_type}"',
            f"train_timesteps = {cfg.num_train_timesteps}",
            f'beta_schedule = "{cfg.beta_schedule}"',
            f"alphas_cumprod = {arr(acp)}",
            f'prediction_type = "{sc.prediction_type}"',
            f"clip_sample = {str(bool(sc.clip_sample)).lower()}",
            f"clip_sample_range = {f32(sc.clip_sample_range)}",
            f'timestep_spacing = "{sc.timestep_spacing}"',
            f"steps_offset = {int(sc.steps_offset)}",
            # LeRobot builds either scheduler with diffusers' defaults for these; the one the
            # other type uses is written with its diffusers default too (unused).
            f'variance_type = "{sc.get("variance_type", "fixed_small")}"',
            f"set_alpha_to_one = {str(bool(sc.get('set_alpha_to_one', True))).lower()}",
            "eta = 0.0",
        ]
    L += ["", "[sampler]"]
    if diffusion:
        L += [f"steps = {steps}", f"min_steps = {min(5, steps)}", "seed = 0"]
    else:
        L += ["steps = 1", "min_steps = 1", "seed = 0"]
    L += ["", "[task]", f"goal_tolerance_rad = {f64(side['goal_tolerance_rad'])}", "goals = ["]
    L += ["    " + arr(g, fmt=f64, per_line=99) + "," for g in side["goals"]]
    L += ["]"]
    tr = side.get("training")
    if tr is None:
        tr = {"data_sha256": "0" * 64, "samples": 0, "demonstrations": 0, "seed": 0,
              "script": "unknown (checkpoint trained elsewhere)", "final_loss": float("nan")}
    L += [
        "",
        "[training]",
        "# data_sha256: SHA-256 of the demonstration arrays (scripts/lerobot/lerobot_demos.py data_digest):",
        "# state [N,14], environment_state [N,7], action [N,7] float32 LE, then episode_index, frame_index int64 LE.",
        "# samples = frames, demonstrations = episodes.",
        f'data_sha256 = "{tr["data_sha256"]}"',
        f"samples = {int(tr['samples'])}",
        f"demonstrations = {int(tr['demonstrations'])}",
        f"seed = {int(tr['seed'])}",
        f'script = "{tr["script"]}"',
        f"final_loss = {float(tr['final_loss']):.6g}",
    ]
    dom = side.get("domain") or domain_from_stats(norm, (OBS_STATE, OBS_ENV_STATE))
    L += [
        "",
        "[domain]",
        "# Declared operating domain of the raw current-step observation, the concatenation of the",
        "# inputs' sources in input order: " + ", ".join(
            f"{s}({A})" for k in (OBS_STATE, OBS_ENV_STATE) for s in side["sources"][k]) + ".",
        "# Per-dim bounds, and a Mahalanobis support check d^2 = (o - mean)^T (covariance + ridge I)^-1 (o - mean).",
        f"obs_min = {arr(dom['obs_min'], fmt=f64)}",
        f"obs_max = {arr(dom['obs_max'], fmt=f64)}",
        f"mean = {arr(dom['mean'], fmt=f64)}",
        f"ridge = {f64(dom['ridge'])}",
        f"mahalanobis_max = {f64(dom['mahalanobis_max'])}",
        "covariance = [",
    ]
    L += ["    " + arr(row, fmt=f64, per_line=999) + "," for row in dom["covariance"]]
    L += ["]", ""]
    with open(path, "w") as f:
        f.write("\n".join(L))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("--name", required=True)
    ap.add_argument("--out", default="rt-config/policies")
    ap.add_argument("--scheduler", choices=["ddpm", "ddim", "both"], default="both", help="diffusion only")
    ap.add_argument("--steps", type=int, default=None,
                    help="diffusion inference steps (default: the checkpoint's num_inference_steps, "
                         "else num_train_timesteps, as LeRobot does)")
    ap.add_argument("--dt-ms", type=float, default=None, help="without chunkrt.json: the frame period")
    ap.add_argument("--goals", default=None, help="without chunkrt.json: JSON list of goal poses")
    ap.add_argument("--goal-tolerance", type=float, default=0.05)
    ap.add_argument("--state", default="planned", choices=["measured", "commanded", "planned"])
    args = ap.parse_args()
    torch.set_num_threads(2)
    os.makedirs(args.out, exist_ok=True)
    policy, pre, post = load(args.checkpoint)
    cfg = policy.config
    if cfg.type not in ("diffusion", "act"):
        raise SystemExit(f"policy type {cfg.type}: only diffusion and act are supported")
    side, note = side_info(args.checkpoint, policy, args)
    if note:
        print(f"note: {note}; domain derived from the normaliser's statistics")
    model_file = f"{args.name}.onnx"
    onnx_path = os.path.join(args.out, model_file)
    diff, shapes = export_graph(policy, onnx_path)
    size = os.path.getsize(onnx_path)
    print(f"wrote {onnx_path} ({size / 1e6:.2f} MB), shapes {shapes}; onnxruntime vs torch max abs diff {diff:.3g}")
    if cfg.type == "diffusion":
        types = ["ddpm", "ddim"] if args.scheduler == "both" else [args.scheduler]
        for st in types:
            steps = args.steps or cfg.num_inference_steps or cfg.num_train_timesteps
            pol, pre_s, _ = load(args.checkpoint, scheduler=st, steps=steps)
            path = os.path.join(args.out, f"{args.name}-{st}.toml")
            write_manifest(path, ckpt=args.checkpoint, policy=pol, pre=pre_s, side=side, model_file=model_file,
                           sched_type=st, steps=steps)
            print(f"wrote {path} ({type(pol.diffusion.noise_scheduler).__name__}, {steps} steps)")
    else:
        path = os.path.join(args.out, f"{args.name}.toml")
        write_manifest(path, ckpt=args.checkpoint, policy=policy, pre=pre, side=side, model_file=model_file,
                       sched_type=None, steps=1)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
