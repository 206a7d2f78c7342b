"""Transparent mode's catch-up (SPEC 2.3): a spare joining at step R runs none of the model's
forward or backward passes for steps before R, and nothing it does while catching up is visible:
the job's output, the script's log and its own checkpoint files are those of the failure-free
run, and the final model is bit for bit the failure-free one."""

from __future__ import annotations

import json
import os
import signal

import pytest
import torch

from tests.agent.conftest import ROLLED_BACK, assert_bit_identical, event_types, incidents

pytestmark = pytest.mark.agent


def _script_lines(job) -> list[str]:
    text = (job.dir / "launcher.log").read_text()
    return [line for line in text.splitlines() if line.startswith("step ")]


def test_spare_catches_up_without_compute_or_side_effects(start_transparent):
    args = ["--epochs", "4"]
    job = start_transparent("job", "side_effects.py", args + ["--step-sleep", "0.2"], 2)
    baseline = start_transparent("baseline", "side_effects.py", args, 0)
    job.wait_step(5)
    os.kill(job.worker_pid(1), signal.SIGKILL)  # a spare takes rank 1
    job.wait_for(lambda: len(job.events("job.resumed")) == 1, what="recovery from SIGKILL")
    job.wait_step(13)
    job.drain(0)  # a spare takes rank 0, the one that prints and saves
    job.wait_for(lambda: len(job.events("job.resumed")) == 2, what="planned migration")
    assert job.wait_done() == 0, job.output()
    assert baseline.wait_done() == 0, baseline.output()

    assert_bit_identical(job.final_states(), baseline.final_states())
    resumed_at = {}
    for events in incidents(job).values():
        assert events[2]["type"] == "io.yoco.migration.completed"
        assert events[2]["data"]["steps_lost"] == 0
        resumed_at[events[0]["data"]["rank"]] = events[2]["data"]["resumed_step"]
    assert sorted(resumed_at) == [0, 1]

    # The process that holds each rank at the end joined at resumed_at[rank]: its model ran
    # forward and backward for no step before that, and for every step from it on.
    total = 4 * 8
    for rank, joined in resumed_at.items():
        calls = json.loads((job.out / f"calls{rank}.json").read_text())
        assert calls["forward"] == list(range(joined, total)), (rank, joined, calls)
        assert calls["backward"] == list(range(joined, total)), (rank, joined, calls)

    # Nothing of the catch-up is visible: output, log and the script's checkpoints.
    assert _script_lines(job) == _script_lines(baseline)
    assert len(_script_lines(baseline)) == len(range(0, total, 3))
    log = (job.out / "log.txt").read_text()
    assert log == (baseline.out / "log.txt").read_text()
    saved = sorted(p.name for p in baseline.out.glob("ckpt_*.pt"))
    assert sorted(p.name for p in job.out.glob("ckpt_*.pt")) == saved
    assert len(saved) == 5
    for name in saved:
        ours = torch.load(job.out / name)
        theirs = torch.load(baseline.out / name)
        assert ours.keys() == theirs.keys()
        for key, tensor in theirs.items():
            assert torch.equal(ours[key], tensor), (name, key)


def test_no_spare_left_rolls_back_to_the_checkpoint(start_transparent, tmp_path):
    """Transparent mode's fallback: with no spare, every rank restarts the script on a fresh
    process, catches up to the newest checkpoint and goes on; reported as the rollback it is."""
    args = ["--steps", "60"]
    checkpoints = ["--checkpoint-dir", str(tmp_path / "ckpt"), "--checkpoint-every", "10"]
    slow = args + ["--step-sleep", "0.1"]
    job = start_transparent("job", "manual_allreduce.py", slow, 0, checkpoints)
    baseline = start_transparent("baseline", "manual_allreduce.py", args, 0)
    job.wait_step(25)
    os.kill(job.worker_pid(1), signal.SIGKILL)
    job.wait_for(lambda: job.events("job.resumed"), timeout=120, what="rollback")
    assert job.wait_done() == 0, job.output()
    assert baseline.wait_done() == 0, baseline.output()

    assert_bit_identical(job.final_states(), baseline.final_states())
    (events,) = incidents(job).values()
    assert event_types(events) == ROLLED_BACK
    restored = events[2]["data"]
    assert restored["checkpoint_step"] in (20, 30)
    # Every step completed after the checkpoint runs again. The detected step is the killed
    # rank's last heartbeat, which can trail the step the survivor had completed by one.
    detected = events[0]["data"]["step"]
    completed = restored["checkpoint_step"] + restored["steps_lost"]
    assert detected <= completed <= detected + 1, (detected, restored)
    assert restored["steps_lost"] > 0
