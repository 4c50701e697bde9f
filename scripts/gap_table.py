"""The reality-gap table of docs/measurements/gap.md from `chunkrt gap`'s gap.json files: per channel and
metric, the largest |difference| over the joints (and the joint), how many joints are
over the tolerance, for each comparison side by side.

    python3 scripts/gap_table.py A/gap.json B/gap.json ...
"""
import json
import sys


def summary(rows):
    out = {}
    for r in rows:
        key = (r["channel"], r["metric"])
        cur = out.setdefault(key, {"max": None, "joint": None, "over": 0, "n": 0, "tol": r["tolerance"]})
        cur["n"] += 1
        cur["over"] += 1 if r["over"] else 0
        d = abs(r["difference"])
        if cur["max"] is None or d > cur["max"]:
            cur["max"], cur["joint"] = d, r["joint"]
    return out


def fmt(v):
    if v is None:
        return "-"
    a = abs(v)
    if a != 0 and (a < 1e-3 or a >= 1e4):
        return f"{v:.2e}"
    return f"{v:.3f}"


def main(paths):
    docs = [json.load(open(p)) for p in paths]
    sums = [summary(d["rows"]) for d in docs]
    keys = []
    for s in sums:
        for k in s:
            if k not in keys:
                keys.append(k)
    name = lambda p: p["name"].rsplit("/", 1)[-1]
    head = ["channel", "metric", "tolerance"] + [
        f"{name(d['reference'])} ({d['reference']['period_ms']:g} ms) -> {name(d['plant'])}"
        for d in docs
    ]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for k in keys:
        cells = [k[0], f"`{k[1]}`", fmt(next((s[k]["tol"] for s in sums if k in s), None))]
        for s in sums:
            c = s.get(k)
            if c is None:
                cells.append("-")
                continue
            j = "" if c["joint"] is None else f" (joint {c['joint']})"
            over = f", **{c['over']}/{c['n']} over**" if c["over"] else ""
            cells.append(f"{fmt(c['max'])}{j}{over}")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
