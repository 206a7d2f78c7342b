"""The platform SIGKILLed in the middle of a run and started again: the agent's spool keeps
what it could not deliver and sends it once the platform is back. No event is lost, none is
stored twice: the platform's stored events are exactly the ids the agent emitted."""

import os
import signal
import time

import pytest

from tests.agent.conftest import incidents, start_job  # noqa: F401 - the fixture
from tests.e2e.conftest import agent_job, stored_events, wait_spares_ready

pytestmark = [pytest.mark.integration, pytest.mark.agent]


def test_platform_killed_and_restarted_mid_run(platform, start_job, tmp_path):  # noqa: F811
    created = platform.create_contract("e2e-restart")
    platform.start()
    key = created["cluster_keys"]["e2e-restart"]
    job = agent_job(start_job, "restart", platform.url, key, "e2e-restart", spares=2, steps=60,
                    tmp=tmp_path)  # fmt: skip

    wait_spares_ready(job, 2)
    job.wait_step(6)
    job.wait_for(lambda: stored_events(platform, "e2e-restart"), 30, "job.started delivered")
    platform.kill()  # SIGKILL: master and workers, mid-run
    os.kill(job.worker_pid(0), signal.SIGKILL)  # a failure while the platform is down
    job.wait_for(lambda: len(job.events("job.resumed")) >= 1, 90, "recovery 1")
    job.wait_step(20)
    job.inject("thermal", 1)
    job.wait_for(lambda: len(job.events("job.resumed")) >= 2, 90, "recovery 2")
    time.sleep(1.5)  # the sender has failed a few rounds by now
    platform.start()  # the same port, the same database
    assert job.wait_done(timeout=180) == 0, job.output()

    emitted = job.events()
    stored = stored_events(platform, "e2e-restart")
    emitted_ids = sorted(e["id"] for e in emitted)
    stored_ids = sorted(s["event_id"] for s in stored)
    assert len(stored_ids) == len(set(stored_ids))  # none twice
    assert stored_ids == emitted_ids  # none lost
    by_id = {e["id"]: e for e in emitted}
    for row in stored:
        assert row["raw"] == by_id[row["event_id"]]  # the very event the agent emitted
    shown = platform.incidents(created["contract"], created["read_token"])
    assert {i["subject"] for i in shown} == set(incidents(job))
    assert sorted(i["outcome"] for i in shown) == ["live_resolved", "live_resolved"]
