"""Booking the renewal/expansion order value: amount = credit rate × order value (SPEC 4.5)."""

from decimal import Decimal

import pytest

from tests.platform.account_team import missed_credits, records, staff
from yoco.guarantee.actions import (
    ActionError,
    do_approve_credit,
    do_book_order,
    do_export_credit,
)
from yoco.guarantee.models import Credit


def test_booking_sets_amount_basis_and_author(contract_factory, api):
    (credit,) = missed_credits(contract_factory, api)
    alice = staff("alice")
    booked = do_book_order(credit, order_value=Decimal("1500000.10"), actor=alice, reason="PO-7")
    assert booked.amount == Decimal("375000.03")  # 25 % of 1,500,000.10, half-up
    assert booked.basis == Credit.BASIS_ORDER
    assert booked.order_value == Decimal("1500000.10")
    assert booked.amount_changed_by == alice
    (record,) = records(credit, "book_order")
    assert record.before["amount"] == "300000.00" and record.after["amount"] == "375000.03"
    assert record.before["basis"] == "annual_value_estimate"
    assert record.after["basis"] == "renewal_order"
    assert record.reason == "PO-7"
    assert booked.change_seq == record.pk


def test_booking_an_approved_credit_sends_it_back_for_approval(contract_factory, api):
    (credit,) = missed_credits(contract_factory, api)
    alice, bob = staff("alice"), staff("bob")
    do_approve_credit(credit, actor=alice)
    booked = do_book_order(credit, order_value=Decimal("800000"), actor=alice)
    assert booked.state == Credit.EARNED and booked.amount == Decimal("200000.00")
    with pytest.raises(ActionError, match="four-eyes"):
        do_approve_credit(credit, actor=alice)
    assert do_approve_credit(credit, actor=bob).state == Credit.APPROVED


def test_exported_credit_amount_never_changes(contract_factory, api):
    (credit,) = missed_credits(contract_factory, api)
    do_approve_credit(credit, actor=staff("alice"))
    do_export_credit(credit, actor="billing:test")
    with pytest.raises(ActionError, match="exported"):
        do_book_order(credit, order_value=Decimal("1"), actor=staff("bob"))
    credit.refresh_from_db()
    assert credit.amount == Decimal("300000.00") and credit.state == Credit.EXPORTED


@pytest.mark.parametrize("value", [Decimal("100.001"), Decimal("-5"), Decimal("NaN")])
def test_order_value_must_be_money(contract_factory, api, value):
    (credit,) = missed_credits(contract_factory, api)
    with pytest.raises(ActionError):
        do_book_order(credit, order_value=value, actor=staff("alice"))
    credit.refresh_from_db()
    assert credit.basis == Credit.BASIS_ANNUAL_VALUE and records(credit, "book_order") == []
