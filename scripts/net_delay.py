#!/usr/bin/env python3
"""A TCP relay that delays what it passes, each direction on its own: every piece of data
read from one side reaches the other a delay later, drawn from a normal distribution
(mean and spread in ms, never below 0), in order. It stands in for `tc netem delay` where
the kernel has no sch_netem (CONFIG_NET_SCH_NETEM): the remote policy's tests run the
policy server behind it in a network namespace.

    python scripts/net_delay.py --listen HOST:PORT --to HOST:PORT --delay-file FILE

FILE holds "MEAN_MS SPREAD_MS" and is read again whenever it changes, so a test can
change the delay mid-run. Prints "relaying" once listening.
"""
import argparse
import asyncio
import os
import random


class Delay:
    def __init__(self, path):
        self.path, self.mtime, self.mean, self.spread = path, None, 0.0, 0.0

    def draw(self):
        try:
            m = os.stat(self.path).st_mtime_ns
            if m != self.mtime:
                self.mtime = m
                parts = open(self.path).read().split()
                self.mean, self.spread = float(parts[0]), float(parts[1]) if len(parts) > 1 else 0.0
        except (OSError, ValueError, IndexError):
            pass
        return max(0.0, random.gauss(self.mean, self.spread)) / 1000.0


async def pipe(reader, writer, delay):
    loop = asyncio.get_running_loop()
    last = 0.0
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            due = max(last, loop.time() + delay.draw())
            last = due
            loop.call_at(due, writer.write, data)
    except ConnectionError:
        pass
    await asyncio.sleep(max(0.0, last - loop.time()) + 0.001)
    writer.close()


async def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--listen", required=True)
    ap.add_argument("--to", required=True)
    ap.add_argument("--delay-file", required=True)
    args = ap.parse_args()
    lhost, lport = args.listen.rsplit(":", 1)
    thost, tport = args.to.rsplit(":", 1)
    delay = Delay(args.delay_file)

    async def handle(client_r, client_w):
        try:
            server_r, server_w = await asyncio.open_connection(thost, int(tport))
        except OSError:
            client_w.close()
            return
        await asyncio.gather(pipe(client_r, server_w, delay), pipe(server_r, client_w, delay))

    server = await asyncio.start_server(handle, lhost, int(lport))
    print("relaying", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
