"""POST/GET /api/v1/incidents/{id}/disputes: the owner's token, a teammate's portal session,
and another customer (404) (SPEC 5)."""

import json

import pytest

from tests.platform.account_team import customer_user, fail_once
from yoco.guarantee.models import Dispute, Incident


@pytest.fixture
def incident(acme, api):
    fail_once(api, acme, "east")
    return Incident.objects.get()


def _post(api, incident, body, **headers):
    return api.post(
        f"/api/v1/incidents/{incident.pk}/disputes",
        data=json.dumps(body),
        content_type="application/json",
        **headers,
    )


def test_owner_token_opens_and_lists(acme, api, incident):
    auth = {"HTTP_AUTHORIZATION": f"Bearer {acme.read_token}"}
    response = _post(api, incident, {"reason": "the GPU failed, not our code"}, **auth)
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["state"] == "open" and body["incident"] == incident.pk
    assert body["reason"] == "the GPU failed, not our code" and body["answer"] == ""
    assert body["opened_by"].startswith("read token ")
    listed = api.get(f"/api/v1/incidents/{incident.pk}/disputes", **auth).json()
    assert [d["id"] for d in listed] == [body["id"]]
    # a second open dispute on the same incident is a conflict, not a copy
    assert _post(api, incident, {"reason": "again"}, **auth).status_code == 409
    assert Dispute.objects.count() == 1


def test_teammate_session_opens(acme, api, incident):
    api.force_login(customer_user("teammate", acme.contract.customer))
    response = _post(api, incident, {"reason": "wrong category"})
    assert response.status_code == 201, response.content
    assert response.json()["opened_by"] == "teammate"
    assert Dispute.objects.get().opened_by.username == "teammate"


def test_outsider_sees_404(acme, outsider, api, incident):
    auth = {"HTTP_AUTHORIZATION": f"Bearer {outsider.read_token}"}
    assert _post(api, incident, {"reason": "x"}, **auth).status_code == 404
    assert api.get(f"/api/v1/incidents/{incident.pk}/disputes", **auth).status_code == 404
    api.force_login(customer_user("outsider", outsider.contract.customer))
    assert _post(api, incident, {"reason": "x"}).status_code == 404
    assert not Dispute.objects.exists()


@pytest.mark.parametrize(
    "body", [{}, {"reason": ""}, {"reason": "   "}, {"reason": 5 * 2000 * "x"}]
)
def test_bad_reason_is_400_or_409(acme, api, incident, body):
    auth = {"HTTP_AUTHORIZATION": f"Bearer {acme.read_token}"}
    assert _post(api, incident, body, **auth).status_code in (400, 409)
    assert not Dispute.objects.exists()


def test_no_credentials_is_401_and_other_scope_403(acme, api, incident):
    assert _post(api, incident, {"reason": "x"}).status_code == 401
    key = {"HTTP_AUTHORIZATION": f"Bearer {acme.cluster_keys['east']}"}
    assert _post(api, incident, {"reason": "x"}, **key).status_code == 403
