#!/usr/bin/env python3
"""An independent client of the Foxglove WebSocket protocol (subprotocol
foxglove.sdk.v1, the Foxglove SDK's; written from the protocol's description, not the
SDK): connects to URL, reads serverInfo and the advertised channels, subscribes to every
one, and for SECONDS collects what arrives (binary MessageData frames: opcode 0x01, the
subscription id as u32 LE, the log time as u64 LE ns, the payload). Prints JSON: the
channels as advertised, per topic the message count and the payloads (up to --keep).

    foxglove_client.py ws://127.0.0.1:8765 --seconds 3
"""
import argparse
import asyncio
import json
import struct
import sys
import time

import websockets


async def collect(url, seconds, keep):
    async with websockets.connect(
        url, subprotocols=["foxglove.sdk.v1"], max_size=64 << 20, open_timeout=10
    ) as ws:
        if ws.subprotocol != "foxglove.sdk.v1":
            raise SystemExit(f"server chose subprotocol {ws.subprotocol!r}")
        server_info, channels = None, {}
        subscribed = {}
        out = {"topics": {}}
        deadline = None
        next_id = 1
        while True:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                break
            timeout = 10 if deadline is None else max(0.0, deadline - now)
            try:
                msg = await asyncio.wait_for(ws.recv(), timeout=timeout)
            except asyncio.TimeoutError:
                if deadline is None:
                    raise SystemExit("nothing advertised within 10 s")
                break
            if isinstance(msg, str):
                m = json.loads(msg)
                op = m.get("op")
                if op == "serverInfo":
                    server_info = m
                elif op == "advertise":
                    subs = []
                    for ch in m["channels"]:
                        channels[ch["id"]] = ch
                        subs.append({"id": next_id, "channelId": ch["id"]})
                        subscribed[next_id] = ch["topic"]
                        next_id += 1
                    await ws.send(json.dumps({"op": "subscribe", "subscriptions": subs}))
                    if deadline is None:
                        deadline = time.monotonic() + seconds
                continue
            if msg[0] != 0x01:
                continue
            sub_id, log_time = struct.unpack_from("<IQ", msg, 1)
            topic = subscribed.get(sub_id, f"?{sub_id}")
            t = out["topics"].setdefault(topic, {"count": 0, "payloads": [], "log_times_ns": []})
            t["count"] += 1
            t["log_times_ns"].append(log_time)
            if len(t["payloads"]) < keep:
                t["payloads"].append(msg[13:].decode("utf-8"))
        out["server_info"] = server_info
        out["channels"] = [
            {k: ch.get(k) for k in ("topic", "encoding", "schemaName", "schemaEncoding", "schema")}
            for ch in channels.values()
        ]
        out["seconds"] = seconds
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--keep", type=int, default=1000)
    a = ap.parse_args()
    json.dump(asyncio.run(collect(a.url, a.seconds, a.keep)), sys.stdout)


if __name__ == "__main__":
    main()
