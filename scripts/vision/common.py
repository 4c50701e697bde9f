"""Shared pieces of scripts/vision: the expert, the demonstration data, the batch renderer
(the same rule as scene.render, vectorised for training) and the policy network."""

import hashlib
import math

import numpy as np

from scene import ARM, ARM_UV_RANGE, D1, D2, G0, TARGET, _grid_base, render, target_pose  # noqa: F401

W = 3.0          # expert natural frequency, rad/s (critically damped)
DT = 0.05        # frame period, s
H = 16           # action horizon (action[0] = the current position)
DA = 7
S = 64
OFFS = DT * np.arange(H)
NB = 6           # polynomial basis functions of the predicted sequence


# ---------------------------------------------------------------- expert

def expert(q, qd, g, ts):
    """Closed form of q'' = -2 W q' - W^2 (q - g) from (q, qd): positions and velocities at
    times ts (relative). q, qd, g [..., 7]; returns [..., len(ts), 7] twice."""
    q, qd, g = np.asarray(q, np.float64), np.asarray(qd, np.float64), np.asarray(g, np.float64)
    ts = np.asarray(ts, np.float64)
    e0 = q - g
    c = qd + W * e0
    tt = ts.reshape((1,) * (q.ndim - 1) + (-1, 1))
    ex = np.exp(-W * tt)
    e = (e0[..., None, :] + c[..., None, :] * tt) * ex
    ed = c[..., None, :] * ex - W * e
    return g[..., None, :] + e, ed


def chunk(q, qd, g):
    return expert(q, qd, g, OFFS)[0]


def uv_of(g):
    return np.stack([(g - G0) @ D1 / (D1 @ D1), (g - G0) @ D2 / (D2 @ D2)], -1)


def draw_target(rng, prev, min_step=0.35):
    while True:
        t = rng.uniform(0.1, 0.9, 2)
        if np.hypot(*(t - prev)) >= min_step:
            return t


def make_dataset(seed=20261201, n_chains=300, chain_len=6, n_recovery=7000, rest_frac=0.45):
    """Frames (state [N,14] = q, qdot; uv [N,2] of the shown target; actions [N,16,7];
    kind [N] 0 nominal, 1 recovery, 2 rest)."""
    rng = np.random.default_rng(seed)
    ts = DT * np.arange(51)                       # 2.5 s
    st, uvs, kinds = [], [], []
    nominal = []                                  # (q, qd, uv) of nominal frames for perturbing
    for _ in range(n_chains):
        prev = np.array([0.5, 0.5]) if rng.random() < 0.5 else rng.uniform(0.1, 0.9, 2)
        for _ in range(chain_len):
            tgt = draw_target(rng, prev)
            g = target_pose(*tgt)
            q0 = target_pose(*prev)
            qs, qds = expert(q0, np.zeros(7), g, ts)
            st.append(np.concatenate([qs, qds], -1))
            uvs.append(np.repeat(tgt[None], len(ts), 0))
            kinds.append(np.zeros(len(ts), np.int64))
            prev = tgt
    st = np.concatenate(st)
    uvs = np.concatenate(uvs)
    kinds = np.concatenate(kinds)
    # recovery branches: perturbed states and a few frames of the expert's way back
    idx = rng.integers(0, len(st), n_recovery)
    scale = np.where(rng.random(n_recovery) < 0.25, 2.5, 1.0)[:, None]
    q = st[idx, :7] + rng.normal(0, 0.03, (n_recovery, 7)) * scale
    qd = st[idx, 7:] + rng.normal(0, 0.15, (n_recovery, 7)) * scale
    # some pure in-plane / off-plane pushes (position only)
    k = n_recovery // 5
    q[:k] += rng.normal(0, 0.06, (k, 1)) * D1 + rng.normal(0, 0.06, (k, 1)) * D2
    g = target_pose(uvs[idx, 0:1], uvs[idx, 1:2])
    onward = DT * np.array([0, 2, 5])
    qs, qds = expert(q, qd, g, onward)
    rs = np.concatenate([qs, qds], -1).reshape(-1, 14)
    ruv = np.repeat(uvs[idx], len(onward), 0)
    st = np.concatenate([st, rs])
    uvs = np.concatenate([uvs, ruv])
    kinds = np.concatenate([kinds, np.ones(len(rs), np.int64)])
    # top up the frames near rest at the goal to rest_frac
    g_all = target_pose(uvs[:, 0:1], uvs[:, 1:2])
    near = (np.abs(st[:, :7] - g_all).max(1) < 0.05) & (np.abs(st[:, 7:]).max(1) < 0.1)
    n_extra = max(0, int((rest_frac * len(st) - near.sum()) / (1 - rest_frac)))
    tg = rng.uniform(0.1, 0.9, (n_extra, 2))
    g = target_pose(tg[:, 0:1], tg[:, 1:2])
    sc = rng.choice([0.0, 0.003, 0.01, 0.02], (n_extra, 1))
    q = g + rng.normal(0, 1, (n_extra, 7)) * sc
    qd = rng.normal(0, 1, (n_extra, 7)) * sc * 3
    st = np.concatenate([st, np.concatenate([q, qd], -1)])
    uvs = np.concatenate([uvs, tg])
    kinds = np.concatenate([kinds, np.full(n_extra, 2, np.int64)])
    g_all = target_pose(uvs[:, 0:1], uvs[:, 1:2])
    act = chunk(st[:, :7], st[:, 7:], g_all)
    near = (np.abs(st[:, :7] - g_all).max(1) < 0.05) & (np.abs(st[:, 7:]).max(1) < 0.1)
    info = {"frames": len(st), "nominal": int((kinds == 0).sum()), "recovery": int((kinds == 1).sum()),
            "rest_added": int((kinds == 2).sum()), "near_rest_frac": float(near.mean()),
            "segments": n_chains * chain_len, "branches": n_recovery}
    return st.astype(np.float32), uvs.astype(np.float64), act.astype(np.float32), kinds, info


def data_digest(state, uv, act):
    h = hashlib.sha256()
    for a in (np.asarray(state, "<f4"), np.asarray(uv, "<f8"), np.asarray(act, "<f4")):
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


# ---------------------------------------------------------------- batch renderer

_c = np.arange(S, dtype=np.float64) + 0.5
_base = _grid_base(S)


def render_batch(q, uv):
    """[B, S, S, 3] uint8: scene.render for each row (vectorised; training only)."""
    B = len(q)
    img = np.broadcast_to(_base, (B, S, S, 3)).copy()
    m, w = S / 8.0, 3.0 * S / 4.0
    d = np.asarray(q, np.float64) - G0
    ua = np.clip(d @ D1 / (D1 @ D1), *ARM_UV_RANGE)
    va = np.clip(d @ D2 / (D2 @ D2), *ARM_UV_RANGE)
    for (u, v, r, col) in ((uv[:, 0], uv[:, 1], 5.0 * S / 64.0, TARGET), (ua, va, 3.0 * S / 64.0, ARM)):
        dx = _c[None, :] - (m + u * w)[:, None]
        dy = _c[None, :] - (m + v * w)[:, None]
        inside = (dy * dy)[:, :, None] + (dx * dx)[:, None, :] <= r * r
        img[inside] = col
    return img


# ---------------------------------------------------------------- model

def build_model(torch, img_mean, img_std, st_mean, st_std, a_min, a_max):
    nn = torch.nn

    class SpatialSoftmax(nn.Module):
        def __init__(self, hw):
            super().__init__()
            ys, xs = torch.meshgrid(torch.linspace(-1, 1, hw), torch.linspace(-1, 1, hw), indexing="ij")
            self.register_buffer("pos", torch.stack([xs.reshape(-1), ys.reshape(-1)], 1))  # [HW, 2]

        def forward(self, f):
            b, k = f.shape[0], f.shape[1]
            p = torch.softmax(f.reshape(b, k, -1), -1)
            return (p @ self.pos).reshape(b, 2 * k)

    class Policy(nn.Module):
        def __init__(self, kp=16, hid=512):
            super().__init__()
            f32 = lambda a: torch.tensor(np.asarray(a, np.float32))  # noqa: E731
            self.register_buffer("img_mean", f32(img_mean).reshape(1, 3, 1, 1))
            self.register_buffer("img_std", f32(img_std).reshape(1, 3, 1, 1))
            self.register_buffer("st_mean", f32(st_mean)[:DA])
            self.register_buffer("st_scale", f32(st_std)[:DA] + 1e-8)
            self.register_buffer("a_min", f32(a_min))
            self.register_buffer("a_den", f32(np.where(a_max - a_min == 0, 1e-8, a_max - a_min)))
            ys, xs = torch.meshgrid(torch.linspace(-1, 1, S), torch.linspace(-1, 1, S), indexing="ij")
            self.register_buffer("coords", torch.stack([xs, ys])[None])
            self.enc = nn.Sequential(
                nn.Conv2d(5, 16, 5, 2, 2), nn.GELU(),
                nn.Conv2d(16, 32, 3, 2, 1), nn.GELU(),
                nn.Conv2d(32, 32, 3, 1, 1), nn.GELU(),
                nn.Conv2d(32, kp, 1))
            self.ss = SpatialSoftmax(16)
            self.aux = nn.Linear(2 * kp, 2)
            self.mlp = nn.Sequential(nn.Linear(2 * kp + 2 * DA, hid), nn.GELU(), nn.Linear(hid, hid), nn.GELU(),
                                     nn.Linear(hid, hid), nn.GELU(), nn.Linear(hid, NB * DA))
            tt = np.arange(H) / (H - 1.0)
            qb, _ = np.linalg.qr(np.stack([tt ** k for k in range(1, NB + 1)], 1))   # [H, NB], zero at i = 0
            self.register_buffer("basis", f32(qb))

        def features(self, image):
            b = image.shape[0]
            z = torch.cat([image, self.coords.expand(b, -1, -1, -1)], 1)
            return self.ss(self.enc(z))

        def predict(self, feat, state):
            """The normalised action sequence the flow ends at: the current position (in action
            units) + a smooth offset, polynomials of degree 1..NB over the horizon."""
            b = state.shape[0]
            q = state[:, :DA] * self.st_scale + self.st_mean            # raw current position
            base = 2.0 * (q - self.a_min) / self.a_den - 1.0             # in action units
            coef = self.mlp(torch.cat([feat, state], 1)).reshape(b, NB, DA)
            return base[:, None, :] + torch.matmul(self.basis, coef)

        def forward(self, x, t, state, image):
            """Rectified-flow velocity toward the predicted sequence: (a_hat - x) / (1 - t)."""
            a_hat = self.predict(self.features(image), state)
            return (a_hat - x) / torch.clamp(1.0 - t.reshape(-1, 1, 1), min=0.01)

    return Policy()


def normalise_image(img_u8, mean, std):
    """[B, S, S, 3] uint8 -> [B, 3, S, S] float32: pixels / 255, (x - mean_c) / (std_c + 1e-8)."""
    x = img_u8.astype(np.float32) / np.float32(255.0)
    x = (x - np.asarray(mean, np.float32)) / (np.asarray(std, np.float32) + np.float32(1e-8))
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))
