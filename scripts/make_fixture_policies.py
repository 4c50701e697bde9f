#!/usr/bin/env python3
"""Writes the faulty policies of the withdrawal regression tests (issue 12) into
tests/fixtures/policies/, beside manifests derived from the bundled flow policy:

* constant.onnx + constant.toml: a flow "denoiser" whose output ignores its inputs
  (a constant velocity field), so every chunk is the observed pose plus the same
  large offset: the policy walks the arm out of its declared domain and on toward
  the soft limits.
* out-of-scale.toml: the bundled flow.onnx with every act_std multiplied by 10
  (model and digest unchanged): a plausible model with a wrong normalisation.
* base-following-residual.onnx + .toml: a residual that takes its base's chunk
  ([residual.base_chunk]) and returns it: correction = (base - q) / 4 (issue 40).

Needs `onnx` and `numpy` (in .venv since requirements-test.txt has onnx; the outputs are committed):
    python3 -m venv /tmp/onnxvenv && /tmp/onnxvenv/bin/pip install onnx numpy
    /tmp/onnxvenv/bin/python scripts/make_fixture_policies.py
"""
import hashlib
import pathlib
import re
import tomllib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

root = pathlib.Path(__file__).resolve().parent.parent
src = root / "rt-config" / "policies"
out = root / "tests" / "fixtures" / "policies"
out.mkdir(parents=True, exist_ok=True)

# out = x * 0 + C + (sum(obs) + t) * 0: every input stays in the graph. The constant model
# observes positions and goal only (the older "joint_pos_and_goal" encoding, measured state):
# its domain is then left by walking, not at once by a velocity no demonstration had.
horizon, dof, d_obs = 32, 7, 14
const = np.full((1, horizon, dof), 3.0, dtype=np.float32)
nodes = [
    helper.make_node("Mul", ["x", "zero"], ["x0"]),
    helper.make_node("ReduceSum", ["obs"], ["obs_sum"], keepdims=0),
    helper.make_node("Add", ["obs_sum", "t"], ["ot"]),
    helper.make_node("Mul", ["ot", "zero"], ["ot0"]),
    helper.make_node("Add", ["x0", "c"], ["xc"]),
    helper.make_node("Add", ["xc", "ot0"], ["out"]),
]
graph = helper.make_graph(
    nodes,
    "constant_flow",
    [
        helper.make_tensor_value_info("obs", TensorProto.FLOAT, [1, d_obs]),
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, horizon, dof]),
        helper.make_tensor_value_info("t", TensorProto.FLOAT, [1]),
    ],
    [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, horizon, dof])],
    [
        numpy_helper.from_array(np.zeros((1,), dtype=np.float32), "zero"),
        numpy_helper.from_array(const, "c"),
    ],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model)
(out / "constant.onnx").write_bytes(model.SerializeToString())
digest = hashlib.sha256((out / "constant.onnx").read_bytes()).hexdigest()

# Without the provenance ledger (its stages and measurements are the bundled model's).
manifest = (src / "flow.toml").read_text().split("# Provenance ledger")[0]
header = "# Test fixture written by scripts/make_fixture_policies.py: {}\n"


def floats(body: str):
    return [float(v) for v in body.replace("\n", " ").split(",") if v.strip()]


def positions_and_goal(text: str) -> str:
    """The manifest cut down to the first 2 * dof observation values (no velocities)."""
    n = 2 * dof
    for key in ["obs_mean", "obs_std", "obs_min", "obs_max", "mean"]:
        m = re.search(rf"^{key} = \[(.*?)\]", text, re.S | re.M)
        body = ", ".join(repr(v) for v in floats(m.group(1))[:n])
        text = text[: m.start()] + f"{key} = [{body}]" + text[m.end():]
    m = re.search(r"^covariance = \[\n(.*?)\n\]", text, re.S | re.M)
    rows = re.findall(r"\[(.*?)\]", m.group(1))[:n]
    body = "\n".join("    [" + ", ".join(repr(v) for v in floats(r)[:n]) + "]," for r in rows)
    text = text[: m.start()] + f"covariance = [\n{body}\n]" + text[m.end():]
    text = re.sub(r"^d_obs = .*$", f"d_obs = {n}", text, flags=re.M)
    text = re.sub(r'^observation = ".*"$', 'observation = "joint_pos_and_goal"', text, flags=re.M)
    return re.sub(r'^state = ".*"$', 'state = "measured"', text, flags=re.M)


constant = re.sub(r'model_file = ".*"', 'model_file = "constant.onnx"', positions_and_goal(manifest))
constant = re.sub(r'model_sha256 = ".*"', f'model_sha256 = "{digest}"', constant)
(out / "constant.toml").write_text(
    header.format("a constant-output flow model (walks out of its domain)") + constant)


def scale_act_std(text: str, factor: float) -> str:
    m = re.search(r"act_std = \[(.*?)\]", text, re.S)
    values = [float(v) for v in m.group(1).replace("\n", " ").split(",") if v.strip()]
    body = ", ".join(repr(v * factor) for v in values)
    return text[: m.start()] + f"act_std = [{body}]" + text[m.end():]


scaled = re.sub(r'model_file = ".*"', 'model_file = "../../../rt-config/policies/flow.onnx"', manifest)
(out / "out-of-scale.toml").write_text(
    header.format("the bundled flow model with every act_std x10 (model and digest unchanged)")
    + scale_act_std(scaled, 10.0))
print("wrote", out)

# base-following-residual: a residual policy that conditions on its base's chunk (issue 40).
# Its graph takes the observation (the base's layout, so the base's domain applies) and
# "action.base" [1, 16, 7], the bundled flow policy's chunk on the residual's 50 ms grid as
# deltas from the measured positions, normalised mean_std (mean 0, std 4); it returns that
# input unchanged (plus 0 x the observation): correction = (base - q) / 4 per setpoint.
res_h, res_dt = 16, 50.0
nodes = [
    helper.make_node("ReduceSum", ["obs"], ["obs_sum"], keepdims=0),
    helper.make_node("Mul", ["obs_sum", "zero"], ["obs0"]),
    helper.make_node("Add", ["action.base", "obs0"], ["actions"]),
]
graph = helper.make_graph(
    nodes,
    "base_following_residual",
    [
        helper.make_tensor_value_info("obs", TensorProto.FLOAT, [1, 3 * dof]),
        helper.make_tensor_value_info("action.base", TensorProto.FLOAT, [1, res_h, dof]),
    ],
    [helper.make_tensor_value_info("actions", TensorProto.FLOAT, [1, res_h, dof])],
    [numpy_helper.from_array(np.zeros((1,), dtype=np.float32), "zero")],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model)
(out / "base-following-residual.onnx").write_bytes(model.SerializeToString())
res_digest = hashlib.sha256((out / "base-following-residual.onnx").read_bytes()).hexdigest()
flow = tomllib.loads((src / "flow.toml").read_text())


def toml_list(v):
    return "[" + ", ".join(toml_list(x) if isinstance(x, list) else repr(float(x)) for x in v) + "]"


domain = "\n".join(
    f"{k} = {toml_list(v)}" if not isinstance(v, (int, float)) else f"{k} = {v!r}"
    for k, v in flow["domain"].items())
zeros, fours = toml_list([0.0] * dof), toml_list([4.0] * dof)
(out / "base-following-residual.toml").write_text(f'''# Test fixture written by scripts/make_fixture_policies.py: a residual that conditions on its
# base's chunk. correction[i][j] = (base(i * 50 ms)[j] - q[j]) / 4, base = the bundled flow policy.
format = 2
kind = "chunk"
model_file = "base-following-residual.onnx"
model_sha256 = "{res_digest}"
d_a = {dof}
dt_ms = {res_dt}

[origin]
framework = "onnx helper"
policy = "residual"
checkpoint = "base-following-residual.onnx"

[observation]
history = 1
state = "measured"

[[observation.inputs]]
name = "obs"
sources = ["joint_pos", "goal", "joint_vel"]
normalisation = "identity"

[action]
encoding = "residual"
normalisation = "identity"
horizon = {res_h}
start = 0
len = {res_h}

[io]
out = "actions"

[sampler]
steps = 1
min_steps = 1
seed = 0

[task]
goal_tolerance_rad = 0.05
goals = {toml_list(flow["encoding"]["goals"])}

[training]
data_sha256 = "{'0' * 64}"
samples = 1
demonstrations = 1
seed = 0
script = "scripts/make_fixture_policies.py"
final_loss = 0.0

[domain]
{domain}

[residual]
base_sha256 = "{flow["model_sha256"]}"

[residual.base_chunk]
name = "action.base"
steps = {res_h}
encoding = "delta_from_observed"
normalisation = "mean_std"
mean = {zeros}
std = {fours}
''')
print("wrote", out / "base-following-residual.toml")
