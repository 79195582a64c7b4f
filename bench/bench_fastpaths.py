"""The fast-path table (issue 15): reel beside git on the same data, in one run, CPU time of whole
processes (user + system, from wait4), interleaved so machine load hits both alike; medians.

    python3 bench/bench_fastpaths.py [--quick] [--big] [--only ROW[,ROW...]]

Rows: one CLI verb's start-up (with the floor: python importing blake3, zstandard and msgpack and
reading one ref; the start-up budget row is a plumbing verb's CPU against that floor: start-up is a
budget reported here, not a module set pinned by the tests), `cat-file --batch` over 20k packed
objects, gc with half the objects unreachable at 5k and 20k (80k with --big; max RSS too), full push
and clone of 20k objects over a path remote (git's clone twice: as it clones a local path by default,
with hard links to the remote's files, and with --no-local, which moves and indexes a pack as reel's
clone must), and an incremental push of 10 objects onto a 20k remote; the sync rows also show dulwich
(the pure-Python git) doing the same transfer in its own process. --quick uses 2k objects and one
repetition.
--only runs just the named sections (startup, batch, gc, sync), so one engineer can measure their rows.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import GIT_ENV, fast_import_blobs, git, git_init, payloads, scratch  # noqa: E402

import reelstore  # noqa: E402
from reelstore.backend.repo import Repo  # noqa: E402
from reelstore.namespace.tree import Namespace  # noqa: E402
from reelstore.objects import Blob, Record  # noqa: E402

REEL = shutil.which("reel") or "reel"
FLOOR = (
    "import gc, sys, blake3, zstandard, msgpack; from pathlib import Path; "
    "print(Path(sys.argv[1]).read_text()[:64]); gc.freeze()"
)
"""Every floor ends as reel does: with the heap frozen, so the exit's last collection walks none of it."""


def run(
    cmd: Sequence[str], cwd: Path, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> tuple[float, float, int]:
    """(CPU seconds, wall seconds, peak RSS in KiB) of one process and its children, output discarded.

    CPU comes from wait4. The peak RSS is the largest VmHWM seen in /proc for the process or any of its
    descendants, sampled every 5 ms (wait4's ru_maxrss cannot be used: Linux carries the parent's
    high-water mark into a forked child, so every child would report at least this script's size)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        list(cmd),
        cwd=cwd,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    if stdin is not None:
        assert proc.stdin is not None
        try:
            proc.stdin.write(stdin)
        except BrokenPipeError:
            pass
        proc.stdin.close()
    peak = 0
    while True:
        peak = max(peak, _tree_hwm(proc.pid))
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        time.sleep(0.005)
    wall = time.perf_counter() - start
    err = proc.stderr.read() if proc.stderr else b""
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {err.decode(errors='replace')[-500:]}")
    return usage.ru_utime + usage.ru_stime, wall, peak


def _tree_hwm(root: int) -> int:
    """The largest VmHWM (KiB) among `root` and its live descendants."""
    best, todo, seen = 0, [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    best = max(best, int(line.split()[1]))
            for task in Path(f"/proc/{pid}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return best


def interleaved(pairs: dict[str, Callable[[], tuple[float, float, int]]], repeat: int) -> dict[str, list[tuple]]:
    """Each callable `repeat` times, in turn (a, b, a, b, …), so load hits every contestant alike."""
    out: dict[str, list[tuple]] = {k: [] for k in pairs}
    for _ in range(repeat):
        for name, fn in pairs.items():
            out[name].append(fn())
    return out


def med(samples: list[tuple], i: int) -> float:
    return statistics.median(s[i] for s in samples)


def row(
    title: str, reel_s: list[tuple], other: list[tuple] | None, floor: list[tuple] | None = None, rss: bool = False
) -> None:
    parts = [f"{title:<44} reel {med(reel_s, 0) * 1000:8.1f} ms cpu ({med(reel_s, 1) * 1000:7.1f} wall)"]
    if other:
        parts.append(f"git {med(other, 0) * 1000:8.1f} ms  reel/git {med(reel_s, 0) / max(med(other, 0), 1e-6):6.2f}x")
    if floor:
        parts.append(f"floor {med(floor, 0) * 1000:6.1f} ms  reel/floor {med(reel_s, 0) / med(floor, 0):5.2f}x")
    if rss:
        parts.append(f"RSS reel {med(reel_s, 2) / 1024:6.1f} MB git {med(other, 2) / 1024 if other else 0:6.1f} MB")
    print("  ".join(parts), flush=True)


def reel_store(path: Path, n: int, reachable_share: float = 1.0) -> Repo:
    """A store of `n` blobs; the first `reachable_share` of them named in the trunk's namespace."""
    repo = Repo.init(path)
    blobs = [Blob(p) for p in payloads(n)]
    repo.objects.put_many(blobs)
    keep = blobs[: int(n * reachable_share)]
    head = repo.refs["refs/heads/main"]
    top = repo.objects.get_as(head, Record)
    root = Namespace(repo.objects).update(top.namespace, {f"f/{i:06}": b.id for i, b in enumerate(keep)})
    rec = Record(parent=head, namespace=root, effects=None, view=None, author="bench", message="bulk", time=0)
    repo.objects.put(rec)
    repo.refs.set("refs/heads/main", rec.id, head, message="bench")
    return repo


def git_repo(path: Path, n: int, reachable_share: float = 1.0) -> Path:
    """A git repository of `n` blobs, the first share in one commit's tree, the rest unreachable."""
    git_init(path)
    data = payloads(n)
    keep = int(n * reachable_share)
    stream = [fast_import_blobs(data)]
    stream.append(b"commit refs/heads/main\ncommitter b <b@x> 0 +0000\ndata 4\nbulk\n")
    stream += [b"M 100644 :%d f/%06d\n" % (i + 1, i) for i in range(keep)]
    git("fast-import", "--quiet", cwd=path, input=b"".join(stream) + b"\n")
    return path


def startup(tmp: Path, repeat: int) -> None:
    for cached in (False, True):
        _startup(tmp / ("cached" if cached else "uncached"), repeat, cached)


def bytecode_env(cached: bool) -> dict[str, str]:
    """The environment for reel runs with or without cached bytecode. Not cached is this environment's
    own state (an editable install under PYTHONDONTWRITEBYTECODE=1): the project's __pycache__
    directories are removed first, so every reelstore module is compiled at every start (installed
    libraries keep their bytecode). Cached: bytecode may be written, so a warm-up run caches it."""
    env = dict(os.environ)
    if cached:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        return env
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    root = Path(reelstore.__file__).resolve().parent.parent
    for top in ("reelstore", "plumbing", "porcelain", "cli"):
        for cache in (root / top).rglob("__pycache__"):
            shutil.rmtree(cache, ignore_errors=True)
    return env


CLICK_COMMAND = (
    "import sys, click, blake3, zstandard, msgpack; from pathlib import Path\n"
    "@click.group()\ndef cli(): pass\n"
    "@cli.command()\n@click.option('-p', 'pretty', is_flag=True)\n@click.argument('ref')\n"
    "def show(pretty, ref): click.echo(Path(ref).read_text()[:64])\n"
    "import gc\ntry:\n cli(['show', '-p', sys.argv[1]])\nfinally:\n gc.freeze()"
)
"""The floor with click doing what every verb makes it do: a group, one command with a short flag
(click tries `-p` as a long option first, which loads difflib to suggest a name) and `--help`'s
translated strings (gettext, locale), parsed and run."""

IMPORT_PATCH = (
    "import sys, importlib; importlib.import_module = lambda n, package=None: (__import__(n), sys.modules[n])[1]; "
)
"""-X importtime times only the imports of `import` statements; the CLI (and `reelstore.objects`)
load modules by importlib.import_module, so the measuring run routes it through `__import__`."""


def _importtime(code: str, args: Sequence[str], cwd: Path, env: dict[str, str]) -> dict[str, int]:
    """Module -> self import time (us), the median of 3 runs of `python -X importtime -c code args`
    (a `{}` in an argument becomes the run's number, for verbs that create a name)."""
    runs: dict[str, list[int]] = {}
    for i in range(3):
        argv = [a.replace("{}", str(i)) for a in args]
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", code, *argv], cwd=cwd, env=env, capture_output=True, check=True
        )
        for line in done.stderr.decode().splitlines():
            if line.startswith("import time:") and "self [us]" not in line:
                own, _cum, name = line.split(":", 1)[1].split("|")
                runs.setdefault(name.strip(), []).append(int(own))
    return {name: int(statistics.median(v)) for name, v in runs.items()}


LIBS = ("blake3", "zstandard", "msgpack", "dulwich")


def _import_split(args: Sequence[str], cwd: Path, env: dict[str, str], base: dict[str, int]) -> str:
    """Where a verb's imports go (-X importtime self times, ms; importtime itself inflates them): what
    `import click` loads, the libraries, the rest of the standard library, and reelstore's modules."""
    got = _importtime(IMPORT_PATCH + "from reelstore.cli.main import main; main(sys.argv[1:])", args, cwd, env)
    groups = {"python+click": 0, "libs": 0, "other stdlib": 0, "reelstore": 0}
    count = 0
    for name, us in got.items():
        if name in base:
            groups["python+click"] += us
        elif name.split(".")[0] in LIBS or name.startswith("_cffi"):
            groups["libs"] += us
        elif name.startswith("reelstore"):
            groups["reelstore"] += us
            count += 1
        else:
            groups["other stdlib"] += us
    return (
        "imports: " + " | ".join(f"{k} {v / 1000:.1f}" for k, v in groups.items()) + f" ms ({count} reelstore modules)"
    )


def _click_floor_why(cwd: Path, env: dict[str, str]) -> str:
    """Why python + click is the floor: what `import click` loads, by -X importtime."""
    base = _importtime("pass", [], cwd, env)
    got = _importtime("import click", [], cwd, env)
    extra = {k: v for k, v in got.items() if k not in base}
    top = sorted(extra.items(), key=lambda kv: -kv[1])[:6]
    listed = ", ".join(f"{k} {v / 1000:.1f}" for k, v in top)
    return (
        f"  why: `python -c pass` imports {len(base)} modules ({sum(base.values()) / 1000:.1f} ms self, site "
        f"and the editable install's finder among them); `import click` adds {len(extra)} "
        f"({sum(extra.values()) / 1000:.1f} ms self: {listed}, ...)"
    )


def _click_command_why(cwd: Path, env: dict[str, str], ref: str) -> str:
    """What running a click command loads beyond `import click` (-X importtime self times): gettext's
    locale for its translated strings, difflib (and heapq) for the suggestions of the NoSuchOption that
    click builds when it tries a short flag as a long option first."""
    base = _importtime("import click, blake3, zstandard, msgpack", [], cwd, env)
    got = _importtime(CLICK_COMMAND, [ref], cwd, env)
    extra = sorted(((k, v) for k, v in got.items() if k not in base), key=lambda kv: -kv[1])
    listed = ", ".join(f"{k} {v / 1000:.1f}" for k, v in extra)
    return (
        f"  and a click command with a short flag adds {len(extra)} modules "
        f"({sum(v for _, v in extra) / 1000:.1f} ms self: {listed})"
    )


def _verb_row(
    title: str,
    reel_s: list[tuple],
    git_s: list[tuple] | None,
    floor: list[tuple],
    click_floor: list[tuple],
    command_floor: list[tuple],
) -> None:
    """reel beside git, the Python floor, the floor with click imported and with a click command run; the
    goal is reel/(floor+click) <= 1.3, shown as the ratio of medians and as the median of paired rounds."""
    r = med(reel_s, 0)
    parts = [f"{title:<30} reel {r * 1000:6.1f} ms cpu ({med(reel_s, 1) * 1000:6.1f} wall)"]
    if git_s:
        parts.append(f"git {med(git_s, 0) * 1000:5.1f} ms  reel/git {r / max(med(git_s, 0), 1e-6):5.1f}x")
    parts.append(f"floor {med(floor, 0) * 1000:5.1f}  reel/floor {r / med(floor, 0):4.2f}x")
    parts.append(
        f"floor+click {med(click_floor, 0) * 1000:5.1f}  reel/(floor+click) {r / med(click_floor, 0):4.2f}x"
        f" (paired {paired(reel_s, click_floor):4.2f}x)"
    )
    parts.append(
        f"reel/(floor + a click command) {r / med(command_floor, 0):4.2f}x"
        f" (paired {paired(reel_s, command_floor):4.2f}x)"
    )
    print("  ".join(parts), flush=True)


def paired(a: list[tuple], b: list[tuple]) -> float:
    """The median of the per-round ratios a/b: each round's two runs are neighbours in time, so a load
    that comes and goes (this machine is shared) moves both, and the ratio less than either median."""
    return statistics.median(x[0] / y[0] for x, y in zip(a, b, strict=True))


def _startup(tmp: Path, repeat: int, cached: bool) -> None:
    """Without cached bytecode (as this environment runs reel: every reelstore module is compiled at
    every start) and with it (after one warm-up run wrote __pycache__). Each verb's runs are interleaved
    with git's and with the two floors' (the Python floor: python + blake3/zstandard/msgpack reading one ref;
    and that with `import click`, which every verb pays while the CLI is click)."""
    env = bytecode_env(cached)
    print(f"== one CLI verb, whole process, bytecode {'cached' if cached else 'not cached'}")
    tmp.mkdir(parents=True)
    r, g = tmp / "s-reel", tmp / "s-git"
    reel_store(r, 10)
    git_repo(g, 10)
    head = (r / ".reel" / "refs" / "heads" / "main").read_text()[:64]
    ghead = git("rev-parse", "main", cwd=g).decode().strip()
    ref = str(r / ".reel/refs/heads/main")
    if cached:
        for warm in ([REEL, "--help"], [REEL, "show-ref"], [REEL, "fork", "warm"], [REEL, "cat-file", "-p", head]):
            run(warm, r, env=env)
    floors = {
        "pass": lambda: run([sys.executable, "-c", "pass"], r, env=env),
        "floor": lambda: run([sys.executable, "-c", FLOOR, ref], r, env=env),
        "click": lambda: run([sys.executable, "-c", "import click; " + FLOOR, ref], r, env=env),
        "command": lambda: run([sys.executable, "-c", CLICK_COMMAND, ref], r, env=env),
    }
    got = interleaved(floors, repeat)
    print(f"{'(python -c pass)':<30} {med(got['pass'], 0) * 1000:6.1f} ms cpu")
    print(
        f"{'(floor)':<30} {med(got['floor'], 0) * 1000:6.1f} ms cpu  (python + blake3, zstandard, msgpack; "
        "reads one ref)"
    )
    print(
        f"{'(floor + import click)':<30} {med(got['click'], 0) * 1000:6.1f} ms cpu  "
        f"floor+click/floor {med(got['click'], 0) / med(got['floor'], 0):4.2f}x"
    )
    print(
        f"{'(floor + a click command)':<30} {med(got['command'], 0) * 1000:6.1f} ms cpu  "
        "(a group, one command with -p, parsed and run)"
    )
    print(_click_floor_why(r, env))
    print(_click_command_why(r, env, ref))

    def versus(
        title: str,
        reel_cmd: Callable[[], list[str]],
        git_cmd: Callable[[], list[str]] | None,
        split: list[str] | None = None,
        cwd: Path = r,
        gcwd: Path = g,
    ) -> dict[str, list[tuple]]:
        pairs = {
            "r": lambda: run(reel_cmd(), cwd, env=env),
            "f": floors["floor"],
            "c": floors["click"],
            "k": floors["command"],
        }
        if git_cmd is not None:
            pairs["g"] = lambda: run(git_cmd(), gcwd, env={**os.environ, **GIT_ENV})
        if split is not None:  # the floor after click and the reelstore modules the verb loads, none called
            listed = tmp / f"modules-{len(list(tmp.glob('modules-*')))}.txt"
            subprocess.run(
                [sys.executable, "-c", _LIST_MODULES, str(listed), *split[:-1], split[-1].format("list")],
                cwd=cwd,
                check=True,
                capture_output=True,
                env=env,
            )
            loads = (
                "import sys, click, importlib\n"
                "for name in open(sys.argv[2]).read().split(): importlib.import_module(name)\n"
            )
            pairs["m"] = lambda: run([sys.executable, "-c", loads + FLOOR, ref, str(listed)], r, env=env)
        res = interleaved(pairs, repeat)
        _verb_row(title, res["r"], res.get("g"), res["f"], res["c"], res["k"])
        if split is not None:
            print("    " + _import_split(split, cwd, env, base_click))
            code, click_ms = med(res["m"], 0), med(res["c"], 0)
            print(
                f"    floor + click + loading the {len(listed.read_text().split())} reelstore modules it loads (none "
                f"called) {code * 1000:.1f} ms = {code / click_ms:.2f}x floor+click; reel/that "
                f"{med(res['r'], 0) / code:.2f}x"
            )
        return res

    base_click = _importtime("import click", [], r, env)
    versus("--version", lambda: [REEL, "--version"], lambda: ["git", "--version"])
    versus("--help", lambda: [REEL, "--help"], lambda: ["git", "help", "-a"])
    plumbing = versus("show-ref", lambda: [REEL, "show-ref"], lambda: ["git", "show-ref"], ["show-ref"])
    versus(
        "cat-file -p HEAD record",
        lambda: [REEL, "cat-file", "-p", head],
        lambda: ["git", "cat-file", "-p", ghead],
        ["cat-file", "-p", head],
    )
    versus(
        "update-ref refs/heads/b",
        lambda: [REEL, "update-ref", "refs/heads/b", head],
        lambda: ["git", "update-ref", "refs/heads/b", ghead],
        ["update-ref", "refs/heads/b", head],
    )
    n = iter(range(10**6))
    versus(
        "fork / git branch",
        lambda: [REEL, "fork", f"v{next(n)}"],
        lambda: ["git", "branch", f"b{next(n)}", "main"],
        ["fork", "vsplit{}"],
    )
    remote, gremote = git_init(tmp / "p-remote"), git_init(tmp / "p-gremote")
    subprocess.run([REEL, "remote", "add", "base", str(remote)], cwd=r, check=True, env=env)
    subprocess.run([REEL, "push", "base"], cwd=r, check=True, capture_output=True, env=env)
    git("push", "-q", str(gremote), "main", cwd=g)
    versus(
        "push, nothing to send",
        lambda: [REEL, "push", "base"],
        lambda: ["git", "push", "-q", str(gremote), "main"],
        ["push", "base"],
    )
    verb, floor = med(plumbing["r"], 0), med(plumbing["f"], 0)
    print(
        f"{'start-up budget (show-ref)':<30} reel {verb * 1000:6.1f} ms cpu = {verb / floor:4.2f}x the Python floor "
        f"({floor * 1000:.1f} ms; paired {paired(plumbing['r'], plumbing['f']):4.2f}x): the budget row, reported, "
        "never asserted by a test",
        flush=True,
    )


FLOOR_BATCH = Path(__file__).resolve().parent / "floor_batch.py"


def batch(tmp: Path, n: int, repeat: int) -> None:
    """reel (with its optional C accelerator, and without it: REEL_PURE=1), git and the floor
    (bench/floor_batch.py: the same checks and output in a minimal Python script, no click and no
    reelstore) over the same ids, interleaved, in both bytecode modes (the floor imports no project
    module, so only reel's figures depend on the mode)."""
    from reelstore.backend.packs.bulk_read import accelerator_built

    built = accelerator_built()
    print(
        f"== cat-file --batch, {n} packed objects (floor: bench/floor_batch.py; C accelerator "
        f"{'built' if built else 'NOT built: both reel rows are pure Python'})"
    )
    r, g = tmp / "b-reel", tmp / "b-git"
    repo = reel_store(r, n)
    subprocess.run([REEL, "repack", "-a", "-d"], cwd=r, check=True, capture_output=True)
    git_repo(g, n)
    git("repack", "-a", "-d", "-q", cwd=g)
    ids = "".join(h.hex() + "\n" for h in sorted(repo.objects)).encode()
    gids = git("cat-file", "--batch-all-objects", "--batch-check=%(objectname)", cwd=g)
    fast_env = {k: v for k, v in os.environ.items() if k != "REEL_PURE"}
    pure_env = dict(fast_env, REEL_PURE="1")
    want = subprocess.run(
        [REEL, "cat-file", "--batch"], cwd=r, input=ids, capture_output=True, check=True, env=fast_env
    ).stdout
    pure = subprocess.run(
        [REEL, "cat-file", "--batch"], cwd=r, input=ids, capture_output=True, check=True, env=pure_env
    ).stdout
    got = subprocess.run([sys.executable, str(FLOOR_BATCH)], cwd=r, input=ids, capture_output=True, check=True).stdout
    if got != want or pure != want:
        raise RuntimeError("the floor script's or the pure path's output differs from reel's")
    floor_cmd = [sys.executable, str(FLOOR_BATCH)]
    # The floor after `import click`: the part of reel's start-up a click CLI cannot avoid (a script runs from
    # source either way: Python caches no bytecode for the file it is given).
    source = f"open({str(FLOOR_BATCH)!r}).read()"
    click_cmd = [sys.executable, "-c", f"import click; exec(compile({source}, 'floor_batch.py', 'exec'))"]
    # The floor after loading the reelstore modules a batch loads (listed by one untimed batch; their bodies
    # run, nothing of them is called): what reel's own code costs to load, compiled or cached.
    modules = tmp / "b-batch-modules.txt"
    subprocess.run(
        [sys.executable, "-c", _LIST_MODULES, str(modules), "cat-file", "--batch"],
        cwd=r,
        input=ids[:65],
        check=True,
        capture_output=True,
        env=fast_env,
    )
    count, git_whole = len(modules.read_text().split()), {}
    code_cmd = [
        sys.executable,
        "-c",
        f"import importlib, click\nfor name in open({str(modules)!r}).read().split(): "
        f"importlib.import_module(name)\nexec(compile({source}, 'floor_batch.py', 'exec'))",
    ]
    for cached in (False, True):
        env = bytecode_env(cached)
        if cached:
            run([REEL, "cat-file", "--batch"], r, ids[:65], env=env)
        fast = {k: v for k, v in env.items() if k != "REEL_PURE"}
        slow = {**fast, "REEL_PURE": "1"}
        got = interleaved(
            {
                "r": lambda fast=fast: run([REEL, "cat-file", "--batch"], r, ids, env=fast),
                "p": lambda slow=slow: run([REEL, "cat-file", "--batch"], r, ids, env=slow),
                "g": lambda: run(["git", "cat-file", "--batch"], g, gids),
                "f": lambda: run(floor_cmd, r, ids),
                "c": lambda: run(click_cmd, r, ids),
            },
            repeat,
        )
        reel_ms, pure_ms, git_ms, floor_ms, click_ms = (med(got[k], 0) * 1000 for k in "rpgfc")
        git_whole[cached] = git_ms
        title = f"cat-file --batch, bytecode {'cached' if cached else 'not cached'}"
        print(
            f"{title:<44} reel {reel_ms:8.1f} ms cpu ({med(got['r'], 1) * 1000:7.1f} wall)  git {git_ms:6.1f} ms  "
            f"floor {floor_ms:6.1f} ms  reel/git {reel_ms / git_ms:5.2f}x  reel/floor {reel_ms / floor_ms:5.2f}x  "
            f"floor/git {floor_ms / git_ms:5.2f}x",
            flush=True,
        )
        print(
            f"{'  (reel, pure Python: REEL_PURE=1)':<44} {pure_ms:13.1f} ms cpu ({med(got['p'], 1) * 1000:7.1f} wall)"
            f"  pure/git {pure_ms / git_ms:5.2f}x  pure/floor {pure_ms / floor_ms:5.2f}x",
            flush=True,
        )
        print(
            f"{'  (floor + import click)':<44} {click_ms:13.1f} ms cpu  "
            f"reel/(floor+click) {reel_ms / click_ms:5.2f}x  (floor+click)/git {click_ms / git_ms:5.2f}x",
            flush=True,
        )
    # The start alone, with no input: what the process pays before it reads one object, beside the floor
    # after click and the reelstore modules a batch loads (their bodies run; nothing of them is called).
    # Where that alone passes 2.5x git's whole batch, loading reel's code is what holds the row.
    for cached in (False, True):
        env = bytecode_env(cached)
        got = interleaved(
            {
                "r": lambda env=env: run([REEL, "cat-file", "--batch"], r, b"", env=env),
                "f": lambda: run(floor_cmd, r, b""),
                "c": lambda: run(click_cmd, r, b""),
                "m": lambda env=env: run(code_cmd, r, b"", env=env),
            },
            repeat,
        )
        reel_ms, floor_ms, click_ms, code_ms = (med(got[k], 0) * 1000 for k in "rfcm")
        title = f"cat-file --batch, no input ({'cached' if cached else 'not cached'})"
        print(
            f"{title:<44} reel {reel_ms:8.1f} ms cpu  floor {floor_ms:6.1f} ms  floor + click {click_ms:6.1f} ms  "
            f"floor + click + the {count} modules {code_ms:6.1f} ms = {code_ms / git_whole[cached]:4.2f}x git's "
            f"whole batch",
            flush=True,
        )


GC_FLOOR = "import click, blake3, zstandard, msgpack; import gc; gc.freeze()"
"""What a reel gc cannot shed: the interpreter, click (the CLI) and the three libraries its store format
uses (BLAKE3 ids and checksums, zstd entries, msgpack bodies)."""
FLOOR_GC = Path(__file__).resolve().parent / "floor_gc.py"


def gc_rows(tmp: Path, sizes: Sequence[int], repeat: int) -> None:
    """gc --prune=now of a fresh copy of each store: reel, git and the floor (bench/floor_gc.py: the same
    checks and result in a minimal Python script, no click, no reelstore), interleaved, bytecode cached
    (as an installed reel runs; the empty store is also shown without). Also the import floor (GC_FLOOR),
    and the part of each gc that grows with the store (each tool's gc less its empty-store gc); then how
    far each ratio is from flat across the sizes, and what it would be with git's empty-store cost in
    place of the tool's own (the difference is the tool's fixed cost)."""
    print(
        "== gc --prune=now with half the objects unreachable (fresh copy each run, bytecode cached; "
        "floor: bench/floor_gc.py)"
    )
    git_env = {**os.environ, **GIT_ENV}

    def fresh(src: Path) -> Path:
        dst = src.with_name(src.name + "-run")
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst, symlinks=True)
        return dst

    def line(title: str, got: dict[str, list[tuple]]) -> None:
        r, g, f = (med(got[k], 0) * 1000 for k in "rgf")
        rss = " ".join(f"{k} {med(got[k], 2) / 1024:5.1f}" for k in "rgf")
        print(
            f"{title:<34} reel {r:7.1f} ms cpu ({med(got['r'], 1) * 1000:6.1f} wall)  git {g:6.1f}  floor {f:6.1f}  "
            f"reel/git {r / g:5.2f}x  reel/floor {r / f:5.2f}x  floor/git {f / g:5.2f}x  RSS MB {rss}",
            flush=True,
        )

    e0, eg0 = tmp / "g-reel-empty", tmp / "g-git-empty"
    Repo.init(e0)
    git_init(eg0)
    empty: dict[str, list[tuple]] = {}
    for cached in (False, True):
        env = bytecode_env(cached)
        if cached:
            run([REEL, "gc", "--prune=now"], fresh(e0), env=env)  # writes the bytecode
        empty = interleaved(
            {
                "r": lambda env=env: run([REEL, "gc", "--prune=now"], fresh(e0), env=env),
                "g": lambda: run(["git", "gc", "--prune=now", "-q"], fresh(eg0), env=git_env),
                "f": lambda env=env: run([sys.executable, str(FLOOR_GC)], fresh(e0), env=env),
                "i": lambda env=env: run([sys.executable, "-c", GC_FLOOR], e0, env=env),
            },
            repeat,
        )
        line(f"empty store, bytecode {'cached' if cached else 'not cached'}", empty)
    env = bytecode_env(True)
    imported = GC_FLOOR.split(";")[0].removeprefix("import ")
    print(
        f"{'(python + ' + imported + ')':<34} {med(empty['i'], 0) * 1000:7.1f} ms cpu, "
        f"RSS {med(empty['i'], 2) / 1024:5.1f} MB"
    )
    ratios: dict[int, dict[str, float]] = {}
    levelled: dict[int, dict[str, float]] = {}
    LEVELLED = "  with git's empty-store cost"
    for n in sizes:
        r0, g0 = tmp / f"g-reel-{n}", tmp / f"g-git-{n}"
        reel_store(r0, n, 0.5)
        git_repo(g0, n, 0.5)
        git("repack", "-d", "-q", cwd=g0)
        got = interleaved(
            {
                "r": lambda r0=r0: run([REEL, "gc", "--prune=now"], fresh(r0), env=env),
                "g": lambda g0=g0: run(["git", "gc", "--prune=now", "-q"], fresh(g0), env=git_env),
                "f": lambda r0=r0: run([sys.executable, str(FLOOR_GC)], fresh(r0), env=env),
            },
            repeat,
        )
        line(f"{n} objects", got)
        grow = {k: (med(got[k], 0) - med(empty[k], 0)) * 1e6 / n for k in "rgf"}
        more = " ".join(f"{k} +{(med(got[k], 2) - med(empty[k], 2)) / 1024:.1f}" for k in "rgf")
        print(
            f"{'  less the empty store, per object':<34} reel {grow['r']:5.2f} us  git {grow['g']:5.2f} us  "
            f"floor {grow['f']:5.2f} us  reel/git {grow['r'] / grow['g']:5.2f}x  "
            f"floor/git {grow['f'] / grow['g']:5.2f}x  RSS MB {more}",
            flush=True,
        )
        # What of the ratio is fixed cost: the same gc with git's empty-store cost in place of its own.
        total = {k: med(got[k], 0) for k in "rgf"}
        base = {k: med(empty[k], 0) for k in "rgf"}
        ratios[n] = {k: total[k] / total["g"] for k in "rf"}
        levelled[n] = {k: (total[k] - base[k] + base["g"]) / total["g"] for k in "rf"}
        print(
            f"{LEVELLED:<34} reel/git {levelled[n]['r']:5.2f}x (fixed cost +"
            f"{ratios[n]['r'] - levelled[n]['r']:4.2f}x)  floor/git {levelled[n]['f']:5.2f}x (fixed cost +"
            f"{ratios[n]['f'] - levelled[n]['f']:4.2f}x)",
            flush=True,
        )
    if len(ratios) > 1:
        # Flat means one ratio at every size: the spread is the largest ratio over the smallest.
        for k, who in (("r", "reel"), ("f", "floor")):
            seen = [ratios[n][k] for n in sizes]
            even = [levelled[n][k] for n in sizes]
            print(
                f"{'  ' + who + '/git from ' + str(sizes[0]) + ' to ' + str(sizes[-1]):<34} "
                + " ".join(f"{r:5.2f}x" for r in seen)
                + f"  spread {max(seen) / min(seen):4.2f}x (flat: 1.00x); "
                f"with git's empty-store cost "
                + " ".join(f"{r:5.2f}x" for r in even)
                + f"  spread {max(even) / min(even):4.2f}x",
                flush=True,
            )


FLOOR_SYNC = str(Path(__file__).resolve().parent / "floor_sync.py")
ZERO = "0" * 40


def sync_rows(tmp: Path, n: int, repeat: int) -> None:
    """Push, clone and incremental push over a path remote, each beside git and beside its floor
    (bench/floor_sync.py: python with the modules every reel process imports, and the git child the
    protocol needs: receive-pack taking the very pack reel sent, or upload-pack and the store's pack
    writer for clone). Bytecode cached, as an installed reel runs: one untimed push and clone first
    write it for every module they load."""
    print(f"== sync over a path remote, {n} objects (bytecode cached)")
    env = bytecode_env(True)
    imports = "import click, blake3, zstandard, msgpack, sqlite3"
    start = interleaved({"s": lambda: run([sys.executable, "-c", imports], tmp)}, repeat)
    row("(floor's start-up: python -c 'import click, …')", start["s"], None)
    r = tmp / "y-reel"
    reel_store(r, n)
    g = git_repo(tmp / "y-git", n)
    counter = iter(range(10**6))
    ref = "refs/reel/heads/main"
    git_init(tmp / "y-warm")
    subprocess.run([REEL, "remote", "add", "warm", str(tmp / "y-warm")], cwd=r, check=True, env=env)
    subprocess.run([REEL, "push", "warm"], cwd=r, check=True, capture_output=True, env=env)
    subprocess.run(
        [REEL, "clone", str(tmp / "y-warm"), str(tmp / "y-warm-clone")],
        cwd=tmp,
        check=True,
        capture_output=True,
        env=env,
    )

    def reel_push() -> tuple[float, float, int]:
        k = next(counter)
        git_init(tmp / f"y-remote-{k}")
        subprocess.run([REEL, "remote", "add", f"r{k}", str(tmp / f"y-remote-{k}")], cwd=r, check=True, env=env)
        return run([REEL, "push", f"r{k}"], r, env=env)

    def git_push() -> tuple[float, float, int]:
        remote = tmp / f"y-gremote-{next(counter)}"
        git_init(remote)
        return run(["git", "push", "-q", str(remote), "main"], g)

    def floor_push() -> tuple[float, float, int]:
        sent = tmp / "y-remote-0"  # the first reel push, made before the first floor run
        pack = next((sent / "objects" / "pack").glob("*.pack"))
        remote = tmp / f"y-fremote-{next(counter)}"
        git_init(remote)
        commit = git("rev-parse", ref, cwd=sent).decode().strip()
        return run([sys.executable, FLOOR_SYNC, "push", str(remote), ref, ZERO, commit, str(pack)], tmp)

    def dulwich_push() -> tuple[float, float, int]:
        remote = tmp / f"y-dremote-{next(counter)}"
        git_init(remote)
        return run([sys.executable, "-c", DULWICH_PUSH, str(g), str(remote)], tmp)

    got = interleaved({"r": reel_push, "g": git_push, "f": floor_push, "d": dulwich_push}, repeat)
    row("full push", got["r"], got["g"], got["f"])
    floor_ratio("full push", got)
    dulwich_ratio("full push", got)
    remote, gremote = tmp / "y-remote-base", tmp / "y-gremote-base"
    git_init(remote)
    git_init(gremote)
    subprocess.run([REEL, "remote", "add", "base", str(remote)], cwd=r, check=True, env=env)
    subprocess.run([REEL, "push", "base"], cwd=r, check=True, capture_output=True, env=env)
    git("push", "-q", str(gremote), "main", cwd=g)
    tip = git("rev-parse", ref, cwd=remote).decode().strip()
    got = interleaved(
        {
            "r": lambda: run([REEL, "clone", str(remote), str(tmp / f"y-clone-{next(counter)}")], tmp, env=env),
            "g": lambda: run(
                ["git", "clone", "-q", "--bare", str(gremote), str(tmp / f"y-gclone-{next(counter)}")], tmp
            ),
            "n": lambda: run(
                ["git", "clone", "-q", "--bare", "--no-local", str(gremote), str(tmp / f"y-gclone-{next(counter)}")],
                tmp,
            ),
            "f": lambda: run(
                [sys.executable, FLOOR_SYNC, "clone", str(remote), tip, str(tmp / f"y-fclone-{next(counter)}")], tmp
            ),
            "d": lambda: run(
                [sys.executable, "-c", DULWICH_CLONE, str(gremote), str(tmp / f"y-dclone-{next(counter)}")], tmp
            ),
        },
        repeat,
    )
    row("clone (git: local, hard links)", got["r"], got["g"])
    row("clone (git: --no-local, packs and indexes)", got["r"], got["n"], got["f"])
    floor_ratio("clone", {"f": got["f"], "g": got["n"]})
    dulwich_ratio("clone", {"r": got["r"], "g": got["n"], "d": got["d"]})
    row("  of which the store's pack write alone", pack_write_alone(tmp, r, repeat), None)
    print("(incremental push: 10 new objects onto the remote above)")
    samples: dict[str, list[tuple]] = {"r": [], "g": [], "f": [], "c": [], "d": []}
    modules = tmp / "y-push-modules.txt"
    _add_ten(r, repeat)  # one untimed push first, to list the reelstore modules a push loads
    subprocess.run(
        [sys.executable, "-c", _LIST_MODULES, str(modules), "push", "base"],
        cwd=r,
        check=True,
        capture_output=True,
        env=env,
    )
    for k in range(repeat):
        _add_ten(r, k)
        before, before_code = tmp / f"y-fincr-{k}", tmp / f"y-fincr-code-{k}"
        shutil.copytree(remote, before, symlinks=True)
        shutil.copytree(remote, before_code, symlinks=True)
        old = git("rev-parse", ref, cwd=remote).decode().strip()
        samples["r"].append(run([REEL, "push", "base"], r, env=env))
        new = git("rev-parse", ref, cwd=remote).decode().strip()
        pack = tmp / f"y-fincr-{k}.pack"
        pack.write_bytes(
            git("pack-objects", "--revs", "--stdout", "--window=0", "-q", cwd=remote, input=f"{new}\n^{old}\n".encode())
        )
        samples["f"].append(run([sys.executable, FLOOR_SYNC, "push", str(before), ref, old, new, str(pack)], tmp))
        samples["c"].append(
            run(
                [sys.executable, FLOOR_SYNC, "push", str(before_code), ref, old, new, str(pack), str(modules)],
                tmp,
                env=env,
            )
        )
        blobs = [b"extra %d %d" % (k, i) for i in range(10)]
        stream = fast_import_blobs(blobs) + b"commit refs/heads/main\ncommitter b <b@x> 1 +0000\ndata 4\nmore\n"
        stream += b"from refs/heads/main^0\n" + b"".join(b"M 100644 :%d x/%d/%d\n" % (i + 1, k, i) for i in range(10))
        git("fast-import", "--quiet", cwd=g, input=stream + b"\n")
        dremote = tmp / f"y-dincr-{k}"  # the git remote as it is before git's push, for dulwich's
        shutil.copytree(gremote, dremote, symlinks=True)
        samples["g"].append(run(["git", "push", "-q", str(gremote), "main"], g, env={**os.environ, **GIT_ENV}))
        samples["d"].append(run([sys.executable, "-c", DULWICH_PUSH, str(g), str(dremote)], tmp))
    row("incremental push of 10 objects", samples["r"], samples["g"], samples["f"])
    floor_ratio("incremental push", samples)
    dulwich_ratio("incremental push", samples)
    count = len(modules.read_text().split())
    code, gmed = med(samples["c"], 0), max(med(samples["g"], 0), 1e-6)
    print(
        f"  incremental push: floor + loading the {count} reelstore modules a push loads (none of them run) "
        f"{code * 1000:.1f} ms = {code / gmed:.2f}x git; reel/that {med(samples['r'], 0) / code:.2f}x",
        flush=True,
    )


_LIST_MODULES = (
    "import atexit, sys\nout = sys.argv.pop(1)\n"
    "names = lambda: '\\n'.join(m for m in sys.modules if m.startswith('reelstore'))\n"
    "atexit.register(lambda: open(out, 'w').write(names()))\n"
    "from reelstore.cli.main import main\nsys.argv[0] = 'reel'\nmain()\n"
)
"""`reel <args>` that writes, as it exits, the reelstore modules it loaded to the file named first."""


def _add_ten(store: Path, k: int) -> None:
    """Ten new blobs under `x/<k>/` in a new record on the store's trunk (an incremental push's load)."""
    repo = Repo.open(store)
    extra = [Blob(b"extra %d %d" % (k, i)) for i in range(10)]
    repo.objects.put_many(extra)
    head = repo.refs["refs/heads/main"]
    top = repo.objects.get_as(head, Record)
    root = Namespace(repo.objects).update(top.namespace, {f"x/{k}/{i}": b.id for i, b in enumerate(extra)})
    rec = Record(parent=head, namespace=root, effects=None, view=None, author="bench", message="more", time=k + 1)
    repo.objects.put(rec)
    repo.refs.set("refs/heads/main", rec.id, head, message="bench")


def pack_write_alone(tmp: Path, store: Path, repeat: int) -> list[tuple]:
    """CPU of the store's pack writer alone (`write_pack`, in this process) on every object of `store`:
    the part of a clone (and of the clone floor) that stores what was received."""
    from reelstore.backend.packs.pack_item import PackItem
    from reelstore.backend.packs.pack_write import write_pack

    repo = Repo.open(store)
    items = [(h, repo.objects.get_raw(h)) for h in repo.objects]
    out = []
    for k in range(repeat):
        start = time.process_time()
        write_pack(tmp / f"y-packwrite-{k}", (PackItem(h, raw, 0) for h, raw in items))
        out.append((time.process_time() - start, 0.0, 0))
    return out


def floor_ratio(title: str, got: dict[str, list[tuple]]) -> None:
    """The floor beside git: how far below git's own figure the floor already is (or above it)."""
    print(
        f"  {title}: floor/git {med(got['f'], 0) / max(med(got['g'], 0), 1e-6):5.2f}x "
        "(floor: python + click + blake3/zstandard/msgpack/sqlite3 + the git child; bench/floor_sync.py)",
        flush=True,
    )


def dulwich_ratio(title: str, got: dict[str, list[tuple]]) -> None:
    """dulwich, the pure-Python git, doing the same transfer in its own process (its porcelain, started as
    reel is): where Python itself sits against git, beside reel."""
    d = med(got["d"], 0)
    print(
        f"  {title}: dulwich {d * 1000:.1f} ms cpu ({med(got['d'], 1) * 1000:.1f} wall)  "
        f"dulwich/git {d / max(med(got['g'], 0), 1e-6):5.2f}x  reel/dulwich {med(got['r'], 0) / d:5.2f}x",
        flush=True,
    )


DULWICH_PUSH = (
    "import io, sys\nfrom dulwich import porcelain\n"
    "porcelain.push(sys.argv[1], sys.argv[2], [b'refs/heads/main'], outstream=io.BytesIO(), "
    "errstream=io.BytesIO())"
)
DULWICH_CLONE = (
    "import io, sys\nfrom dulwich import porcelain\n"
    "porcelain.clone(sys.argv[1], sys.argv[2], bare=True, errstream=io.BytesIO()).close()"
)
"""dulwich's push and bare clone over a path remote, as `python -c` (its porcelain prints nothing here)."""


SECTIONS = ("startup", "batch", "gc", "sync")


def main(argv: list[str]) -> None:
    quick, big = "--quick" in argv, "--big" in argv
    only = set(SECTIONS)
    if "--only" in argv:
        only = set(argv[argv.index("--only") + 1].split(","))
        if not only <= set(SECTIONS):
            sys.exit(f"--only takes a comma-separated list of {', '.join(SECTIONS)}")
    n = 2_000 if quick else 20_000
    repeat = 1 if quick else 5
    with scratch() as tmp:
        if "startup" in only:
            startup(tmp, 3 if quick else 15)
        if "batch" in only:
            batch(tmp, n, repeat)
        if "gc" in only:
            gc_rows(tmp, [500, 2_000] if quick else [5_000, 20_000] + ([80_000] if big else []), 1 if quick else 3)
        if "sync" in only:
            sync_rows(tmp, n, repeat)


if __name__ == "__main__":
    main(sys.argv[1:])
