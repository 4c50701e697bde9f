#!/usr/bin/env python3
"""The margin tables of docs/measurements/margin.md from the margin.json files that
scripts/margin-table.sh wrote (usage: margin_table.py OUT [full])."""
import json, os, sys
O = sys.argv[1]
full = len(sys.argv) > 2 and sys.argv[2] == "full"
def rows(name):
    p = f"{O}/{name}/margin.json"
    if not os.path.exists(p): return []
    return json.load(open(p))["rows"]
def cell(r):
    if r["pm_deg"] is not None:
        return f"**{r['pm_deg']:.1f}°** at {r['crossover_hz']:.2f} Hz, DM {r['delay_margin_ms']:.0f} ms"
    return r["status"]
def user(r):
    o = r["oscillation"]
    osc = "-" if not o else f"{o['freq_hz']:.2f} Hz {o['amplitude_rad']*1e3:.2f} mrad" + (" LC" if o["limit_cycle"] else "")
    return f"{r['hold_err_rms_rad']*1e3:.2f}", osc, f"{r['fallbacks']}/{r['chunks_expired']}", f"{r['overshoot_rad']*1e3:.1f}"
out = ["| loop | delay at | comp | delay (ms) | PM, f_c, delay margin | hold err RMS (mrad) | overshoot (mrad) | free oscillation | fallbacks / expired |", "|---|---|---|---|---|---|---|---|---|"]
sel = {0, 40, 50, 80, 100, 35}
for name, label, at in [
    ("servo-transport", "servo k=π, 20 ms bus", "transport"),
    ("servo-observation", "servo k=π, 20 ms bus", "observation"),
    ("servo-seed", "servo k=π, 20 ms bus", "inference 35 ± 6.2 ms"),
    ("servo-1ms", "servo k=π, 1 ms bus", "transport"),
    ("servo2hz-transport", "servo k=4π, 20 ms bus", "transport"),
    ("servo2hz-observation", "servo k=4π, 20 ms bus ", "observation"),
    ("servo2hz-seed", "servo k=4π, 20 ms bus", "inference 35 ± 6.2 ms"),
    ("servo-approach", "servo k=π, 50 mrad step first", "transport"),
    ("scripted", "scripted, holding", "transport"),
    ("flow-planned", "flow (state: planned, as trained), holding", "transport"),
    ("flow-measured", "flow (state: measured), holding", "transport"),
    ("flow-measured-1ms", "flow (state: measured), 1 ms bus", "transport"),
    ("ddim-measured", "DDIM (state: measured), holding", "transport"),
]:
    for r in rows(name):
        d = r["delay_ms"]
        if not full and int(round(d)) not in sel and name not in ("servo-approach",):
            continue
        h, osc, fb, ov = user(r)
        out.append(f"| {label} | {at} | {r['compensation']} | {d:g} | {cell(r)} | {h} | {ov} | {osc} | {fb} |")
print("\n".join(out))
