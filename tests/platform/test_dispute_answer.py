"""The account team upholds a dispute (an override with its reason; the open year's counts
follow; a closed year is marked for review, an exported credit never changes) or rejects it."""

import pytest

from tests.platform.account_team import AFTER_YEAR_1, fail_once, records, staff
from yoco.guarantee.actions import (
    ActionError,
    do_approve_credit,
    do_close_due_years,
    do_export_credit,
    do_open_dispute,
    do_reject_dispute,
    do_uphold_dispute,
)
from yoco.guarantee.models import ContractYear, Credit, Incident


def year1(created):
    return ContractYear.objects.get(contract=created.contract, number=1)


@pytest.fixture
def dispute(acme, api):
    fail_once(api, acme, "east")
    do_close_due_years(now=year1(acme).start.replace(month=6))  # expire it; nothing closes
    assert year1(acme).counts["failed"] == 1
    return do_open_dispute(Incident.objects.get(), reason="the GPU died", label="read token x")


def test_uphold_overrides_with_the_reason_and_the_open_year_follows(acme, dispute):
    alice = staff("alice")
    answered = do_uphold_dispute(
        dispute, outcome="excluded", reason="XID 79 confirmed", actor=alice
    )
    assert answered.state == "upheld" and answered.answer == "XID 79 confirmed"
    incident = Incident.objects.get()
    assert incident.outcome == "excluded" and incident.override_by == alice
    assert "XID 79 confirmed" in incident.override_reason
    counts = year1(acme).counts
    assert counts["failed"] == 0 and counts["excluded"] == 1
    (record,) = records(answered, "uphold_dispute")
    assert record.reason == "XID 79 confirmed" and record.actor == alice
    assert record.before["state"] == "open" and record.after["state"] == "upheld"
    (override,) = records(incident, "override_outcome")
    assert "XID 79 confirmed" in override.reason
    with pytest.raises(ActionError, match="already upheld"):
        do_reject_dispute(answered, reason="no", actor=staff("bob"))


def test_reject_keeps_the_outcome(acme, dispute):
    answered = do_reject_dispute(dispute, reason="user code raised", actor=staff("alice"))
    assert answered.state == "rejected" and answered.answer == "user code raised"
    assert Incident.objects.get().outcome == "failed"
    assert year1(acme).counts["failed"] == 1
    assert records(answered, "reject_dispute")[0].reason == "user code raised"


@pytest.mark.parametrize("reason", ["", "   "])
def test_an_answer_needs_a_reason_and_the_account_team(dispute, reason):
    with pytest.raises(ActionError, match="reason"):
        do_reject_dispute(dispute, reason=reason, actor=staff("alice"))
    with pytest.raises(ActionError):
        do_reject_dispute(dispute, reason="r", actor=None)
    dispute.refresh_from_db()
    assert dispute.state == "open"


def test_upheld_on_a_closed_year_marks_review_and_never_changes_an_exported_credit(acme, api):
    fail_once(api, acme, "east")
    do_close_due_years(now=AFTER_YEAR_1)
    credit = Credit.objects.get()
    do_approve_credit(credit, actor=staff("alice"))
    do_export_credit(credit, actor="billing:test")
    closed = year1(acme)
    dispute = do_open_dispute(Incident.objects.get(), reason="GPU", label="t")
    do_uphold_dispute(dispute, outcome="live_resolved", reason="agent log", actor=staff("bob"))
    after = year1(acme)
    assert after.counts == closed.counts and after.needs_review
    exported = Credit.objects.get()
    assert exported.state == "exported" and exported.amount == credit.amount
