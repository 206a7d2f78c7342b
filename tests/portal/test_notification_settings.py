"""The notifications settings page per visitor: the owner adds a contact and an endpoint (its
secret shown in that answer only), a teammate sees them and sends a test, another customer's
user neither sees nor touches them."""

import pytest
from django.test import Client

from tests.platform.account_team import customer_user
from yoco.notifications.models import Contact, Endpoint, Notification


def _client(user):
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def owner(acme):
    return _client(customer_user("owner", acme.contract.customer))


def test_owner_adds_contact_and_endpoint_secret_shown_once(acme, owner):
    assert owner.post("/notifications/contacts", {"email": "ops@acme.test"}).status_code == 302
    response = owner.post("/notifications/endpoints", {"url": "https://hooks.acme.test/yoco"})
    assert response.status_code == 201
    endpoint = Endpoint.objects.get()
    assert endpoint.secret.startswith("whsec_") and endpoint.secret in response.content.decode()
    again = owner.get("/notifications/").content.decode()
    assert endpoint.secret not in again
    assert "ops@acme.test" in again and "https://hooks.acme.test/yoco" in again
    assert endpoint.customer == acme.contract.customer
    assert Contact.objects.get().customer == acme.contract.customer


def test_teammate_sees_them_and_sends_a_test(acme, owner):
    owner.post("/notifications/endpoints", {"url": "https://hooks.acme.test/yoco"})
    endpoint = Endpoint.objects.get()
    teammate = _client(customer_user("teammate", acme.contract.customer))
    assert "https://hooks.acme.test/yoco" in teammate.get("/notifications/").content.decode()
    assert teammate.post(f"/notifications/endpoints/{endpoint.pk}/test").status_code == 302
    test = Notification.objects.get()
    assert test.event_type == "io.yoco.test" and test.endpoint == endpoint
    assert test.webhook_id in teammate.get("/notifications/").content.decode()


def test_outsider_neither_sees_nor_touches(acme, contract_factory, owner):
    owner.post("/notifications/contacts", {"email": "ops@acme.test"})
    owner.post("/notifications/endpoints", {"url": "https://hooks.acme.test/yoco"})
    endpoint, contact = Endpoint.objects.get(), Contact.objects.get()
    other = contract_factory(customer_name="Other Labs", clusters=["north"])
    stranger = _client(customer_user("stranger", other.contract.customer))
    page = stranger.get("/notifications/").content.decode()
    assert "ops@acme.test" not in page and "hooks.acme.test" not in page
    assert stranger.post(f"/notifications/endpoints/{endpoint.pk}/test").status_code == 404
    assert stranger.post(f"/notifications/endpoints/{endpoint.pk}/disable").status_code == 404
    assert stranger.post(f"/notifications/contacts/{contact.pk}/remove").status_code == 404
    assert Endpoint.objects.get().active and Contact.objects.exists()
    assert not Notification.objects.exists()
