"""Trains a residual policy on a LeRobot dataset that `chunkrt export lerobot` wrote, and
writes it as an ONNX model with a format-2 residual manifest bound to its base
(docs/adapt.md "The loop end to end", scripts/adapt.sh).

    .venv/bin/python scripts/adapt/train_residual.py DATASET --base BASE_MANIFEST \
        --out DIR [--plant TEXT]

What it learns: the goal error the frozen base is left with on this arm. For every frame
of an episode from a seen start (held-out starts are the evaluation's, never trained
on), the target is that episode's final miss, goal - measured position, per joint; frames
where the policy had no authority or the permission gate blocked it are left out (a
blocked proposal is never a target). The model is, per joint j,

    correction_j = sum_k a_jk tanh((goal_j - pos_j) / s_k) + b_j,   s = 5, 20, 80 mrad

fitted by ridge regression (closed form, numpy, seconds): the error a worn joint leaves
depends on the side it approaches the goal from, which the sign of the goal error
tells while it moves and after. The correction is the same at every step of the chunk.

The ONNX graph takes the observation as the base does (joint_pos, goal, joint_vel: the
base's domain applies as written) and returns `actions` [1, horizon, dof]. The manifest
says action.encoding = "residual", binds it to the base with [residual] base_sha256,
and appends its stage to the base's regime_sequence (whose last checkpoint is then
this model, as the loader requires).
"""

import argparse
import hashlib
import json
import os
import sys
import tomllib

import numpy as np
import onnx
import pyarrow.parquet as pq
from onnx import TensorProto, helper, numpy_helper

SCALES = (0.005, 0.02, 0.08)
RIDGE = 1e-4
HORIZON = 16
DT_MS = 50.0
OPSET = 17


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def column(table, name):
    """A fixed-size-list column as a float64 [rows, width] array."""
    col = table.column(name).combine_chunks()
    width = col.type.list_size
    return np.asarray(col.flatten(), dtype=np.float64).reshape(-1, width)


def load(dataset):
    """Frames (goal error, target) of the seen-start episodes, and what was used."""
    data_file = os.path.join(dataset, "data", "chunk-000", "file-000.parquet")
    data = pq.read_table(data_file)
    meta = pq.read_table(os.path.join(dataset, "meta", "episodes", "chunk-000", "file-000.parquet"))
    held_out = dict(zip(meta.column("episode_index").to_pylist(), meta.column("held_out").to_pylist()))
    state = column(data, "observation.state")
    dof = state.shape[1] // 2
    pos = state[:, :dof]
    goal = column(data, "observation.environment_state")
    episode = np.asarray(data.column("episode_index").to_pylist())
    intervention = np.asarray(data.column("intervention").to_pylist(), dtype=bool)
    err = goal - pos
    xs, ys, used = [], [], []
    for e in np.unique(episode):
        if held_out.get(int(e), False):
            continue
        rows = np.flatnonzero(episode == e)
        miss = err[rows[-1]]  # the error the episode ended with
        keep = rows[~intervention[rows]]
        if len(keep) == 0:
            continue
        xs.append(err[keep])
        ys.append(np.broadcast_to(miss, (len(keep), dof)))
        used.append(int(e))
    if not xs:
        sys.exit(f"train_residual: {dataset}: no frame of a seen-start episode to train on")
    return np.concatenate(xs), np.concatenate(ys), used, dof, data_file


def features(x):
    return np.stack([np.tanh(x / s) for s in SCALES] + [np.ones_like(x)], axis=-1)


def fit(x, y):
    """Per joint: the coefficients of SCALES then the bias, and the mean squared error."""
    dof = x.shape[1]
    coef = np.zeros((dof, len(SCALES) + 1))
    for j in range(dof):
        phi = features(x[:, j])
        a = phi.T @ phi + RIDGE * len(phi) * np.eye(phi.shape[1])
        coef[j] = np.linalg.solve(a, phi.T @ y[:, j])
    pred = np.stack([features(x[:, j]) @ coef[j] for j in range(dof)], axis=1)
    return coef, float(np.mean((pred - y) ** 2))


def graph(coef, dof, obs_dim):
    """obs [1, obs_dim] = joint_pos, goal, joint_vel -> actions [1, HORIZON, dof]."""
    f32 = lambda name, v: numpy_helper.from_array(np.asarray(v, dtype=np.float32), name)
    i64 = lambda name, v: numpy_helper.from_array(np.asarray(v, dtype=np.int64), name)
    init = [
        i64("pos_lo", [0]), i64("pos_hi", [dof]), i64("goal_hi", [2 * dof]), i64("axis1", [1]),
        i64("out_shape", [1, HORIZON, dof]), f32("bias", coef[:, -1]),
    ]
    nodes = [
        helper.make_node("Slice", ["obs", "pos_lo", "pos_hi", "axis1"], ["pos"]),
        helper.make_node("Slice", ["obs", "pos_hi", "goal_hi", "axis1"], ["goal"]),
        helper.make_node("Sub", ["goal", "pos"], ["err"]),
    ]
    terms = []
    for k, s in enumerate(SCALES):
        init += [f32(f"inv_scale{k}", [1.0 / s]), f32(f"gain{k}", coef[:, k])]
        nodes += [
            helper.make_node("Mul", ["err", f"inv_scale{k}"], [f"z{k}"]),
            helper.make_node("Tanh", [f"z{k}"], [f"t{k}"]),
            helper.make_node("Mul", [f"t{k}", f"gain{k}"], [f"term{k}"]),
        ]
        terms.append(f"term{k}")
    nodes += [
        helper.make_node("Sum", terms + ["bias"], ["correction"]),
        helper.make_node("Unsqueeze", ["correction", "axis1"], ["correction3"]),
        helper.make_node("Expand", ["correction3", "out_shape"], ["actions"]),
    ]
    g = helper.make_graph(
        nodes,
        "chunkrt_residual",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, [1, obs_dim])],
        [helper.make_tensor_value_info("actions", TensorProto.FLOAT, [1, HORIZON, dof])],
        init,
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="chunkrt scripts/adapt/train_residual.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def toml_value(v):
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return repr(float(v)) if isinstance(v, float) else str(v)


def table_lines(name, d, array=False):
    lines = [f"[[{name}]]" if array else f"[{name}]"]
    for k, v in d.items():
        if isinstance(v, list) and v and isinstance(v[0], list):
            lines.append(f"{k} = [")
            lines += [f"    {toml_value(row)}," for row in v]
            lines.append("]")
        else:
            lines.append(f"{k} = {toml_value(v)}")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dataset")
    ap.add_argument("--base", required=True, help="the base policy's manifest (format 1)")
    ap.add_argument("--out", required=True, help="directory for residual.onnx and residual.toml")
    ap.add_argument("--plant", default="the arm the dataset was recorded on")
    args = ap.parse_args()

    with open(args.base, "rb") as f:
        base = tomllib.load(f)
    if base.get("format", 1) != 1 or "domain" not in base:
        sys.exit(f"train_residual: {args.base}: expected the bundled format-1 manifest with a [domain]")
    x, y, used, dof, data_file = load(args.dataset)
    coef, mse = fit(x, y)
    obs_dim = len(base["domain"]["obs_min"])
    if obs_dim != 3 * dof:
        sys.exit(f"train_residual: {args.base}: its observation has {obs_dim} values, expected 3 x {dof}")

    os.makedirs(args.out, exist_ok=True)
    model_path = os.path.join(args.out, "residual.onnx")
    onnx.save(graph(coef, dof, obs_dim), model_path)
    model_sha = sha256_file(model_path)
    data_sha = sha256_file(data_file)

    stages = [dict(s) for s in base.get("regime_sequence", [])]
    stages.append({
        "stage": "residual on the frozen base (ridge regression of the goal error the base is left with)",
        "plant": args.plant,
        "checkpoint_sha256": model_sha,
        "data": f"{len(used)} episodes, {len(x)} frames of {os.path.abspath(args.dataset)}, "
                f"data/chunk-000/file-000.parquet sha256 {data_sha}",
    })
    lines = [
        "# chunkrt residual policy manifest, written by scripts/adapt/train_residual.py:",
        f"# per joint, correction = sum_k a_k tanh((goal - pos) / s_k) + b, s = {list(SCALES)} rad.",
        "format = 2",
        'kind = "chunk"',
        'model_file = "residual.onnx"',
        f'model_sha256 = "{model_sha}"',
        f"d_a = {dof}",
        f"dt_ms = {DT_MS}",
        "",
        *table_lines("origin", {"framework": "numpy ridge regression", "policy": "residual",
                                "checkpoint": "residual.onnx"}),
        "",
        "[observation]",
        "history = 1",
        'state = "measured"',
        "",
        "# The base's observation layout, so the base's declared domain applies as written.",
        *table_lines("observation.inputs", {"name": "obs", "sources": ["joint_pos", "goal", "joint_vel"],
                                            "normalisation": "identity"}, array=True),
        "",
        *table_lines("action", {"encoding": "residual", "normalisation": "identity",
                                "horizon": HORIZON, "start": 0, "len": HORIZON}),
        "",
        *table_lines("io", {"out": "actions"}),
        "",
        *table_lines("sampler", {"steps": 1, "min_steps": 1, "seed": 0}),
        "",
        *table_lines("task", {"goal_tolerance_rad": 0.02,
                              "goals": [list(map(float, g)) for g in np.unique(np.round(
                                  column(pq.read_table(data_file), "observation.environment_state"), 6), axis=0)]}),
        "",
        "# data_sha256: SHA-256 of the dataset's data/chunk-000/file-000.parquet.",
        *table_lines("training", {"data_sha256": data_sha, "samples": len(x),
                                  "demonstrations": len(used), "seed": 0,
                                  "script": "scripts/adapt/train_residual.py", "final_loss": mse}),
        "",
        "# The base's declared domain: the residual's input, the goal error, is defined",
        "# wherever the base's observation is.",
        *table_lines("domain", base["domain"]),
        "",
        "# The base's training stages, then this one (its checkpoint is this model).",
    ]
    for s in stages:
        lines += table_lines("regime_sequence", s, array=True) + [""]
    lines += ["[residual]", f'base_sha256 = "{base["model_sha256"]}"', ""]
    with open(os.path.join(args.out, "residual.toml"), "w") as f:
        f.write("\n".join(lines))
    print(json.dumps({"episodes": used, "frames": len(x), "mse": mse,
                      "gain_per_joint": [float(np.sum(c[:-1])) for c in coef],
                      "model_sha256": model_sha}))


if __name__ == "__main__":
    main()
