"""A training job under the agent's launcher, started as a subprocess and watched through the
files it keeps (--status-file, --events) and the final states its ranks write (--out): what the
agent's tests and bench/gpu_check.py drive. Needs only torch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import torch

from agent.launcher import kill_listed_processes
from agent.reporter import read_jsonl

REPO = Path(__file__).resolve().parents[1]


class LaunchedJob:
    """`command` runs the launcher with `--status-file status_path --events events_path`; its
    output goes to directory/launcher.log. The process runs in a session of its own, so stop()
    ends it and everything it started."""

    def __init__(self, directory: Path, command: list[str], env: dict[str, str] | None = None):
        self.dir = directory
        self.status_path = directory / "status.json"
        self.events_path = directory / "events.jsonl"
        self.out = directory / "out"
        self.log_path = directory / "launcher.log"
        self.log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            command, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip

    def status(self) -> dict:
        try:
            return json.loads(self.status_path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    def events(self, kind: str | None = None) -> list[dict]:
        if not self.events_path.exists():
            return []
        events = read_jsonl(self.events_path)
        return [e for e in events if kind is None or e["type"] == "io.yoco." + kind]

    def wait_for(self, predicate, timeout: float = 60, what: str = "condition"):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            if self.process.poll() is not None:
                raise AssertionError(f"job ended while waiting for {what}:\n{self.output()}")
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}:\n{self.output()}")

    def wait_step(self, step: int, timeout: float = 180) -> dict:
        """Wait for `step`, with every spare ready: on a loaded machine spares still importing
        torch would turn a test of live migration into one of the no-spare fallback."""

        def reached():
            status = self.status()
            spares_ready = all(
                m.get("ready") for m in status.get("members", []) if m["role"] == "spare"
            )
            return status.get("step", 0) >= step and spares_ready and status

        return self.wait_for(reached, timeout, what=f"step {step} with spares ready")

    def worker_pid(self, rank: int) -> int:
        for member in self.status()["members"]:
            if member["role"] == "worker" and member["rank"] == rank:
                return member["pid"]
        raise AssertionError(f"no worker with rank {rank}: {self.status()}")

    def address(self) -> str:
        return self.wait_for(lambda: self.status().get("address"), what="coordinator address")

    def wait_done(self, timeout: float = 240) -> int:
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired as error:
            raise AssertionError(f"job did not end:\n{self.output()}") from error

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text()[-6000:]

    def final_states(self) -> list[dict]:
        """What each rank saved at the end (agent/examples/gpt.py --out)."""
        return [torch.load(p, weights_only=False) for p in sorted(self.out.glob("rank*.pt"))]

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        kill_listed_processes(self.status_path)
        self.log.close()


def state_differences(states: list[dict], baseline: list[dict]) -> list[str]:
    """Where the ranks' final model and optimizer states differ from a failure-free run's
    (torch.equal, bit for bit); empty when they are identical."""
    if len(states) != len(baseline):
        return [f"{len(states)} ranks wrote a state, expected {len(baseline)}"]
    found = []
    for rank, (state, expected) in enumerate(zip(states, baseline, strict=True)):
        for name, tensor in expected["model"].items():
            if not torch.equal(state["model"][name], tensor):
                found.append(f"rank {rank} model {name}")
        got, want = state["optimizer"], expected["optimizer"]
        if got["param_groups"] != want["param_groups"]:
            found.append(f"rank {rank} optimizer param_groups")
        if got["state"].keys() != want["state"].keys():
            found.append(f"rank {rank} optimizer state keys")
            continue
        for index, slots in want["state"].items():
            for key, value in slots.items():
                if not torch.equal(got["state"][index][key], value):
                    found.append(f"rank {rank} optimizer state {index}.{key}")
    return found
