"""The billing export takes a billing token only: read or ingest key 403, none or bad 401."""

import pytest

from tests.platform.account_team import billing_token, missed_credits, staff
from yoco.accounts.actions import do_revoke_key
from yoco.accounts.models import BillingToken
from yoco.guarantee.actions import do_approve_credit
from yoco.guarantee.models import Credit


@pytest.fixture
def approved(contract_factory, api):
    (credit,) = missed_credits(contract_factory, api)
    do_approve_credit(credit, actor=staff("alice"))
    return credit


def calls(api, credit, header):
    extra = {"HTTP_AUTHORIZATION": header} if header else {}
    return [
        api.get("/api/v1/billing/credits", **extra),
        api.post(f"/api/v1/billing/credits/{credit.pk}/ack", **extra),
    ]


def test_billing_token_is_accepted(approved, api):
    statuses = [r.status_code for r in calls(api, approved, f"Bearer {billing_token()}")]
    assert statuses == [200, 200]


def test_read_and_ingest_keys_are_403(approved, api, acme):
    for key in (acme.read_token, acme.cluster_keys["east"]):
        assert [r.status_code for r in calls(api, approved, f"Bearer {key}")] == [403, 403]
    assert Credit.objects.get(pk=approved.pk).state == Credit.APPROVED


@pytest.mark.parametrize("header", [None, "Bearer nope.nope", "Basic dXNlcjpwdw=="])
def test_no_or_unknown_key_is_401(approved, api, header):
    assert [r.status_code for r in calls(api, approved, header)] == [401, 401]
    assert Credit.objects.get(pk=approved.pk).state == Credit.APPROVED


def test_revoked_billing_token_is_401(approved, api):
    token = billing_token()
    do_revoke_key(BillingToken.objects.get(prefix=token.partition(".")[0]), actor=staff("bob"))
    assert [r.status_code for r in calls(api, approved, f"Bearer {token}")] == [401, 401]


def test_a_staff_session_is_not_a_billing_token(approved, client):
    client.force_login(staff("carol"))
    assert client.get("/api/v1/billing/credits").status_code == 401
    assert client.post(f"/api/v1/billing/credits/{approved.pk}/ack").status_code in (401, 403)
