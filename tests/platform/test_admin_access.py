"""The admin is the account team's: staff only; customer users and anonymous are turned away."""

import pytest

from tests.conftest import cloud_event, post_events
from tests.platform.account_team import billing_token, customer_user, missed_credits, staff
from yoco.accounts.models import AuditRecord, BillingToken, Cluster, ClusterKey, Customer, ReadToken
from yoco.events.models import Event
from yoco.guarantee.models import Contract, ContractYear, Credit, Incident, Job

MODELS = [
    ("accounts", "customer", Customer),
    ("accounts", "cluster", Cluster),
    ("accounts", "clusterkey", ClusterKey),
    ("accounts", "readtoken", ReadToken),
    ("accounts", "billingtoken", BillingToken),
    ("guarantee", "incident", Incident),
    ("guarantee", "job", Job),
    ("events", "event", Event),
    ("guarantee", "contract", Contract),
    ("guarantee", "contractyear", ContractYear),
    ("guarantee", "credit", Credit),
    ("accounts", "auditrecord", AuditRecord),
]


@pytest.fixture
def everything(contract_factory, api, outsider):
    """One object of every admin model: a missed year with its credit, events, keys, tokens."""
    (credit,) = missed_credits(contract_factory, api)
    event = cloud_event("job.started", cluster="north", framework="pytorch", world_size=8)
    post_events(api, outsider.cluster_keys["north"], [event])
    billing_token()
    return credit


def urls():
    from django.contrib.admin.utils import quote

    found = ["/admin/"]
    for app, name, model in MODELS:
        found.append(f"/admin/{app}/{name}/")
        obj = model.objects.order_by("pk").first()
        assert obj is not None, name
        found.append(f"/admin/{app}/{name}/{quote(obj.pk)}/change/")
    return found


def test_staff_sees_every_changelist_and_change_page(everything, client):
    client.force_login(staff("alice"))
    for url in urls():
        response = client.get(url)
        assert response.status_code == 200, url
    assert client.get("/admin/accounts/customer/add/").status_code == 200


def test_customer_users_and_anonymous_are_sent_to_login(everything, client, acme, outsider):
    acme_customer = acme.contract.customer
    people = [
        customer_user("owner", acme_customer),
        customer_user("teammate", acme_customer),
        customer_user("outsider", outsider.contract.customer),
        None,
    ]
    for person in people:
        client.logout()
        if person is not None:
            client.force_login(person)
        for url in urls():
            response = client.get(url)
            assert response.status_code == 302, (person, url)
            assert response["Location"].startswith("/admin/login/"), (person, url)
        # nor can they run an admin action
        credit = Credit.objects.first()
        response = client.post(
            "/admin/guarantee/credit/",
            {"action": "void", "_selected_action": [credit.pk], "apply": "1", "reason": "x"},
        )
        assert response.status_code == 302 and response["Location"].startswith("/admin/login/")
        assert Credit.objects.get(pk=credit.pk).state == Credit.EARNED


def test_nothing_can_be_added_changed_or_deleted_directly(everything, client):
    client.force_login(staff("alice"))
    credit = Credit.objects.get()
    assert client.get("/admin/guarantee/credit/add/").status_code == 403
    assert client.post(f"/admin/guarantee/credit/{credit.pk}/change/", {"state": "approved"})
    assert Credit.objects.get(pk=credit.pk).state == Credit.EARNED
    record = AuditRecord.objects.first()
    assert client.post(f"/admin/accounts/auditrecord/{record.pk}/change/", {"reason": "x"})
    assert AuditRecord.objects.get(pk=record.pk).reason == record.reason
    assert client.post(f"/admin/guarantee/credit/{credit.pk}/delete/").status_code == 403
