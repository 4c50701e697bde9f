#!/usr/bin/env python3
"""Reads a chunkrt recording with the `mcap` package (PyPI), independently of the
Rust writer, and prints what it holds as JSON: messages per topic (from the
messages themselves and from the file's statistics), gate events per
constraint, cycles with a gate intervention, the cycle numbers' range and the
clock metadata. Used by crates/chunkrt-cli/tests/recording.rs.

    python scripts/read_recording.py RUN_DIR/recording.mcap [more segments...]
"""
import collections
import json
import sys

from mcap.reader import make_reader


def main(paths):
    topics = collections.Counter()
    stats = collections.Counter()
    gate = collections.Counter()
    gate_cycles = 0
    cycles = []
    chunk_seqs = []
    chunk_shapes_ok = True
    clock = []
    log_times_monotonic = True
    for path in paths:
        with open(path, "rb") as f:
            reader = make_reader(f)
            summary = reader.get_summary()
            for cid, ch in summary.channels.items():
                stats[ch.topic] += summary.statistics.channel_message_counts.get(cid, 0)
            clock += [m.metadata for m in reader.iter_metadata() if m.name == "chunkrt.clock"]
            last = {}
            for schema, channel, message in reader.iter_messages(log_time_order=False):
                data = json.loads(message.data)
                topics[channel.topic] += 1
                if message.log_time < last.get(channel.topic, 0):
                    log_times_monotonic = False
                last[channel.topic] = message.log_time
                if channel.topic == "/chunkrt/cycle":
                    cycles.append(data["cycle"])
                    if data["gate_mask"]:
                        gate_cycles += 1
                elif channel.topic == "/chunkrt/events" and data["event"] == "gate":
                    gate[data["constraint"]] += 1
                elif channel.topic == "/chunkrt/chunk":
                    chunk_seqs.append(data["seq"])
                    rows = data["pos_rad"]
                    if len(rows) != data["len"] or any(len(r) != data["dof"] for r in rows):
                        chunk_shapes_ok = False
    print(json.dumps({
        "messages": topics,
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
    }))


if __name__ == "__main__":
    main(sys.argv[1:])
