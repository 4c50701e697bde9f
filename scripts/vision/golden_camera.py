#!/usr/bin/env python3
"""Goldens of the synthetic camera for crates/chunkrt-camera/tests (the Rust renderer is
compared with scene.render pixel by pixel).

  golden_camera.py   writes crates/chunkrt-camera/tests/golden/synthetic/
    cases.json     [{"q": [7], "u", "v", "size", "file"}]
    case_NN.rgb    the raw image, size * size * 3 bytes, row-major [y][x][RGB]
"""

import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from scene import D1, D2, G0, render, target_pose  # noqa: E402

REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
OUT = os.path.join(REPO, "crates", "chunkrt-camera", "tests", "golden", "synthetic")


def cases():
    rng = np.random.default_rng(20261201)
    off = lambda s: rng.normal(0.0, s, 7)  # noqa: E731
    c = []
    # (q, u, v, size, what)
    c.append((target_pose(0.5, 0.5), 0.2, 0.7, 64, "arm at the centre, target elsewhere"))
    c.append((target_pose(0.3, 0.6), 0.3, 0.6, 64, "arm exactly on the target (concentric)"))
    c.append((target_pose(0.62, 0.41) + off(0.02), 0.6, 0.4, 64, "arm overlapping the target, off-plane"))
    c.append((target_pose(0.1, 0.1), 0.9, 0.9, 64, "opposite corners"))
    c.append((target_pose(0.9, 0.12), 0.1, 0.9, 64, "other corners"))
    c.append((target_pose(0.5, 0.5), 0.0, 0.0, 64, "target at the (0, 0) edge"))
    c.append((target_pose(0.5, 0.5), 1.0, 1.0, 64, "target at the (1, 1) edge"))
    c.append((target_pose(-0.6, 1.8), 0.45, 0.55, 64, "arm clamped outside (u < -0.15, v > 1.15)"))
    c.append((target_pose(1.4, -0.3) + off(0.05), 0.95, 0.05, 64, "arm clamped (u > 1.15, v < -0.15), target near it"))
    q = G0 + 0.37 * D1 + 0.81 * D2 + off(0.1)
    c.append((q, 0.83, 0.17, 64, "arm off the plane"))
    c.append((target_pose(0.5 + 2.0 / 48, 0.5), 0.5, 0.5, 64, "arm two pixels right of the target centre"))
    c.append((target_pose(0.25 + 0.5 / 48, 0.75 - 0.5 / 48), 0.25, 0.75, 64, "half-pixel offsets (disc edges on pixel centres)"))
    c.append((target_pose(0.3, 0.35) + off(0.03), 0.72, 0.28, 96, "size 96"))
    return c


def main():
    os.makedirs(OUT, exist_ok=True)
    meta = []
    for i, (q, u, v, size, what) in enumerate(cases()):
        q = [float(x) for x in q]
        img = render(np.array(q), u, v, size)
        assert img.shape == (size, size, 3) and img.dtype == np.uint8
        name = f"case_{i:02d}.rgb"
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(img.tobytes())
        meta.append({"q": q, "u": float(u), "v": float(v), "size": size, "file": name})
        n_red = int((img == np.array([220, 40, 40], np.uint8)).all(-1).sum())
        n_green = int((img == np.array([40, 200, 80], np.uint8)).all(-1).sum())
        print(f"{name}: size {size}, red {n_red} px, green {n_green} px  ({what})")
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(f"wrote {len(meta)} cases to {os.path.relpath(OUT, REPO)}")


if __name__ == "__main__":
    main()
