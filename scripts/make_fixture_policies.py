#!/usr/bin/env python3
"""Writes the faulty policies of the withdrawal regression tests (issue 12) into
tests/fixtures/policies/, beside manifests derived from the bundled flow policy:

* constant.onnx + constant.toml: a flow "denoiser" whose output ignores its inputs
  (a constant velocity field), so every chunk is the observed pose plus the same
  large offset: the policy walks the arm out of its declared domain and on toward
  the soft limits.
* out-of-scale.toml: the bundled flow.onnx with every act_std multiplied by 10
  (model and digest unchanged): a plausible model with a wrong normalisation.

Needs `onnx` and `numpy` (not in the test venv; the outputs are committed):
    python3 -m venv /tmp/onnxvenv && /tmp/onnxvenv/bin/pip install onnx numpy
    /tmp/onnxvenv/bin/python scripts/make_fixture_policies.py
"""
import hashlib
import pathlib
import re

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
