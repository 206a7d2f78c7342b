"""Shared by the benchmarks: repeats and their spread, the processes a benchmark starts, where
results go and what machine and commit made them."""

from __future__ import annotations

import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"


# --------------------------------------------------------------------------- repeats


def interleaved(
    configurations: dict[str, Callable[[], dict]],
    repeats: int,
    log=print,
    budget_s: float | None = None,
) -> dict:
    """Run every configuration `repeats` times, round-robin (each round in a rotated order), so
    that a change in machine load hits every configuration alike. Returns name -> [result].
    With `budget_s`, no round starts that the slowest round so far says would end past it:
    fewer (whole) rounds, every configuration the same number of times."""
    names = list(configurations)
    results: dict[str, list[dict]] = {name: [] for name in names}
    started, slowest = time.monotonic(), 0.0
    for round_ in range(repeats):
        if budget_s is not None and time.monotonic() - started + slowest > budget_s:
            log(f"stopping after {round_} rounds: another would pass the {budget_s:g} s budget")
            break
        round_started = time.monotonic()
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            log(f"round {round_ + 1}/{repeats}: {name}")
            results[name].append(configurations[name]())
        slowest = max(slowest, time.monotonic() - round_started)
    return results


def spread(values: list[float], digits: int = 4) -> dict:
    """median, min and max of repeated measurements (the median is what targets judge)."""
    values = [v for v in values if v is not None]
    if not values:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {
        "median": round(statistics.median(values), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
        "n": len(values),
    }


def is_spread(value) -> bool:
    return isinstance(value, dict) and {"median", "min", "max"} <= value.keys()


def spreads(runs: list[dict], digits: int = 4) -> dict:
    """The spread of every number the runs have in common (nested dicts kept as dicts)."""
    out = {}
    for key, first in runs[0].items():
        values = [run.get(key) for run in runs]
        if isinstance(first, bool):
            continue
        if isinstance(first, int | float):
            out[key] = spread([float(v) for v in values if isinstance(v, int | float)], digits)
        elif isinstance(first, dict) and all(isinstance(v, dict) for v in values):
            nested = spreads(values, digits)
            if nested:
                out[key] = nested
    return out


def overlaps(a: dict, b: dict) -> bool:
    """Do two spreads' min–max ranges overlap?"""
    return a["min"] <= b["max"] and b["min"] <= a["max"]


# --------------------------------------------------------------------------- processes


class Processes:
    """Every process a benchmark started, each in a session of its own; kill_all() ends them and
    all their descendants (also those that started sessions of their own)."""

    def __init__(self) -> None:
        self.top: list[subprocess.Popen] = []
        self.seen: set[int] = set()

    def start(self, argv: list[str], logfile: Path, env: dict | None = None) -> subprocess.Popen:
        full_env = {**os.environ, "PYTHONPATH": str(REPO), "YOCO_THREADS": "1", **(env or {})}
        with open(logfile, "ab") as out:
            proc = subprocess.Popen(
                argv, cwd=REPO, env=full_env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self.top.append(proc)
        return proc

    def remember(self, pid: int) -> None:
        self.seen.add(pid)

    def kill_all(self) -> None:
        pids = set(self.seen)
        for proc in self.top:
            pids.add(proc.pid)
            pids |= descendants(proc.pid)
        for proc in self.top:
            _signal_group(proc.pid)
        for pid in pids:
            _signal_group(pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for proc in self.top:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.top.clear()
        self.seen.clear()


def _signal_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def wait_until(predicate: Callable[[], object], timeout_s: float, what: str, poll_s=0.02):
    """Poll until `predicate()` is truthy and return it; TimeoutError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout_s:g} s")
        time.sleep(poll_s)


# --------------------------------------------------------------------------- recovery


def kill_to_next_step(
    launcher_args: list[str], script: list[str], timeout_s: float, warm_steps: int = 4
) -> dict:
    """Run `script` under the real launcher (`yoco-agent run LAUNCHER_ARGS -- SCRIPT`), wait
    until it completed `warm_steps` steps with a spare ready, SIGKILL rank 1 and time until the
    job's next completed step. The script appends "step,time" to $YOCO_BENCH_MARKS after each
    completed step (every rank may: a step's time is its last rank's)."""
    from agent.launcher import kill_listed_processes

    tmp = Path(tempfile.mkdtemp(prefix="yoco-recovery-"))
    marks, status, events = tmp / "steps.log", tmp / "status.json", tmp / "events.jsonl"
    env = dict(os.environ, PYTHONPATH=str(REPO), YOCO_BENCH_MARKS=str(marks))
    command = [
        sys.executable, "-m", "agent.cli", "run", *launcher_args, "--events", str(events),
        "--status-file", str(status), "--heartbeat-timeout", "5", "--join-timeout",
        str(timeout_s), "--", *script,
    ]  # fmt: skip
    with open(tmp / "launcher.log", "wb") as out:
        launcher = subprocess.Popen(
            command, cwd=REPO, env=env, start_new_session=True, stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip

    def completed() -> dict[int, float]:
        """Each completed step's time (its last rank's mark)."""
        if launcher.poll() is not None:
            raise RuntimeError(f"the job ended early; see {tmp / 'launcher.log'}")
        done: dict[int, float] = {}
        for line in marks.read_text().split() if marks.exists() else []:
            step, t = line.split(",")
            done[int(step)] = max(done.get(int(step), 0.0), float(t))
        return done

    def spare_ready() -> bool:
        try:
            members = json.loads(status.read_text())["members"]
        except (OSError, ValueError, KeyError):
            return False
        return any(m["role"] == "spare" and m["ready"] for m in members)

    try:
        what = f"{warm_steps} steps with a spare ready"
        wait_until(lambda: len(completed()) >= warm_steps and spare_ready(), timeout_s, what)
        pid = next(m["pid"] for m in json.loads(status.read_text())["members"]
                   if m["role"] == "worker" and m["rank"] == 1)  # fmt: skip
        before = completed()
        killed = time.time()
        os.kill(pid, signal.SIGKILL)

        def resumed_and_stepped():
            text = events.read_text() if events.exists() else ""
            after = [t for step, t in completed().items() if step not in before and t > killed]
            return "job.resumed" in text and after

        after = wait_until(resumed_and_stepped, timeout_s, "the first step after the kill")
        resumed_at = next(
            datetime.fromisoformat(e["time"]).timestamp()
            for e in map(json.loads, events.read_text().splitlines())
            if e["type"].endswith("job.resumed")
        )
        ends = [before[k] for k in sorted(before)]
        gaps = sorted(b - a for a, b in zip(ends, ends[1:], strict=False))
        return {
            "kill_to_next_step_s": max(0.0, min(after) - killed),
            "kill_to_resumed_s": max(0.0, resumed_at - killed),
            "step_s": gaps[len(gaps) // 2],
        }
    finally:
        _signal_group(launcher.pid)
        launcher.wait(timeout=30)
        kill_listed_processes(status)


# --------------------------------------------------------------------------- results


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    try:
        import torch

        torch_version = torch.__version__
    except ImportError:
        torch_version = None
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(memory_gib, 1),
        "python": platform.python_version(),
        "torch": torch_version,
        "os": platform.platform(),
    }


def git_commit() -> str:
    """The commit measured; `+dirty` when the work tree had uncommitted changes; "" for a
    checkout copied without .git, or a host without git."""

    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=30
            ).stdout.strip()
        except OSError:
            return ""

    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/results")
    return git("rev-parse", "--short", "HEAD") + ("+dirty" if dirty else "")


def write_result(
    name: str, figures: dict, commit: str | None = None, path: Path | None = None
) -> Path:
    """Write bench/results/NAME.json (or `path`). `commit`: the one measured (git_commit()
    when the benchmark started); default now."""
    RESULTS.mkdir(exist_ok=True)
    path = path or RESULTS / f"{name}.json"
    document = {
        **figures,
        "machine": {**machine(), **figures.get("machine", {})},
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "git_commit": commit or git_commit(),
    }
    path.write_text(json.dumps(document, indent=2) + "\n")
    return path
