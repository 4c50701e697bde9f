"""Demonstrations of the simulated 7-joint arm as LeRobot-style episodes (numpy only).

The task and the expert are scripts/train_policy.py's (GOALS, detour_direction, progress_rate,
progress_accel, nominal_rate, and the perturbation constants): the arm cycles through the
three goals, passing a joint-space obstacle on one side or the other.

Frames are recorded every DT_S = 50 ms (20 fps). Per frame:
  observation.state             [q (7), v (7)]   the arm's planned state (rad, rad/s)
  observation.environment_state goal (7)         the goal of the segment the frame belongs to
  action                        q (7)            the absolute joint-position target for the
                                                 frame: the expert's plan at this frame, which
                                                 is the planned position itself (action[t] =
                                                 q_t), so the action window after a frame is
                                                 the expert's plan from that frame's state.

Episodes (every one is a single rollout of the expert, so every action window is the
expert's own, smooth, plan from the window's anchor state):
  * nominal segments: a cycle g0 -> g1 -> g2 -> g0 from rest; each segment starts where the
    previous one reached its goal (within GOAL_TOLERANCE_RAD on every joint, still moving:
    the runtime switches goals there) and is recorded until SETTLE_FRAMES after it reaches
    its own goal. Segments after the first start with one frame of the previous segment
    (old goal), so the anchor right after a goal switch sees the history chunkrt gives it
    (previous frame with the old goal); that lead-in frame is not used as an anchor
    (LeRobot's EpisodeAwareSampler drop_n_first_frames = 1 for those episodes).
  * DART-style recovery branches: states along each nominal path perturbed as in
    train_policy.make_dataset (off-path position and velocity, progress-rate spread,
    arrival velocity at the start, a tube that widens toward the goal, less lateral noise
    near the start), each followed by the expert for BRANCH_FRAMES frames.
The expert: progress s along path(s) = q0 + s (g1 - q0) + amp sin(pi s) n follows
train_policy.progress_accel; the off-path offset e returns critically damped (RETURN_RATE).
"""

import hashlib
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import train_policy as tp  # noqa: E402  (numpy-only at import time)

DOF = tp.DOF
GOALS = tp.GOALS
GOAL_TOLERANCE_RAD = tp.GOAL_TOLERANCE_RAD
DT_S = 0.05
SUBSTEPS = 10
SETTLE_FRAMES = 30  # frames recorded after a segment reaches its goal
BRANCH_FRAMES = 32
BRANCH_DROP_LAST = 15
MAX_SEGMENT_FRAMES = 200


class Segment:
    """One goal-to-goal path of the expert (start position q0, goal g1, detour amplitude)."""

    def __init__(self, g_prev, q0, g1, amp):
        self.q0, self.g1, self.amp = q0, g1, amp
        self.n = tp.detour_direction(g_prev, g1)
        u = np.linspace(0.0, 1.0, 400)
        dp_ds = np.abs(np.diff(self.path(u), axis=0)).max() / (u[1] - u[0])
        self.s_dot_max = tp.MAX_DEMO_SPEED_RAD_S / dp_ds

    def path(self, s):
        s = np.asarray(s)[..., None]
        return self.q0 + s * (self.g1 - self.q0) + self.amp * np.sin(np.pi * s) * self.n

    def path_ds(self, s):
        s = np.asarray(s)[..., None]
        return (self.g1 - self.q0) + self.amp * np.pi * np.cos(np.pi * s) * self.n

    def rollout(self, s0, sd0, e0, ed0, frames):
        """Batched expert rollout from (s, ds/dt, e, de/dt) [B], [B], [B,7], [B,7]:
        q, v [B, frames, 7] at the frame times 0, DT_S, ..."""
        s, sd = np.array(s0, float), np.array(sd0, float)
        b = len(s)
        S = np.empty((b, frames))
        SD = np.empty((b, frames))
        h = DT_S / SUBSTEPS
        for i in range(frames):
            S[:, i], SD[:, i] = s, sd
            for _ in range(SUBSTEPS):
                sdd = tp.progress_accel(s, sd, self.s_dot_max)
                sd = sd + h * sdd
                s = s + h * sd
        t = (np.arange(frames) * DT_S)[None, :, None]
        w = tp.RETURN_RATE
        a = e0[:, None, :]
        bb = ed0[:, None, :] + w * e0[:, None, :]
        ex = np.exp(-w * t)
        e = (a + bb * t) * ex
        de = (bb - w * (a + bb * t)) * ex
        q = self.path(S) + e
        v = self.path_ds(S) * SD[..., None] + de
        return q, v


def _reached(q, g):
    return np.abs(q - g).max(-1) <= GOAL_TOLERANCE_RAD


def make_episodes(rng, cycles=60, branches_per_segment=12):
    """Returns dict of arrays: state [N,14], env [N,7], action [N,7] (float32),
    episode_index [N] (int64), frame_index [N], anchor [N] bool (frame usable as a window
    anchor), and episode bounds ep_from / ep_to [E] (int64)."""
    episodes = []  # list of (q [T,7], v [T,7], goal [T,7], anchor [T] bool)
    n_goals = len(GOALS)
    for c in range(cycles):
        # Sides balanced per segment over the cycles.
        sides = [(1.0 if ((c + k) % 2 == 0) else -1.0) for k in range(n_goals)]
        if c % 4 >= 2:
            sides = [-x for x in sides]
        q = GOALS[0] + rng.normal(0.0, tp.START_NOISE_RAD, DOF)
        v = np.zeros(DOF)
        lead = None  # the previous segment's frame at the switch (old goal)
        for k in range(n_goals):
            g_prev, g1 = GOALS[k], GOALS[(k + 1) % n_goals]
            amp = sides[k] * tp.DETOUR_RAD * (1.0 + 0.05 * rng.normal())
            seg = Segment(g_prev, q.copy(), g1, amp)
            # Start of the segment: at q with velocity v (the arrival at the previous goal).
            qs, vs = seg.rollout(np.zeros(1), np.zeros(1), np.zeros((1, DOF)), v[None, :], MAX_SEGMENT_FRAMES)
            qs, vs = qs[0], vs[0]
            hit = np.nonzero(_reached(qs, g1))[0]
            assert len(hit), "segment did not reach its goal"
            i_sw = int(hit[0])
            end = min(i_sw + 1 + SETTLE_FRAMES, MAX_SEGMENT_FRAMES)
            eq, ev = qs[:end], vs[:end]
            goal = np.broadcast_to(g1, eq.shape)
            anchor = np.ones(end, bool)
            if lead is not None:
                eq = np.concatenate([lead[0][None], eq])
                ev = np.concatenate([lead[1][None], ev])
                goal = np.concatenate([lead[2][None], goal])
                anchor = np.concatenate([[False], anchor])
            episodes.append((eq, ev, np.array(goal), anchor))
            # Recovery branches along this segment's path.
            episodes += _branches(rng, seg, g1, branches_per_segment)
            q, v = qs[i_sw].copy(), vs[i_sw].copy()
            lead = (q.copy(), v.copy(), np.array(g1, float))
    return _pack(episodes)


def _branches(rng, seg, g1, m):
    """train_policy.make_dataset's perturbed states along seg, each followed for BRANCH_FRAMES."""
    grid, rate = tp.nominal_rate(seg.s_dot_max)
    r = rng.random(m)
    s_now = np.where(
        r < tp.START_FRACTION,
        rng.uniform(0.0, 0.02, m),
        np.where(r < 1.0 - tp.GOAL_FRACTION, rng.uniform(0.0, 1.0, m), 1.0),
    )
    sd_now = np.interp(s_now, grid, rate) * np.clip(1.0 + tp.RATE_NOISE * rng.normal(size=m), 0.0, None)
    grow = s_now**2
    sigma = (tp.STATE_NOISE_RAD + (tp.GOAL_NOISE_RAD - tp.STATE_NOISE_RAD) * grow)[:, None]
    eps = rng.normal(0.0, 1.0, (m, DOF)) * sigma
    deps = rng.normal(0.0, 1.0, (m, DOF)) * tp.VEL_NOISE_RAD_S
    n = seg.n
    lateral = np.clip(s_now / tp.LATERAL_NOISE_RAMP, tp.LATERAL_NOISE_MIN, 1.0)[:, None]
    eps -= (1.0 - lateral) * (eps @ n)[:, None] * n[None, :]
    deps -= (1.0 - lateral) * (deps @ n)[:, None] * n[None, :]
    # Arrival velocity at the start (the previous goal reached while still moving): the
    # velocity a nominal segment leaves the goal tolerance ball with is ~0.1-0.4 rad/s.
    at_start = (r < tp.START_FRACTION) & (rng.random(m) < 0.5)
    arriving = rng.normal(0.0, 0.2, (m, DOF))
    deps += np.where(at_start[:, None], arriving, 0.0)
    q, v = seg.rollout(s_now, sd_now, eps, deps, BRANCH_FRAMES)
    out = []
    # Branches end mid-motion: only anchors whose whole action window (16 frames) lies in the
    # episode (drop_n_last_frames = BRANCH_DROP_LAST), so no window ends in a padded "hold".
    anchor = np.ones(BRANCH_FRAMES, bool)
    anchor[BRANCH_FRAMES - BRANCH_DROP_LAST:] = False
    for i in range(m):
        out.append((q[i], v[i], np.broadcast_to(g1, q[i].shape).copy(), anchor))
    return out


def _pack(episodes):
    state, env, action, epi, fidx, anchor, ep_from, ep_to = [], [], [], [], [], [], [], []
    start = 0
    for e, (q, v, g, a) in enumerate(episodes):
        T = len(q)
        state.append(np.concatenate([q, v], axis=1))
        env.append(g)
        action.append(q)
        epi.append(np.full(T, e, np.int64))
        fidx.append(np.arange(T, dtype=np.int64))
        anchor.append(a)
        ep_from.append(start)
        ep_to.append(start + T)
        start += T
    return {
        "state": np.concatenate(state).astype(np.float32),
        "env": np.concatenate(env).astype(np.float32),
        "action": np.concatenate(action).astype(np.float32),
        "episode_index": np.concatenate(epi),
        "frame_index": np.concatenate(fidx),
        "anchor": np.concatenate(anchor),
        "ep_from": np.array(ep_from, np.int64),
        "ep_to": np.array(ep_to, np.int64),
    }


def data_digest(d):
    """SHA-256 of the demonstration arrays: state, env, action (float32 LE), episode_index,
    frame_index (int64 LE), in that order, C order."""
    h = hashlib.sha256()
    for k in ("state", "env", "action"):
        h.update(np.ascontiguousarray(d[k], dtype="<f4").tobytes())
    for k in ("episode_index", "frame_index"):
        h.update(np.ascontiguousarray(d[k], dtype="<i8").tobytes())
    return h.hexdigest()


def window_indices(d, frames, deltas):
    """LeRobotDataset's query indices (dataset_reader._get_query_indices): for each anchor
    frame i and delta k, index i + k clamped to the anchor's episode [from, to), and the pad
    mask (i + k < from) | (i + k >= to). frames: global frame indices [B]."""
    ep = d["episode_index"][frames]
    lo = d["ep_from"][ep][:, None]
    hi = d["ep_to"][ep][:, None]
    want = frames[:, None] + np.asarray(list(deltas))[None, :]
    idx = np.clip(want, lo, hi - 1)
    pad = (want < lo) | (want >= hi)
    return idx, pad


def domain_block(obs):
    """train_policy.main's declared operating domain, over raw observations [N, D]."""
    ridge = 1e-4
    obs = obs.astype(np.float64)
    cov = np.cov(obs.T)
    prec = np.linalg.inv(cov + ridge * np.eye(cov.shape[0]))
    centred = obs - obs.mean(0)
    d2 = np.einsum("ni,ij,nj->n", centred, prec, centred)
    span = obs.max(0) - obs.min(0)
    return {
        "min": obs.min(0) - 0.1 * span - 0.02,
        "max": obs.max(0) + 0.1 * span + 0.02,
        "mean": obs.mean(0),
        "cov": cov,
        "ridge": ridge,
        "d_max": float(np.sqrt(d2.max()) * 1.5),
    }
