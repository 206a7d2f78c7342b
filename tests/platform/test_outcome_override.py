"""The account team overrides an incident's outcome, with a reason (SPEC 4.3)."""

import pytest

from tests.conftest import cloud_event, post_events
from tests.platform.account_team import AFTER_YEAR_1, fail_once, records, staff
from yoco.guarantee.actions import (
    ActionError,
    do_clear_override,
    do_close_due_years,
    do_override_outcome,
)
from yoco.guarantee.models import ContractYear, Incident


def year1(created):
    return ContractYear.objects.get(contract=created.contract, number=1)


@pytest.fixture
def failed_incident(acme, api):
    fail_once(api, acme, "east")
    do_close_due_years(now=year1(acme).start.replace(month=6))  # expire it; nothing closes
    incident = Incident.objects.get()
    assert incident.outcome == "failed" and year1(acme).counts["failed"] == 1
    return incident


def test_override_is_kept_with_its_author_and_the_open_year_follows(acme, failed_incident):
    alice = staff("alice")
    incident = do_override_outcome(
        failed_incident, outcome="excluded", reason="customer's own NCCL bug", actor=alice
    )
    assert incident.outcome == "excluded" and incident.computed_outcome == "failed"
    assert incident.override_outcome == "excluded"
    assert incident.override_reason == "customer's own NCCL bug"
    assert incident.override_by == alice and incident.override_at is not None
    counts = year1(acme).counts
    assert counts["failed"] == 0 and counts["excluded"] == 1
    (record,) = records(incident, "override_outcome")
    assert record.actor == alice and record.reason == "customer's own NCCL bug"
    assert record.before["outcome"] == "failed" and record.before["override_outcome"] is None
    assert record.after["outcome"] == "excluded" and record.after["override_by"] == "alice"


def test_override_survives_later_events(acme, api, failed_incident):
    do_override_outcome(failed_incident, outcome="excluded", reason="r", actor=staff("alice"))
    late = cloud_event("migration.failed", subject="inc-1", time="2026-03-01T10:01:00Z", reason="x")
    assert post_events(api, acme.cluster_keys["east"], [late]).status_code == 200
    incident = Incident.objects.get()
    assert incident.outcome == "excluded" and incident.override_by.username == "alice"


@pytest.mark.parametrize("reason", ["", "  ", None])
def test_override_needs_a_reason(failed_incident, reason):
    with pytest.raises(ActionError, match="reason"):
        do_override_outcome(failed_incident, outcome="excluded", reason=reason, actor=staff("a"))
    assert Incident.objects.get().outcome == "failed"
    assert records(failed_incident) == []


def test_override_outcome_must_be_a_decision(failed_incident):
    for outcome in ("pending", "great", None):
        with pytest.raises(ActionError):
            do_override_outcome(
                failed_incident, outcome=outcome, reason="r", actor=staff(f"u{outcome}")
            )


def test_a_closed_year_is_marked_for_review_not_changed(acme, failed_incident):
    do_close_due_years(now=AFTER_YEAR_1)
    closed = year1(acme)
    assert closed.state == "closed" and closed.counts["failed"] == 1
    do_override_outcome(failed_incident, outcome="live_resolved", reason="r", actor=staff("al"))
    after = year1(acme)
    assert after.counts == closed.counts and after.state == "closed"
    assert after.needs_review is True and "live_resolved 1" in after.review_note


def test_clear_override_goes_back_to_the_computed_outcome(acme, failed_incident):
    alice, bob = staff("alice"), staff("bob")
    do_override_outcome(failed_incident, outcome="live_resolved", reason="r", actor=alice)
    assert year1(acme).counts["live_resolved"] == 1
    with pytest.raises(ActionError, match="reason"):
        do_clear_override(failed_incident, reason="", actor=bob)
    incident = do_clear_override(failed_incident, reason="evidence was wrong", actor=bob)
    assert incident.outcome == "failed" and incident.override_outcome is None
    assert incident.override_by is None and incident.override_reason == ""
    assert year1(acme).counts["failed"] == 1
    (record,) = records(incident, "clear_override")
    assert (
        record.before["override_outcome"] == "live_resolved" and record.after["outcome"] == "failed"
    )
    with pytest.raises(ActionError, match="no override"):
        do_clear_override(failed_incident, reason="again", actor=bob)


def test_only_the_account_team_overrides(acme, failed_incident):
    from tests.platform.account_team import customer_user

    with pytest.raises(ActionError):
        do_override_outcome(
            failed_incident,
            outcome="excluded",
            reason="r",
            actor=customer_user("owner", acme.contract.customer),
        )
