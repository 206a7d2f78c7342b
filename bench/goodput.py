"""Goodput under failures: YOCO live migration vs checkpoint-restart vs TorchFT (issue 7).

    .venv/bin/python bench/goodput.py [--steps 560] [--failures 6] [--timeout 300]

One training job (agent/examples/gpt.py's transformer, its optimizer, schedule, synthetic data
and seed; a small configuration so that it runs on 2 CPU cores) for a fixed number of steps on
2 workers, run three ways under the same seeded failure schedule: a SIGKILL of one worker
process (the rank drawn from the seed) each time the job first reaches step K, 2K, ... (K =
steps // (failures + 1)), each jittered by up to ±K/3 steps (seeded) so the failures do not line
up with checkpoint boundaries.

* ``yoco``: ``yoco-agent run --workers 2 --spares F`` (one spare per failure: spares are not
  replenished within a run); the kill hits the worker's pid from the agent's ``--status-file``.
* ``checkpoint_restart``: bench/ckpt_restart_train.py under ``torchrun --max-restarts``: plain
  DDP, a torch.distributed.checkpoint every C steps, C from the Young/Daly rule
  (bench.savings_model.young_daly_interval_hours) with the checkpoint cost measured in a short
  calibration run and the schedule's failure interval as the MTTF; every failure restarts the
  whole job from the newest checkpoint.
* ``torchft``: bench/torchft_train.py, one replica group (one process under its own
  ``torchrun --max-restarts``) per worker, the lighthouse on 127.0.0.1. Needs torchft-nightly
  (installed on demand, see that file); if it cannot run, the result says why.

Each system also runs once without failures (its own baseline). Per system: wall time to finish,
steps recomputed, ETTR (productive time — the steps of the job at the system's own failure-free
step time, checkpoint writes excluded — over wall time), tokens/s, time lost per failure ((wall
− failure-free wall) / failures). The top-level ``failure_free_wall_s`` is YOCO's failure-free
run (the reference job). Writes bench/results/goodput.json; render with bench/render.py.

Every process it starts (and their children) is killed on exit, on timeout and on Ctrl-C.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.common import RESULTS, write_result  # noqa: E402
from bench.savings_model import young_daly_interval_hours  # noqa: E402

PY = sys.executable
WORLD = 2
MODEL = ["--dim", "64", "--layers", "2", "--heads", "4", "--seq", "32", "--batch", "8"]
TOKENS_PER_STEP = WORLD * 8 * 32  # world × batch × seq
POLL_S = 0.02


def log(msg: str) -> None:
    print(f"[goodput {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --------------------------------------------------------------------------- processes


class Processes:
    """Everything this benchmark started; kill_all() ends them and all their descendants."""

    def __init__(self) -> None:
        self.top: list[subprocess.Popen] = []
        self.seen: set[int] = set()

    def start(self, argv: list[str], logfile: Path, env: dict | None = None) -> subprocess.Popen:
        out = open(logfile, "ab")  # noqa: SIM115 - closed with the process
        full_env = {**os.environ, "PYTHONPATH": str(REPO), "YOCO_THREADS": "1", **(env or {})}
        proc = subprocess.Popen(
            argv, cwd=REPO, env=full_env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        out.close()
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
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for proc in self.top:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self.top.clear()
        self.seen.clear()


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


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


# --------------------------------------------------------------------------- one run


class Run:
    """Watches one job, fires the failure schedule, times it."""

    def __init__(
        self,
        name: str,
        procs: Processes,
        ranks: Callable[[], dict[int, dict]],
        steps: int,
        schedule: list[tuple[int, int]],
        timeout_s: float,
    ):
        self.name, self.procs, self.ranks, self.steps = name, procs, ranks, steps
        self.schedule, self.timeout_s = list(schedule), timeout_s
        self.kills: list[dict] = []
        self.killed: set[int] = set()
        self.recomputed_by_restart = 0
        self.t_first: float | None = None
        self.t_last: float | None = None
        self.first_step = self.high = 0

    def watch(self, top: list[subprocess.Popen], t0: float) -> float:
        high = 0
        starts: dict[int, tuple[int, int]] = {}  # rank -> (pid, start step) last seen
        last_report = 0.0
        while any(p.poll() is None for p in top):
            now = time.monotonic()
            if now - t0 > self.timeout_s:
                raise TimeoutError(f"{self.name}: not finished after {self.timeout_s:.0f} s")
            ranks = self.ranks()
            for rank, info in ranks.items():
                self.procs.remember(info["pid"])
                if "start" in info and starts.get(rank, (None,))[0] != info["pid"]:
                    if rank in starts and rank == min(ranks):  # a restarted job: count once
                        self.recomputed_by_restart += max(0, high - info["start"])
                    starts[rank] = (info["pid"], info["start"])
            step = max((info["step"] for info in ranks.values()), default=0)
            if step >= 1 and self.t_first is None:
                self.t_first, self.first_step = now, step
            if step > high:
                self.t_last, high = now, step
            self.high = high
            if self.schedule and high >= self.schedule[0][0]:
                at, rank = self.schedule[0]
                info = ranks.get(rank)
                # a live process that is not one already killed (an unreaped zombie still
                # answers signal 0); a target that is down (restarting) is waited for
                if (
                    info
                    and info["step"] >= at
                    and info["pid"] not in self.killed
                    and _alive(info["pid"])
                ):
                    self.killed.add(info["pid"])
                    os.kill(info["pid"], signal.SIGKILL)
                    self.kills.append({"step": info["step"], "rank": rank, "t_s": now - t0})
                    log(f"{self.name}: SIGKILL rank {rank} (pid {info['pid']}) at step {step}")
                    self.schedule.pop(0)
            if now - last_report > 10:
                log(f"{self.name}: step {step}/{self.steps}, {now - t0:.0f} s")
                last_report = now
            time.sleep(POLL_S)
        return time.monotonic() - t0


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _progress_reader(directory: Path) -> Callable[[], dict[int, dict]]:
    def read() -> dict[int, dict]:
        out = {}
        for path in directory.glob("rank*.json"):
            info = _read_json(path)
            if info:
                out[int(path.stem[4:])] = info
        return out

    return read


def _status_reader(path: Path) -> Callable[[], dict[int, dict]]:
    def read() -> dict[int, dict]:
        status = _read_json(path) or {}
        return {
            m["rank"]: {"pid": m["pid"], "step": m["step"] or 0}
            for m in status.get("members", [])
            if m.get("role") == "worker" and m.get("rank") is not None and m.get("pid")
        }

    return read


def _finish(run: Run, top: list[subprocess.Popen], wall: float, logs: Path) -> dict:
    codes = [p.returncode for p in top]
    if any(codes):
        raise RuntimeError(f"{run.name}: exit codes {codes}: {_last_error(logs)}")
    if run.t_first is None or run.high <= run.first_step:
        raise RuntimeError(f"{run.name}: no training progress seen; logs in {logs}")
    return {
        "wall_s": wall,
        "failures_injected": len(run.kills),
        "kills": run.kills,
        "steady_s": run.t_last - run.t_first,
        "steady_steps": run.high - run.first_step,
    }


def _last_error(logs: Path) -> str:
    """The last line of the run's logs that names an error (for the results)."""
    found = "no error line in the logs"
    for path in sorted(logs.glob("*.txt")):
        for line in path.read_text(errors="replace").splitlines():
            if "Error" in line or "error" in line or "failed" in line:
                found = line.strip(" │")[:300]
    return found


def run_yoco(args, procs: Processes, work: Path, schedule, tag: str) -> dict:
    d = work / f"yoco_{tag}"
    d.mkdir()
    status, events = d / "status.json", d / "events.jsonl"
    argv = [
        PY, "-m", "agent.cli", "run", "--workers", str(WORLD), "--spares", str(args.failures),
        "--events", str(events), "--status-file", str(status), "--job", f"goodput-{tag}",
        "--", PY, "agent/examples/gpt.py", "--steps", str(args.steps), "--seed", str(args.seed),
        *MODEL,
    ]  # fmt: skip
    run = Run(f"yoco/{tag}", procs, _status_reader(status), args.steps, schedule, args.timeout)
    t0 = time.monotonic()
    top = [procs.start(argv, d / "log.txt")]
    wall = run.watch(top, t0)
    result = _finish(run, top, wall, d)
    lost = recompute = 0
    downtime = []
    for line in events.read_text().splitlines():
        event = json.loads(line)
        data = event.get("data", {})
        if event["type"] == "io.yoco.migration.completed":
            lost += data.get("steps_lost", 0)
            recompute += 1 if data.get("recompute_ms") else 0
        elif event["type"] == "io.yoco.checkpoint.restored":
            lost += data.get("steps_lost", 0)
        elif event["type"] == "io.yoco.job.resumed":
            downtime.append(data.get("downtime_ms"))
    result.update(
        steps_recomputed=lost + recompute,
        steps_lost=lost,
        in_flight_steps_redone=recompute,
        recovery_downtime_ms=downtime,
    )
    return result


def run_ckpt_restart(args, procs, work: Path, schedule, tag: str, every: int, steps=None) -> dict:
    d = work / f"cr_{tag}"
    d.mkdir()
    steps = steps or args.steps
    argv = [
        PY, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(WORLD),
        "--max-restarts", str(3 * args.failures + 3), "--monitor-interval", "0.1",
        "bench/ckpt_restart_train.py", "--steps", str(steps), "--seed", str(args.seed),
        "--ckpt-dir", str(d / "ckpt"), "--ckpt-every", str(every),
        "--progress-dir", str(d / "progress"), *MODEL,
    ]  # fmt: skip
    reader = _progress_reader(d / "progress")
    run = Run(f"checkpoint_restart/{tag}", procs, reader, steps, schedule, args.timeout)
    t0 = time.monotonic()
    top = [procs.start(argv, d / "log.txt")]
    wall = run.watch(top, t0)
    result = _finish(run, top, wall, d)
    final = reader()
    result.update(
        steps_recomputed=run.recomputed_by_restart,
        checkpoint_s_last_attempt=max((r.get("ckpt_s", 0.0) for r in final.values()), default=0),
        checkpoints_last_attempt=sum(
            1 for s in range(final[0]["start"] + 1, steps) if every and s % every == 0
        ),
    )
    return result


def torchft_missing() -> str | None:
    if importlib.util.find_spec("torchft") is None:
        return (
            "torchft is not installed: pip install --no-deps torchft-nightly && pip install "
            "opentelemetry-api opentelemetry-sdk opentelemetry-exporter-otlp-proto-http"
        )
    if not (Path(PY).parent / "torchft_lighthouse").exists() and not shutil.which(
        "torchft_lighthouse"
    ):
        return "torchft is installed but its torchft_lighthouse binary is not on PATH"
    return None


def run_torchft(args, procs: Processes, work: Path, schedule, tag: str) -> dict:
    d = work / f"torchft_{tag}"
    d.mkdir()
    port = _free_port()
    lighthouse = str(Path(PY).parent / "torchft_lighthouse")
    if not Path(lighthouse).exists():
        lighthouse = shutil.which("torchft_lighthouse") or lighthouse
    procs.start(
        [lighthouse, "--min_replicas", "1", "--bind", f"127.0.0.1:{port}",
         "--heartbeat_timeout_ms", "1000", "--join_timeout_ms", "1000"],
        d / "lighthouse.txt",
    )  # fmt: skip
    reader = _progress_reader(d / "progress")
    run = Run(f"torchft/{tag}", procs, reader, args.steps, schedule, args.timeout)
    t0 = time.monotonic()
    top = []
    for group in range(WORLD):
        argv = [
            PY, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1",
            "--max-restarts", str(3 * args.failures + 3), "--monitor-interval", "0.1",
            "bench/torchft_train.py", "--steps", str(args.steps), "--seed", str(args.seed),
            "--progress-dir", str(d / "progress"), *MODEL,
        ]  # fmt: skip
        env = {
            "REPLICA_GROUP_ID": str(group),
            "NUM_REPLICA_GROUPS": str(WORLD),
            "TORCHFT_LIGHTHOUSE": f"http://127.0.0.1:{port}",
        }
        top.append(procs.start(argv, d / f"group{group}.txt", env))
    wall = run.watch(top, t0)
    result = _finish(run, top, wall, d)
    final = reader()
    # torchft rolls nothing back: a step whose all-reduce broke is discarded (not committed)
    # and run again; the steps a dead group missed are made up by running more short-handed
    # steps, which shows as wall time, not as recomputation.
    result.update(
        steps_recomputed=max((r.get("aborted", 0) for r in final.values()), default=0),
        torchft_steps=max((r.get("ft_step", 0) for r in final.values()), default=0),
    )
    return result


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- figures


def _summarise(name: str, ff: dict, failed: dict, steps: int, failures: int, common_ff: float):
    step_s = ff["steady_s"] - ff.get("checkpoint_s_last_attempt", 0.0)
    step_s /= max(1, ff["steady_steps"])
    productive = steps * step_s
    failures = failed["failures_injected"] or failures  # the kills that really happened
    lost = (failed["wall_s"] - ff["wall_s"]) / failures if failures else None
    return {
        "wall_s": round(failed["wall_s"], 2),
        "steps_recomputed": failed["steps_recomputed"],
        "ettr": round(productive / failed["wall_s"], 4),
        "tokens_per_s": round(steps * TOKENS_PER_STEP / failed["wall_s"], 1),
        "failure_free_wall_s": round(ff["wall_s"], 2),
        "failure_free_ettr": round(productive / ff["wall_s"], 4),
        "failure_free_tokens_per_s": round(steps * TOKENS_PER_STEP / ff["wall_s"], 1),
        "step_s": round(step_s, 4),
        "time_lost_per_failure_s": None if lost is None else round(lost, 2),
        "time_lost_per_failure_vs_reference_s": round((failed["wall_s"] - common_ff) / failures, 2),
        "failures_injected": failed["failures_injected"],
        "detail": {k: v for k, v in failed.items() if k not in ("wall_s", "steps_recomputed")},
    }


def targets(systems: dict, failure_free_wall_s: float) -> dict:
    out = {}
    yoco = systems.get("yoco", {})
    if "wall_s" in yoco:
        ratio = yoco["wall_s"] / failure_free_wall_s
        out["yoco_wall_within_5pct_of_failure_free"] = {
            "value": round(ratio, 4),
            "target": "≤ 1.05",
            "met": ratio <= 1.05,
        }
    for other, limit, label in (("checkpoint_restart", 5, "1/5"), ("torchft", 3, "1/3")):
        key = f"yoco_lost_per_failure_vs_{other}"
        theirs = systems.get(other, {})
        if "wall_s" not in yoco or "wall_s" not in theirs:
            out[key] = {"value": None, "target": f"≤ {label}", "met": None}
            continue
        mine, base = yoco["time_lost_per_failure_s"], theirs["time_lost_per_failure_s"]
        ratio = mine / base if base > 0 else None
        out[key] = {
            "value": None if ratio is None else round(ratio, 4),
            "target": f"≤ {label}",
            "met": (mine <= base / limit) if base > 0 else False,
        }
    return out


# --------------------------------------------------------------------------- main


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--steps", type=int, default=560)
    p.add_argument("--failures", type=int, default=6)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=300, help="seconds per run")
    p.add_argument("--systems", default="yoco,checkpoint_restart,torchft")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    p.add_argument(
        "--merge",
        action="store_true",
        help="keep the other systems' runs from the existing goodput.json (same config)",
    )
    args = p.parse_args()

    every = args.steps // (args.failures + 1)
    rng = random.Random(args.seed)
    # Failures strike anywhere between checkpoints: each kill step is jittered by up to ±K/3
    # (seeded), so it does not line up with checkpoint-restart's interval.
    schedule = [
        (every * (i + 1) + rng.randint(-(every // 3), every // 3), rng.randrange(WORLD))
        for i in range(args.failures)
    ]
    wanted = args.systems.split(",")
    log(f"{args.steps} steps, {WORLD} workers, a SIGKILL every {every} steps: {schedule}")

    procs = Processes()

    def on_signal(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    work = Path(tempfile.mkdtemp(prefix="yoco-goodput-"))
    raw: dict[str, dict] = {}
    systems: dict[str, dict] = {}
    checkpoint: dict = {}
    started = time.monotonic()
    try:

        def attempt(name: str, fn):
            ff = fn([], "failure_free")
            log(f"{name}: failure-free {ff['wall_s']:.1f} s")
            procs.kill_all()
            failed = fn(schedule, "failures")
            log(f"{name}: with {len(failed['kills'])} failures {failed['wall_s']:.1f} s")
            procs.kill_all()
            raw[name] = {"failure_free": ff, "failures": failed}

        def guarded(name: str, fn) -> None:
            if name not in wanted:
                return
            try:
                attempt(name, fn)
            except (TimeoutError, RuntimeError, OSError) as error:
                log(f"{name}: FAILED: {error}")
                systems[name] = {"error": str(error)}
                procs.kill_all()

        if "checkpoint_restart" in wanted:
            try:
                calib_steps, calib_every = 60, 10
                calib = run_ckpt_restart(
                    args, procs, work, [], "calibration", calib_every, steps=calib_steps
                )
                procs.kill_all()
                count = calib["checkpoints_last_attempt"]
                cost_s = calib["checkpoint_s_last_attempt"] / max(1, count)
                step_s = (calib["steady_s"] - calib["checkpoint_s_last_attempt"]) / max(
                    1, calib["steady_steps"]
                )
                mttf_s = every * step_s
                interval_h = young_daly_interval_hours(cost_s, mttf_s / 3600)
                interval = max(1, round(float(interval_h) * 3600 / step_s))
                checkpoint = {
                    "cost_s": round(cost_s, 4),
                    "step_s": round(step_s, 4),
                    "mttf_s": round(mttf_s, 2),
                    "young_daly_interval_s": round(float(interval_h) * 3600, 3),
                    "interval_steps": interval,
                    "intervals_per_failure": round(every / interval, 2),
                }
                log(f"checkpoint-restart: Young/Daly {checkpoint}")
            except (TimeoutError, RuntimeError, OSError) as error:
                systems["checkpoint_restart"] = {"error": f"calibration: {error}"}
                procs.kill_all()
            else:
                guarded(
                    "checkpoint_restart",
                    lambda s, tag: run_ckpt_restart(args, procs, work, s, tag, interval),
                )

        if "torchft" in wanted:
            missing = torchft_missing()
            if missing:
                systems["torchft"] = {"error": missing}
                log(f"torchft: {missing}")
            else:
                guarded("torchft", lambda s, tag: run_torchft(args, procs, work, s, tag))

        guarded("yoco", lambda s, tag: run_yoco(args, procs, work, s, tag))
    except KeyboardInterrupt:
        log("interrupted: ending every process started")
        procs.kill_all()
        raise
    finally:
        procs.kill_all()
        if args.keep:
            log(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    if args.merge and (RESULTS / "goodput.json").exists():
        previous = json.loads((RESULTS / "goodput.json").read_text())
        if previous.get("config", {}).get("steps") == args.steps:
            for name, runs in previous.get("runs", {}).items():
                if name not in wanted:
                    raw.setdefault(name, runs)
            for name, figures in previous.get("systems", {}).items():
                if name not in wanted and "error" in figures:
                    systems.setdefault(name, figures)
            checkpoint = checkpoint or previous.get("checkpoint", {})
    reference = raw.get("yoco", {}).get("failure_free", {}).get("wall_s")
    if reference is None:  # YOCO could not run: the other systems' own baselines only
        reference = min(r["failure_free"]["wall_s"] for r in raw.values()) if raw else 0.0
    for name, r in raw.items():
        systems[name] = _summarise(
            name, r["failure_free"], r["failures"], args.steps, args.failures, reference
        )
    order = ["yoco", "checkpoint_restart", "torchft"]
    systems = {k: systems[k] for k in order if k in systems}
    figures = {
        "failure_free_wall_s": round(reference, 2),
        "failures": args.failures,
        "config": {
            "steps": args.steps,
            "workers": WORLD,
            "model": " ".join(MODEL),
            "tokens_per_step": TOKENS_PER_STEP,
            "seed": args.seed,
            "kill_every_steps": every,
            "schedule": [{"step": s, "rank": r} for s, r in schedule],
        },
        "checkpoint": checkpoint,
        "systems": systems,
        "targets": targets(systems, reference),
        "definitions": {
            "failure_free_wall_s": "YOCO's run of the same job without failures (reference)",
            "time_lost_per_failure_s": "(wall with failures − the system's own failure-free "
            "wall) / failures",
            "ettr": "steps × the system's failure-free step time (checkpoint writes excluded) "
            "/ wall with failures",
            "steps_recomputed": "completed steps redone after a failure (rollback), plus "
            "in-flight steps run again",
        },
        "bench_wall_s": round(time.monotonic() - started, 1),
        "runs": raw,
    }
    path = write_result("goodput", figures)
    log(f"wrote {path}")
    print(json.dumps({"systems": systems, "targets": figures["targets"]}, indent=1)[:4000])


if __name__ == "__main__":
    main()
