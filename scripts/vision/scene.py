#!/usr/bin/env python3
"""The synthetic camera of the simulated 7-joint arm (numpy), written to match
crates/chunkrt-camera/src/synthetic.rs pixel for pixel.

A target (u, v) in [0, 1]^2 stands for the joint pose G0 + u D1 + v D2; the arm's pose q is
drawn at its projection onto that plane, clamped to [-0.15, 1.15]. S x S RGB uint8, row-major
[y][x][c]: background + grid, the target (red disc, r = 5 S / 64), the arm over it (green disc,
r = 3 S / 64), a pixel inside a disc when its centre (x + 0.5, y + 0.5) is within r.
All arithmetic in float64, sums in joint order (as the Rust side does).
"""

import numpy as np

G0 = np.array([-0.5, -0.6, -0.3, -2.0, -0.3, 0.9, 0.8])
D1 = np.array([1.0, 0.0, 0.6, 0.0, 0.6, 0.0, 0.0])
D2 = np.array([0.0, 0.8, 0.0, 0.8, 0.0, 0.6, 0.0])
BACKGROUND = (40, 44, 52)
GRID = (60, 66, 78)
TARGET = (220, 40, 40)
ARM = (40, 200, 80)
ARM_UV_RANGE = (-0.15, 1.15)


def target_pose(u, v):
    return G0 + u * D1 + v * D2


def _coord(q, d):
    num, den = 0.0, 0.0
    for j in range(7):  # sequential float64 sums, joint order
        num += float(d[j]) * (float(q[j]) - float(G0[j]))
        den += float(d[j]) * float(d[j])
    return min(max(num / den, ARM_UV_RANGE[0]), ARM_UV_RANGE[1])


def project(q):
    """(ua, va): where pose q is drawn, clamped to ARM_UV_RANGE."""
    return _coord(q, D1), _coord(q, D2)


def _grid_base(size):
    img = np.empty((size, size, 3), np.uint8)
    img[:, :] = BACKGROUND
    g = max(size // 4, 1)
    idx = np.arange(size)
    on = idx % g == 0
    img[on, :] = GRID
    img[:, on] = GRID
    return img


_BASE = {}
_CENTRES = {}


def _disc(img, size, px, py, r, colour):
    c = _CENTRES.get(size)
    if c is None:
        c = _CENTRES[size] = np.arange(size, dtype=np.float64) + 0.5
    dx = c - px
    dy = c - py
    inside = (dy * dy)[:, None] + (dx * dx)[None, :] <= r * r
    img[inside] = colour


def render(q, u, v, S=64):
    """The image (S, S, 3) uint8 of the arm at pose q (7 joint positions) and target (u, v)."""
    base = _BASE.get(S)
    if base is None:
        base = _BASE[S] = _grid_base(S)
    img = base.copy()
    s = float(S)
    m, w = s / 8.0, 3.0 * s / 4.0
    _disc(img, S, m + float(u) * w, m + float(v) * w, 5.0 * s / 64.0, TARGET)
    ua, va = project(q)
    _disc(img, S, m + ua * w, m + va * w, 3.0 * s / 64.0, ARM)
    return img
