"""A `rejected` (or `conflict`) answer is logged at WARNING with the reason and the event kept in
the dead letters, never retried; the rest of the batch is delivered."""

import json
import logging
import subprocess

import pytest

from agent.spool import Sender, Spool
from tests.e2e.conftest import PYTHON, ROOT, event

pytestmark = pytest.mark.integration


def test_rejected_goes_to_dead_letters_and_is_not_retried(fake_platform, tmp_path, caplog):
    fake_platform.up()
    fake_platform.reject = {"evt-2"}
    fake_platform.stored[("/clusters/ci/jobs/spool", "evt-4")] = {"other": "content"}
    spool_path = tmp_path / "spool.sqlite3"
    spool = Spool(spool_path)
    for n in range(6):
        spool.put(event(n))
    sender = Sender(spool, fake_platform.url, fake_platform.key)
    with caplog.at_level(logging.WARNING, logger="yoco.agent.spool"):
        assert sender.flush(timeout_s=10) is True
        assert sender.flush(timeout_s=1) is True  # nothing left to retry
    assert spool.pending_count() == 0
    dead = {d["id"]: d for d in spool.dead_letters()}
    assert set(dead) == {"evt-2", "evt-4"}
    assert dead["evt-2"]["status"] == "rejected" and "sideways" in dead["evt-2"]["reason"]
    assert dead["evt-4"]["status"] == "conflict"
    assert fake_platform.posts_per_id["evt-2"] == 1  # never retried
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("REJECTED event evt-2" in w and "sideways" in w for w in warnings), warnings

    # The operator sees them with their reasons.
    shown = subprocess.run(
        [PYTHON, "-m", "agent.cli", "spool", "show", "--spool", str(spool_path), "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    summary = json.loads(shown.stdout)
    assert summary["pending"] == 0 and summary["dead"] == 2 and summary["delivered"] == 4
    assert {d["id"] for d in summary["dead_letters"]} == {"evt-2", "evt-4"}

    # Once the cause is fixed, `spool flush --requeue-dead` sends them again.
    fake_platform.reject = set()
    del fake_platform.stored[("/clusters/ci/jobs/spool", "evt-4")]
    flushed = subprocess.run(
        [PYTHON, "-m", "agent.cli", "spool", "flush", "--spool", str(spool_path),
         "--platform", fake_platform.url, "--cluster-key", fake_platform.key, "--requeue-dead"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert flushed.returncode == 0, flushed.stderr
    assert "0 pending, 0 dead" in flushed.stdout
    assert len(fake_platform.stored) == 6
