"""Voiding a credit: a reason is required, an exported credit is never changed."""

import pytest

from tests.platform.account_team import missed_credits, records, staff
from yoco.guarantee.actions import (
    ActionError,
    do_approve_credit,
    do_export_credit,
    do_void_credit,
)
from yoco.guarantee.models import Credit


@pytest.mark.parametrize("reason", ["", "   ", None])
def test_void_needs_a_reason(contract_factory, api, reason):
    (credit,) = missed_credits(contract_factory, api)
    with pytest.raises(ActionError, match="reason"):
        do_void_credit(credit, actor=staff("alice"), reason=reason)
    credit.refresh_from_db()
    assert credit.state == Credit.EARNED
    assert records(credit, "void_credit") == []


@pytest.mark.parametrize("approve_first", [False, True])
def test_void_earned_or_approved_credit(contract_factory, api, approve_first):
    (credit,) = missed_credits(contract_factory, api)
    alice = staff("alice")
    if approve_first:
        do_approve_credit(credit, actor=alice)
    voided = do_void_credit(credit, actor=alice, reason="customer churned before renewal")
    assert voided.state == Credit.VOIDED
    (record,) = records(credit, "void_credit")
    assert record.reason == "customer churned before renewal"
    assert record.before["state"] == ("approved" if approve_first else "earned")
    assert record.after["state"] == "voided"
    assert voided.change_seq == record.pk
    with pytest.raises(ActionError):
        do_approve_credit(credit, actor=staff("bob"))


def test_exported_credit_is_never_voided(contract_factory, api):
    (credit,) = missed_credits(contract_factory, api)
    do_approve_credit(credit, actor=staff("alice"))
    exported, changed = do_export_credit(credit, actor="billing:test")
    assert changed and exported.state == Credit.EXPORTED
    before = Credit.objects.filter(pk=credit.pk).values().get()
    with pytest.raises(ActionError, match="exported"):
        do_void_credit(credit, actor=staff("bob"), reason="too late")
    assert Credit.objects.filter(pk=credit.pk).values().get() == before


def test_credits_and_audit_records_cannot_be_deleted_in_the_admin(contract_factory, api, client):
    (credit,) = missed_credits(contract_factory, api)
    client.force_login(staff("alice"))
    record = records(credit)[0]
    for url in (
        f"/admin/guarantee/credit/{credit.pk}/delete/",
        f"/admin/accounts/auditrecord/{record.pk}/delete/",
    ):
        assert client.post(url, {"post": "yes"}).status_code == 403
    assert Credit.objects.filter(pk=credit.pk).exists()
    assert records(credit)[0].pk == record.pk
