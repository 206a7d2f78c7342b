"""Model-aware vs transparent mode, same model, same run (not a test).
Writes bench/results/agent_modes.json.

    .venv/bin/python bench/agent_modes.py [--hidden 1024] [--kill-step 10]

For each mode: 2 workers + 1 spare under the real launcher, SIGKILL rank 1 after `kill_step`
completed steps, and measure
* bytes: what the migration moved (the migration.completed event),
* recovery_s: SIGKILL -> the next completed step anywhere in the job (steps are marked by the
  training script itself, right after the optimizer update).
Transparent mode's recovery includes the spare replaying the script up to the resume step
(docs/agent.md), so it grows with kill_step; the model-aware spare jumps straight there.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
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
    for step in run.steps(10**9):
        torch.manual_seed(step * 10 + run.rank)
        model(torch.randn(8, hidden)).square().mean().backward()
        if run.step():
            _mark(step)
        time.sleep(0.02)


def transparent_worker(hidden: int, layers: int) -> None:
    """An unmodified DDP loop (run under `python -m agent.transparent`)."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo")
    model = build(hidden, layers)
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=1e-4, momentum=0.9)
    for step in range(10**9):
        torch.manual_seed(step * 10 + dist.get_rank())
        optimizer.zero_grad()
        ddp(torch.randn(8, hidden)).square().mean().backward()
        optimizer.step()
        _mark(step)
        time.sleep(0.02)


def measure(mode: str, hidden: int, layers: int, kill_step: int) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix=f"yoco-modes-{mode}-"))
    marks, status, events = tmp / "steps.log", tmp / "status.json", tmp / "events.jsonl"
    env = dict(os.environ, PYTHONPATH=str(REPO), YOCO_BENCH_MARKS=str(marks))
    flags = ["--transparent"] if mode == "transparent" else []
    command = [
        sys.executable, "-m", "agent.cli", "run", *flags, "--workers", "2", "--spares", "1",
        "--events", str(events), "--status-file", str(status), "--heartbeat-timeout", "5", "--",
        sys.executable, __file__, f"{mode}-worker", str(hidden), str(layers),
    ]  # fmt: skip
    log = open(tmp / "launcher.log", "w")  # noqa: SIM115 - the launcher writes it
    launcher = subprocess.Popen(command, cwd=REPO, env=env, start_new_session=True,
                                stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        while not (marks.exists() and len(marks.read_text().split()) >= 2 * kill_step):
            time.sleep(0.02)
        pid = next(m["pid"] for m in json.loads(status.read_text())["members"]
                   if m["role"] == "worker" and m["rank"] == 1)  # fmt: skip
        before = len(marks.read_text().split())
        killed = time.time()
        os.kill(pid, signal.SIGKILL)
        while True:
            after = [float(x.split(",")[1]) for x in marks.read_text().split()[before:] if x]
            text = events.read_text() if events.exists() else ""
            if "job.resumed" in text and any(t > killed for t in after):
                recovery = min(t for t in after if t > killed) - killed
                break
            time.sleep(0.02)
        # The first step after the kill may be a survivor's; wait for the job to move on.
        completed = next(
            json.loads(line) for line in events.read_text().splitlines()
            if "migration.completed" in line
        )  # fmt: skip
        return {
            "bytes": completed["data"]["bytes"],
            "recovery_s": round(recovery, 3),
            "kill_step": kill_step,
            "migration_ms": completed["data"]["duration_ms"],
        }
    finally:
        os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait()
        kill_listed_processes(status)


def main() -> None:
    if sys.argv[1:2] == ["model_aware-worker"]:
        model_aware_worker(int(sys.argv[2]), int(sys.argv[3]))
        return
    if sys.argv[1:2] == ["transparent-worker"]:
        transparent_worker(int(sys.argv[2]), int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--kill-step", type=int, default=10)
    args = parser.parse_args()
    params = sum(p.numel() for p in build(args.hidden, args.layers).parameters())
    results = {
        "model": {
            "kind": f"MLP {args.layers}x{args.hidden}, SGD + momentum",
            "parameters": params,
            "state_bytes": 2 * 4 * params,
        },
        "machine": {"cores": os.cpu_count(), "torch": torch.__version__, "device": "cpu"},
    }
    for mode in ("model_aware", "transparent"):
        results[mode] = measure(mode, args.hidden, args.layers, args.kill_step)
        print(mode, results[mode], flush=True)
    out = REPO / "bench" / "results" / "agent_modes.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
