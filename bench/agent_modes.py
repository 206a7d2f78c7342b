"""Model-aware vs transparent mode, same model, same machine, interleaved (not a test).
Writes bench/results/agent_modes.json.

    .venv/bin/python bench/agent_modes.py [--hidden 512] [--steps 10 200 1000] [--repeats 5]

For every repeat, each mode in turn: 2 workers + one spare per kill step under the real
launcher; SIGKILL rank 1 after each kill step's number of completed steps (the next kill once
the job runs again), and measure
* recovery_s: SIGKILL -> the next completed step anywhere in the job (steps are marked by the
  training script itself, right after the optimizer update; a survivor cannot complete a step
  before the spare has joined its all-reduce),
* bytes: what the migration moved (the migration.completed event).
Transparent mode's spare runs the script's loop up to the resume step without the model's
compute (agent/catchup.py), so its recovery should barely grow with the kill step; the
model-aware spare jumps straight there. Medians with min and max per step.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent.launcher import kill_listed_processes  # noqa: E402
from bench.common import git_commit, spread, wait_until, write_result  # noqa: E402

STEP_SLEEP_S = 0.005  # the rest of a training loop (logging, a data pipeline) between steps
TIMEOUT_S = 300  # every wait: a step, a ready spare, the recovery


def build(hidden: int, layers: int) -> nn.Module:
    torch.manual_seed(0)
    blocks = []
    for _ in range(layers):
        blocks += [nn.Linear(hidden, hidden), nn.ReLU()]
    return nn.Sequential(*blocks, nn.Linear(hidden, 1))


def _mark(step: int) -> None:
    with open(os.environ["YOCO_BENCH_MARKS"], "a") as marks:
        marks.write(f"{step},{time.time()}\n")


def model_aware_worker(hidden: int, layers: int) -> None:
    import agent

    run = agent.attach()
    model = build(hidden, layers)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)
    run.register(model=model, optimizer=optimizer)
    torch.manual_seed(
        0 if run.is_spare else run.rank
    )  # the inputs: the global RNG is per-rank state
    for step in run.steps(10**9):
        model(torch.randn(8, hidden)).square().mean().backward()
        if run.step():
            _mark(step)
        time.sleep(STEP_SLEEP_S)


def transparent_worker(hidden: int, layers: int) -> None:
    """An unmodified DDP loop (run under `python -m agent.transparent`)."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo")
    model = build(hidden, layers)
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=1e-4, momentum=0.9)
    torch.manual_seed(dist.get_rank())
    for step in range(10**9):
        optimizer.zero_grad()
        ddp(torch.randn(8, hidden)).square().mean().backward()
        optimizer.step()
        _mark(step)
        time.sleep(STEP_SLEEP_S)


def measure(mode: str, hidden: int, layers: int, kill_steps: list[int]) -> list[dict]:
    """One job, killed once at each of `kill_steps` (a fresh parked spare each time)."""
    tmp = Path(tempfile.mkdtemp(prefix=f"yoco-modes-{mode}-"))
    marks, status, events = tmp / "steps.log", tmp / "status.json", tmp / "events.jsonl"
    env = dict(os.environ, PYTHONPATH=str(REPO), YOCO_BENCH_MARKS=str(marks))
    flags = ["--transparent"] if mode == "transparent" else []
    command = [
        sys.executable, "-m", "agent.cli", "run", *flags, "--workers", "2",
        "--spares", str(len(kill_steps)), "--events", str(events), "--status-file", str(status),
        "--heartbeat-timeout", "5", "--join-timeout", "300", "--",
        sys.executable, __file__, f"{mode}-worker", str(hidden), str(layers),
    ]  # fmt: skip
    log = open(tmp / "launcher.log", "w")  # noqa: SIM115 - the launcher writes it
    launcher = subprocess.Popen(command, cwd=REPO, env=env, start_new_session=True,
                                stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    results = []
    try:
        for kill_step in kill_steps:
            results.append(_kill_and_time(tmp, kill_step, len(results)))
        return results
    finally:
        os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait()
        kill_listed_processes(status)


def _marked(marks: Path) -> list[tuple[int, float]]:
    """(step, time) marks; a line still being written is skipped."""
    text = marks.read_text() if marks.exists() else ""
    pairs = [x.split(",") for x in text.split()]
    return [(int(p[0]), float(p[1])) for p in pairs if len(p) == 2 and p[1].count(".") == 1]


def _kill_and_time(tmp: Path, kill_step: int, earlier: int) -> dict:
    marks, status, events = tmp / "steps.log", tmp / "status.json", tmp / "events.jsonl"
    log = tmp / "launcher.log"

    def reached_kill_step():
        if "job failed" in log.read_text():
            raise RuntimeError(log.read_text()[-2000:])
        return max((s for s, _ in _marked(marks)), default=-1) >= kill_step - 1

    def spare_ready():  # a spare still importing torch would be measured too
        members = json.loads(status.read_text())["members"]
        return any(m["role"] == "spare" and m["ready"] for m in members) and members

    wait_until(reached_kill_step, TIMEOUT_S, f"step {kill_step}")
    members = wait_until(spare_ready, TIMEOUT_S, "a ready spare")
    pid = next(m["pid"] for m in members if m["role"] == "worker" and m["rank"] == 1)
    killed = time.time()
    os.kill(pid, signal.SIGKILL)

    def resume_step_completed():
        """The migration's event, once its resume step has completed on every rank."""
        completed = [
            json.loads(line) for line in
            (events.read_text() if events.exists() else "").splitlines()
            if "migration.completed" in line
        ]  # fmt: skip
        if len(completed) <= earlier:
            return None
        resumed = completed[earlier]["data"]["resumed_step"]
        after = [t for s, t in _marked(marks) if s == resumed and t > killed]
        return after and (completed[earlier], min(after))

    completed, resumed_at = wait_until(resume_step_completed, TIMEOUT_S, "the resumed step")
    # Transparent mode: the spare's own account of its catch-up (wall and CPU seconds).
    caught_up = re.findall(r"caught up \d+ steps in ([\d.]+) s \(([\d.]+) s CPU\)", log.read_text())
    return {
        "catch_up_s": [float(x) for x in caught_up[earlier]] if len(caught_up) > earlier else None,
        "bytes": completed["data"]["bytes"],
        "recovery_s": round(resumed_at - killed, 3),
        "kill_step": kill_step,
        "migration_ms": completed["data"]["duration_ms"],
    }


def _spread(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def main() -> None:
    if sys.argv[1:2] == ["model_aware-worker"]:
        model_aware_worker(int(sys.argv[2]), int(sys.argv[3]))
        return
    if sys.argv[1:2] == ["transparent-worker"]:
        transparent_worker(int(sys.argv[2]), int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--steps", type=int, nargs="+", default=[10, 200, 1000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    modes = ("model_aware", "transparent")
    runs: dict[str, dict[int, list[dict]]] = {m: {s: [] for s in args.steps} for m in modes}
    commit, load = git_commit(), [os.getloadavg()[0]]
    for repeat in range(args.repeats):
        for mode in modes if repeat % 2 == 0 else modes[::-1]:  # interleaved, both orders
            for result in measure(mode, args.hidden, args.layers, args.steps):
                runs[mode][result["kill_step"]].append(result)
                print(mode, result, flush=True)
        load.append(os.getloadavg()[0])
        # After every repeat of both modes: an interrupted run leaves what it measured.
        results = summarize(runs, args.hidden, args.layers, load)
        path = write_result("agent_modes", results, commit)
    print(path.read_text())


def summarize(
    runs: dict[str, dict[int, list[dict]]], hidden: int, layers: int, load: list[float]
) -> dict:
    """runs: mode -> kill step -> measure()'s results; load: the 1-minute load average at the
    start and after each repeat."""
    params = sum(p.numel() for p in build(hidden, layers).parameters())
    steps = list(runs["transparent"])
    repeats = min(len(measured) for by_step in runs.values() for measured in by_step.values())
    results = {
        "model": {
            "kind": f"MLP {layers}x{hidden}, SGD + momentum",
            "parameters": params,
            "state_bytes": 2 * 4 * params,
        },
        "machine": {"device": "cpu", "load_average_1min": spread(load, 2)},
        "repeats": repeats,
        "setup": (
            f"2 workers + {len(steps)} spares, SIGKILL of rank 1 after each of {steps} "
            f"completed steps in one job, {repeats} jobs per mode, modes interleaved"
        ),
    }
    for mode, by_kill_step in runs.items():
        by_step, nbytes = {}, []
        for kill_step, measured in by_kill_step.items():
            median, low, high = _spread([r["recovery_s"] for r in measured])
            by_step[str(kill_step)] = round(median, 3)
            by_step[f"{kill_step}_min"] = round(low, 3)
            by_step[f"{kill_step}_max"] = round(high, 3)
            nbytes += [r["bytes"] for r in measured]
        results[mode] = {"recovery_s_by_step": by_step, "bytes": int(statistics.median(nbytes))}
        if mode == "transparent":  # the spare's catch-up, medians: wall and CPU seconds
            for index, name in enumerate(("catch_up_wall_s_by_step", "catch_up_cpu_s_by_step")):
                results[mode][name] = {
                    str(step): round(statistics.median(r["catch_up_s"][index] for r in measured), 3)
                    for step, measured in by_kill_step.items()
                    if all(r["catch_up_s"] for r in measured)
                }
    first, last = str(steps[0]), str(steps[-1])
    t_first = results["transparent"]["recovery_s_by_step"][first]
    t_last = results["transparent"]["recovery_s_by_step"][last]
    m_last = results["model_aware"]["recovery_s_by_step"][last]
    results["targets"] = {
        f"transparent_{last}_vs_{first}": {
            "value": t_last,
            "target": f"≤ 1.5 × {t_first} + 0.5 = {1.5 * t_first + 0.5:.3f} s",
            "met": t_last <= 1.5 * t_first + 0.5,
        },
        f"transparent_vs_model_aware_{last}": {
            "value": t_last,
            "target": f"≤ 3 × {m_last} + 0.5 = {3 * m_last + 0.5:.3f} s",
            "met": t_last <= 3 * m_last + 0.5,
        },
    }
    return results


if __name__ == "__main__":
    main()
