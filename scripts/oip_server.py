#!/usr/bin/env python3
"""Serves a chunkrt policy (a manifest and its ONNX model) with MLServer over the Open
Inference Protocol v2 (gRPC), for `policy.kind = "remote"` with `protocol = "oip"`.

Writes MLServer's settings and the model's settings (runtime scripts/oip_runtime.py;
version = the model's SHA-256, so a client can refuse a server of another policy and
names the version in every request; the inputs and output declared) into a temporary
folder, starts `mlserver start` on it (no parallel workers, no metrics server), waits
until the model is ready, and prints `listening on http://HOST:PORT` (the gRPC port).
With --tls-cert/--tls-key, TLS is terminated in front of MLServer's gRPC port (as an
ingress does; ALPN h2) and the line says https://.

    python scripts/oip_server.py --manifest rt-config/policies/flow.toml [--host 127.0.0.1]
        [--port 8081] [--model chunkrt-policy] [--token TOKEN]
        [--tls-cert CERT.pem --tls-key KEY.pem] [--stall-after N --stall-s S] [--exit-after N]
"""

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def die_with_parent():
    """In the child before exec: SIGKILL when this launcher dies, however it dies (a test
    kills it), so no MLServer outlives it and holds its port."""
    import ctypes

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def free_port(host):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def settings(args, folder, grpc_port, http_port):
    with open(args.manifest, "rb") as f:
        m = tomllib.load(f)
    server = {
        "debug": False,
        "host": "127.0.0.1" if args.tls_cert else args.host,
        "http_port": http_port,
        "grpc_port": grpc_port,
        "parallel_workers": 0,
        "metrics_endpoint": None,
        "load_models_at_startup": True,
        "grpc_max_message_length": args.max_mb * 1024 * 1024,
    }
    model = {
        "name": args.model,
        "implementation": "oip_runtime.ChunkModel",
        "platform": "chunkrt-onnxruntime",
        "versions": [m["model_sha256"]],
        "inputs": [
            {"name": "observation/state", "datatype": "FP32", "shape": [m["d_obs"]]},
            {"name": "noise", "datatype": "FP32", "shape": [m["horizon"], m["d_a"]]},
        ],
        "outputs": [{"name": "actions", "datatype": "FP64", "shape": [m["horizon"], m["d_a"]]}],
        "parameters": {
            "version": m["model_sha256"],
            "extra": {
                "manifest": os.path.abspath(args.manifest),
                "token": args.token,
                "stall_after": args.stall_after,
                "stall_s": args.stall_s,
                "exit_after": args.exit_after,
            },
        },
    }
    with open(os.path.join(folder, "settings.json"), "w") as f:
        json.dump(server, f)
    with open(os.path.join(folder, "model-settings.json"), "w") as f:
        json.dump(model, f)


def wait_ready(proc, http_port, model, limit_s=120):
    """Until MLServer says the model is ready (its REST port), or it ends, or limit_s."""
    url = f"http://127.0.0.1:{http_port}/v2/models/{model}/ready"
    start = time.monotonic()
    while time.monotonic() - start < limit_s:
        if proc.poll() is not None:
            sys.exit(f"mlserver ended with {proc.returncode} before the model was ready")
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    proc.kill()
    sys.exit(f"the model was not ready within {limit_s} s")


async def tls_front(args, cert, key, port, backend_port):
    """TLS in front of MLServer's gRPC port: each connection's bytes both ways."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ctx.set_alpn_protocols(["h2"])

    async def pipe(reader, writer):
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def handle(reader, writer):
        try:
            br, bw = await asyncio.open_connection("127.0.0.1", backend_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, bw), pipe(br, writer))

    server = await asyncio.start_server(handle, args.host, port, ssl=ctx)
    print(f"listening on https://{args.host}:{port}", flush=True)
    async with server:
        await server.serve_forever()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8081, help="gRPC port; 0: any free port (printed)")
    ap.add_argument("--model", default="chunkrt-policy")
    ap.add_argument("--token", default=os.environ.get("CHUNKRT_POLICY_TOKEN"))
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    ap.add_argument("--max-mb", type=int, default=16)
    ap.add_argument("--stall-after", type=int, default=0)
    ap.add_argument("--stall-s", type=float, default=0.3)
    ap.add_argument("--exit-after", type=int, default=0)
    args = ap.parse_args()

    port = args.port or free_port(args.host)
    grpc_port = free_port("127.0.0.1") if args.tls_cert else port
    http_port = free_port("127.0.0.1")
    folder = tempfile.mkdtemp(prefix="chunkrt-oip-")
    settings(args, folder, grpc_port, http_port)
    env = dict(os.environ)
    env["PYTHONPATH"] = HERE + os.pathsep + env.get("PYTHONPATH", "")
    mlserver = os.path.join(os.path.dirname(sys.executable), "mlserver")
    proc = subprocess.Popen([mlserver, "start", folder], env=env, stdout=sys.stderr, preexec_fn=die_with_parent)

    def stop(*_):
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        wait_ready(proc, http_port, args.model)
    finally:
        # MLServer has read the settings and loaded the model (or failed to): the folder
        # is not needed again, and a launcher killed later leaves nothing behind.
        shutil.rmtree(folder, ignore_errors=True)
    if args.tls_cert:
        try:
            asyncio.run(tls_front(args, args.tls_cert, args.tls_key, port, grpc_port))
        finally:
            stop()
    else:
        print(f"listening on http://{args.host}:{port}", flush=True)
        code = proc.wait()
        sys.exit(code)


if __name__ == "__main__":
    main()
