#!/usr/bin/env python3
"""Closed-loop sanity check of exported LeRobot policies (numpy + onnxruntime, no torch).

An ideal arm: the state is the played plan. Every frame (dt_ms, 50 ms) the policy is
re-inferred from the planned state and plays its sequence's setpoints [start, start + len)
(setpoint 0 = now); the arm reaches setpoint 1 at the next frame. The planned velocity there
is the central difference of the setpoints, (a[2] - a[0]) / (2 dt). The goal cycles through
the manifest's goals: the next one when every joint is within goal_tolerance_rad, or when
the arm has settled (within 0.2 rad, every |v| < 0.05 rad/s) for 5 inferences (a failure).
History frames keep the goal they were recorded with (--history-goal current: all history
frames get the current goal).

  closed_loop.py [--manifest rt-config/policies/lerobot-diffusion-ddim.toml ...] [--segments 6]
"""

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from chunkrt_ref import Manifest, infer  # noqa: E402

SETTLE_RAD = 0.2
SETTLE_VEL = 0.05
SETTLE_COUNT = 5
TIMEOUT_S = 10.0


def run(man, segments, seed, history_goal, verbose):
    goals = np.array(man.m["task"]["goals"], np.float64)
    tol = man.m["task"]["goal_tolerance_rad"]
    dt = man.m["dt_ms"] / 1000.0
    rng = np.random.default_rng(seed)
    q = goals[0].copy()
    v = np.zeros_like(q)
    k = 1  # heading for goals[1]
    hist = []
    results = []
    t_seg, settled, frames = 0.0, 0, 0
    max_step_acc = 0.0
    path_dev = []
    t0 = time.time()
    while len(results) < segments:
        g = goals[k]
        hist.append({"joint_pos": q.astype(np.float32), "joint_vel": v.astype(np.float32), "goal": g.astype(np.float32)})
        hist = hist[-man.history:]
        h = [hist[0]] * (man.history - len(hist)) + hist  # LeRobot's queue fill at the start
        if history_goal == "current":
            h = [dict(o, goal=g.astype(np.float32)) for o in h]
        _, acts = infer(man, h, rng=rng)
        acts = acts.astype(np.float64)
        q_new = acts[1]
        v_new = (acts[2] - acts[0]) / (2 * dt)
        max_step_acc = max(max_step_acc, float(np.abs(v_new - v).max() / dt))
        q, v = q_new, v_new
        frames += 1
        t_seg += dt
        # detour: signed offset along the obstacle's normal at the segment's midpoint
        g_prev = goals[(k - 1) % len(goals)]
        dvec = (g - g_prev) / np.linalg.norm(g - g_prev)
        path_dev.append(float(np.linalg.norm((q - g_prev) - ((q - g_prev) @ dvec) * dvec)))
        err = float(np.abs(q - g).max())
        reached = err <= tol
        settled = settled + 1 if (err <= SETTLE_RAD and np.abs(v).max() < SETTLE_VEL) else 0
        if reached or settled >= SETTLE_COUNT or t_seg >= TIMEOUT_S:
            res = {"goal": k, "reached": reached, "time_s": round(t_seg, 2), "err": err,
                   "max_offpath": max(path_dev)}
            results.append(res)
            if verbose:
                print(f"    segment {len(results)}: goal {k} {'reached' if reached else 'NOT reached'} "
                      f"in {t_seg:.2f}s (max joint err {err:.3f} rad, max off-line {res['max_offpath']:.2f} rad)")
            k = (k + 1) % len(goals)
            t_seg, settled, path_dev = 0.0, 0, []
    return results, max_step_acc, frames, time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--manifest", action="append")
    ap.add_argument("--segments", type=int, default=6)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--history-goal", choices=["recorded", "current"], default="recorded")
    args = ap.parse_args()
    paths = args.manifest or [os.path.join(REPO, "rt-config", "policies", n)
                              for n in ("lerobot-diffusion-ddim.toml", "lerobot-act.toml")]
    ok_all = True
    for p in paths:
        man = Manifest(p)
        for seed in range(args.seeds if man.kind == "diffusion" else 1):
            print(f"{os.path.basename(p)} (seed {seed}, history goal {args.history_goal}):")
            res, acc, frames, wall = run(man, args.segments, seed, args.history_goal, True)
            ok = all(r["reached"] for r in res)
            ok_all &= ok
            print(f"  {'ALL GOALS REACHED' if ok else 'FAILED'}: segment times "
                  f"{[r['time_s'] for r in res]} s; max frame-to-frame acceleration {acc:.2f} rad/s^2; "
                  f"{frames} inferences in {wall:.1f}s")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
