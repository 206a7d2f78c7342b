"""End to end: the platform under gunicorn, a real training job under the agent reporting to it
over HTTP, four injected failures. What the platform shows (incidents, outcomes, /years) is what
the agent did, outcome by outcome."""

import os
import signal

import pytest

from tests.agent.conftest import incidents, start_job  # noqa: F401 - the fixture
from tests.e2e.conftest import agent_job, stored_events, wait_spares_ready

pytestmark = [pytest.mark.integration, pytest.mark.agent]


def expected_outcome(events: list[dict]) -> str:
    """SPEC 4.3 from the agent's own record (default contract: nothing excluded here)."""
    kinds = {e["type"].removeprefix("io.yoco."): e["data"] for e in events}
    if kinds["failure.detected"]["trigger"] == "planned":
        return "planned"
    if "checkpoint.restored" in kinds:
        return "rolled_back"
    assert kinds["migration.completed"]["steps_lost"] == 0 and "job.resumed" in kinds
    return "live_resolved"


def test_incidents_and_years_match_what_the_agent_did(platform, start_job, tmp_path):  # noqa: F811
    created = platform.create_contract("e2e-live")
    platform.start()
    key = created["cluster_keys"]["e2e-live"]
    job = agent_job(start_job, "live", platform.url, key, "e2e-live", spares=3, steps=80,
                    tmp=tmp_path)  # fmt: skip

    def resumed(n):
        job.wait_for(lambda: len(job.events("job.resumed")) >= n, 90, f"recovery {n}")

    wait_spares_ready(job, 3)
    job.wait_step(8)
    os.kill(job.worker_pid(0), signal.SIGKILL)  # unplanned, live
    resumed(1)
    job.wait_step(22)
    job.inject("thermal", 1)  # pre-emptive, live
    resumed(2)
    job.wait_step(36)
    job.drain(0)  # planned
    resumed(3)
    job.wait_step(52)
    os.kill(job.worker_pid(1), signal.SIGKILL)  # no spare left: checkpoint fallback
    resumed(4)
    assert job.wait_done(timeout=180) == 0, job.output()

    by_subject = incidents(job)
    assert len(by_subject) == 4
    expected = {subject: expected_outcome(events) for subject, events in by_subject.items()}
    assert sorted(expected.values()) == ["live_resolved", "live_resolved", "planned",
                                         "rolled_back"]  # fmt: skip

    # The sink flushed on close: the platform already holds everything, nothing twice.
    emitted = job.events()
    stored = stored_events(platform, "e2e-live")
    assert sorted(e["id"] for e in emitted) == sorted(s["event_id"] for s in stored)
    token = created["read_token"]
    shown = {i["subject"]: i for i in platform.incidents(created["contract"], token)}
    assert set(shown) == set(expected)
    for subject, outcome in expected.items():
        incident = shown[subject]
        assert incident["outcome"] == outcome, (subject, incident)
        detected = by_subject[subject][0]["data"]
        assert incident["trigger"] == detected["trigger"]
        assert incident["category"] == detected["category"]
        assert sorted(e["id"] for e in incident["events"]) == sorted(
            e["id"] for e in by_subject[subject]
        )

    years = platform.get(f"/api/v1/contracts/{created['contract']}/years", token)["years"]
    year = years[0]  # 2026: the run happens in it
    assert year["counts"] == {"live_resolved": 2, "rolled_back": 1, "failed": 0, "pending": 0,
                              "excluded": 0, "planned": 1}  # fmt: skip
    assert year["eligible"] == 3 and year["compliance"] == "0.6667" and year["meets"] is False
    assert all(y["eligible"] == 0 for y in years[1:])
