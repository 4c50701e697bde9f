"""Loads a dataset written by `chunkrt export lerobot` with LeRobot's own LeRobotDataset
(outside CI: it needs the LeRobot venv, scripts/lerobot/setup.sh; `lerobot[dataset]`).

    .venv-lerobot/bin/python scripts/lerobot/check_dataset.py DATASET

Checks that every frame loads with its declared shape and dtype (a camera image as LeRobot
gives it to a policy: a CHW float tensor in [0, 1]), the task text comes
back, episode and frame indices run without gaps, and a delta-timestamps window (what a
chunked policy trains on) loads; exits 1 on the first failure.
"""
import json
import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"  # a missing file fails here instead of a Hub download

from lerobot.datasets.lerobot_dataset import LeRobotDataset  # noqa: E402

root = sys.argv[1]
info = json.load(open(os.path.join(root, "meta", "info.json")))
ds = LeRobotDataset("local/chunkrt", root=root)
assert len(ds) == info["total_frames"], (len(ds), info["total_frames"])
assert ds.meta.total_episodes == info["total_episodes"]
prev = None
for i in range(len(ds)):
    item = ds[i]
    for k, f in info["features"].items():
        shape = tuple(item[k].shape)
        want = () if f["shape"] == [1] else tuple(f["shape"])
        if f["dtype"] == "image":  # declared height, width, channels; loaded as a CHW tensor
            want = (want[2], want[0], want[1])
            assert 0.0 <= float(item[k].min()) and float(item[k].max()) <= 1.0, (i, k)
        assert shape == want, (i, k, shape, want)
    assert item["task"] == "reach the goal" or isinstance(item["task"], str), item["task"]
    e, fr = int(item["episode_index"]), int(item["frame_index"])
    if prev is not None:
        assert (e, fr) in ((prev[0], prev[1] + 1), (prev[0] + 1, 0)), (i, prev, (e, fr))
    prev = (e, fr)
w = LeRobotDataset(
    "local/chunkrt", root=root, delta_timestamps={"action": [k / ds.fps for k in range(8)]}
)
assert tuple(w[0]["action"].shape) == (8, info["features"]["action"]["shape"][0])
print(f"{root}: {len(ds)} frames, {ds.meta.total_episodes} episodes at {ds.fps} fps load with LeRobotDataset")
