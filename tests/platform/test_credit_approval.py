"""Approving a credit: earned → approved, four-eyes (SPEC 4.5), audited and re-sequenced."""

from decimal import Decimal

import pytest

from tests.platform.account_team import customer_user, missed_credits, records, staff
from yoco.guarantee.actions import ActionError, do_approve_credit, do_book_order
from yoco.guarantee.models import Credit


def test_system_earned_credit_is_approved_by_any_account_team_member(contract_factory, api):
    (credit,) = missed_credits(contract_factory, api)
    assert credit.amount_changed_by is None and credit.amount == Decimal("300000.00")
    alice = staff("alice")
    approved = do_approve_credit(credit, actor=alice, reason="checked the evidence")
    assert approved.state == Credit.APPROVED
    (record,) = records(credit, "approve_credit")
    assert record.actor == alice and record.actor_label == "alice"
    assert record.reason == "checked the evidence"
    assert record.before["state"] == "earned" and record.after["state"] == "approved"
    assert record.after["amount"] == "300000.00"
    credit.refresh_from_db()
    assert credit.change_seq == record.pk


def test_the_person_who_set_the_amount_cannot_approve_it(contract_factory, api):
    (credit,) = missed_credits(contract_factory, api)
    alice, bob = staff("alice"), staff("bob")
    do_book_order(credit, order_value=Decimal("2000000"), actor=alice)
    with pytest.raises(ActionError, match="four-eyes"):
        do_approve_credit(credit, actor=alice)
    credit.refresh_from_db()
    assert credit.state == Credit.EARNED
    assert records(credit, "approve_credit") == []
    assert do_approve_credit(credit, actor=bob).state == Credit.APPROVED


def test_only_the_account_team_approves(contract_factory, api):
    (credit,) = missed_credits(contract_factory, api)
    customer = credit.contract_year.contract.customer
    for actor in (None, customer_user("owner", customer)):
        with pytest.raises(ActionError):
            do_approve_credit(credit, actor=actor)
    credit.refresh_from_db()
    assert credit.state == Credit.EARNED


def test_approving_twice_is_refused(contract_factory, api):
    (credit,) = missed_credits(contract_factory, api)
    do_approve_credit(credit, actor=staff("alice"))
    with pytest.raises(ActionError, match="approved"):
        do_approve_credit(credit, actor=staff("bob"))
    assert len(records(credit, "approve_credit")) == 1
