"""Helpers for the agent's tests: real launcher, real processes, real signals.

Every job runs in its own session and is killed (process group and all) when a test ends, so a
failing test cannot leave processes behind or hang the suite.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from agent.launcher import kill_listed_processes
from agent.reporter import read_jsonl

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
# A transformer small enough for 2 CPU cores, big enough to have dropout, AdamW and a scheduler.
GPT_ARGS = ["--steps", "60", "--dim", "32", "--heads", "2", "--layers", "2", "--seq", "16",
            "--batch", "4", "--vocab", "64", "--seed", "7"]  # fmt: skip


class Job:
    def __init__(
        self, tmp: Path, workers: int, spares: int, extra: list[str], script_args, script=None
    ):
        self.dir = tmp
        self.events_path = tmp / "events.jsonl"
        self.status_path = tmp / "status.json"
        self.out = tmp / "out"
        command = [
            PYTHON, "-m", "agent.cli", "run", "--workers", str(workers), "--spares", str(spares),
            "--events", str(self.events_path), "--status-file", str(self.status_path),
            "--cluster", "ci", "--job", tmp.name, "--join-timeout", "300",
            "--heartbeat-timeout", "3", *extra, "--",
            PYTHON, str(script or REPO / "agent/examples/gpt.py"), *script_args, "--out",
            str(self.out),
        ]  # fmt: skip
        env = dict(os.environ, PYTHONPATH=str(REPO), YOCO_CONNECT_TIMEOUT_S="20")
        self.log = open(tmp / "launcher.log", "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True,
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

    def wait_step(self, step: int) -> dict:
        """Wait for `step`, with every spare ready: on a loaded machine spares still importing
        torch would turn a test of live migration into one of the no-spare fallback."""

        def reached():
            status = self.status()
            spares_ready = all(
                m.get("ready") for m in status.get("members", []) if m["role"] == "spare"
            )
            return status.get("step", 0) >= step and spares_ready and status

        return self.wait_for(reached, timeout=180, what=f"step {step} with spares ready")

    def worker_pid(self, rank: int) -> int:
        for member in self.status()["members"]:
            if member["role"] == "worker" and member["rank"] == rank:
                return member["pid"]
        raise AssertionError(f"no worker with rank {rank}: {self.status()}")

    def address(self) -> str:
        return self.wait_for(lambda: self.status().get("address"), what="coordinator address")

    def cli(self, *args: str) -> dict:
        result = subprocess.run(
            [PYTHON, "-m", "agent.cli", *args, "--coordinator", self.address()],
            cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True,
            text=True, timeout=30,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    def wait_done(self, timeout: float = 240) -> int:
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired as error:
            raise AssertionError(f"job did not end:\n{self.output()}") from error

    def output(self) -> str:
        self.log.flush()
        return (self.dir / "launcher.log").read_text()[-6000:]

    def final_states(self) -> list[dict]:
        return [torch.load(p, weights_only=False) for p in sorted(self.out.glob("rank*.pt"))]

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        kill_listed_processes(self.status_path)
        self.log.close()


@pytest.fixture
def start_job(tmp_path):
    jobs: list[Job] = []

    def start(name: str, workers=4, spares=0, extra=(), script_args=GPT_ARGS, script=None) -> Job:
        directory = tmp_path / name
        directory.mkdir()
        job = Job(directory, workers, spares, list(extra), list(script_args), script)
        jobs.append(job)
        return job

    yield start
    for job in jobs:
        job.stop()


@pytest.fixture(scope="session")
def baseline(tmp_path_factory) -> list[dict]:
    """The failure-free run every migration test must reproduce bit for bit."""
    job = Job(tmp_path_factory.mktemp("baseline"), 4, 0, [], GPT_ARGS)
    try:
        assert job.wait_done() == 0, job.output()
        states = job.final_states()
    finally:
        job.stop()
    assert len(states) == 4
    return states


def assert_bit_identical(states: list[dict], baseline: list[dict]) -> None:
    """Model and optimizer state of every rank torch.equal to the failure-free run."""
    assert len(states) == len(baseline)
    for state, expected in zip(states, baseline, strict=True):
        for name, tensor in expected["model"].items():
            assert torch.equal(state["model"][name], tensor), name
        got, want = state["optimizer"], expected["optimizer"]
        assert got["param_groups"] == want["param_groups"]
        assert got["state"].keys() == want["state"].keys()
        for index, slots in want["state"].items():
            for key, value in slots.items():
                assert torch.equal(got["state"][index][key], value), (index, key)


def incidents(job: Job) -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = {}
    for event in job.events():
        if "subject" in event:
            grouped.setdefault(event["subject"], []).append(event)
    return grouped


def kill_alarm_drain(job: Job, at: tuple[int, int, int], ranks: tuple[int, int, int]) -> float:
    """SIGKILL a worker, a thermal alarm on another, then a drain, each at its step and each
    once the previous recovery has resumed the job. The time of the kill."""
    (kill_at, alarm_at, drain_at), (killed, alarmed, drained) = at, ranks
    job.wait_step(kill_at)
    killed_at = time.time()
    os.kill(job.worker_pid(killed), signal.SIGKILL)  # unplanned
    job.wait_for(lambda: len(job.events("job.resumed")) == 1, what="recovery from SIGKILL")
    job.wait_step(alarm_at)
    job.cli("inject", "thermal", "--rank", str(alarmed))  # pre-emptive
    job.wait_for(lambda: len(job.events("job.resumed")) == 2, what="pre-emptive migration")
    job.wait_step(drain_at)
    job.cli("drain", "--rank", str(drained))  # planned
    job.wait_for(lambda: len(job.events("job.resumed")) == 3, what="planned migration")
    return killed_at
