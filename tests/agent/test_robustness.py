"""Migrations that go wrong half-way still end live-resolved; when nothing live is left the
checkpoint fallback runs and says how many steps it lost."""

from __future__ import annotations

import os
import signal

import pytest

from agent.recovery import DIGEST_MISMATCH
from agent.transport import CORRUPT_ONCE_ENV
from tests.agent.conftest import GPT_ARGS, ROLLED_BACK, assert_bit_identical, event_types, incidents

pytestmark = pytest.mark.agent
SLOW_STEPS = ["--step-sleep", "0.1"]

# The first spare fails the migration, the next one completes it.
ONE_SPARE_FAILED_THEN_LIVE = [
    "failure.detected",
    "migration.started",
    "migration.failed",
    "migration.started",
    "migration.completed",
    "job.resumed",
]


def _kill_mid_transfer(job, role: str) -> int:
    transfer = job.wait_for(lambda: job.status().get("transfer"), what="a transfer in flight")
    pid = transfer[f"{role}_pid"]
    os.kill(pid, signal.SIGKILL)
    return pid


def test_spare_killed_during_migration_moves_on_to_the_next_spare(start_job, baseline, monkeypatch):
    monkeypatch.setenv("YOCO_INJECT_RECV_DELAY_S", "0.05")
    job = start_job("spare-killed", workers=4, spares=2, script_args=GPT_ARGS + SLOW_STEPS)
    job.wait_step(6)
    os.kill(job.worker_pid(1), signal.SIGKILL)
    _kill_mid_transfer(job, "target")
    assert job.wait_done() == 0, job.output()

    assert_bit_identical(job.final_states(), baseline)
    (events,) = incidents(job).values()
    assert event_types(events) == ONE_SPARE_FAILED_THEN_LIVE
    assert "died while receiving" in events[2]["data"]["reason"]
    assert events[4]["data"]["steps_lost"] == 0


def test_spare_whose_state_digest_differs_loses_the_migration_to_the_next_spare(
    start_job, baseline, monkeypatch, tmp_path
):
    # A test hook (transport.CORRUPT_ONCE_ENV): the first spare to receive a state flips a bit
    # of it after the transfer's checksums passed; only the digests of the moved state differ.
    token = tmp_path / "corrupt-once"
    token.touch()
    monkeypatch.setenv(CORRUPT_ONCE_ENV, str(token))
    job = start_job("digest", workers=4, spares=2, script_args=GPT_ARGS + SLOW_STEPS)
    job.wait_step(6)
    os.kill(job.worker_pid(1), signal.SIGKILL)
    assert job.wait_done() == 0, job.output()

    assert not token.exists()
    assert_bit_identical(job.final_states(), baseline)
    (events,) = incidents(job).values()
    assert event_types(events) == ONE_SPARE_FAILED_THEN_LIVE
    assert f"could not receive the state: {DIGEST_MISMATCH}" in events[2]["data"]["reason"]
    assert events[4]["data"]["verified"] is True
    assert events[4]["data"]["steps_lost"] == 0


def test_source_killed_during_preemptive_migration_falls_back_to_a_replica(
    start_job, baseline, monkeypatch
):
    monkeypatch.setenv("YOCO_INJECT_RECV_DELAY_S", "0.05")
    job = start_job("source-killed", workers=4, spares=1, script_args=GPT_ARGS + SLOW_STEPS)
    job.wait_step(6)
    job.inject("ecc", 2)
    _kill_mid_transfer(job, "source")
    assert job.wait_done() == 0, job.output()

    assert_bit_identical(job.final_states(), baseline)
    (events,) = incidents(job).values()
    assert event_types(events) == ONE_SPARE_FAILED_THEN_LIVE
    assert events[0]["data"]["trigger"] == "preemptive"
    assert events[0]["data"]["category"] == "gpu_ecc"
    assert events[1]["data"]["state_source"] == "self"
    assert events[3]["data"]["state_source"] == "replica"
    assert events[4]["data"]["steps_lost"] == 0


def test_no_spare_left_restores_the_newest_checkpoint_and_reports_the_loss(
    start_job, baseline, tmp_path
):
    checkpoints = ["--checkpoint-dir", str(tmp_path / "ckpt"), "--checkpoint-every", "10"]
    job = start_job(
        "no-spare", workers=4, spares=0, extra=checkpoints, script_args=GPT_ARGS + SLOW_STEPS
    )
    job.wait_step(24)
    os.kill(job.worker_pid(3), signal.SIGKILL)
    assert job.wait_done() == 0, job.output()

    # Rolled back, then recomputed with the same RNG and data: still the same final model.
    assert_bit_identical(job.final_states(), baseline)
    (events,) = incidents(job).values()
    assert event_types(events) == ROLLED_BACK
    assert events[1]["data"]["reason"] == "no spare left"
    restored = events[2]["data"]
    assert restored["checkpoint_step"] == 20
    assert restored["steps_lost"] >= 4  # killed at step 24 or later
    assert events[3]["data"]["step"] == 20
