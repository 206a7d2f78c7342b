"""Reopening a closed year: reason required; its unexported credit is voided; exported refuses."""

import pytest
import time_machine

from tests.platform.account_team import AFTER_YEAR_1, fail_once, missed_credits, records, staff
from yoco.guarantee.actions import (
    ActionError,
    do_approve_credit,
    do_close_due_years,
    do_close_year_now,
    do_export_credit,
    do_reopen_year,
)
from yoco.guarantee.models import ContractYear, Credit


def test_reopen_needs_a_reason(contract_factory, api):
    (credit,) = missed_credits(contract_factory, api)
    year = credit.contract_year
    for reason in ("", "  ", None):
        with pytest.raises(ActionError, match="reason"):
            do_reopen_year(year, actor=staff(f"u{reason!r}"), reason=reason)
    year.refresh_from_db()
    assert year.state == ContractYear.CLOSED
    assert records(year, "reopen_year") == []


def test_reopen_opens_the_year_and_voids_its_unexported_credit(contract_factory, api):
    (credit,) = missed_credits(contract_factory, api)
    alice = staff("alice")
    do_approve_credit(credit, actor=alice)
    year = do_reopen_year(credit.contract_year, actor=alice, reason="late events from cluster")
    assert year.state == ContractYear.OPEN and year.closed_at is None
    assert year.needs_review is False
    (record,) = records(year, "reopen_year")
    assert record.reason == "late events from cluster"
    assert record.before["state"] == "closed" and record.after["state"] == "open"
    credit.refresh_from_db()
    assert credit.state == Credit.VOIDED
    (void,) = records(credit, "void_credit")
    assert "reopened" in void.reason and void.before["state"] == "approved"
    assert credit.change_seq == void.pk

    # Closing again earns a fresh credit from the final counts.
    do_close_due_years(now=AFTER_YEAR_1)
    year.refresh_from_db()
    assert year.state == ContractYear.CLOSED
    fresh = year.credits.exclude(state=Credit.VOIDED).get()
    assert fresh.pk != credit.pk and fresh.state == Credit.EARNED


def test_year_with_an_exported_credit_cannot_be_reopened(contract_factory, api):
    (credit,) = missed_credits(contract_factory, api)
    do_approve_credit(credit, actor=staff("alice"))
    do_export_credit(credit, actor="billing:test")
    with pytest.raises(ActionError, match="exported"):
        do_reopen_year(credit.contract_year, actor=staff("bob"), reason="late events")
    year = ContractYear.objects.get(pk=credit.contract_year_id)
    assert year.state == ContractYear.CLOSED
    assert Credit.objects.get(pk=credit.pk).state == Credit.EXPORTED


def test_an_open_year_cannot_be_reopened(acme):
    year = ContractYear.objects.get(contract=acme.contract, number=1)
    with pytest.raises(ActionError, match="not closed"):
        do_reopen_year(year, actor=staff("alice"), reason="why not")


def test_close_by_hand_refuses_a_year_not_over(acme, api):
    fail_once(api, acme, "east")
    alice = staff("alice")
    first, second = ContractYear.objects.filter(contract=acme.contract).order_by("number")
    with time_machine.travel(AFTER_YEAR_1, tick=False):  # year 1 over, year 2 running
        with pytest.raises(ActionError, match="cannot close yet"):
            do_close_year_now(second, actor=alice)
        assert do_close_year_now(first, actor=alice) is True
    assert first.credits.get().state == Credit.EARNED
    second.refresh_from_db()
    assert second.state == ContractYear.OPEN
