"""Spares start after the workers, at a lower CPU priority, without delaying the first step;
a failure before any spare is ready waits for one, or says plainly that none can come."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest

from agent.advice import NO_SPARE
from agent.launcher import kill_listed_processes
from agent.priority import SPARE_NICE
from agent.reporter import read_jsonl
from tests.agent.conftest import PYTHON, REPO

pytestmark = pytest.mark.agent


def _start(tmp: Path, steps: int, **env: str) -> tuple[subprocess.Popen, Path]:
    (tmp / "out").mkdir()
    command = [
        PYTHON, "-m", "agent.cli", "run", "--workers", "2", "--spares", "1",
        "--events", str(tmp / "events.jsonl"), "--status-file", str(tmp / "status.json"),
        "--heartbeat-timeout", "3", "--join-timeout", "300", "--",
        PYTHON, "tests/agent/scripts/spare_probe.py", str(tmp / "out"), str(steps),
    ]  # fmt: skip
    log = open(tmp / "launcher.log", "w")  # noqa: SIM115 - the launcher writes it
    process = subprocess.Popen(
        command, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO), **env), stdout=log,
        stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    return process, tmp / "status.json"


def _status(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _wait(predicate, process: subprocess.Popen, tmp: Path, what: str, timeout: float = 400):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        assert process.poll() is None, f"job ended before {what}:\n{_log(tmp)}"
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}:\n{_log(tmp)}")


def _log(tmp: Path) -> str:
    return (tmp / "launcher.log").read_text()[-4000:]


def _kill_rank1_while_no_spare_is_ready(process, status_path, tmp) -> None:
    """Once training has begun and the spare has joined (and noted its priority) but is still
    loading its model."""

    def training_and_spare_joined():
        status = _status(status_path)
        spare_joined = any(
            json.loads(p.read_text()).get("role") == "spare" for p in (tmp / "out").glob("*.json")
        )
        return status.get("step", 0) >= 2 and spare_joined and status

    status = _wait(training_and_spare_joined, process, tmp, "step 2 with the spare joined")
    assert not any(m["role"] == "spare" and m["ready"] for m in status["members"]), status
    worker = next(m for m in status["members"] if m["role"] == "worker" and m["rank"] == 1)
    os.kill(worker["pid"], signal.SIGKILL)


def _stop(process: subprocess.Popen, status_path: Path) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    kill_listed_processes(status_path)


def _records(tmp: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in (tmp / "out").glob("*.json")]


def test_spare_starts_after_the_workers_at_lower_priority_and_a_kill_before_it_is_ready_waits(
    tmp_path,
):
    process, status_path = _start(tmp_path, steps=10**6, PROBE_SPARE_LOAD_S="4")
    try:
        _kill_rank1_while_no_spare_is_ready(process, status_path, tmp_path)

        def spare_trained_as_a_rank_and_reported():
            events = tmp_path / "events.jsonl"
            reported = events.exists() and "job.resumed" in events.read_text()
            trained = any(r["role"] == "spare" and "rank_nice" in r for r in _records(tmp_path))
            return reported and trained

        _wait(spare_trained_as_a_rank_and_reported, process, tmp_path, "the spare as rank 1")
    finally:
        _stop(process, status_path)

    events = read_jsonl(tmp_path / "events.jsonl")
    types = [e["type"].removeprefix("io.yoco.") for e in events]
    assert "checkpoint.restored" not in types and "migration.failed" not in types, types
    (completed,) = [e for e in events if e["type"] == "io.yoco.migration.completed"]
    assert completed["data"]["steps_lost"] == 0
    assert "waiting for one to finish starting" in _log(tmp_path)

    records = _records(tmp_path)
    workers = [r for r in records if r["role"] == "worker"]
    (spare,) = [r for r in records if r["role"] == "spare"]
    started = min(
        datetime.fromisoformat(e["time"]).timestamp()
        for e in events
        if e["type"] == "io.yoco.job.started"
    )
    # The spare was started only once every worker had joined and the job had started.
    assert spare["started"] >= started > max(w["started"] for w in workers)
    normal = os.getpriority(os.PRIO_PROCESS, 0)
    assert all(set(w["rank_nice"]) == {normal} for w in workers), workers
    # Every thread of the waiting spare ran at the lower priority; once the failure waited for
    # it (it was still loading), and as rank 1, all at normal.
    assert set(spare["spare_nice"]) == {normal + SPARE_NICE}, spare
    assert set(spare["loaded_nice"]) == {normal}, spare
    assert spare["rank"] == 1 and set(spare["rank_nice"]) == {normal}, spare


def test_no_spare_can_come_and_no_checkpoint_fails_the_job_with_a_clear_error(tmp_path):
    process, status_path = _start(tmp_path, steps=10**6, PROBE_SPARE_CRASH="1")
    try:
        _kill_rank1_while_no_spare_is_ready(process, status_path, tmp_path)
        assert process.wait(timeout=400) == 1, _log(tmp_path)
    finally:
        _stop(process, status_path)
    assert f"live recovery impossible ({NO_SPARE})" in _log(tmp_path)
    events = read_jsonl(tmp_path / "events.jsonl")
    (failed,) = [e for e in events if e["type"] == "io.yoco.migration.failed"]
    assert failed["data"]["reason"] == NO_SPARE
    assert events[-1]["type"] == "io.yoco.job.finished"
    assert events[-1]["data"]["status"] == "failed"


def test_spares_start_one_at_a_time_once_training_began():
    from agent.spares import SpareSupply

    started = []
    hurried = []
    supply = SpareSupply(
        lambda: started.append(100 + len(started)) or started[-1],
        3,
        hurried.append,
        "after-workers",
    )
    assert supply.pending() == 3 and not started  # nothing before the workers train
    supply.launch()
    assert not started
    supply.begin()
    assert started == [100]
    supply.begin()  # already begun: nothing more
    assert started == [100]
    supply.ready(999)  # someone else's readiness starts nothing
    assert started == [100]
    supply.hurry()
    assert hurried == [100]
    supply.ready(100)
    assert started == [100, 101]
    supply.gone(101)  # died while loading: the next one starts
    assert started == [100, 101, 102] and supply.coming()
    supply.ready(102)
    assert started == [100, 101, 102] and supply.pending() == 0 and not supply.coming()


def test_spares_with_workers_all_start_at_launch():
    from agent.spares import SpareSupply

    started = []
    supply = SpareSupply(
        lambda: started.append(100 + len(started)) or started[-1], 3, lambda pid: None,
        "with-workers",
    )  # fmt: skip
    supply.launch()
    assert started == [100, 101, 102] and supply.pending() == 3
    supply.begin()  # the workers train: nothing more to start
    supply.ready(101)
    assert started == [100, 101, 102] and supply.pending() == 2
    supply.gone(100)
    supply.ready(102)
    assert supply.pending() == 0 and not supply.coming()


def test_a_failure_before_the_first_step_completed_starts_the_first_spare_at_once():
    from agent.spares import SpareSupply

    started, hurried = [], []
    supply = SpareSupply(lambda: started.append(100) or 100, 2, hurried.append, "after-workers")
    supply.launch()
    assert supply.coming() and not started  # the failure will wait for it ...
    supply.hurry()  # ... so it starts now, at the workers' priority
    assert started == [100] and hurried == [100] and supply.pending() == 2


@pytest.mark.parametrize("when", ["with-workers", "before-training"])
def test_a_single_spare_also_starts_at_launch(when):
    from agent.spares import SpareSupply

    started = []
    supply = SpareSupply(lambda: started.append(100) or 100, 1, lambda pid: None, when)
    supply.launch()  # before-training waits for it before the first step: it must be on its way
    assert started == [100] and supply.coming()
