#!/usr/bin/env python3
"""The manual's shell examples, executed as printed.

  scripts/book-examples.py [--long] [--page WORD ...] [--list]
  scripts/book-examples.py --self-test

Every shell block (```sh, ```bash, ```console or unlabelled) of README.md and of
docs/**/*.md carries one tag after its language, e.g. ```sh,run:

  run     executed here, by every `scripts/test.sh` (stage book-examples): seconds each
  long    executed only with --long (`TEST_STAGES=book-long ./scripts/test.sh`): minutes
  host    needs what a CI machine has not (drives on a NIC, the host's systemd, docker,
          the host's cgroups or IRQs): not executed; its chunkrt command lines are still
          checked by the binary's parser (crates/chunkrt-cli/tests/book.rs)
  output  what a command printed, not a command

and optionally `fails` (the commands must exit non-zero, and every line the block shows
below a `$ ` command must appear in what they print, `...` matching anything) and
`late` (run after the page's other blocks: it reads what a later block makes).

A `console` block runs its `$ ` lines (a trailing `\\` joins the next line); any other
block runs whole, as a bash script with `set -eo pipefail`. The blocks of one page run
in order, in the repository's root (the commands name ./target/release/chunkrt,
rt-config/..., runs/...), with target/release on PATH, in their own session (a server
a block starts with `&` is stopped when the block ends) and under a time limit. `sudo`
is the command itself (a shell function) when root; when not root a block using it is
skipped and recorded (scripts/lib/skip.sh's rule: under CI a skip fails). `./scripts/test.sh`
inside a block is not run again (it is what runs this). runs/ is the examples' own: one
already there is moved aside to runs.before-book-examples/ and put back at the end.

Exit 1 when a block fails, or has no tag; the counts per tag are printed.
"""
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SHELL = ("", "sh", "bash", "console")
KINDS = ("run", "long", "host", "output")
LIMIT_S = {"run": 240, "long": 3600}


class Block:
    def __init__(self, page, line, lang, tags, body):
        self.page, self.line, self.lang, self.tags, self.body = page, line, lang, tags, body

    @property
    def place(self):
        return f"{self.page}:{self.line}"

    @property
    def kind(self):
        k = [t for t in self.tags if t in KINDS]
        return k[0] if len(k) == 1 else None

    def commands(self):
        """The script to run and the output lines the block shows."""
        console = self.lang == "console" or any(l.startswith("$ ") for l in self.body)
        if not console:
            lines = self.body
            shown = []
        else:
            lines, shown, cont = [], [], False
            for l in self.body:
                if cont or l.startswith("$ "):
                    lines.append(l[2:] if l.startswith("$ ") and not cont else l)
                    cont = l.rstrip().endswith("\\")
                elif l.strip():
                    shown.append(l)
        script = "\n".join(
            "true  # scripts/test.sh: what runs this" if re.match(r"\s*\./scripts/test\.sh\b", l) else l
            for l in lines)
        return script, shown


def blocks_of(page, text):
    out, cur = [], None
    for i, line in enumerate(text.split("\n")):
        s = line.strip()
        if s.startswith("```"):
            if cur is None:
                info = [w for w in re.split(r"[,\s]+", s[3:].strip()) if w]
                lang = info[0] if info and info[0] not in KINDS else ""
                tags = info[1:] if info and info[0] not in KINDS else info
                cur = (i + 1, lang, tags, [])
            else:
                line_no, lang, tags, body = cur
                if lang in SHELL:
                    out.append(Block(page, line_no, lang, tags, body))
                cur = None
            continue
        if cur is not None:
            cur[3].append(line)
    return out


def pages():
    files = [os.path.join(ROOT, "README.md")]
    files += sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))
    return files


def matches(shown, printed):
    """The shown lines missing from what was printed (`...` matches anything)."""
    got = [l.rstrip() for l in printed.split("\n")]
    missing = []
    for want in shown:
        pat = ".*".join(re.escape(p) for p in want.rstrip().split("..."))
        if not any(re.fullmatch(pat, g) for g in got):
            missing.append(want)
    return missing


# Before every block: `set -eo pipefail`; the book's `sudo CMD` is CMD itself (this runs as
# root when a block has sudo), `sudo VAR=x CMD` likewise, `sudo kill %1` the shell's kill.
PRELUDE = """set -eo pipefail
sudo() { if [[ "$1" == *=* ]]; then env "$@"; else "$@"; fi; }
"""


def skip(block, why):
    line = f"SKIP book-examples {block.place}: {why}"
    ci = os.environ.get("CI", "").strip()
    if ci and ci not in ("0", "false", "False", "FALSE"):
        return f"{line}; CI=true: every prerequisite must be installed, so this is a failure"
    print(line, file=sys.stderr)
    if os.environ.get("CHUNKRT_SKIP_FILE"):
        with open(os.environ["CHUNKRT_SKIP_FILE"], "a") as f:
            f.write(line + "\n")
    return None


def execute(block, env):
    """None when the block passed, else what went wrong."""
    script, shown = block.commands()
    if re.search(r"(^|[\s;&|(])sudo\s", script) and os.geteuid() != 0:
        return skip(block, "uses sudo and this is not root")
    limit = LIMIT_S[block.kind]
    t0 = time.monotonic()
    # Output to a file, not a pipe: a server the block leaves in the background would
    # hold a pipe open after the block ended.
    with tempfile.TemporaryFile(mode="w+") as out:
        p = subprocess.Popen(["bash", "-c", PRELUDE + script], cwd=ROOT, env=env, stdout=out,
                             stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            p.wait(timeout=limit)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
        try:
            os.killpg(p.pid, signal.SIGKILL)  # what the block left running, or all of it
        except ProcessLookupError:
            pass
        p.wait()
        out.seek(0)
        printed = out.read()
    dt = time.monotonic() - t0
    tail = "\n".join("    | " + l for l in printed.rstrip().split("\n")[-25:])
    if timed_out:
        return f"still running after {limit} s\n{tail}"
    if "fails" in block.tags:
        if p.returncode == 0:
            return f"exit 0, but the block shows a failure\n{tail}"
        missing = matches(shown, printed)
        if missing:
            return "printed otherwise than the page shows; missing:\n" + "\n".join(
                "    - " + m for m in missing) + "\n" + tail
    elif p.returncode != 0:
        return f"exit {p.returncode}\n{tail}"
    print(f"PASS {block.place} ({block.kind}, {dt:.0f} s)", flush=True)
    return None


def run_page(blocks, wanted, env):
    failures = []
    todo = [b for b in blocks if b.kind in wanted and "late" not in b.tags]
    todo += [b for b in blocks if b.kind in wanted and "late" in b.tags]
    for b in todo:
        print(f"---- {b.place} ({b.kind}{', fails' if 'fails' in b.tags else ''})", flush=True)
        err = execute(b, env)
        if err:
            print(f"FAIL {b.place}: {err}", flush=True)
            failures.append(b.place)
    return failures


def collect(words):
    all_blocks, untagged = [], []
    for path in pages():
        page = os.path.relpath(path, ROOT)
        with open(path, encoding="utf-8") as f:
            bl = blocks_of(page, f.read())
        untagged += [b.place for b in bl if b.kind is None]
        if not words or any(w in page for w in words):
            all_blocks.append((page, bl))
    return all_blocks, untagged


def main(args):
    long = "--long" in args
    words = []
    if "--page" in args:
        words = args[args.index("--page") + 1:]
    found, untagged = collect(words)
    if untagged:
        print("shell blocks without one tag of run, long, host, output:", file=sys.stderr)
        print("\n".join("  " + u for u in untagged), file=sys.stderr)
        return 1
    counts = {}
    for _, bl in found:
        for b in bl:
            counts[b.kind] = counts.get(b.kind, 0) + 1
    print("shell blocks: " + ", ".join(f"{counts.get(k, 0)} {k}" for k in KINDS), flush=True)
    if "--list" in args:
        for _, bl in found:
            for b in bl:
                print(f"{b.place}\t{','.join(b.tags)}")
        return 0
    wanted = ("run", "long") if long else ("run",)
    env = dict(os.environ)
    env["PATH"] = f"{os.path.join(ROOT, 'target', 'release')}:{env['PATH']}"
    saved = os.path.join(ROOT, "runs.before-book-examples")
    runs = os.path.join(ROOT, "runs")
    if os.path.exists(runs):
        if os.path.exists(saved):
            print(f"{saved} exists (an earlier run was cut off): put it back as runs/ first",
                  file=sys.stderr)
            return 1
        os.rename(runs, saved)
    failures = []
    try:
        for _, bl in found:
            failures += run_page(bl, wanted, env)
    finally:
        if os.path.exists(saved):
            shutil.rmtree(runs, ignore_errors=True)
            os.rename(saved, runs)
    ran = sum(counts.get(k, 0) for k in wanted)
    print(f"{ran} block(s) run ({' and '.join(wanted)}), {len(failures)} failed")
    for f in failures:
        print("  FAILED " + f)
    return 1 if failures else 0


def self_test():
    """The runner fails on a renamed flag, on a page printing otherwise, and on no tag."""
    good = ("```sh,run\n./target/release/chunkrt validate rt-config/sim.toml\n```\n"
            "```console,run,fails\n$ ./target/release/chunkrt validate /nonexistent.toml\n"
            "chunkrt: error: ...nonexistent.toml...\n```\n")
    env = dict(os.environ)
    env["PATH"] = f"{os.path.join(ROOT, 'target', 'release')}:{env['PATH']}"
    cases = [(good, 0)]
    cases.append((good.replace("validate rt-config", "validate --strictly rt-config"), 1))
    cases.append((good.replace("validate rt-config", "valdate rt-config"), 1))
    cases.append((good.replace("error: ...nonexistent", "error: ...nonexistant"), 1))
    cases.append((good.replace("console,run,fails", "console,run"), 1))
    bad = []
    for text, want in cases:
        bl = blocks_of("self-test.md", text)
        assert all(b.kind == "run" for b in bl) and len(bl) == 2, text
        got = 1 if run_page(bl, ("run",), env) else 0
        if got != want:
            bad.append(f"expected {'a failure' if want else 'a pass'}:\n{text}")
    if [b.kind for b in blocks_of("p.md", "```sh\nchunkrt check\n```\n")] != [None]:
        bad.append("an untagged block was taken")
    print(f"self-test: {len(cases) + 1} cases, {len(bad)} wrong")
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(self_test() if "--self-test" in sys.argv[1:] else main(sys.argv[1:]))
