#!/usr/bin/env python3
"""Reads a chunkrt recording with the `mcap` package (PyPI), independently of the
Rust writer, and prints what it holds as JSON: messages per topic (from the
messages themselves and from the file's statistics), gate events per
constraint, cycles with a gate intervention, the cycle numbers' range and the
clock metadata. Used by crates/chunkrt-cli/tests/recording.rs.

With --blend-ms B (the run's executor.blend_ms; --lookahead-ms L, default 0) it
also replays the recorded chunks: for every cycle that plays a chunk and lies
past that chunk's seam blend, the executed setpoint must be the chunk's natural
cubic spline (through its setpoints on its own time grid, continued as a
straight line past its last one) at the cycle's deadline + L. The spline is
built here from its definition (interpolation, C2 continuity, zero second
derivative at both ends; one dense linear system per chunk), not with the
runtime's tridiagonal recurrence.

A segment cut short (a run killed by SIGKILL leaves its last one without the
summary and footer, and the chunk it was writing half written) is read as a
stream, record by record, up to its last whole record: its messages count, and
"cut_short" names it with the error that stopped the read and the messages read
before it (a line on stderr says so too). Chunk CRCs are checked, so a half
written chunk is never read as messages.

    python scripts/read_recording.py [--blend-ms B] RUN_DIR/recording.mcap [more segments...]
"""
import argparse
import collections
import json
import sys

import numpy as np
from mcap.records import Channel, Footer, Message, Metadata, Statistics
from mcap.stream_reader import StreamReader


class Segment:
    """One segment read as a stream, in file order: iterate `messages()` (pairs of
    channel and message), then `clock` (the chunkrt.clock metadata), `counts` (the
    statistics' per-channel message counts, None without a summary), `read` (the
    messages read) and `stopped` (why the read ended before the footer, or None)."""

    def __init__(self, path):
        self.path = path
        self.channels = {}
        self.clock = []
        self.counts = None
        self.read = 0
        self.stopped = None

    def messages(self):
        footer = False
        with open(self.path, "rb") as f:
            try:
                for record in StreamReader(f, validate_crcs=True).records:
                    if isinstance(record, Channel):
                        self.channels[record.id] = record
                    elif isinstance(record, Message):
                        self.read += 1
                        yield self.channels[record.channel_id], record
                    elif isinstance(record, Metadata) and record.name == "chunkrt.clock":
                        self.clock.append(record.metadata)
                    elif isinstance(record, Statistics):
                        self.counts = record.channel_message_counts
                    elif isinstance(record, Footer):
                        footer = True
            except Exception as e:  # any failure past the last whole record
                self.stopped = f"{type(e).__name__}: {e}"
        if self.stopped is None and not footer:
            self.stopped = "no footer"


def natural_cubic(ts, ys):
    """Coefficients (a, b, c, d) per interval of the natural cubic spline through
    (ts, ys), p_i(t) = a + b s + c s^2 + d s^3 with s = t - ts[i], from a dense
    system of its defining conditions."""
    n = len(ts)
    if n < 2:
        return None
    m = n - 1
    A = np.zeros((4 * m, 4 * m))
    r = np.zeros(4 * m)
    row = 0
    for i in range(m):
        h = ts[i + 1] - ts[i]
        A[row, 4 * i] = 1.0
        r[row] = ys[i]
        row += 1
        A[row, 4 * i: 4 * i + 4] = [1.0, h, h * h, h ** 3]
        r[row] = ys[i + 1]
        row += 1
        if i + 1 < m:
            A[row, 4 * i: 4 * i + 4] = [0.0, 1.0, 2 * h, 3 * h * h]
            A[row, 4 * (i + 1) + 1] = -1.0
            row += 1
            A[row, 4 * i: 4 * i + 4] = [0.0, 0.0, 2.0, 6 * h]
            A[row, 4 * (i + 1) + 2] = -2.0
            row += 1
    A[row, 2] = 2.0
    row += 1
    h = ts[-1] - ts[-2]
    A[row, 4 * (m - 1): 4 * m] = [0.0, 0.0, 2.0, 6 * h]
    return np.linalg.solve(A, r).reshape(m, 4)


def spline_at(ts, coef, y, t):
    if coef is None:
        return y[0]
    if t >= ts[-1]:
        a, b, c, d = coef[-1]
        h = ts[-1] - ts[-2]
        return y[-1] + (b + 2 * c * h + 3 * d * h * h) * (t - ts[-1])
    if t <= ts[0]:
        return y[0] + coef[0][1] * (t - ts[0])
    i = min(int(np.searchsorted(ts, t, side="right")) - 1, len(ts) - 2)
    a, b, c, d = coef[i]
    s = t - ts[i]
    return a + b * s + c * s * s + d * s ** 3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--blend-ms", type=float)
    ap.add_argument("--lookahead-ms", type=float, default=0.0)
    ap.add_argument("paths", nargs="+")
    args = ap.parse_args()
    paths = args.paths
    topics = collections.Counter()
    stats = collections.Counter()
    gate = collections.Counter()
    gate_cycles = 0
    cycles = []
    chunk_seqs = []
    chunk_shapes_ok = True
    clock = []
    chunks = {}
    playing = []
    by_cycle = {}
    observations = []
    log_times_monotonic = True
    cut_short = []
    for path in paths:
        segment = Segment(path)
        last = {}
        for channel, message in segment.messages():
            data = json.loads(message.data)
            topics[channel.topic] += 1
            if message.log_time < last.get(channel.topic, 0):
                log_times_monotonic = False
            last[channel.topic] = message.log_time
            if channel.topic == "/chunkrt/cycle":
                cycles.append(data["cycle"])
                by_cycle[data["cycle"]] = (data["feedback_rad"], data["command_rad"])
                if data["mode"] == "Playing" and data["chunk_seq"]:
                    playing.append((data["t_deadline_ns"], data["chunk_seq"], data["setpoint_rad"]))
                if data["gate_mask"]:
                    gate_cycles += 1
            elif channel.topic == "/chunkrt/inference" and "obs" in data:
                observations.append(data["obs"])
            elif channel.topic == "/chunkrt/events" and data["event"] == "gate":
                gate[data["constraint"]] += 1
            elif channel.topic == "/chunkrt/chunk":
                chunk_seqs.append(data["seq"])
                chunks[data["seq"]] = data
                rows = data["pos_rad"]
                if len(rows) != data["len"] or any(len(r) != data["dof"] for r in rows):
                    chunk_shapes_ok = False
        clock += segment.clock
        if segment.counts is not None:
            for cid, ch in segment.channels.items():
                stats[ch.topic] += segment.counts.get(cid, 0)
        if segment.stopped is not None:
            cut_short.append({"path": path, "messages_read": segment.read,
                              "stopped_by": segment.stopped})
            print(f"read_recording.py: {path} was cut short (the run did not close it): "
                  f"read {segment.read} messages up to its last whole record; "
                  f"the read stopped at: {segment.stopped}", file=sys.stderr)
    setpoints = None
    if args.blend_ms is not None and clock:
        setpoints = check_setpoints(chunks, playing, int(clock[0]["t0_mono_ns"]),
                                    args.blend_ms * 1e-3, args.lookahead_ms * 1e-3)
    print(json.dumps({
        "messages": topics,
        "cut_short": cut_short,
        "statistics": stats,
        "gate": gate,
        "gate_cycles": gate_cycles,
        "cycles_first_last": [min(cycles), max(cycles)] if cycles else None,
        "cycles_distinct": len(set(cycles)),
        "log_times_monotonic_per_topic": log_times_monotonic,
        "chunk_seqs_increasing": all(a < b for a, b in zip(chunk_seqs, chunk_seqs[1:])),
        "chunk_seq_last": chunk_seqs[-1] if chunk_seqs else None,
        "chunk_shapes_ok": chunk_shapes_ok,
        "clock": clock,
        "setpoints_from_chunks": setpoints,
        "observations": check_observations(observations, by_cycle),
    }))


def check_observations(observations, by_cycle):
    """The observation each inference call was given against the cycle that
    captured it: its measured positions are that cycle's feedback, its commanded
    positions that cycle's command."""
    matched = missing = 0
    worst = 0.0
    for o in observations:
        c = by_cycle.get(o["seq"])
        if c is None:
            missing += 1
            continue
        matched += 1
        feedback, command = c
        for a, b in list(zip(o["pos_rad"], feedback)) + list(zip(o["cmd_pos_rad"], command)):
            worst = max(worst, abs(a - b))
    return {"given": len(observations), "matched": matched, "cycle_missing": missing,
            "max_abs_err_rad": worst}


def check_setpoints(chunks, playing, t0_ns, blend_s, lookahead_s):
    """Compares the executed setpoints with the recorded chunks' splines past each
    seam's blend: cycles checked, cycles inside blends, the largest difference."""
    splines = {}
    splice_t = {}
    checked = in_blend = missing = 0
    worst = 0.0
    worst_at = None
    for t_deadline_ns, seq, setpoint in sorted(playing):
        t = (t_deadline_ns - t0_ns) * 1e-9 + lookahead_s
        if seq not in splice_t:
            splice_t[seq] = t
        if t - splice_t[seq] < blend_s - 1e-9:
            in_blend += 1
            continue
        c = chunks.get(seq)
        if c is None:
            missing += 1
            continue
        if seq not in splines:
            knots = np.array([c["t_start_s"] + i * c["dt_ms"] * 1e-3 for i in range(c["len"])])
            ys = np.array(c["pos_rad"])
            splines[seq] = (knots, [natural_cubic(knots, ys[:, j]) for j in range(c["dof"])], ys)
        knots, coefs, ys = splines[seq]
        checked += 1
        for j, coef in enumerate(coefs):
            err = abs(spline_at(knots, coef, ys[:, j], t) - setpoint[j])
            if err > worst:
                worst, worst_at = err, {"chunk": seq, "joint": j, "t_s": t}
    return {"checked": checked, "in_blend": in_blend, "chunk_missing": missing,
            "max_abs_err_rad": worst, "worst_at": worst_at}


if __name__ == "__main__":
    main()
