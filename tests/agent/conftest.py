"""Helpers for the agent's tests: real launcher, real processes, real signals.

Every job runs in its own session and is killed (process group and all) when a test ends, so a
failing test cannot leave processes behind or hang the suite.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from agent.protocol import control_request
from bench.job import REPO, LaunchedJob, state_differences

PYTHON = sys.executable
# A transformer small enough for 2 CPU cores, big enough to have dropout, AdamW and a scheduler.
GPT_ARGS = ["--steps", "60", "--dim", "32", "--heads", "2", "--layers", "2", "--seq", "16",
            "--batch", "4", "--vocab", "64", "--seed", "7"]  # fmt: skip
# Test jobs last seconds and inject failures at fixed steps: the first step waits until every
# spare is ready, however loaded the machine. The default (spares one by one once the workers
# train) is tested in test_spares.py.
SPARES_START = ["--spares-start", "before-training"]


class Job(LaunchedJob):
    def __init__(
        self, tmp: Path, workers: int, spares: int, extra: list[str], script_args, script=None
    ):
        command = [
            PYTHON, "-m", "agent.cli", "run", "--workers", str(workers), "--spares", str(spares),
            "--events", str(tmp / "events.jsonl"), "--status-file", str(tmp / "status.json"),
            "--cluster", "ci", "--job", tmp.name, "--join-timeout", "300",
            "--heartbeat-timeout", "3", *SPARES_START, *extra, "--",
            PYTHON, str(script or REPO / "agent/examples/gpt.py"), *script_args, "--out",
            str(tmp / "out"),
        ]  # fmt: skip
        super().__init__(tmp, command, env={"YOCO_CONNECT_TIMEOUT_S": "20"})

    def drain(self, rank: int) -> dict:
        """A planned migration of `rank` (what `yoco-agent drain` sends)."""
        return self._control({"type": "drain", "rank": rank, "node": None})

    def inject(self, kind: str, rank: int) -> dict:
        """A fault in `rank`'s health monitor (what `yoco-agent inject` sends)."""
        return self._control({"type": "inject", "kind": kind, "rank": rank, "xid": None})

    def _control(self, request: dict) -> dict:
        # Sent from the test process: the CLI's own start-up (seconds on a loaded machine) would
        # let a short job pass the step it is meant for; test_operator_cli.py drives the CLI.
        reply = control_request(self.address(), request)
        assert reply.get("ok"), reply
        return reply


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


@pytest.fixture
def start_transparent(tmp_path):
    """start_transparent(name, script, script_args, spares, extra=(), transparent=True): a
    2-worker job running a script from tests/agent/scripts (unmodified under --transparent, or a
    model-aware one), stopped when the test ends."""
    from tests.agent.transparent_job import TransparentJob  # it builds on this module

    jobs: list[Job] = []

    def start(
        name: str, script: str, args, spares: int, extra=(), transparent=True
    ) -> TransparentJob:
        directory = tmp_path / name
        directory.mkdir()
        job = TransparentJob(
            directory, script, 2, spares, list(args), list(extra), transparent=transparent
        )
        jobs.append(job)
        return job

    yield start
    for job in jobs:
        job.stop()


# The GPT above sharded with FSDP2 (agent/examples/fsdp_gpt.py); MESH_ARGS pick the mesh.
FSDP_SCRIPT = REPO / "agent/examples/fsdp_gpt.py"
FSDP_ARGS = ["--steps", "16", "--dim", "32", "--heads", "2", "--layers", "2", "--seq", "16",
             "--batch", "4", "--vocab", "64", "--seed", "7"]  # fmt: skip
FSDP_4 = ["--shard", "4"]


@pytest.fixture(scope="session")
def fsdp_baseline(tmp_path_factory) -> list[dict]:
    """The failure-free run of the 4-way FSDP job: every rank's final local shards."""
    return failure_free_states(tmp_path_factory.mktemp("fsdp_baseline"), FSDP_ARGS + FSDP_4,
                               FSDP_SCRIPT)  # fmt: skip


# agent/examples/llama.py, small enough for 4 processes on 2 CPU cores; 4 query heads over 2
# key/value heads so that both split over 2 tensor-parallel ranks.
LLAMA_SCRIPT = REPO / "agent/examples/llama.py"
LLAMA_ARGS = ["--steps", "16", "--dim", "32", "--heads", "4", "--kv-heads", "2", "--layers", "2",
              "--seq", "16", "--batch", "4", "--vocab", "64", "--seed", "7"]  # fmt: skip
FSDP_2_TP_2 = ["--shard", "2", "--tp", "2"]


@pytest.fixture(scope="session")
def llama_tp_baseline(tmp_path_factory) -> list[dict]:
    """The failure-free run of llama.py on FSDP 2 x TP 2: every rank's final local shards."""
    return failure_free_states(tmp_path_factory.mktemp("llama_tp_baseline"),
                               LLAMA_ARGS + FSDP_2_TP_2, LLAMA_SCRIPT)  # fmt: skip


@pytest.fixture(scope="session")
def baseline(tmp_path_factory) -> list[dict]:
    """The failure-free run every migration test must reproduce bit for bit."""
    return failure_free_states(tmp_path_factory.mktemp("baseline"), GPT_ARGS)


def failure_free_states(directory: Path, script_args: list[str], script=None) -> list[dict]:
    """Every rank's final state after a 4-worker job with no spares and no failure."""
    job = Job(directory, 4, 0, [], script_args, script)
    try:
        assert job.wait_done() == 0, job.output()
        states = job.final_states()
    finally:
        job.stop()
    assert len(states) == 4
    return states


def assert_bit_identical(states: list[dict], baseline: list[dict]) -> None:
    """Model and optimizer state of every rank torch.equal to the failure-free run."""
    assert not (differences := state_differences(states, baseline)), differences


# An incident's events, in order (SPEC 3), by how it ended.
LIVE_MIGRATION = ["failure.detected", "migration.started", "migration.completed", "job.resumed"]
ROLLED_BACK = ["failure.detected", "migration.failed", "checkpoint.restored", "job.resumed"]


def event_types(events: list[dict]) -> list[str]:
    return [e["type"].removeprefix("io.yoco.") for e in events]


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
    # Steps seen before the kill give a StepSampler the ordinary step time it compares the
    # stall with: at least three, however the status file groups them.
    job.wait_step(max(kill_at, 4))
    killed_at = time.time()
    os.kill(job.worker_pid(killed), signal.SIGKILL)  # unplanned
    job.wait_for(lambda: len(job.events("job.resumed")) == 1, what="recovery from SIGKILL")
    job.wait_step(alarm_at)
    job.inject("thermal", alarmed)  # pre-emptive
    job.wait_for(lambda: len(job.events("job.resumed")) == 2, what="pre-emptive migration")
    job.wait_step(drain_at)
    job.drain(drained)  # planned
    job.wait_for(lambda: len(job.events("job.resumed")) == 3, what="planned migration")
    return killed_at
