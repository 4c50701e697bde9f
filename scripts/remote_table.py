#!/usr/bin/env python3
"""The table of local against served policies (docs/measurements/remote.md, scripts/remote-table.sh): per
run, from its report.json, the inference latency (observation -> chunk published), the
round trip to the policy server and the server's own time, the age of the chunk in use
(P50 / P99), chunks expired and the share of playing cycles the gate clamped; from its
recording (the `mcap` package, not the Rust reader), the mean time from one goal to the
next (the times the policy moved on to its next goal).

    python scripts/remote_table.py NAME=RUN_DIR [NAME=RUN_DIR ...]
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from read_recording import Segment  # noqa: E402


def ms(metric, q):
    if not metric or not metric.get("count"):
        return None
    return metric[q] / 1e6


def pair(metric):
    a, b = ms(metric, "p50"), ms(metric, "p99")
    return "-" if a is None else f"{a:.1f} / {b:.1f}"


def goal_times(run_dir, report):
    files = report.get("recording", {}).get("files") or ["recording.mcap"]
    changes = []
    for name in files:
        for channel, message in Segment(os.path.join(run_dir, name)).messages():
            if channel.topic != "/chunkrt/inference":
                continue
            d = json.loads(message.data)
            g = d.get("goal")
            if d.get("status") == "published" and g is not None and (not changes or changes[-1][1] != g):
                changes.append((d["t_s"], g))
    gaps = [b[0] - a[0] for a, b in zip(changes, changes[1:])]
    return len(changes), (sum(gaps) / len(gaps) if gaps else float("nan"))


def row(name, run_dir):
    r = json.load(open(os.path.join(run_dir, "report.json")))
    m, c = r["metrics"], r["counters"]
    goals, t_goal = goal_times(run_dir, r)
    clamped = r.get("command_stream", {}).get("gate_clamped_pct")
    return (f"| {name} | {pair(m.get('inference_latency'))} | {pair(m.get('network_rtt'))} | "
            f"{pair(m.get('server_time'))} | {pair(m.get('chunk_age'))} | {c.get('chunks_expired', 0)} | "
            f"{'-' if clamped is None else f'{clamped:.2f} %'} | {goals} | {t_goal:.2f} |")


def main():
    print("| policy | inference P50 / P99 (ms) | round trip P50 / P99 (ms) | server P50 / P99 (ms) "
          "| chunk age P50 / P99 (ms) | expired | gate clamped | goals | time to goal (s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for arg in sys.argv[1:]:
        name, run_dir = arg.split("=", 1)
        print(row(name, run_dir))


if __name__ == "__main__":
    main()
