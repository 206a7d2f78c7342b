"""Goodput under failures: YOCO live migration vs checkpoint-restart vs TorchFT vs plain torchrun.

    .venv/bin/pip install -e ".[bench]"     # the peers (torchft); or YOCO_BENCH=1 bash .ci/setup
    .venv/bin/python bench/goodput.py [--repeats 5] [--steps 560] [--failures 6] [--timeout 300]
                                      [--budget-min M]  # whole rounds that fit in M minutes

One training job (agent/examples/gpt.py's transformer, its optimizer, schedule, synthetic data
and seed; a small configuration so that it runs on 2 CPU cores) for a fixed number of steps on
2 workers, run by each system under the same seeded failure schedule: a SIGKILL of one worker
process (the rank drawn from the seed) each time the job first reaches step K, 2K, ... (K =
steps // (failures + 1)), each jittered by up to ±K/3 steps (seeded) so the failures do not line
up with checkpoint boundaries.

* ``yoco``: bench/yoco_train.py under ``yoco-agent run --workers 2 --spares F`` (one spare per
  failure: spares are not replenished within a run).
* ``checkpoint_restart``: bench/ckpt_restart_train.py under ``torchrun --max-restarts``: plain
  DDP, a torch.distributed.checkpoint every C steps, C from the Young/Daly rule
  (bench.savings_model.young_daly_interval_hours) with the checkpoint cost measured in a short
  calibration run and the schedule's failure interval as the MTTF; every failure restarts the
  whole job from the newest checkpoint.
* ``torchft``: bench/torchft_train.py, one replica group (one process under its own
  ``torchrun --max-restarts``) per worker, the lighthouse on 127.0.0.1 (on a port it binds
  itself) with a 1 s heartbeat timeout, like YOCO's.
* ``torchrun``: bench/ckpt_restart_train.py without checkpoints under plain torchrun, without
  failures: the job as it runs with no fault tolerance at all (the reference).

Every system also runs once without failures per round. Each configuration runs ``--repeats``
times, interleaved (round-robin, each round in a rotated order) so that a change in machine load
hits all alike; every figure is reported as median, min and max over the repeats, and targets
are judged on medians. Per system: wall time and tokens/s with failures, the same without
failures, time to first step (launch to the first completed training step, in the failure-free
run), steps recomputed, ETTR (productive time — the steps at the system's own failure-free step
time, checkpoint writes excluded — over wall time) and time lost per failure, against the
system's own failure-free run of the same round and against plain torchrun's.

Every training script publishes its progress the same way (ckpt_restart_train.Progress: pid,
start step, steps done, when its first step completed), and the benchmark reads it every 20 ms.
A missing peer, or any run that fails or exceeds its timeout, fails the whole benchmark with a
message and a non-zero exit: no partial result is written. Every process it starts (and their
children) is killed after each run, on error, on timeout and on Ctrl-C.
Writes bench/results/goodput.json; render with bench/render.py. Run it twice in a row and
`bench/reproduce.py goodput FIRST.json` records whether the two runs' ranges overlap.
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
from itertools import count
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.common import Processes, git_commit, interleaved, spreads, wait_until, write_result  # noqa: E402
from bench.savings_model import young_daly_interval_hours  # noqa: E402

PY = sys.executable
WORLD = 2
MODEL = ["--dim", "64", "--layers", "2", "--heads", "4", "--seq", "32", "--batch", "8"]
TOKENS_PER_STEP = WORLD * 8 * 32  # world × batch × seq
POLL_S = 0.02
SYSTEMS = ("yoco", "checkpoint_restart", "torchft", "torchrun")


def log(msg: str) -> None:
    print(f"[goodput {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class BenchmarkError(RuntimeError):
    """A run that failed: the benchmark stops and writes nothing."""


def missing_peers() -> list[str]:
    """What the comparison needs and is not installed (the [bench] extra)."""
    missing = []
    if importlib.util.find_spec("torchft") is None:
        missing.append("torchft (the torchft-nightly package)")
    return missing


# --------------------------------------------------------------------------- one run


class Run:
    """Watches one job through its progress files, fires the failure schedule, times it."""

    def __init__(self, name: str, procs: Processes, progress: Path, steps: int, schedule, timeout):
        self.name, self.procs, self.progress, self.steps = name, procs, progress, steps
        self.schedule, self.timeout_s = list(schedule), timeout
        self.kills: list[dict] = []
        self.killed: set[int] = set()
        self.recomputed_by_restart = 0
        self.first_step_at: float | None = None  # wall clock, from the training processes
        self.t_first: float | None = None
        self.t_last: float | None = None
        self.first_step = self.high = 0

    def ranks(self) -> dict[int, dict]:
        out = {}
        for path in self.progress.glob("rank*.json"):
            try:
                out[int(path.stem[4:])] = json.loads(path.read_text())
            except (OSError, ValueError):
                pass  # replaced while read: next poll
        return out

    def watch(self, top: list[subprocess.Popen]) -> dict:
        launched = time.time()
        t0 = time.monotonic()
        starts: dict[int, tuple[int, int]] = {}  # rank -> (pid, start step) last seen
        last_report = 0.0
        while any(p.poll() is None for p in top):
            now = time.monotonic()
            if now - t0 > self.timeout_s:
                raise BenchmarkError(f"{self.name}: not finished after {self.timeout_s:.0f} s")
            ranks = self.ranks()
            for rank, info in ranks.items():
                self.procs.remember(info["pid"])
                if starts.get(rank, (None,))[0] != info["pid"]:
                    if rank in starts and rank == min(ranks):  # a restarted job: count once
                        self.recomputed_by_restart += max(0, self.high - info["start"])
                    starts[rank] = (info["pid"], info["start"])
                if "first_step_at" in info:
                    first = info["first_step_at"]
                    self.first_step_at = min(first, self.first_step_at or first)
            step = max((info["step"] for info in ranks.values()), default=0)
            if step >= 1 and self.t_first is None:
                self.t_first, self.first_step = now, step
            if step > self.high:
                self.t_last, self.high = now, step
            self._fire(ranks, step, now - t0)
            if now - last_report > 10:
                log(f"{self.name}: step {step}/{self.steps}, {now - t0:.0f} s")
                last_report = now
            time.sleep(POLL_S)
        wall = time.monotonic() - t0
        codes = [p.returncode for p in top]
        if any(codes):
            raise BenchmarkError(f"{self.name}: exit codes {codes}")
        if self.first_step_at is None or self.high <= self.first_step:
            raise BenchmarkError(f"{self.name}: no training progress seen")
        return {
            "wall_s": wall,
            "time_to_first_step_s": self.first_step_at - launched,
            "failures_injected": len(self.kills),
            "kills": self.kills,
            "steady_s": self.t_last - self.t_first,
            "steady_steps": self.high - self.first_step,
        }

    def _fire(self, ranks: dict[int, dict], step: int, elapsed: float) -> None:
        if not self.schedule or self.high < self.schedule[0][0]:
            return
        at, rank = self.schedule[0]
        info = ranks.get(rank)
        # a live process that is not one already killed (an unreaped zombie still answers
        # signal 0); a target that is down (restarting) is waited for
        if info and info["step"] >= at and info["pid"] not in self.killed and _alive(info["pid"]):
            self.killed.add(info["pid"])
            os.kill(info["pid"], signal.SIGKILL)
            self.kills.append({"step": info["step"], "rank": rank, "t_s": round(elapsed, 3)})
            log(f"{self.name}: SIGKILL rank {rank} (pid {info['pid']}) at step {step}")
            self.schedule.pop(0)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _torchrun(nproc: int, restarts: int, script: str) -> list[str]:
    return [
        PY, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
        "--max-restarts", str(restarts), "--monitor-interval", "0.1", script,
    ]  # fmt: skip


class Systems:
    """How each system runs the job; every run gets a fresh directory under `work`."""

    def __init__(self, args, procs: Processes, work: Path):
        self.args, self.procs, self.work = args, procs, work
        self.ids = count()
        self.restarts = 3 * args.failures + 3
        self.every = 0  # checkpoint-restart's interval, set by calibrate()

    def _dir(self, name: str) -> Path:
        d = self.work / f"{next(self.ids):03d}_{name}"
        d.mkdir()
        return d

    def _job_args(self, steps: int, progress: Path) -> list[str]:
        return ["--steps", str(steps), "--seed", str(self.args.seed),
                "--progress-dir", str(progress), *MODEL]  # fmt: skip

    def run(self, name: str, schedule, start: Callable[[Path], list[subprocess.Popen]], steps):
        d = self._dir(name.replace("/", "_"))
        run = Run(name, self.procs, d / "progress", steps, schedule, self.args.timeout)
        try:
            result = run.watch(start(d))
        except BenchmarkError as error:
            raise BenchmarkError(f"{error}; logs in {d}: {_last_error(d)}") from None
        finally:
            self.procs.kill_all()
        result["steps_recomputed"] = run.recomputed_by_restart
        result["final"] = run.ranks()
        result["dir"] = d
        return result

    def yoco(self, schedule) -> dict:
        def start(d: Path):
            argv = [
                PY, "-m", "agent.cli", "run", "--workers", str(WORLD),
                "--spares", str(self.args.failures), "--events", str(d / "events.jsonl"),
                "--status-file", str(d / "status.json"), "--job", d.name, "--",
                PY, "bench/yoco_train.py", *self._job_args(self.args.steps, d / "progress"),
            ]  # fmt: skip
            return [self.procs.start(argv, d / "log.txt")]

        result = self.run(f"yoco/{_tag(schedule)}", schedule, start, self.args.steps)
        lost = redone = 0
        downtime = []
        for line in (result.pop("dir") / "events.jsonl").read_text().splitlines():
            event = json.loads(line)
            data = event.get("data", {})
            if event["type"] in ("io.yoco.migration.completed", "io.yoco.checkpoint.restored"):
                lost += data.get("steps_lost", 0)
                redone += 1 if data.get("recompute_ms") else 0
            elif event["type"] == "io.yoco.job.resumed":
                downtime.append(data.get("downtime_ms"))
        result.pop("final")
        result.update(
            steps_recomputed=lost + redone,
            steps_lost=lost,
            in_flight_steps_redone=redone,
            recovery_downtime_ms=downtime,
        )
        return result

    def checkpoint_restart(self, schedule, every=None, steps=None, name="checkpoint_restart"):
        every = self.every if every is None else every
        steps = steps or self.args.steps

        def start(d: Path):
            argv = [
                *_torchrun(WORLD, self.restarts, "bench/ckpt_restart_train.py"),
                "--ckpt-dir", str(d / "ckpt"), "--ckpt-every", str(every),
                *self._job_args(steps, d / "progress"),
            ]  # fmt: skip
            return [self.procs.start(argv, d / "log.txt")]

        result = self.run(f"{name}/{_tag(schedule)}", schedule, start, steps)
        result.pop("dir")
        final = result.pop("final")
        result.update(
            checkpoint_s_last_attempt=max(r.get("ckpt_s", 0.0) for r in final.values()),
            checkpoints_last_attempt=sum(
                1 for s in range(final[0]["start"] + 1, steps) if every and s % every == 0
            ),
        )
        return result

    def torchrun(self) -> dict:
        return self.checkpoint_restart([], every=0, name="torchrun")

    def torchft(self, schedule) -> dict:
        def start(d: Path):
            # The lighthouse binds a free port itself and writes its address (no port race).
            address = d / "lighthouse.address"
            self.procs.start(
                [PY, "bench/torchft_train.py", "lighthouse", str(address)], d / "lighthouse.txt"
            )
            lighthouse = wait_until(
                lambda: address.exists() and address.read_text(), 60, "torchft lighthouse"
            )
            top = []
            for group in range(WORLD):
                argv = [
                    *_torchrun(1, self.restarts, "bench/torchft_train.py"),
                    *self._job_args(self.args.steps, d / "progress"),
                ]
                env = {
                    "REPLICA_GROUP_ID": str(group),
                    "NUM_REPLICA_GROUPS": str(WORLD),
                    "TORCHFT_LIGHTHOUSE": lighthouse,
                }
                top.append(self.procs.start(argv, d / f"group{group}.txt", env))
            return top

        result = self.run(f"torchft/{_tag(schedule)}", schedule, start, self.args.steps)
        result.pop("dir")
        final = result.pop("final")
        # torchft rolls nothing back: a step whose all-reduce broke is discarded (not committed)
        # and run again; the steps a dead group missed are made up by running more short-handed
        # steps, which shows as wall time, not as recomputation.
        result.update(
            steps_recomputed=max(r.get("aborted", 0) for r in final.values()),
            torchft_steps=max(r.get("ft_step", 0) for r in final.values()),
        )
        return result

    def calibrate(self, kill_every: int) -> dict:
        """Checkpoint cost and step time from a short run, then the Young/Daly interval."""
        calib_steps, calib_every = 60, 10
        calib = self.checkpoint_restart([], every=calib_every, steps=calib_steps)
        cost_s = calib["checkpoint_s_last_attempt"] / max(1, calib["checkpoints_last_attempt"])
        step_s = (calib["steady_s"] - calib["checkpoint_s_last_attempt"]) / max(
            1, calib["steady_steps"]
        )
        mttf_s = kill_every * step_s
        interval_h = float(young_daly_interval_hours(cost_s, mttf_s / 3600))
        self.every = max(1, round(interval_h * 3600 / step_s))
        return {
            "cost_s": round(cost_s, 4),
            "step_s": round(step_s, 4),
            "mttf_s": round(mttf_s, 2),
            "young_daly_interval_s": round(interval_h * 3600, 3),
            "interval_steps": self.every,
            "intervals_per_failure": round(kill_every / self.every, 2),
        }


def _tag(schedule) -> str:
    return "failures" if schedule else "failure_free"


def _last_error(logs: Path) -> str:
    """The last line of the run's logs that names an error."""
    found = "no error line in the logs"
    for path in sorted(logs.glob("*.txt")):
        for line in path.read_text(errors="replace").splitlines():
            if "Error" in line or "error" in line or "failed" in line:
                found = line.strip(" │")[:300]
    return found


# --------------------------------------------------------------------------- figures


def per_round(ff: dict, failed: dict | None, torchrun: dict, steps: int) -> dict:
    """The figures of one round of one system."""
    step_s = (ff["steady_s"] - ff.get("checkpoint_s_last_attempt", 0.0)) / max(
        1, ff["steady_steps"]
    )
    tokens = steps * TOKENS_PER_STEP
    out = {
        "failure_free_wall_s": ff["wall_s"],
        "failure_free_tokens_per_s": tokens / ff["wall_s"],
        "time_to_first_step_s": ff["time_to_first_step_s"],
        "step_s": step_s,
    }
    if failed is None:  # plain torchrun: no failures survived
        return out
    landed = failed["failures_injected"]
    out.update(
        wall_s=failed["wall_s"],
        tokens_per_s=tokens / failed["wall_s"],
        failures_injected=landed,
        steps_recomputed=failed["steps_recomputed"],
        ettr=steps * step_s / failed["wall_s"],
        failure_free_ettr=steps * step_s / ff["wall_s"],
        time_lost_per_failure_s=(failed["wall_s"] - ff["wall_s"]) / max(1, landed),
        time_lost_per_failure_vs_torchrun_s=(failed["wall_s"] - torchrun["wall_s"])
        / max(1, landed),
        wall_vs_torchrun=failed["wall_s"] / torchrun["wall_s"],
        time_to_first_step_vs_torchrun=ff["time_to_first_step_s"]
        / torchrun["time_to_first_step_s"],
    )
    return out


def summarise(raw: dict[str, list[dict]], steps: int) -> dict:
    systems = {}
    torchrun_runs = raw["torchrun/failure_free"]
    for name in SYSTEMS:
        rounds = []
        for i, torchrun in enumerate(torchrun_runs):
            failed = raw[f"{name}/failures"][i] if name != "torchrun" else None
            rounds.append(per_round(raw[f"{name}/failure_free"][i], failed, torchrun, steps))
        systems[name] = spreads(rounds)
    return systems


def _median(systems: dict, name: str, figure: str):
    return systems.get(name, {}).get(figure, {}).get("median")


def targets(systems: dict) -> dict:
    """The targets, judged on the medians over the repeats."""
    out = {}
    wall = _median(systems, "yoco", "wall_s")
    ff = _median(systems, "yoco", "failure_free_wall_s")
    ratio = wall / ff if wall and ff else None
    out["yoco_wall_within_5pct_of_failure_free"] = _target(ratio, "≤ 1.05", 1.05)
    mine = _median(systems, "yoco", "time_to_first_step_s")
    base = _median(systems, "torchrun", "time_to_first_step_s")
    ratio = mine / base if mine and base else None
    out["yoco_time_to_first_step_within_10pct_of_torchrun"] = _target(ratio, "≤ 1.10", 1.10)
    for other, limit, label in (("checkpoint_restart", 5, "1/5"), ("torchft", 3, "1/3")):
        mine = _median(systems, "yoco", "time_lost_per_failure_s")
        base = _median(systems, other, "time_lost_per_failure_s")
        ratio = mine / base if mine is not None and base and base > 0 else None
        out[f"yoco_lost_per_failure_vs_{other}"] = _target(ratio, f"≤ {label}", 1 / limit)
    return out


def _target(value: float | None, text: str, limit: float) -> dict:
    return {
        "value": None if value is None else round(value, 4),
        "target": text,
        "met": None if value is None else value <= limit,
    }


def _schedule(args) -> tuple[int, list[tuple[int, int]]]:
    every = args.steps // (args.failures + 1)
    rng = random.Random(args.seed)
    # Failures strike anywhere between checkpoints: each kill step is jittered by up to ±K/3
    # (seeded), so it does not line up with checkpoint-restart's interval.
    return every, [
        (every * (i + 1) + rng.randint(-(every // 3), every // 3), rng.randrange(WORLD))
        for i in range(args.failures)
    ]


# --------------------------------------------------------------------------- main


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--steps", type=int, default=560)
    p.add_argument("--failures", type=int, default=6)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=5, help="runs of each configuration")
    p.add_argument("--timeout", type=float, default=300, help="seconds per run")
    p.add_argument(
        "--budget-min", type=float, help="start no round that would end past this (minutes)"
    )
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    p.add_argument("--output", type=Path, help="default bench/results/goodput.json")
    args = p.parse_args()

    commit = git_commit()  # the code measured, before anything can change the work tree
    missing = missing_peers()
    if missing:
        sys.exit(
            f"goodput: cannot compare without {', '.join(missing)}: install the peers with "
            '`.venv/bin/pip install -e ".[bench]"` (or `YOCO_BENCH=1 bash .ci/setup`)'
        )
    every, schedule = _schedule(args)
    log(f"{args.steps} steps, {WORLD} workers, {args.repeats} repeats, a SIGKILL every {every} "
        f"steps: {schedule}")  # fmt: skip

    def on_signal(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    procs = Processes()
    work = Path(tempfile.mkdtemp(prefix="yoco-goodput-"))
    systems = Systems(args, procs, work)
    started = time.monotonic()
    keep = args.keep
    try:
        checkpoint = systems.calibrate(every)
        log(f"checkpoint-restart: Young/Daly {checkpoint}")
        raw = interleaved(
            {
                "yoco/failure_free": lambda: systems.yoco([]),
                "yoco/failures": lambda: systems.yoco(schedule),
                "checkpoint_restart/failure_free": lambda: systems.checkpoint_restart([]),
                "checkpoint_restart/failures": lambda: systems.checkpoint_restart(schedule),
                "torchft/failure_free": lambda: systems.torchft([]),
                "torchft/failures": lambda: systems.torchft(schedule),
                "torchrun/failure_free": systems.torchrun,
            },
            args.repeats,
            log,
            args.budget_min * 60 if args.budget_min else None,
        )
    except BenchmarkError as error:
        keep = True
        sys.exit(f"goodput: FAILED, nothing written: {error}")
    except BaseException:
        keep = True
        raise
    finally:
        procs.kill_all()
        if keep:
            log(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    figures = summarise(raw, args.steps)
    repeats = len(raw["torchrun/failure_free"])  # fewer than asked if the budget cut it
    document = {
        "failures": args.failures,
        "repeats": repeats,
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
        "systems": figures,
        "targets": targets(figures),
        "definitions": {
            "median [min–max]": f"over {repeats} runs of each configuration, interleaved",
            "time_to_first_step_s": "launch to the first completed training step (failure-"
            "free run), as the training processes record it",
            "time_lost_per_failure_s": "(wall with failures − the system's own failure-free "
            "wall of the same round) / failures",
            "time_lost_per_failure_vs_torchrun_s": "(wall with failures − plain torchrun's "
            "failure-free wall of the same round) / failures",
            "ettr": "steps × the system's failure-free step time (checkpoint writes excluded) "
            "/ wall with failures",
            "steps_recomputed": "completed steps redone after a failure (rollback), plus "
            "in-flight steps run again",
        },
        "bench_wall_s": round(time.monotonic() - started, 1),
        "runs": {name: [_rounded(r) for r in runs] for name, runs in raw.items()},
    }
    path = write_result("goodput", document, commit, args.output)
    log(f"wrote {path}")
    print(json.dumps({"targets": document["targets"]}, indent=1, ensure_ascii=False))


def _rounded(run: dict) -> dict:
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in run.items()}


if __name__ == "__main__":
    main()
