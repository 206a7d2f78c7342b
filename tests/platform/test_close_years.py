"""close_years closes years past end + grace, earns the credit of a miss once, and freezes."""

import json
from io import StringIO

from django.core.management import call_command

from tests.conftest import cloud_event, post_events
from yoco.accounts.models import AuditRecord
from yoco.guarantee.models import ContractYear, Credit


def _failed(subject, time):
    return cloud_event("failure.detected", subject=subject, time=time, trigger="unplanned",
                       category="gpu_xid")  # fmt: skip


def _live(subject, time, resumed):
    return [
        _failed(subject, time),
        cloud_event(
            "migration.completed", subject=subject, time=resumed, steps_lost=0, duration_ms=900
        ),  # fmt: skip
        cloud_event("job.resumed", subject=subject, time=resumed, step=3),
    ]


def _close(now):
    out = StringIO()
    call_command("close_years", now=now, stdout=out)
    return out.getvalue()


def test_not_due_before_end_plus_grace(acme, api):
    assert "No contract year" in _close("2027-01-07T23:59:59Z")
    assert not ContractYear.objects.filter(state="closed").exists()


def test_due_year_that_meets_closes_without_credit(acme, api):
    post_events(api, acme.cluster_keys["east"], _live("a", "2026-03-01T00:00:00Z",
                                                       "2026-03-01T00:05:00Z"))  # fmt: skip
    output = _close("2027-01-08T00:00:00Z")
    assert "year 1" in output and "meets" in output
    year = ContractYear.objects.get(number=1)
    assert year.state == "closed" and year.counts["live_resolved"] == 1
    assert not Credit.objects.exists()
    assert ContractYear.objects.get(number=2).state == "open"


def test_missed_year_earns_one_credit_with_evidence(acme, api):
    post_events(api, acme.cluster_keys["east"], [_failed("a", "2026-03-01T00:00:00Z")])
    output = _close("2027-01-08T00:00:00+00:00")
    assert "MISSES" in output and "300000.00 USD" in output
    credit = Credit.objects.get()
    assert credit.state == "earned"
    assert credit.evidence["counts"]["failed"] == 1
    assert credit.evidence["rules_version"]
    assert len(credit.evidence["incident_ids"]) == 1
    assert AuditRecord.objects.filter(action="earn_credit").count() == 1
    years = api.get(f"/api/v1/contracts/{acme.contract.pk}/years",
                    HTTP_AUTHORIZATION=f"Bearer {acme.read_token}").json()  # fmt: skip
    assert years["years"][0]["state"] == "closed"
    assert years["years"][0]["credit"] == {"state": "earned", "amount": "300000.00",
                                           "currency": "USD"}  # fmt: skip


def test_second_run_changes_nothing(acme, api):
    post_events(api, acme.cluster_keys["east"], [_failed("a", "2026-03-01T00:00:00Z")])
    _close("2027-01-08T00:00:00Z")
    before = list(AuditRecord.objects.values_list("pk", flat=True))
    assert "No contract year" in _close("2027-01-08T00:00:00Z")
    assert list(AuditRecord.objects.values_list("pk", flat=True)) == before
    assert Credit.objects.count() == 1


def test_late_event_marks_closed_year_for_review_and_keeps_result(acme, api):
    _close("2027-01-08T00:00:00Z")
    post_events(api, acme.cluster_keys["east"], [_failed("late", "2026-06-01T00:00:00Z")])
    year = ContractYear.objects.get(number=1)
    assert year.state == "closed" and year.needs_review
    assert year.counts["failed"] == 0


def test_now_without_offset_is_utc(acme):
    assert "No contract year" in _close("2027-01-07T23:59:59")
    assert "year 1" in _close("2027-01-08T00:00:00")


def test_bad_now_is_a_clear_error(acme):
    import pytest
    from django.core.management import CommandError

    with pytest.raises(CommandError, match="--now"):
        _close("next tuesday")


def test_command_output_json_free(acme):
    # close_years prints plain lines; create_contract's last line is JSON (tested apart).
    assert not _close("2026-01-01T00:00:00Z").startswith("{")
    json.dumps(acme.cluster_keys)
