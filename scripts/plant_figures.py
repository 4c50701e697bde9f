#!/usr/bin/env python3
"""The figures that tell two plants apart, read from a run's directory with the `mcap`
package (PyPI), independently of the Rust writer: how the arm followed its commands, what
torque its drives applied, and how far the policy got.

    python scripts/plant_figures.py [--torque-limit-nm L1,L2,...] [--markdown] RUN_DIR [RUN_DIR ...]

For each run it prints one JSON object (a line): the run's backend and arm model (from
report.json), cycles and cycles playing, the goals the policy moved on to (the distinct
goal indices its chunks were computed toward, in order), chunks expired and the share of
playing cycles the gate clamped in percent (report.json), the tracking error |command - measured| of
the worst joint per playing cycle, P50 / P99 / max (rad), computed here from
command_rad and feedback_rad, and per joint the peak and mean measured torque (N m) and
the peak as a fraction of the torque limit given (null: the recording has no torque) (default: the Franka arm's 87 N m on
joints 1-4, 12 N m on joints 5-7). With --markdown, one table of all runs instead (the
docs/measurements/plants.md's table of the two plants, scripts/plant-table.sh). Used by
crates/chunkrt-cli/tests/mujoco.rs.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from read_recording import Segment  # noqa: E402

FRANKA_LIMITS_NM = [87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0]


def figures(run_dir, limits):
    report = json.load(open(os.path.join(run_dir, "report.json")))
    segments = sorted(f for f in os.listdir(run_dir) if f.startswith("recording") and f.endswith(".mcap"))
    errors, torques, goals = [], [], []
    cycles = 0
    for name in segments:
        for channel, message in Segment(os.path.join(run_dir, name)).messages():
            data = json.loads(message.data)
            if channel.topic == "/chunkrt/cycle":
                cycles += 1
                if data["mode"] != "Playing":
                    continue
                cmd = np.array(data["command_rad"])
                fb = np.array(data["feedback_rad"])
                errors.append(float(np.max(np.abs(cmd - fb))))
                if "feedback_torque_nm" in data:  # recordings before it have none
                    torques.append(data["feedback_torque_nm"])
            elif channel.topic == "/chunkrt/inference":
                g = data.get("goal")
                if g is not None and (not goals or goals[-1] != g):
                    goals.append(g)
    t = np.abs(np.array(torques)) if torques else None
    counters = report.get("counters", {})
    conf = report.get("config", {})
    stream = report.get("command_stream", {})
    out = {
        "run": run_dir,
        "backend": conf.get("backend"),
        "backend_model": conf.get("backend_model"),
        "backend_model_sha256": conf.get("backend_model_sha256"),
        "cycles": cycles,
        "cycles_playing": len(errors),
        "goals_moved_on_to": goals,
        "chunks_expired": counters.get("chunks_expired"),
        "gate_clamped_pct": stream.get("gate_clamped_pct"),
        "track_err_rad": {
            "p50": float(np.percentile(errors, 50)) if errors else None,
            "p99": float(np.percentile(errors, 99)) if errors else None,
            "max": float(np.max(errors)) if errors else None,
        },
        "torque_peak_nm": None if t is None else [float(x) for x in t.max(axis=0)],
        "torque_mean_nm": None if t is None else [float(x) for x in np.mean(np.array(torques), axis=0)],
        "torque_peak_of_limit": None if t is None else [float(x) / l for x, l in zip(t.max(axis=0), limits)],
    }
    return out


def markdown(rows):
    """The rows as docs/measurements/plants.md's table (scripts/plant-table.sh)."""
    lines = [
        "| policy | plant | goals moved on to | expired | gate clamped | tracking error P50 / P99 (mrad)"
        " | peak torque of limit, joints 1-7 | mean torque j2 / j4 (N m) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        name = os.path.basename(os.path.normpath(r["run"]))
        policy = "ACT (LeRobot)" if "lerobot-act" in name else "flow (bundled)"
        plant = "MuJoCo Panda" if r["backend"] == "mujoco" else "chunkrt-sim"
        te = r["track_err_rad"]
        peak = " ".join(f"{x:.2f}" for x in r["torque_peak_of_limit"] or [])
        mean = r["torque_mean_nm"] or [float("nan")] * 4
        lines.append(
            f"| {policy} | {plant} | {len(r['goals_moved_on_to'])} | {r['chunks_expired']} | "
            f"{r['gate_clamped_pct']:.1f} % | {te['p50'] * 1e3:.2f} / {te['p99'] * 1e3:.2f} | "
            f"{peak} | {mean[1]:.1f} / {mean[3]:.1f} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--torque-limit-nm", default=",".join(str(x) for x in FRANKA_LIMITS_NM))
    ap.add_argument("--markdown", action="store_true", help="one table of all runs instead of JSON lines")
    ap.add_argument("runs", nargs="+")
    args = ap.parse_args()
    limits = [float(x) for x in args.torque_limit_nm.split(",")]
    rows = [figures(run, limits) for run in args.runs]
    if args.markdown:
        print(markdown(rows))
    else:
        for row in rows:
            print(json.dumps(row))


if __name__ == "__main__":
    main()
