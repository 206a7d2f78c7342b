"""A closed year with a credit whose evidence names events, overrides and dispute decisions."""

from dataclasses import dataclass

from tests.conftest import cloud_event, post_events
from tests.platform.account_team import AFTER_YEAR_1, staff
from yoco.guarantee.actions import (
    do_close_due_years,
    do_open_dispute,
    do_override_outcome,
    do_reject_dispute,
    do_uphold_dispute,
)
from yoco.guarantee.models import ContractYear, Credit, Incident


@dataclass
class ClosedYear:
    year: ContractYear
    credit: Credit
    incidents: dict[str, Incident]


def _failure(subject, time):
    return cloud_event("failure.detected", subject=subject, time=time, trigger="unplanned",
                       category="gpu_xid")  # fmt: skip


def close_missed_year(api, created) -> ClosedYear:
    """Year 1 of the default contract (2026) closed short of its 90 % target: one incident
    resolved live, one failed (its dispute rejected), one the account team excluded and one
    excluded by an upheld dispute; the job reported a supported framework. Live 1 of 2."""
    events = [
        cloud_event("job.started", time="2026-02-01T00:00:00Z", framework="pytorch",
                    world_size=8, gpus=8),
        _failure("live", "2026-03-01T00:00:00Z"),
        cloud_event("migration.completed", subject="live", time="2026-03-01T00:04:00Z",
                    steps_lost=0, duration_ms=900),
        cloud_event("job.resumed", subject="live", time="2026-03-01T00:05:00Z", step=3),
        _failure("failed", "2026-04-01T00:00:00Z"),
        _failure("overridden", "2026-05-01T00:00:00Z"),
        _failure("disputed", "2026-06-01T00:00:00Z"),
    ]  # fmt: skip
    response = post_events(api, created.cluster_keys["east"], events)
    assert response.status_code == 200, response.content
    incidents = {i.subject: i for i in Incident.objects.all()}
    alice = staff("alice")
    do_override_outcome(
        incidents["overridden"], outcome="excluded", actor=alice, reason="facility power"
    )
    upheld = do_open_dispute(incidents["disputed"], reason="the PDU tripped", label="token")
    do_uphold_dispute(upheld, outcome="excluded", actor=alice, reason="PDU trip confirmed")
    rejected = do_open_dispute(incidents["failed"], reason="it came back", label="token")
    do_reject_dispute(rejected, actor=alice, reason="it came back after the deadline")
    do_close_due_years(now=AFTER_YEAR_1)
    year = ContractYear.objects.get(contract=created.contract, number=1)
    assert year.state == ContractYear.CLOSED
    return ClosedYear(
        year=year,
        credit=Credit.objects.get(contract_year=year),
        incidents={i.subject: i for i in Incident.objects.all()},
    )
