#!/usr/bin/env python3
"""Trains the policies bundled in rt-config/policies/ (jax + numpy on the CPU, fixed seed).

Install: python3 -m pip install -r scripts/requirements-train.txt (about 15 minutes on
two cores; the trained files are committed, nothing is trained at test time).

Task: the 7-joint simulated arm cycles through the goal poses GOALS. Between two consecutive
goals sits an obstacle (in joint space, at the midpoint of the straight line); the
demonstrations pass it on one side or on the other with equal probability. From the same
observation (the arm at rest at one goal, heading for the next), half the demonstrations go
"left" and half go "right": the data are deliberately bimodal.

Encoding (written into every manifest, implemented by chunkrt-policy):
  observation  obs = [q_1..q_7, goal_1..goal_7, v_1..v_7]   (joint positions, current goal,
               joint velocities; rad, rad/s). At run time q and v are the planned state
               (manifest `state = "planned"`: the chunk being played, without the seam
               blends toward it): each chunk continues the trajectory being played, so
               consecutive chunks meet at the seams (see expert_rollout).
  action       a[i, j] = chunk[i, j] - q_j        (delta from the observed position), i < H
  graph        out = f(obs_n, x, t): obs_n = (obs - obs_mean) / obs_std, the action chunk
               normalised per element as (a - act_mean) / act_std.

Outputs (in --out, default rt-config/policies):
  flow.onnx + flow.toml   flow-matching denoiser (velocity; t in [0, 1], t = 1 is data)
  ddim.onnx + ddim.toml   DDIM denoiser (predicted noise; t = timestep 0..N-1, cosine schedule)
  regression.onnx         squared-error regression baseline (obs -> normalised chunk), same
                          normalisation as flow.toml: the mode test's counterexample.

All three networks share one MLP shape (SiLU, HIDDEN x LAYERS) and one fixed latent basis:
the top LATENT principal directions of the normalised chunks (they keep all but ~1e-6 of
the variance). Inside each graph:
  features     [obs_n, (q - goal) / OBS_DELTA_SCALE_RAD]     (a fixed affine map of obs_n)
  denoisers    MLP([features, x @ basis, sin/cos(time)]) = latent coordinates of the clean
               chunk x1_hat = c @ basis^T; the head returns what the sampler expects:
               flow  v = (x1_hat - x) / max(1 - t, FLOW_MIN_DENOM)
               DDIM  eps = (x - sqrt(abar_t) x1_hat) / sqrt(1 - abar_t)
  regression   MLP(features) @ basis^T
Predicting the clean chunk in a low-dimensional basis (rather than the velocity or the
noise of all H x D_a numbers) is what lets a small MLP trained for minutes separate the
two modes; the graph's inputs and outputs are unchanged, so the Rust samplers are too.
"""

import argparse
import hashlib
import os
import sys
import time

import numpy as np

DOF = 7
HORIZON = 32
DT_S = 0.02
GOALS = np.array(
    [
        [0.0, -0.4, 0.0, -1.6, 0.0, 1.2, 0.8],
        [0.9, 0.1, -0.4, -1.2, 0.5, 1.0, 0.2],
        [-0.6, 0.2, 0.5, -1.0, -0.4, 1.5, 1.1],
    ]
)
GOAL_TOLERANCE_RAD = 0.05
DETOUR_RAD = 0.45  # lateral amplitude of the detour around the obstacle
START_NOISE_RAD = 0.02  # spread of the start pose around its goal
STATE_NOISE_RAD = 0.08  # off-path perturbation of the observed state (teaches recovery)
VEL_NOISE_RAD_S = 0.15  # off-path velocity of the observed state
RATE_NOISE = 0.25  # relative spread of the progress rate around the expert's own
RETURN_RATE = 3.5  # 1/s: critically damped return of an off-path offset to the path
PROGRESS_GAIN = 4.0  # 1/s: lag of the progress rate behind its target
ARRIVAL_RATE = 6.0  # 1/s: critically damped approach to the goal
LATERAL_NOISE_MIN = 0.25  # share of STATE_NOISE_RAD toward the detour side at the start ...
LATERAL_NOISE_RAMP = 0.25  # ... growing to all of it at this progress
GOAL_NOISE_RAD = 0.15
GOAL_FRACTION = 0.15
MAX_DEMO_SPEED_RAD_S = 1.1
START_FRACTION = 0.3
START_RATE = 0.1  # progress-rate profile, see progress_rate()
RAMP = 0.2
HIDDEN = 256
OBS_DELTA_SCALE_RAD = 0.25  # scale of the (q - goal) feature
# Normalised chunks are (a - mean) / (std * ACT_SCALE): per element the std is 1 / ACT_SCALE,
# and the smooth chunks' leading principal directions, which sum over 32 setpoints, come to
# about 1.5 noise units instead of 9. At scale 1 the two modes sit ~15 noise units apart, so
# the sampler would have to choose a side within its first Euler step (t < 1/K), where the
# field is steepest and a smooth network cannot follow it; at this scale the choice spreads
# over t ~ 0.2-0.5 (the role of the latent scale factor or sigma_data in image diffusion).
ACT_SCALE = 6.0
LATENT = 48  # principal directions of the normalised chunks the networks work in
LAYERS = 3
FREQS = 16
DDIM_STEPS_TRAIN = 100
SEED = 20260101
EMA_DECAY = 0.999
GRAD_CLIP_NORM = 1.0
# The denoisers' MLPs predict the clean chunk; the graph's head turns that into the velocity
# (flow) or the noise (DDIM) the sampler expects (see export_onnx).
FLOW_MIN_DENOM = 0.05  # v = (x1_hat - x_t) / max(1 - t, this)
FLOW_MAX_WEIGHT = 4.0
DDIM_MIN_SNR_GAMMA = 5.0


# ---------------------------------------------------------------- demonstrations


def detour_direction(g0, g1):
    """Unit joint-space vector orthogonal to g1 - g0: the side the obstacle is passed on."""
    d = (g1 - g0) / np.linalg.norm(g1 - g0)
    e = np.array([0.0, 1.0, 0.0, 1.0, 0.0, -1.0, 0.0])
    n = e - (e @ d) * d
    return n / np.linalg.norm(n)


def progress_rate(s, s_dot_max):
    """The expert's target ds/dt as a function of progress s only: a third of cruise speed at
    the start, cruise speed from s = 0.2."""
    up = (START_RATE + s) / (START_RATE + RAMP)
    return s_dot_max * np.clip(up, 0.0, 1.0)


def progress_accel(s, sd, s_dot_max):
    """d2s/dt2 of the expert: the rate follows its target with a lag (PROGRESS_GAIN), and
    the arrival is a critically damped approach to s = 1 (ARRIVAL_RATE), whichever brakes
    harder. The approach takes over smoothly (where the two agree) and never overshoots."""
    follow = PROGRESS_GAIN * (progress_rate(s, s_dot_max) - sd)
    arrive = ARRIVAL_RATE**2 * (1.0 - s) - 2.0 * ARRIVAL_RATE * sd
    return np.minimum(follow, arrive)


def expert_rollout(s0, sd0, s_dot_max, e0, ed0):
    """The expert's future from the state (s, ds/dt) along the path and the off-path offset
    (e, de/dt), sampled at the HORIZON setpoint times (10 Euler sub-steps each).

    A second-order, time-invariant system: the progress rate follows its target with a lag
    and arrives critically damped (progress_accel), and the offset returns to the path critically
    damped, e(t) = (e0 + (de0 + w e0) t) exp(-w t), w = RETURN_RATE. Its future is a function
    of position and velocity only, so a policy that observes both and re-plans every 50 ms
    from the commanded state reproduces the trajectory it is already playing: consecutive
    chunks agree in position and velocity at every seam, and the acceleration stays within a
    fraction of the limits (no velocity steps at the start or at the goal)."""
    n = len(s0)
    s_fut = np.empty((n, HORIZON))
    s, sd = s0.copy(), sd0.copy()
    h = DT_S / 10.0
    for i in range(HORIZON):
        s_fut[:, i] = s
        for _ in range(10):
            sdd = progress_accel(s, sd, s_dot_max)
            sd = sd + h * sdd
            s = s + h * sd
    t = (np.arange(HORIZON) * DT_S)[None, :, None]
    w = RETURN_RATE
    e_fut = (e0[:, None, :] + (ed0[:, None, :] + w * e0[:, None, :]) * t) * np.exp(-w * t)
    return s_fut, e_fut


def nominal_rate(s_dot_max):
    """ds/dt along the expert's own trajectory from rest at s = 0, as a function of s:
    (s grid, rate) for np.interp."""
    s, sd, h = 0.0, 0.0, 1e-3
    grid, rate = [0.0], [0.0]
    while s < 0.999 and len(grid) < 200000:
        sd += h * float(progress_accel(s, sd, s_dot_max))
        s += h * sd
        grid.append(s)
        rate.append(sd)
    grid.append(1.0)
    rate.append(0.0)
    return np.array(grid), np.array(rate)


def arrival_velocities(k):
    """The velocities the expert arrives at goal k with (the first state within
    GOAL_TOLERANCE_RAD of it on every joint), one per side of the previous segment: the
    runtime advances to the next goal there, so a new segment starts moving."""
    g0, g1 = GOALS[k - 1], GOALS[k]
    n = detour_direction(g0, g1)
    out = []
    for side in (-1.0, 1.0):
        amp = side * DETOUR_RAD

        def path(s):
            return g0 + s * (g1 - g0) + amp * np.sin(np.pi * s) * n

        def path_ds(s):
            return (g1 - g0) + amp * np.pi * np.cos(np.pi * s) * n

        u = np.linspace(0.0, 1.0, 400)
        dp_ds = np.abs(np.diff(path(u[:, None]), axis=0)).max() / (u[1] - u[0])
        s_dot_max = MAX_DEMO_SPEED_RAD_S / dp_ds
        s, sd, h = 0.0, 0.0, 1e-3
        while np.abs(path(s) - g1).max() > GOAL_TOLERANCE_RAD and s < 0.9999:
            sd += h * float(progress_accel(s, sd, s_dot_max))
            s += h * sd
        out.append(path_ds(s) * sd)
    return out


def make_dataset(rng, demos_per_side, samples_per_demo):
    """Returns obs [N, 21] = [q, goal, v], act [N, H, 7] (float32)."""
    obs, act = [], []
    for k in range(len(GOALS)):
        g0, g1 = GOALS[k], GOALS[(k + 1) % len(GOALS)]
        n = detour_direction(g0, g1)
        arrivals = arrival_velocities(k)
        for side in (-1.0, 1.0):
            for _ in range(demos_per_side):
                q0 = g0 + rng.normal(0.0, START_NOISE_RAD, DOF)
                amp = side * DETOUR_RAD * (1.0 + 0.05 * rng.normal())

                def path(s, q0=q0, amp=amp):
                    s = s[..., None]
                    return q0 + s * (g1 - q0) + amp * np.sin(np.pi * s) * n

                def path_ds(s, q0=q0, amp=amp):
                    s = s[..., None]
                    return (g1 - q0) + amp * np.pi * np.cos(np.pi * s) * n

                # Cruise rate: the fastest joint moves at MAX_DEMO_SPEED_RAD_S.
                u = np.linspace(0.0, 1.0, 400)
                dp_ds = np.abs(np.diff(path(u), axis=0)).max() / (u[1] - u[0])
                s_dot_max = MAX_DEMO_SPEED_RAD_S / dp_ds
                grid, rate = nominal_rate(s_dot_max)
                # States: a share at the start, where the two modes split (the ambiguous
                # observations, where a policy must not average), the rest along the way
                # and a few at the goal.
                r = rng.random(samples_per_demo)
                s_now = np.where(
                    r < START_FRACTION,
                    rng.uniform(0.0, 0.02, samples_per_demo),
                    np.where(r < 1.0 - GOAL_FRACTION, rng.uniform(0.0, 1.0, samples_per_demo), 1.0),
                )
                # Progress rate near the expert's own (from rest at the start), spread so
                # that a policy learns to return to it from faster or slower.
                sd_now = np.interp(s_now, grid, rate) * np.clip(
                    1.0 + RATE_NOISE * rng.normal(size=samples_per_demo), 0.0, None
                )
                # Off-path states with the way back. The tube widens toward the goal, so that
                # an arm that arrives off the path (say, with some of the detour left) or
                # stops short of the goal is pulled in. Off-path velocities likewise (an arm
                # arriving at a goal still moving, a gate that held the command back).
                grow = s_now**2
                sigma = (STATE_NOISE_RAD + (GOAL_NOISE_RAD - STATE_NOISE_RAD) * grow)[:, None]
                eps = rng.normal(0.0, 1.0, (samples_per_demo, DOF)) * sigma
                deps = rng.normal(0.0, 1.0, (samples_per_demo, DOF)) * VEL_NOISE_RAD_S
                # Near the start, less of it toward the sides: once the arm has left the start
                # on one side, the state says which (a generative policy re-planning every 50 ms
                # then stays on that side, instead of finding states where both sides are
                # equally likely and stalling between them).
                lateral = np.clip(s_now / LATERAL_NOISE_RAMP, LATERAL_NOISE_MIN, 1.0)[:, None]
                eps -= (1.0 - lateral) * (eps @ n)[:, None] * n[None, :]
                deps -= (1.0 - lateral) * (deps @ n)[:, None] * n[None, :]
                # Half the states at the start still carry the arrival at this goal (a
                # share of the velocity the previous segment arrived with, from either of
                # its sides): the next segment begins by turning that motion around.
                at_start = (r < START_FRACTION) & (rng.random(samples_per_demo) < 0.5)
                which = rng.integers(0, 2, samples_per_demo)
                share = rng.uniform(0.0, 1.2, samples_per_demo)
                arriving = np.stack(arrivals)[which] * share[:, None]
                deps += np.where(at_start[:, None], arriving, 0.0)
                s_fut, e_fut = expert_rollout(s_now, sd_now, s_dot_max, eps, deps)
                p_now = path(s_now)  # [S, 7]
                q = p_now + eps
                v = path_ds(s_now) * sd_now[:, None] + deps
                a = path(s_fut) + e_fut - q[:, None, :]
                obs.append(np.concatenate([q, np.broadcast_to(g1, q.shape), v], axis=1))
                act.append(a)
    obs = np.concatenate(obs).astype(np.float32)
    act = np.concatenate(act).astype(np.float32)
    return obs, act


def data_digest(obs, act):
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(obs, dtype="<f4").tobytes())
    h.update(np.ascontiguousarray(act, dtype="<f4").tobytes())
    return h.hexdigest()


# ---------------------------------------------------------------- the MLP (jax)


class Mlp:
    """SiLU MLP; Adam with an exponential moving average of the weights (what gets exported:
    smoother fields, cleaner mode separation than the last iterate). Parameters are numpy
    float32 arrays [w0, b0, w1, b1, ...]; training runs as one jit-compiled jax step."""

    def __init__(self, rng, sizes):
        self.params = []
        for a, b in zip(sizes[:-1], sizes[1:]):
            self.params.append(rng.normal(0.0, np.sqrt(2.0 / a), (a, b)).astype(np.float32))
            self.params.append(np.zeros(b, dtype=np.float32))
        self.params[-2] *= 0.1
        self.ema = [p.copy() for p in self.params]


def mlp_apply(params, x):
    import jax

    nl = len(params) // 2
    for i in range(nl):
        x = x @ params[2 * i] + params[2 * i + 1]
        if i < nl - 1:
            # x * sigmoid(x) (the graph's Sigmoid + Mul); jax's form has a finite gradient
            # for very negative x, where 1 / (1 + exp(-x)) differentiates to inf / inf.
            x = jax.nn.silu(x)
    return x


def make_step():
    import jax
    import jax.numpy as jnp

    def loss_fn(params, inp, target, weight):
        d = mlp_apply(params, inp) - target
        return jnp.mean(weight[:, None] * d * d)

    @jax.jit
    def step(params, m, v, ema, count, inp, target, weight, lr):
        loss, grads = jax.value_and_grad(loss_fn)(params, inp, target, weight)
        # Global gradient-norm clipping: the velocity loss weighs samples near t = 1 up to
        # FLOW_MAX_WEIGHT times, and one unlucky batch must not throw the weights away.
        norm = jnp.sqrt(sum(jnp.sum(g * g) for g in grads))
        scale = jnp.minimum(1.0, GRAD_CLIP_NORM / (norm + 1e-12))
        grads = [g * scale for g in grads]
        b1, b2, eps = 0.9, 0.999, 1e-8
        c1 = 1.0 - b1**count
        c2 = 1.0 - b2**count
        m = [b1 * mi + (1.0 - b1) * g for mi, g in zip(m, grads)]
        v = [b2 * vi + (1.0 - b2) * g * g for vi, g in zip(v, grads)]
        params = [p - lr * (mi / c1) / (jnp.sqrt(vi / c2) + eps) for p, mi, vi in zip(params, m, v)]
        decay = jnp.minimum(EMA_DECAY, (1.0 + count) / (10.0 + count))
        ema = [decay * e + (1.0 - decay) * p for e, p in zip(ema, params)]
        return params, m, v, ema, loss

    return step


def time_features(t, t_scale):
    """sin/cos features of t * t_scale at FREQS geometric frequencies (as in the graph)."""
    f = time_freqs(t_scale)
    ang = t[:, None].astype(np.float32) * f[None, :]
    return np.concatenate([np.sin(ang), np.cos(ang)], axis=1).astype(np.float32)


def time_freqs(t_scale):
    return (2.0 * np.pi * np.geomspace(0.5, 32.0, FREQS) * t_scale).astype(np.float32)


def cosine_alphas_cumprod(n, s=0.008):
    def abar(u):
        return np.cos((u + s) / (1.0 + s) * np.pi / 2.0) ** 2

    betas = np.minimum(1.0 - abar(np.arange(1, n + 1) / n) / abar(np.arange(n) / n), 0.999)
    return np.cumprod(1.0 - betas)


def lr_at(step, steps, lr0):
    return lr0 * (0.02 + 0.98 * 0.5 * (1.0 + np.cos(np.pi * step / steps)))


def train(name, net, steps, batch, rng, make_batch, lr0=1e-3):
    """Adam on the mean of weight * squared error; make_batch returns (input, target,
    per-sample weight or None). Leaves the trained and averaged weights in `net`."""
    import jax.numpy as jnp

    steps = int(steps)
    step_fn = make_step()
    params = [jnp.asarray(p) for p in net.params]
    ema = [jnp.asarray(p) for p in net.ema]
    m = [jnp.zeros_like(p) for p in params]
    v = [jnp.zeros_like(p) for p in params]
    t0 = time.time()
    window, n_window, avg = 0.0, 0, None
    for step in range(steps):
        inp, target, weight = make_batch(rng, batch)
        if weight is None:
            weight = np.ones(len(inp), dtype=np.float32)
        params, m, v, ema, loss = step_fn(
            params, m, v, ema, jnp.float32(step + 1), inp, target,
            weight.astype(np.float32), jnp.float32(lr_at(step, steps, lr0)),
        )
        window = window + loss
        n_window += 1
        if step % 1000 == 0 or step == steps - 1:
            avg = float(window) / n_window  # mean loss since the last line
            if not np.isfinite(avg):
                raise SystemExit(f"{name}: training diverged (loss {avg}) at step {step}; nothing written")
            window, n_window = 0.0, 0
            print(f"  {name}: step {step:6d}  loss {avg:.5f}  ({time.time() - t0:.0f} s)", flush=True)
    net.params = [np.asarray(p, dtype=np.float32) for p in params]
    net.ema = [np.asarray(p, dtype=np.float32) for p in ema]
    return avg


# ---------------------------------------------------------------- ONNX export


def obs_feature_map(stats):
    """Fixed affine map from the normalised observation to (q - goal) / OBS_DELTA_SCALE_RAD,
    the arm's offset from its goal, which the networks read beside the observation: where
    the arm stands relative to its goal is what decides the chunk, and an MLP resolves it
    much sooner from this feature than from q and goal separately (both span the workspace).
    Returns (A [3 DOF, DOF], b [DOF]) with features = obs_n @ A + b."""
    sd, mu = stats["obs_std"], stats["obs_mean"]
    a = np.zeros((3 * DOF, DOF))
    for j in range(DOF):
        a[j, j] = sd[j] / OBS_DELTA_SCALE_RAD
        a[DOF + j, j] = -sd[DOF + j] / OBS_DELTA_SCALE_RAD
    b = (mu[:DOF] - mu[DOF : 2 * DOF]) / OBS_DELTA_SCALE_RAD
    return a.astype(np.float32), b.astype(np.float32)


def export_onnx(path, net, d_obs, d_a, horizon, t_scale, head, basis, features, alphas=None):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    inits, nodes = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    denoiser = head in ("flow", "ddim")
    inputs = [helper.make_tensor_value_info("obs", TensorProto.FLOAT, [1, d_obs])]
    const("feat_a", features[0])
    const("feat_b", features[1][None, :])
    nodes += [
        helper.make_node("MatMul", ["obs", "feat_a"], ["feat_ab"]),
        helper.make_node("Add", ["feat_ab", "feat_b"], ["feat"]),
        helper.make_node("Concat", ["obs", "feat"], ["obs_f"], axis=1),
    ]
    if denoiser:
        inputs.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, horizon, d_a]))
        inputs.append(helper.make_tensor_value_info("t", TensorProto.FLOAT, [1]))
        const("shape_t", np.array([1, 1], dtype=np.int64))
        const("freqs", time_freqs(t_scale)[None, :])
        const("shape_flat", np.array([1, horizon * d_a], dtype=np.int64))
        const("basis", basis.astype(np.float32))
        nodes += [
            helper.make_node("Reshape", ["t", "shape_t"], ["t2"]),
            helper.make_node("Mul", ["t2", "freqs"], ["ang"]),
            helper.make_node("Sin", ["ang"], ["tsin"]),
            helper.make_node("Cos", ["ang"], ["tcos"]),
            helper.make_node("Reshape", ["x", "shape_flat"], ["xf"]),
            # The noisy chunk's coordinates in the latent (PCA) basis.
            helper.make_node("MatMul", ["xf", "basis"], ["xl"]),
            helper.make_node("Concat", ["obs_f", "xl", "tsin", "tcos"], ["h0"], axis=1),
        ]
        h = "h0"
    else:
        h = "obs_f"
    params = net.ema
    nl = len(params) // 2
    for i in range(nl):
        w = const(f"w{i}", params[2 * i])
        b = const(f"b{i}", params[2 * i + 1])
        nodes.append(helper.make_node("MatMul", [h, w], [f"mm{i}"]))
        nodes.append(helper.make_node("Add", [f"mm{i}", b], [f"z{i}"]))
        if i < nl - 1:
            nodes.append(helper.make_node("Sigmoid", [f"z{i}"], [f"sg{i}"]))
            nodes.append(helper.make_node("Mul", [f"z{i}", f"sg{i}"], [f"h{i + 1}"]))
            h = f"h{i + 1}"
        else:
            h = f"z{i}"
    # The MLP's output is the clean chunk's latent coordinates; back to the chunk.
    const("basis_t", np.ascontiguousarray(basis.T).astype(np.float32))
    nodes.append(helper.make_node("MatMul", [h, "basis_t"], ["x1_hat"]))
    h = "x1_hat"
    # The MLP predicts the clean chunk; the head turns it into what the sampler expects.
    if head == "flow":
        # v = (x1_hat - x_t) / max(1 - t, FLOW_MIN_DENOM)
        const("one", np.ones((1, 1), dtype=np.float32))
        const("min_denom", np.full((1, 1), FLOW_MIN_DENOM, dtype=np.float32))
        nodes += [
            helper.make_node("Sub", ["one", "t2"], ["omt"]),
            helper.make_node("Max", ["omt", "min_denom"], ["denom"]),
            helper.make_node("Sub", [h, "xf"], ["dx"]),
            helper.make_node("Div", ["dx", "denom"], ["vel"]),
        ]
        h = "vel"
    elif head == "ddim":
        # eps = (x_t - sqrt(abar_t) x0_hat) / sqrt(1 - abar_t), abar_t looked up by timestep.
        n = len(alphas)
        const("sqrt_abar", np.sqrt(alphas).astype(np.float32))
        const("sqrt_1m_abar", np.sqrt(1.0 - alphas).astype(np.float32))
        const("t_lo", np.array(0.0, dtype=np.float32))
        const("t_hi", np.array(float(n - 1), dtype=np.float32))
        nodes += [
            helper.make_node("Round", ["t"], ["t_round"]),
            helper.make_node("Clip", ["t_round", "t_lo", "t_hi"], ["t_clip"]),
            helper.make_node("Cast", ["t_clip"], ["t_idx"], to=TensorProto.INT64),
            helper.make_node("Gather", ["sqrt_abar", "t_idx"], ["sa1"], axis=0),
            helper.make_node("Gather", ["sqrt_1m_abar", "t_idx"], ["sb1"], axis=0),
            helper.make_node("Reshape", ["sa1", "shape_t"], ["sa"]),
            helper.make_node("Reshape", ["sb1", "shape_t"], ["sb"]),
            helper.make_node("Mul", ["sa", h], ["sx0"]),
            helper.make_node("Sub", ["xf", "sx0"], ["num"]),
            helper.make_node("Div", ["num", "sb"], ["eps"]),
        ]
        h = "eps"
    const("shape_out", np.array([1, horizon, d_a], dtype=np.int64))
    nodes.append(helper.make_node("Reshape", [h, "shape_out"], ["out"]))
    outputs = [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, horizon, d_a])]
    graph = helper.make_graph(nodes, os.path.basename(path), inputs, outputs, inits)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="chunkrt train_policy.py"
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


# ---------------------------------------------------------------- manifests


def fmt_list(v, per_line=8):
    v = [float(x) for x in np.asarray(v).ravel()]
    if len(v) <= per_line:
        return "[" + ", ".join(f"{x:.9g}" for x in v) + "]"
    lines = []
    for i in range(0, len(v), per_line):
        lines.append("    " + ", ".join(f"{x:.9g}" for x in v[i : i + per_line]) + ",")
    return "[\n" + "\n".join(lines) + "\n]"


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def write_manifest(path, model_file, kind, stats, domain, digest, counts, sampler, alphas):
    model_path = os.path.join(os.path.dirname(path), model_file)
    out = [
        f"# chunkrt policy manifest, written by scripts/train_policy.py (seed {SEED}).",
        "# Checked at load: the model's SHA-256, its input/output names and shapes, the dims.",
        "format = 1",
        f'kind = "{kind}"',
        f'model_file = "{model_file}"',
        f'model_sha256 = "{sha256_file(model_path)}"',
        f"d_obs = {3 * DOF}",
        f"d_a = {DOF}",
        f"horizon = {HORIZON}",
        f"dt_ms = {DT_S * 1000:.9g}",
        "",
        "[io]",
        'obs = "obs"',
        'x = "x"',
        't = "t"',
        'out = "out"',
        "",
        "[encoding]",
        "# obs = [q_1..q_7, goal_1..goal_7, v_1..v_7]; chunk[i][j] = q_j + (out[i][j] * act_std + act_mean)",
        "# q, v: the planned state (the chunk being played, without the seam blends toward it):",
        "# each chunk continues the trajectory being played.",
        'observation = "joint_pos_goal_vel"',
        'state = "planned"',
        'action = "delta_from_observed"',
        f"goal_tolerance_rad = {GOAL_TOLERANCE_RAD}",
        "goals = [",
    ]
    out += ["    " + fmt_list(g) + "," for g in GOALS]
    out += [
        "]",
        "",
        "[normalisation]",
        f"obs_mean = {fmt_list(stats['obs_mean'])}",
        f"obs_std = {fmt_list(stats['obs_std'])}",
        f"act_mean = {fmt_list(stats['act_mean'])}",
        f"act_std = {fmt_list(stats['act_std'])}",
        "",
        "[sampler]",
        f'method = "{sampler["method"]}"',
        f"steps = {sampler['steps']}",
        f"min_steps = {sampler['min_steps']}",
        "seed = 0",
        "",
    ]
    if alphas is not None:
        out += [
            "[schedule]",
            "# DDIM (eta = 0): timesteps round(linspace(N-1, 0, K)); x0 clipped to +-clip_x0.",
            'name = "cosine"',
            f"train_timesteps = {len(alphas)}",
            "clip_x0 = 5.0",
            f"alphas_cumprod = {fmt_list(alphas)}",
            "",
        ]
    out += [
        "[training]",
        "# data_sha256: SHA-256 of obs then act, float32 little-endian, C order.",
        f'data_sha256 = "{digest}"',
        f"samples = {counts['samples']}",
        f"demonstrations = {counts['demos']}",
        f"seed = {SEED}",
        'script = "scripts/train_policy.py"',
        f"final_loss = {counts['loss']:.6g}",
        "",
        "[domain]",
        "# Declared operating domain of the observation vector: per-dim bounds, and a",
        "# Mahalanobis support check d^2 = (o - mean)^T (covariance + ridge I)^-1 (o - mean).",
        f"obs_min = {fmt_list(domain['min'])}",
        f"obs_max = {fmt_list(domain['max'])}",
        f"mean = {fmt_list(domain['mean'])}",
        f"ridge = {domain['ridge']:.9g}",
        f"mahalanobis_max = {domain['d_max']:.9g}",
        "covariance = [",
    ]
    out += ["    " + fmt_list(row, per_line=99) + "," for row in domain["cov"]]
    out += ["]", ""]
    out += provenance_lines(kind, sha256_file(model_path), counts["demos"], digest)
    with open(path, "w") as f:
        f.write("\n".join(out))


def provenance_lines(kind, model_sha, demos, data_sha):
    """The manifest's provenance ledger (docs/gap.md): one training stage,
    ending with this model, on demonstrations of the kinematic expert (expert_rollout:
    no physics, so no model asset), and its randomisation as +-2 sigma of the Gaussian
    draws. `chunkrt gap --omission-log` appends the measured omissions after it."""
    return [
        "# Provenance ledger (README \"The reality gap\"): the training stages, the simulator,",
        "# then the omission log `chunkrt gap --omission-log` appends.",
        "[[regime_sequence]]",
        f'stage = "imitation ({kind} matching of the expert\'s chunks)"',
        'plant = "kinematic expert (scripts/train_policy.py expert_rollout)"',
        f'checkpoint_sha256 = "{model_sha}"',
        f'data = "{demos} demonstrations, data_sha256 {data_sha}"',
        "",
        "[simulation_provenance]",
        "# The demonstrations are a kinematic expert's: no physics engine, no model asset.",
        'engine = "kinematic expert"',
        f'build = "scripts/train_policy.py (seed {SEED})"',
        f"timestep_s = {DT_S / 10:.9g}",
        'integrator = "explicit euler"',
        "",
        "[simulation_provenance.randomization]",
        "# +-2 sigma of the Gaussian draws",
        f"start_offset_rad = [{-2 * START_NOISE_RAD:.9g}, {2 * START_NOISE_RAD:.9g}]",
        "detour_scale = [0.9, 1.1]",
        f"progress_rate_scale = [{max(0.0, 1 - 2 * RATE_NOISE):.9g}, {1 + 2 * RATE_NOISE:.9g}]",
        f"state_offset_rad = [{-2 * STATE_NOISE_RAD:.9g}, {2 * STATE_NOISE_RAD:.9g}]",
        f"state_velocity_rad_s = [{-2 * VEL_NOISE_RAD_S:.9g}, {2 * VEL_NOISE_RAD_S:.9g}]",
        "",
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "rt-config", "policies"))
    ap.add_argument("--steps", type=int, default=60000, help="training steps per network (flow: 1.5x)")
    ap.add_argument(
        "--regression-steps", type=int, default=8000,
        help="training steps of the regression baseline. Near the start the measured state "
        "decides the side within ~0.03 rad, so a regressor trained long puts a steep transition "
        "there and its value at the exactly ambiguous observation depends on where that "
        "transition lands (60 000 steps: +0.24 rad); at 8 000 it is the conditional mean, the "
        "midpoint (+0.01 rad)",
    )
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--demos-per-side", type=int, default=120)
    ap.add_argument("--samples-per-demo", type=int, default=80)
    ap.add_argument("--only", choices=["flow", "ddim", "regression"], help="train one network (experiments)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(SEED)

    obs, act = make_dataset(rng, args.demos_per_side, args.samples_per_demo)
    n = len(obs)
    digest = data_digest(obs, act)
    print(f"dataset: {n} samples, sha256 {digest}")
    act_flat = act.reshape(n, -1)
    stats = {
        "obs_mean": obs.mean(0),
        "obs_std": np.maximum(obs.std(0), 1e-2),
        "act_mean": act_flat.mean(0),
        "act_std": np.maximum(act_flat.std(0), 1e-3) * ACT_SCALE,
    }
    obs_n = ((obs - stats["obs_mean"]) / stats["obs_std"]).astype(np.float32)
    features = obs_feature_map(stats)
    obs_f = np.concatenate([obs_n, obs_n @ features[0] + features[1]], axis=1).astype(np.float32)
    act_n = ((act_flat - stats["act_mean"]) / stats["act_std"]).astype(np.float32)

    # Declared domain: bounds with a margin, mean/covariance with a ridge, and a threshold at
    # 1.5x the largest training distance.
    ridge = 1e-4
    cov = np.cov(obs.astype(np.float64).T)
    prec = np.linalg.inv(cov + ridge * np.eye(cov.shape[0]))
    centred = obs.astype(np.float64) - obs.mean(0)
    d2 = np.einsum("ni,ij,nj->n", centred, prec, centred)
    span = obs.max(0) - obs.min(0)
    domain = {
        "min": obs.min(0) - 0.1 * span - 0.02,
        "max": obs.max(0) + 0.1 * span + 0.02,
        "mean": obs.mean(0).astype(np.float64),
        "cov": cov,
        "ridge": ridge,
        "d_max": float(np.sqrt(d2.max()) * 1.5),
    }
    print(f"domain: max training Mahalanobis distance {np.sqrt(d2.max()):.2f}")

    # Latent basis: the top LATENT principal directions of the normalised chunks (they hold
    # all but ~1e-6 of the variance). The networks read and write chunks in it; the graph
    # projects the noisy chunk onto it and maps the prediction back (export_onnx).
    evals, evecs = np.linalg.eigh(np.cov(act_n.astype(np.float64).T))
    basis = evecs[:, ::-1][:, :LATENT].astype(np.float32)  # [H * D_a, LATENT], orthonormal
    kept = evals[::-1][:LATENT].sum() / evals.sum()
    lat_n = (act_n @ basis).astype(np.float32)
    resid = act_n - lat_n @ basis.T
    print(f"latent: {LATENT} principal directions keep {kept:.7f} of the variance; "
          f"largest reconstruction error {np.abs(resid * stats['act_std']).max() * 1e3:.2f} mrad")
    sizes_den = [4 * DOF + LATENT + 2 * FREQS] + [HIDDEN] * LAYERS + [LATENT]
    sizes_reg = [4 * DOF] + [HIDDEN] * LAYERS + [LATENT]
    counts = {"samples": n, "demos": 2 * len(GOALS) * args.demos_per_side}

    # Flow matching: x_t = (1 - t) x0 + t x1, x0 ~ N(0, I), x1 = data; target x1 - x0.
    def flow_batch(r, b):
        idx = r.integers(0, n, b)
        x1 = lat_n[idx]  # the basis is orthonormal: N(0, I) noise stays N(0, I) in it
        x0 = r.standard_normal(x1.shape).astype(np.float32)
        t = r.uniform(0.0, 1.0, b).astype(np.float32)
        xt = (1.0 - t[:, None]) * x0 + t[:, None] * x1
        inp = np.concatenate([obs_f[idx], xt, time_features(t, 1.0)], axis=1)
        # x-prediction with the velocity loss: |v_hat - v|^2 = |x1_hat - x1|^2 / (1 - t)^2.
        w = 1.0 / np.maximum(1.0 - t, FLOW_MIN_DENOM) ** 2
        return inp, x1, np.minimum(w, FLOW_MAX_WEIGHT)

    alphas = cosine_alphas_cumprod(DDIM_STEPS_TRAIN)

    def ddim_batch(r, b):
        idx = r.integers(0, n, b)
        x0 = lat_n[idx]
        eps = r.standard_normal(x0.shape).astype(np.float32)
        k = r.integers(0, DDIM_STEPS_TRAIN, b)
        a = alphas[k].astype(np.float32)[:, None]
        xt = np.sqrt(a) * x0 + np.sqrt(1.0 - a) * eps
        inp = np.concatenate([obs_f[idx], xt, time_features(k.astype(np.float32), 1.0 / DDIM_STEPS_TRAIN)], axis=1)
        # x0-prediction, min-SNR weighted: the noise loss is SNR * |x0_hat - x0|^2.
        snr = alphas[k] / (1.0 - alphas[k])
        return inp, x0, np.minimum(snr, DDIM_MIN_SNR_GAMMA)

    def reg_batch(r, b):
        idx = r.integers(0, n, b)
        return obs_f[idx], lat_n[idx], None

    common = {"d_obs": 3 * DOF, "d_a": DOF, "horizon": HORIZON}
    for name, kind, make_batch, t_scale, sampler, sched in [
        ("flow", "flow", flow_batch, 1.0, {"method": "euler", "steps": 16, "min_steps": 2}, None),
        ("ddim", "ddim", ddim_batch, 1.0 / DDIM_STEPS_TRAIN, {"method": "ddim", "steps": 25, "min_steps": 5}, alphas),
    ]:
        if args.only and args.only != name:
            continue
        net = Mlp(np.random.default_rng(SEED + 1), sizes_den)
        loss = train(name, net, args.steps * (1.5 if name == "flow" else 1.0), args.batch, np.random.default_rng(SEED + 2), make_batch)
        export_onnx(os.path.join(args.out, f"{name}.onnx"), net, t_scale=t_scale, head=kind, basis=basis, features=features, alphas=sched, **common)
        write_manifest(
            os.path.join(args.out, f"{name}.toml"), f"{name}.onnx", kind, stats, domain, digest,
            dict(counts, loss=loss), sampler, sched,
        )
        print(f"wrote {name}.onnx + {name}.toml")

    if args.only and args.only != "regression":
        return 0
    net = Mlp(np.random.default_rng(SEED + 1), sizes_reg)
    train("regression", net, args.regression_steps, args.batch, np.random.default_rng(SEED + 2), reg_batch)
    export_onnx(os.path.join(args.out, "regression.onnx"), net, t_scale=1.0, head=None, basis=basis, features=features, **common)
    print("wrote regression.onnx (normalisation as in flow.toml)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
