"""Reference implementation of what chunkrt does with a format-2 (LeRobot) manifest, in numpy
+ onnxruntime only (no torch): read the manifest, normalise the raw observation history, run
the exported graph (ACT: once; diffusion: the diffusers DDPM/DDIM scheduler, plain f32
arithmetic in diffusers' order), unnormalise the setpoints [start, start + len).

Used by golden_lerobot.py --check (goldens reproduced from the ONNX) and closed_loop.py.
"""

import os
import tomllib

import numpy as np

f = np.float32
EPS = f(1e-8)


class Manifest:
    def __init__(self, path):
        with open(path, "rb") as fh:
            self.m = tomllib.load(fh)
        assert self.m["format"] == 2
        self.path = path
        self.dir = os.path.dirname(os.path.abspath(path))
        self.kind = self.m["kind"]
        self.d_a = self.m["d_a"]
        self.history = self.m["observation"]["history"]
        self.inputs = self.m["observation"]["inputs"]
        self.act = self.m["action"]
        self.start, self.len, self.horizon = self.act["start"], self.act["len"], self.act["horizon"]
        self.sched = self.m.get("scheduler")
        self.steps = self.m["sampler"]["steps"]
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        self.sess = ort.InferenceSession(os.path.join(self.dir, self.m["model_file"]), so,
                                         providers=["CPUExecutionProvider"])


def normalise(spec, x):
    x = np.asarray(x, f)
    mode = spec["normalisation"]
    if mode == "min_max":
        lo, hi = np.array(spec["min"], f), np.array(spec["max"], f)
        denom = hi - lo
        denom = np.where(denom == 0, EPS, denom).astype(f)
        return ((f(2) * (x - lo)) / denom) - f(1)
    if mode == "mean_std":
        return (x - np.array(spec["mean"], f)) / (np.array(spec["std"], f) + EPS)
    return x


def unnormalise(spec, x):
    x = np.asarray(x, f)
    mode = spec["normalisation"]
    if mode == "min_max":
        lo, hi = np.array(spec["min"], f), np.array(spec["max"], f)
        denom = hi - lo
        denom = np.where(denom == 0, EPS, denom).astype(f)
        return (x + f(1)) / f(2) * denom + lo
    if mode == "mean_std":
        return x * np.array(spec["std"], f) + np.array(spec["mean"], f)
    return x


def graph_inputs(man, observations):
    """observations: list (oldest first, len == history) of dicts joint_pos/joint_vel/goal."""
    assert len(observations) == man.history
    feeds = {}
    for spec in man.inputs:
        rows = [normalise(spec, np.concatenate([np.asarray(o[s], f) for s in spec["sources"]]))
                for o in observations]
        arr = np.stack(rows)[None] if man.history > 1 else rows[0][None]
        feeds[spec["name"]] = arr.astype(f)
    return feeds


def timesteps(sc, n):
    T = sc["train_timesteps"]
    sp = sc["timestep_spacing"]
    if sp == "leading":
        ratio = T // n
        ts = (np.arange(0, n) * ratio).round()[::-1].astype(np.int64) + sc["steps_offset"]
    elif sp == "trailing":
        ts = np.round(np.arange(T, 0, -T / n)).astype(np.int64) - 1
    elif sp == "linspace":
        ts = np.linspace(0, T - 1, n).round()[::-1].astype(np.int64)
    else:
        raise ValueError(sp)
    return [int(t) for t in ts]


def sched_step(sc, acp, ts, s, x, m, noise_fn):
    """diffusers DDPMScheduler/DDIMScheduler.step, f32, IEEE sqrt."""
    T, n = sc["train_timesteps"], len(ts)
    t = ts[s]
    if sc["type"] == "ddpm":
        prev = ts[s + 1] if s + 1 < n else -1
        one = f(1)
    else:
        prev = t - T // n
        one = f(1) if sc["set_alpha_to_one"] else acp[0]
    a_t = acp[t]
    a_p = acp[prev] if prev >= 0 else one
    b_t, b_p = f(1) - a_t, f(1) - a_p
    sa, sb = np.sqrt(a_t), np.sqrt(b_t)
    pt = sc["prediction_type"]
    if pt == "epsilon":
        x0, e = (x - sb * m) / sa, m
    elif pt == "sample":
        x0 = m
        e = (x - sa * x0) / sb
    else:
        x0, e = sa * x - sb * m, sa * m + sb * x
    if sc["clip_sample"]:
        r = f(sc["clip_sample_range"])
        x0 = np.clip(x0, -r, r)
    if sc["type"] == "ddpm":
        ca = a_t / a_p
        cb = f(1) - ca
        out = ((np.sqrt(a_p) * cb) / b_t) * x0 + ((np.sqrt(ca) * b_p) / b_t) * x
        if t > 0:
            z = noise_fn()
            var = max((f(1) - a_p) / (f(1) - a_t) * cb, f(1e-20))
            vt = sc["variance_type"]
            if vt == "fixed_small":
                out = out + np.sqrt(var) * z
            elif vt == "fixed_small_log":
                out = out + np.exp(f(0.5) * np.log(var)) * z
            else:
                out = out + np.sqrt(cb) * z
        return out.astype(f)
    eta = f(sc["eta"])
    var = (b_p / b_t) * (f(1) - a_t / a_p)
    std = eta * np.sqrt(var)
    out = np.sqrt(a_p) * x0 + np.sqrt(f(1) - a_p - std * std) * e
    if sc["eta"] > 0:
        out = out + std * noise_fn()
    return out.astype(f)


def infer(man, observations, initial_noise=None, step_noise=None, rng=None, steps=None):
    """Returns (normalised sequence [horizon, d_a], absolute setpoints [len, d_a])."""
    feeds = graph_inputs(man, observations)
    if man.kind == "chunk":
        seq = man.sess.run([man.m["io"]["out"]], feeds)[0][0]
    else:
        io, sc = man.m["io"], man.sched
        acp = np.array(sc["alphas_cumprod"], f)
        ts = timesteps(sc, steps or man.steps)
        shape = (1, man.horizon, man.d_a)
        if initial_noise is None:
            x = rng.standard_normal(shape).astype(f)
        else:
            x = np.asarray(initial_noise, f).reshape(shape)
        queue = None if step_noise is None else [np.asarray(z, f).reshape(shape) for z in step_noise]

        def noise_fn():
            if queue is not None:
                return queue.pop(0)
            return rng.standard_normal(shape).astype(f)

        for s, t in enumerate(ts):
            fd = dict(feeds)
            fd[io["x"]] = x
            fd[io["t"]] = np.array([t], f)
            m = man.sess.run([io["out"]], fd)[0]
            x = sched_step(sc, acp, ts, s, x, m, noise_fn)
        assert queue is None or not queue, "unused step noise"
        seq = x[0]
    acts = unnormalise(man.act, seq[man.start:man.start + man.len])
    return seq, acts


class Ensembler:
    """ACTTemporalEnsembler (LeRobot 0.6.1), f32."""

    def __init__(self, coeff, chunk):
        self.w = np.exp(-coeff * np.arange(chunk)).astype(f)
        self.cum = np.cumsum(self.w.astype(np.float64)).astype(f)
        self.chunk = chunk
        self.ens = None

    def update(self, c):
        c = np.asarray(c, f)
        if self.ens is None:
            self.ens = c.copy()
            self.cnt = np.ones(self.chunk, np.int64)
        else:
            for k in range(len(self.ens)):
                n = self.cnt[k]
                self.ens[k] = ((self.ens[k] * self.cum[n - 1]) + (c[k] * self.w[n])) / self.cum[n]
                self.cnt[k] = min(n + 1, self.chunk)
            self.ens = np.concatenate([self.ens, c[-1:]])
            self.cnt = np.concatenate([self.cnt, [1]])
        a = self.ens[0].copy()
        self.ens, self.cnt = self.ens[1:], self.cnt[1:]
        return a
