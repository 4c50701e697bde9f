#!/usr/bin/env python3
"""Prints the `podman run` options a docker compose service asks for, one per line.

scripts/container-test.sh runs the latency service of docker/compose.yaml with
podman; podman-compose (Debian 1.0.3) drops cpuset and cpu_rt_runtime without a
word, so this translates the keys the service uses and refuses any other key, so
that the compose file and what CI runs cannot drift apart.

Usage: compose_podman.py COMPOSE_FILE SERVICE
Relative volume sources are taken from the compose file's directory, as compose
does; ${VAR} and ${VAR:-default} are expanded from the environment.
"""
import os
import re
import sys

try:
    import yaml
except ImportError:
    sys.exit("compose_podman: python3-yaml is missing (apt-get install python3-yaml)")

# Keys that only say how to build the image: the caller builds it.
BUILD_KEYS = {"build", "image"}


def expand(value, where):
    """Expands ${VAR} and ${VAR:-default} as compose does."""

    def sub(m):
        name, default = m.group(1), m.group(3)
        if name in os.environ and (os.environ[name] or default is None):
            return os.environ[name]
        if default is not None:
            return default
        sys.exit(f"compose_podman: {where}: ${{{name}}} is not set")

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}", sub, str(value))


def micros(value, where):
    """A compose duration ("800ms", "1s", "950us") or an integer (microseconds) in us."""
    if isinstance(value, int):
        return value
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(us|ms|s)?\s*", str(value))
    if not m:
        sys.exit(f"compose_podman: {where}: {value!r} is not a duration (800ms, 1s, 950000)")
    scale = {"us": 1, None: 1, "ms": 1_000, "s": 1_000_000}[m.group(2)]
    return int(float(m.group(1)) * scale)


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: compose_podman.py COMPOSE_FILE SERVICE")
    path, name = argv[1], argv[2]
    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        sys.exit(f"compose_podman: {path}: {e}")
    service = (doc or {}).get("services", {}).get(name)
    if not isinstance(service, dict):
        sys.exit(f"compose_podman: {path}: no service {name!r}")
    base = os.path.dirname(os.path.abspath(path))
    out = []
    for key, value in service.items():
        where = f"{path}: services.{name}.{key}"
        if key in BUILD_KEYS:
            continue
        if key == "cap_add":
            out += [f"--cap-add={c}" for c in value]
        elif key == "cpuset":
            out.append(f"--cpuset-cpus={value}")
        elif key == "cpu_rt_runtime":
            out.append(f"--cpu-rt-runtime={micros(value, where)}")
        elif key == "cpu_rt_period":
            out.append(f"--cpu-rt-period={micros(value, where)}")
        elif key == "devices":
            out += [f"--device={d}" for d in value]
        elif key == "network_mode":
            out.append(f"--network={value}")
        elif key == "ulimits":
            for limit, v in value.items():
                if isinstance(v, dict):
                    v = f"{v['soft']}:{v['hard']}"
                out.append(f"--ulimit={limit}={v}")
        elif key == "volumes":
            for v in value:
                src, _, rest = str(v).partition(":")
                if src.startswith("."):
                    src = os.path.normpath(os.path.join(base, src))
                out.append(f"--volume={src}:{rest}")
        elif key == "environment":
            items = value.items() if isinstance(value, dict) else (
                e.split("=", 1) for e in value)
            out += [f"--env={k}={expand(v, where)}" for k, v in items]
        else:
            sys.exit(f"compose_podman: {where}: key not translated to podman; "
                     "teach scripts/compose_podman.py this key")
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv)
