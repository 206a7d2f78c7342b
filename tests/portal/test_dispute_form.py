"""The portal's dispute form and answer, per visitor: the owner disputes, a teammate sees the
answer and filters by it, another customer's user gets 404."""

import pytest
from django.test import Client

from tests.platform.account_team import customer_user, fail_once, staff
from yoco.guarantee.actions import do_reject_dispute
from yoco.guarantee.models import Dispute, Incident


@pytest.fixture
def incident(acme, api):
    fail_once(api, acme, "east")
    return Incident.objects.get()


def _client(user):
    client = Client()
    client.force_login(user)
    return client


def test_owner_disputes_teammate_sees_the_answer_and_filters(acme, incident):
    customer = acme.contract.customer
    owner = _client(customer_user("owner", customer))
    response = owner.post(f"/incidents/{incident.pk}/dispute", {"reason": "the GPU died"})
    assert response.status_code == 302
    dispute = Dispute.objects.get()
    assert dispute.opened_by.username == "owner" and dispute.state == "open"
    do_reject_dispute(dispute, reason="NCCL timeout in user code", actor=staff("alice"))

    teammate = _client(customer_user("teammate", customer))
    page = teammate.get(f"/incidents/{incident.pk}/").content.decode()
    assert "the GPU died" in page and "NCCL timeout in user code" in page and "rejected" in page
    listed = teammate.get("/incidents/?dispute=rejected").content.decode()
    assert f"/incidents/{incident.pk}/" in listed
    assert (
        f"/incidents/{incident.pk}/"
        not in teammate.get("/incidents/?dispute=open").content.decode()
    )


def test_empty_reason_is_refused(acme, incident):
    owner = _client(customer_user("owner", acme.contract.customer))
    owner.post(f"/incidents/{incident.pk}/dispute", {"reason": "  "})
    assert not Dispute.objects.exists()


def test_outsider_gets_404(acme, contract_factory, incident):
    other = contract_factory(customer_name="Other Labs", clusters=["north"])
    stranger = _client(customer_user("stranger", other.contract.customer))
    assert stranger.post(f"/incidents/{incident.pk}/dispute", {"reason": "x"}).status_code == 404
    assert stranger.get(f"/incidents/{incident.pk}/").status_code == 404
    assert not Dispute.objects.exists()
