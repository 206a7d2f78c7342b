"""Admin actions go through the do_* functions, with their intermediate forms and messages."""

import time_machine
from django.contrib.messages import get_messages

from tests.conftest import cloud_event, post_events
from tests.platform.account_team import (
    AFTER_YEAR_1,
    fail_once,
    missed_credits,
    records,
    staff,
)
from yoco.accounts.models import Cluster, ClusterKey, Membership
from yoco.guarantee.models import ContractYear, Credit, Incident


def act(client, changelist, action, pks, **form):
    data = {"action": action, "_selected_action": [str(pk) for pk in pks], **form}
    return client.post(changelist, data, follow=False)


def texts(response):
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_void_asks_for_a_reason_first(contract_factory, api, client):
    (credit,) = missed_credits(contract_factory, api)
    client.force_login(staff("alice"))
    url = "/admin/guarantee/credit/"
    form = act(client, url, "void", [credit.pk])
    assert form.status_code == 200 and b'name="reason"' in form.content
    blank = act(client, url, "void", [credit.pk], apply="1", reason="  ")
    assert blank.status_code == 200  # the form again, with its error
    assert Credit.objects.get(pk=credit.pk).state == Credit.EARNED
    done = act(client, url, "void", [credit.pk], apply="1", reason="duplicate")
    assert done.status_code == 302
    assert Credit.objects.get(pk=credit.pk).state == Credit.VOIDED
    assert records(credit, "void_credit")[0].reason == "duplicate"


def test_book_then_approve_by_someone_else(contract_factory, api, client):
    (credit,) = missed_credits(contract_factory, api)
    url = "/admin/guarantee/credit/"
    client.force_login(staff("alice"))
    act(client, url, "book_order", [credit.pk], apply="1", order_value="1000000", reason="PO-1")
    credit.refresh_from_db()
    assert credit.amount == 250000 and credit.amount_changed_by.username == "alice"
    refused = act(client, url, "approve", [credit.pk], apply="1", reason="")
    assert any("four-eyes" in t for t in texts(refused))
    assert Credit.objects.get(pk=credit.pk).state == Credit.EARNED
    client.force_login(staff("bob"))
    act(client, url, "approve", [credit.pk], apply="1", reason="")
    assert Credit.objects.get(pk=credit.pk).state == Credit.APPROVED
    page = client.get(f"/admin/guarantee/credit/{credit.pk}/change/")
    assert b"book_order" in page.content and b"approve_credit" in page.content  # history shown


def test_override_through_the_admin(acme, api, client):
    fail_once(api, acme, "east")
    incident = Incident.objects.get()
    client.force_login(staff("alice"))
    url = "/admin/guarantee/incident/"
    form = act(client, url, "override_outcome", [incident.pk])
    assert b'name="outcome"' in form.content and b'name="reason"' in form.content
    act(client, url, "override_outcome", [incident.pk], apply="1", outcome="excluded", reason="")
    assert Incident.objects.get().override_outcome is None
    act(client, url, "override_outcome", [incident.pk], apply="1", outcome="excluded", reason="ok")
    incident.refresh_from_db()
    assert incident.outcome == "excluded" and incident.override_by.username == "alice"


def test_close_and_reopen_years(contract_factory, api, client):
    (credit,) = missed_credits(contract_factory, api)
    year = credit.contract_year
    client.force_login(staff("alice"))
    url = "/admin/guarantee/contractyear/"
    act(client, url, "reopen_year", [year.pk], apply="1", reason="late events")
    assert ContractYear.objects.get(pk=year.pk).state == ContractYear.OPEN
    year2 = ContractYear.objects.get(contract=year.contract, number=2)
    with time_machine.travel(AFTER_YEAR_1, tick=False):  # year 1 over, year 2 running
        client.force_login(staff("bob"))  # a session of that time
        act(client, url, "close_year", [year.pk])
        response = act(client, url, "close_year", [year2.pk])
    assert ContractYear.objects.get(pk=year.pk).state == ContractYear.CLOSED
    assert any("cannot close yet" in t for t in texts(response))
    assert ContractYear.objects.get(pk=year2.pk).state == ContractYear.OPEN


def test_rotate_key_shows_the_new_key_once(acme, api, client):
    client.force_login(staff("alice"))
    cluster = Cluster.objects.get(name="east")
    response = act(client, "/admin/accounts/cluster/", "rotate_key", [cluster.pk])
    (message,) = [t for t in texts(response) if "New ingest key" in t]
    new_key = message.split(": ")[1].split(" ")[0]
    event = cloud_event("job.started", framework="pytorch", world_size=1)
    assert post_events(api, new_key, [event]).status_code == 200
    assert post_events(api, acme.cluster_keys["east"], [event]).status_code == 401
    assert ClusterKey.objects.filter(cluster=cluster, revoked=False).count() == 1
    assert new_key.encode() in client.get("/admin/accounts/cluster/").content  # the message
    assert new_key.encode() not in client.get("/admin/accounts/cluster/").content  # only once


def test_memberships_are_added_and_removed_through_actions(acme, client):
    from django.contrib.auth import get_user_model

    customer = acme.contract.customer
    client.force_login(staff("alice"))
    dana = get_user_model().objects.create_user("dana")
    url = f"/admin/accounts/customer/{customer.pk}/change/"
    data = {
        "members-TOTAL_FORMS": "1",
        "members-INITIAL_FORMS": "0",
        "members-0-user": str(dana.pk),
        "members-0-customer": str(customer.pk),
    }
    response = client.post(url, data)
    assert response.status_code == 302, response.content[:2000]
    assert Membership.objects.get(user=dana).customer == customer
    assert records(customer, "add_member")[0].after == {"user": "dana"}
    membership = Membership.objects.get(user=dana)
    data = {
        "members-TOTAL_FORMS": "1",
        "members-INITIAL_FORMS": "1",
        "members-0-id": str(membership.pk),
        "members-0-customer": str(customer.pk),
        "members-0-user": str(dana.pk),
        "members-0-DELETE": "on",
    }
    assert client.post(url, data).status_code == 302
    assert not Membership.objects.filter(user=dana).exists()
    assert records(customer, "remove_member")[0].before == {"user": "dana"}
