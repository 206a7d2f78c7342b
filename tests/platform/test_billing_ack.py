"""POST /api/v1/billing/credits/{id}/ack: approved → exported, idempotent (SPEC 5)."""

from tests.platform.account_team import billing_token, missed_credits, records, staff
from yoco.guarantee.actions import do_approve_credit, do_void_credit
from yoco.guarantee.models import Credit


def ack(api, token, credit_id):
    return api.post(
        f"/api/v1/billing/credits/{credit_id}/ack", HTTP_AUTHORIZATION=f"Bearer {token}"
    )


def test_ack_exports_and_a_repeat_answers_the_same(contract_factory, api):
    (credit,) = missed_credits(contract_factory, api)
    do_approve_credit(credit, actor=staff("alice"))
    token = billing_token()
    first = ack(api, token, credit.pk)
    assert first.status_code == 200
    body = first.json()
    assert body["id"] == credit.pk and body["state"] == "exported"
    assert body["amount"] == "300000.00" and body["exported_at"] is not None
    second = ack(api, token, credit.pk)
    assert second.status_code == 200 and second.json() == body
    (record,) = records(credit, "export_credit")
    assert record.actor is None and record.actor_label.startswith("billing:")
    assert record.before["state"] == "approved" and record.after["state"] == "exported"
    credit.refresh_from_db()
    assert credit.state == Credit.EXPORTED and credit.change_seq == record.pk == body["change_seq"]


def test_ack_of_a_credit_not_approved_is_409(contract_factory, api):
    earned, voided = missed_credits(contract_factory, api, n=2)
    do_void_credit(voided, actor=staff("alice"), reason="wrong contract")
    token = billing_token()
    for credit in (earned, voided):
        response = ack(api, token, credit.pk)
        assert response.status_code == 409
        assert "detail" in response.json()
        state = credit.state if credit is earned else Credit.VOIDED
        assert Credit.objects.get(pk=credit.pk).state == state
    assert records(earned, "export_credit") == []


def test_ack_of_an_unknown_credit_is_404(db, api):
    assert ack(api, billing_token(), 999999).status_code == 404
