#!/usr/bin/env python3
"""How long an operator's `stop` takes to take effect, through the release binary, while
another client idles on the socket and a third floods it with an endless line.

Usage: operator_latency.py CHUNKRT_BIN PERIOD_MS RUNS   (needs the `mcap` package: .venv)

Runs the bundled flow policy on the simulated arm (rt-config/sim.toml, unpinned, with an
`[operator] socket`) RUNS times for 2.5 s at PERIOD_MS; once the policy plays it connects
the idle and the flooding clients, then writes `stop` from a third and prints the time to
the answer and to the deadline of the first recorded cycle out of `Playing` (CLOCK_MONOTONIC,
the clock the recording's deadlines are on). A measurement, not a test: nothing is asserted.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

from mcap.reader import make_reader

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
bin_, period, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
d = tempfile.mkdtemp(prefix="chunkrt-operator-latency-")
text = open(os.path.join(root, "rt-config/sim.toml")).read()
text = text.replace("cpu = 1 ", "cpu = -1 ", 1).replace("cpu = 0\n", "cpu = -1\n", 1)
text = text.replace('manifest = "policies/flow.toml"',
                    'manifest = "%s"' % os.path.join(root, "rt-config/policies/flow.toml"))
sock = os.path.join(d, "m.sock")
config = os.path.join(d, "m.toml")
open(config, "w").write(text + '\n[operator]\nsocket = "%s"\n' % sock)
for _ in range(runs):
    out = os.path.join(d, "run")
    subprocess.run(["rm", "-rf", out], check=True)
    p = subprocess.Popen([bin_, "run", "--quiet", "--no-plots", "--config", config, "--out", out,
                          "--duration", "2.5s", "--bus-period-ms", period],
                         env=dict(os.environ, CHUNKRT_LOG="warn"), stdout=subprocess.DEVNULL)
    events = os.path.join(out, "events.jsonl")
    while not (os.path.exists(events) and '"to":"Playing"' in open(events).read()):
        time.sleep(0.02)
    idle = socket.socket(socket.AF_UNIX)
    idle.connect(sock)
    idle.send(b"st")  # half a line, never finished
    on = [True]

    def flood():
        f = socket.socket(socket.AF_UNIX)
        f.connect(sock)
        f.settimeout(0.1)
        while on[0]:
            try:
                f.send(b"x" * 65536)
            except OSError:
                pass

    th = threading.Thread(target=flood)
    th.start()
    time.sleep(0.3)
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    t_write = time.monotonic_ns()
    s.send(b"stop\n")
    answer = s.recv(200)
    t_answer = time.monotonic_ns()
    on[0] = False
    th.join()
    p.wait()
    first = None
    with open(os.path.join(out, "recording.mcap"), "rb") as f:
        for _, _, m in make_reader(f).iter_messages(topics=["/chunkrt/cycle"]):
            c = json.loads(m.data)
            if c["t_deadline_ns"] >= t_write and c["mode"] != "Playing":
                first = c
                break
    print("period %s ms: answer %.3f ms after the write; first cycle out of Playing %.3f ms "
          "after the write (%s); %s" % (period, (t_answer - t_write) / 1e6,
                                        (first["t_deadline_ns"] - t_write) / 1e6, first["mode"],
                                        answer.decode().strip()))
