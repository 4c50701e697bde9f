#!/usr/bin/env python3
"""Serves a chunkrt policy (a manifest and its ONNX model) over openpi's WebSocket
protocol, for `policy.kind = "remote"` (rt-config/sim-remote.toml).

The server is built as openpi's own (`openpi.serving.websocket_policy_server`): the
`websockets` package, `openpi_client.msgpack_numpy` as the codec, the metadata message
on connect, one request and one reply per chunk, `server_timing.infer_ms` in the reply,
a traceback as a text message when inference fails, `/healthz`. The policy is the
reference sampler of scripts/policy_reference.py (onnxruntime + NumPy, the Rust
sampler's algorithm): the request carries the raw observation vector
(`observation/state`, float32 [d_obs]), the host's initial noise (`noise`, float32
[horizon, d_a]) and `sampler` {method, steps}; the reply's `actions` (float64
[horizon, d_a]) are absolute joint positions. The metadata names the model's SHA-256,
so a client can refuse a server that serves another policy, and every reply echoes the
request's `request_id` (chunkrt's addition to openpi's protocol, which ties no reply to
its request: the client refuses a stale or repeated reply by it).

    python scripts/policy_server.py --manifest rt-config/policies/flow.toml [--host 127.0.0.1] [--port 8765]
        [--token TOKEN] [--tls-cert CERT.pem --tls-key KEY.pem]
        [--stall-after N --stall-s S] [--exit-after N]

--stall-after N makes the N-th request (and every N-th after it) wait S seconds before
its reply (a server that stalls); --exit-after N ends the process abruptly after N
replies (a server that crashes). Prints `listening on ws://HOST:PORT` when ready.
"""

import argparse
import asyncio
import http
import os
import ssl
import sys
import time
import traceback

import numpy as np
import websockets.asyncio.server as _server
import websockets.frames
from openpi_client import msgpack_numpy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from policy_reference import Reference  # noqa: E402


class ChunkPolicy:
    """The reference sampler behind openpi's `infer(obs) -> dict` interface."""

    def __init__(self, manifest):
        self.ref = Reference(manifest)
        self.method = self.ref.m["sampler"]["method"]
        self.steps = self.ref.m["sampler"]["steps"]

    def metadata(self):
        m = self.ref.m
        return {
            "model_sha256": m["model_sha256"],
            "horizon": m["horizon"],
            "d_a": m["d_a"],
            "d_obs": m["d_obs"],
            "dt_ms": m["dt_ms"],
        }

    def infer(self, obs):
        state = np.asarray(obs["observation/state"], dtype=np.float64).reshape(-1)
        if state.shape != (self.ref.d_obs,):
            raise ValueError(f"observation/state has {state.size} values, the model takes {self.ref.d_obs}")
        noise = np.asarray(obs["noise"], dtype=np.float32).reshape(-1)
        if noise.size != self.ref.h * self.ref.d_a:
            raise ValueError(f"noise has {noise.size} values, the chunk {self.ref.h} x {self.ref.d_a}")
        sampler = obs.get("sampler", {})
        method = sampler.get("method", self.method)
        steps = int(sampler.get("steps", self.steps))
        _, chunk = self.ref.sample(state, noise, steps, method)
        return {"actions": np.ascontiguousarray(chunk, dtype=np.float64)}


def health(connection, request):
    if request.path == "/healthz":
        return connection.respond(http.HTTPStatus.OK, "OK\n")
    return None


async def serve(args, policy):
    served = 0

    async def handler(websocket):
        nonlocal served
        if args.token:
            got = websocket.request.headers.get("Authorization", "")
            if got != f"Api-Key {args.token}":
                await websocket.close(code=websockets.frames.CloseCode.POLICY_VIOLATION, reason="bad token")
                return
        packer = msgpack_numpy.Packer()
        await websocket.send(packer.pack(policy.metadata()))
        prev_total = None
        while True:
            try:
                start = time.monotonic()
                obs = msgpack_numpy.unpackb(await websocket.recv())
                t0 = time.monotonic()
                action = policy.infer(obs)
                infer_s = time.monotonic() - t0
                served += 1
                if args.stall_after and served % args.stall_after == 0:
                    await asyncio.sleep(args.stall_s)
                action["server_timing"] = {"infer_ms": infer_s * 1000}
                if "request_id" in obs:
                    action["request_id"] = obs["request_id"]
                if prev_total is not None:
                    action["server_timing"]["prev_total_ms"] = prev_total * 1000
                await websocket.send(packer.pack(action))
                prev_total = time.monotonic() - start
                if args.exit_after and served >= args.exit_after:
                    os._exit(3)
            except websockets.ConnectionClosed:
                break
            except Exception:
                await websocket.send(traceback.format_exc())
                await websocket.close(
                    code=websockets.frames.CloseCode.INTERNAL_ERROR,
                    reason="Internal server error. Traceback included in previous frame.",
                )
                break

    tls = None
    if args.tls_cert:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(args.tls_cert, args.tls_key)
    async with _server.serve(
        handler,
        args.host,
        args.port,
        compression=None,
        max_size=args.max_mb * 1024 * 1024,
        process_request=health,
        ssl=tls,
    ) as server:
        port = server.sockets[0].getsockname()[1]
        scheme = "wss" if tls else "ws"
        print(f"listening on {scheme}://{args.host}:{port}", flush=True)
        await server.serve_forever()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8765, help="0: any free port (printed)")
    ap.add_argument("--token", default=os.environ.get("CHUNKRT_POLICY_TOKEN"))
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    ap.add_argument("--max-mb", type=int, default=16)
    ap.add_argument("--stall-after", type=int, default=0)
    ap.add_argument("--stall-s", type=float, default=0.3)
    ap.add_argument("--exit-after", type=int, default=0)
    args = ap.parse_args()
    policy = ChunkPolicy(args.manifest)
    asyncio.run(serve(args, policy))


if __name__ == "__main__":
    main()
