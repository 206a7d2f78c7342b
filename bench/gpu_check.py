"""The agent on a real GPU (issue 17): one command on one GPU host, at most 8 minutes.

    PYTHONPATH=. bash bench/gpu_check.sh        # or: PYTHONPATH=. python3 -m bench.gpu_check

Needs only torch (with CUDA), numpy and nvidia-ml-py; runs from the checkout, nothing installed.
Three parts, each bounded in time, each PASS or FAIL:

1. nvml: the NVML health source reads the real device: temperature, volatile ECC counters,
   clock (throttle) reasons; whether XID events are readable is reported.
2. training: agent/examples/gpt.py, 2 ranks + 3 spares, every process on cuda:0 (model,
   optimizer state, gradients on the GPU; the training group is gloo over CUDA tensors, as NCCL
   refuses two ranks on one device), deterministic kernels. Rank 1 is SIGKILLed, rank 0 gets an
   injected thermal reading on top of its live NVML source, rank 1 is drained; every incident
   must be recovered live (steps_lost 0) and the final model and optimizer state of every rank
   must equal, bit for bit, a failure-free run of the same job.
3. stream: bench/gpu_stream.py for 1, 4 and 16 GiB of GPU state: device to device, host
   staged and a raw CUDA IPC copy; device to device must reach 80 % of raw CUDA IPC.

Writes bench/results/gpu.json. Exit status: 0 PASS, 1 FAIL, 77 SKIP (no CUDA device: prints
"SKIP: no CUDA device ..."; 77 is the usual "skipped" code of test drivers).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
import tempfile
import time
from pathlib import Path

import torch

from agent.protocol import control_request
from bench.job import REPO, LaunchedJob, state_differences

SKIP = 77
BUDGET_S = 450  # bench/gpu_check.sh kills the whole check at 480 s
STREAM_SIZES_GB = [1, 4, 16]
D2D_OVER_RAW_TARGET = 0.8
# Long enough (~50 s) for the spares to be ready and three incidents to be recovered.
GPT_ARGS = ["--steps", "600", "--dim", "256", "--heads", "4", "--layers", "4", "--seq", "128",
            "--batch", "16", "--vocab", "512", "--seed", "3", "--step-sleep", "0.05",
            "--deterministic"]  # fmt: skip
THERMAL = "gpu_thermal"


class CheckFailed(AssertionError):
    pass


def environment() -> dict:
    found = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(0),
        "devices": torch.cuda.device_count(),
    }
    try:
        import pynvml

        pynvml.nvmlInit()
        found["driver"] = _text(pynvml.nvmlSystemGetDriverVersion())
    except Exception as error:  # reported by the nvml part
        found["driver"] = f"unknown ({error})"
    return found


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# -- part 1: NVML -------------------------------------------------------------------------------


def check_nvml() -> dict:
    try:
        from agent.telemetry import NvmlSource

        source = NvmlSource.for_cuda_device(0)
    except ImportError as error:
        raise CheckFailed(f"nvidia-ml-py is not importable: {error}") from error
    readings = source.sample()
    required = ["temperature_c", "ecc_correctable", "ecc_uncorrectable", "clock_reasons"]
    missing = [key for key in required if key not in readings]
    figures = {"readings": readings, "xid_readable": source.xid_readable, "missing": missing}
    if missing:
        raise CheckFailed(f"NVML did not read {missing} (read: {readings})", figures)
    return figures


# -- part 2: training under the agent -----------------------------------------------------------


def left(deadline: float) -> float:
    """Seconds to `deadline` (at least one, for a last look)."""
    return max(1.0, deadline - time.monotonic())


class Job(LaunchedJob):
    """The example GPT on the GPU under `python -m agent.launcher` (the GPU host has no typer
    for `yoco-agent run`)."""

    def __init__(self, directory: Path, spares: int):
        directory.mkdir(parents=True)
        self.marks = directory / "marks.csv"
        command = [
            sys.executable, "-m", "agent.launcher", "--workers", "2", "--spares", str(spares),
            "--events", str(directory / "events.jsonl"), "--status-file",
            str(directory / "status.json"), "--cluster", "gpu-check", "--job", directory.name,
            "--heartbeat-timeout", "5", "--join-timeout", "120", "--", sys.executable,
            str(REPO / "agent/examples/gpt.py"), *GPT_ARGS, "--out", str(directory / "out"),
            "--marks", str(self.marks),
        ]  # fmt: skip
        env = {"YOCO_CONNECT_TIMEOUT_S": "60"}
        env["CUBLAS_WORKSPACE_CONFIG"] = os.environ.get("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        super().__init__(directory, command, env)

    def request(self, message: dict) -> dict:
        reply = control_request(self.address(), message)
        if not reply.get("ok"):
            raise CheckFailed(f"the coordinator refused {message}: {reply}")
        return reply

    def finish(self, deadline: float) -> list[dict]:
        code = self.wait_done(left(deadline))
        if code != 0:
            raise CheckFailed(f"the job failed (exit {code}):\n{self.output()}")
        return self.final_states()


def check_training(work: Path, deadline: float) -> dict:
    baseline_job = Job(work / "baseline", spares=0)
    try:
        baseline = baseline_job.finish(deadline)
    finally:
        baseline_job.stop()
    job = Job(work / "failures", spares=3)
    try:
        figures = _inject_failures(job, deadline)
        states = job.finish(deadline)
    finally:
        job.stop()
    figures["state_on_gpu"] = _on_gpu(states)
    differences = state_differences(states, baseline)
    figures["bit_identical"] = not differences
    if differences:
        raise CheckFailed(f"not bit-identical to the failure-free run: {differences[:10]}", figures)
    if not figures["state_on_gpu"]:
        raise CheckFailed("the trained state was not on the GPU", figures)
    if "no NVML telemetry" in job.log_path.read_text():
        raise CheckFailed("a worker ran without its NVML health source", figures)
    return figures


def _inject_failures(job: Job, deadline: float) -> dict:
    """SIGKILL rank 1, then a thermal reading on rank 0, then a drain of rank 1, each once the
    job has recovered from the one before and trained on 15 more steps."""

    def recovered(count: int, what: str) -> int:
        job.wait_for(lambda: len(job.events("job.resumed")) >= count, left(deadline), what)
        resumed_at = job.events("job.resumed")[count - 1]["data"]["step"]
        job.wait_step(resumed_at + 15, left(deadline))
        return resumed_at

    job.wait_step(20, left(deadline))
    killed_at = time.time()
    os.kill(job.worker_pid(1), signal.SIGKILL)
    resumed_after_kill = recovered(1, "recovery from the kill")
    job.request({"type": "inject", "kind": "thermal", "rank": 0})
    recovered(2, "the thermal migration")
    job.request({"type": "drain", "rank": 1})
    job.wait_for(lambda: len(job.events("job.resumed")) >= 3, left(deadline), "the drain")
    detected = [e["data"] for e in job.events("failure.detected")]
    completed = [e["data"] for e in job.events("migration.completed")]
    downtimes = [e["data"]["downtime_ms"] for e in job.events("job.resumed")]
    kinds = [(d["trigger"], d["category"]) for d in detected]
    expected = [("unplanned", "node_crash"), ("preemptive", THERMAL), ("planned", "maintenance")]
    if kinds != expected:
        raise CheckFailed(f"incidents were {kinds}, expected {expected}")
    if len(completed) != 3 or any(c["steps_lost"] for c in completed):
        raise CheckFailed(f"not every incident was migrated live: {completed}")
    # The first step completed after the kill at or past the step the job resumed at (a step
    # a survivor finished as the kill landed does not count).
    after = sorted(
        float(t)
        for step, t in _marks(job.marks)
        if float(t) > killed_at and int(step) >= resumed_after_kill
    )
    return {
        "incidents": [f"{t} ({c})" for t, c in kinds],
        "kill_to_next_step_s": round(after[0] - killed_at, 3) if after else None,
        "downtime_ms": downtimes,
        "migrated_bytes": [c["bytes"] for c in completed],
        "migration_ms": [c["duration_ms"] for c in completed],
    }


def _marks(path: Path) -> list[tuple[str, str]]:
    return [tuple(line.split(",")) for line in path.read_text().split() if "," in line]


def _on_gpu(states: list[dict]) -> bool:
    tensors = [t for s in states for t in s["model"].values()]
    tensors += [t for s in states for slots in s["optimizer"]["state"].values()
                for key, t in slots.items() if key != "step"]  # fmt: skip
    return bool(tensors) and all(t.is_cuda for t in tensors)


# -- part 3: the state stream -------------------------------------------------------------------


def check_stream(budget_s: float) -> dict:
    from bench.gpu_stream import measure

    figures = measure(STREAM_SIZES_GB, budget_s)
    problems = []
    for size in STREAM_SIZES_GB:
        entry = figures.get(f"{size:g}", {})
        ratio = entry.get("device_to_device_over_raw_ipc")
        if ratio is None:
            problems.append(f"{size} GiB: device_to_device or raw_ipc not measured (time bound)")
        elif ratio < D2D_OVER_RAW_TARGET:
            problems.append(f"{size} GiB: device_to_device at {ratio:.0%} of raw CUDA IPC")
    if problems:
        raise CheckFailed("; ".join(problems), figures)
    return figures


# -- the check ----------------------------------------------------------------------------------


def run_check() -> int:
    if not torch.cuda.is_available():
        print(
            f"SKIP: no CUDA device (torch {torch.__version__}, CUDA build "
            f"{torch.version.cuda or 'none'}); nothing checked, bench/results/gpu.json unchanged"
        )
        return SKIP
    # bench/gpu_check.sh's bound sends SIGTERM first: unwind, so every job is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(124))
    started = time.monotonic()
    deadline = started + BUDGET_S
    results: dict = {"environment": environment(), "parts": {}}
    print(f"gpu check on {json.dumps(results['environment'])}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="yoco-gpu-check-"))
    parts = [
        ("nvml", check_nvml),
        ("training", lambda: check_training(work, min(deadline - 120, time.monotonic() + 240))),
        ("stream", lambda: check_stream(max(30.0, min(200.0, deadline - time.monotonic() - 20)))),
    ]
    for name, part in parts:
        part_started = time.monotonic()
        try:
            figures, verdict = part(), "PASS"
        except AssertionError as failure:  # CheckFailed, or a job that ended or stalled
            figures = failure.args[1] if len(failure.args) > 1 else {}
            verdict = f"FAIL: {failure.args[0]}"
        except Exception as error:  # a broken part must not hide the others' results
            figures, verdict = {}, f"FAIL: {type(error).__name__}: {error}"
        seconds = round(time.monotonic() - part_started, 1)
        results["parts"][name] = {"verdict": verdict, "seconds": seconds, **figures}
        print(f"{name}: {verdict} ({seconds} s)", flush=True)
        print(json.dumps(figures, default=str)[:2000], flush=True)
    results["seconds"] = round(time.monotonic() - started, 1)
    from bench.common import write_result

    path = write_result("gpu", json.loads(json.dumps(results, default=str)))
    failed = [n for n, p in results["parts"].items() if p["verdict"] != "PASS"]
    summary = "PASS" if not failed else f"FAIL ({', '.join(failed)})"
    print(f"GPU CHECK: {summary} in {results['seconds']} s; results in {path}", flush=True)
    return 0 if not failed else 1


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    sys.exit(run_check())


if __name__ == "__main__":
    main()
