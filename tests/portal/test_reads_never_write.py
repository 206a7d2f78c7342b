"""Reads never write, and still show the outcome as of now.

A pending incident whose deadline has passed (its expiry not stored yet) is on every page, CSV
and API answer: each GET endpoint runs without a single INSERT, UPDATE or DELETE, shows the
incident failed, and leaves it stored as pending until the periodic expiry stores it."""

import csv
import io
from datetime import timedelta

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from tests.conftest import cloud_event
from tests.portal.conftest import body, content, login
from yoco.accounts.actions import do_create_billing_token, do_create_read_token
from yoco.events.ingest import ingest_events
from yoco.guarantee.expiry import expire_pending
from yoco.guarantee.fold import fold
from yoco.guarantee.models import ContractYear, Incident

WRITES = ("INSERT", "UPDATE", "DELETE")
NOT_READS = {  # POST only
    "api-events",
    "api-billing-credit-ack",
    "portal:incident-dispute",
    "portal:notifications-add-contact",
    "portal:notifications-remove-contact",
    "portal:notifications-add-endpoint",
    "portal:notifications-disable-endpoint",
    "portal:notifications-test",
}


@pytest.fixture
def overdue(demo):
    """An incident folded while pending, whose 15-minute deadline passed an hour ago."""
    detected = timezone.now() - timedelta(hours=1, minutes=15)
    event = cloud_event(
        "failure.detected", cluster=demo.cluster.name, job="llama-405b-pretrain",
        subject="inc-overdue", time=detected.isoformat(), trigger="unplanned",
        category="gpu_hang",
    )  # fmt: skip
    with time_machine.travel(detected + timedelta(minutes=1), tick=False):
        ingest_events(demo.cluster, [event])
        fold(demo.cluster, {"inc-overdue"}, {event["source"]})
    incident = Incident.objects.get(cluster=demo.cluster, subject="inc-overdue")
    assert incident.outcome == "pending" and incident.deadline_at < timezone.now()
    return incident


def _named_routes(resolver=None, namespace=""):
    for entry in (resolver or get_resolver()).url_patterns:
        if isinstance(entry, URLResolver):
            if entry.namespace == "admin":
                continue
            inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            yield from _named_routes(entry, inner)
        elif isinstance(entry, URLPattern) and entry.name:
            yield namespace + entry.name


def _get_urls(data, incident):
    contract = data.contract.pk
    return {
        # name → the URLs that exercise it
        "login": ["/accounts/login/"],
        "portal:home": ["/", f"/?contract={contract}&year=2"],
        "portal:contract": [f"/contracts/{contract}/"],
        "portal:year-statement": [f"/contracts/{contract}/years/1/statement.pdf"],
        "portal:year-verify": [f"/contracts/{contract}/years/1/verify"],
        "portal:incidents": ["/incidents/", "/incidents/?outcome=failed"],
        "portal:incident": [f"/incidents/{i.pk}/" for i in [incident, *data.showcase.values()]],
        "portal:incidents-csv": ["/incidents.csv", "/incidents.csv?outcome=failed"],
        "portal:years-csv": ["/years.csv"],
        "portal:notifications": ["/notifications/"],
        "api-incident-disputes": [f"/api/v1/incidents/{incident.pk}/disputes"],
        "api-incidents": ["/api/v1/incidents", "/api/v1/incidents?outcome=failed"],
        "api-contract-years": [f"/api/v1/contracts/{contract}/years"],
        "api-billing-credits": ["/api/v1/billing/credits"],
        "api-schema": ["/api/v1/schema"],
        "logout": [],  # POST only in Django 5
    }


ADMIN_PAGES = [
    "/admin/", "/admin/guarantee/contract/", "/admin/guarantee/contractyear/",
    "/admin/guarantee/credit/", "/admin/accounts/auditrecord/", "/admin/guarantee/incident/",
    "/admin/events/event/", "/admin/guarantee/job/", "/admin/accounts/customer/",
    "/admin/accounts/cluster/", "/admin/accounts/clusterkey/", "/admin/guarantee/dispute/",
    "/admin/notifications/contact/", "/admin/notifications/endpoint/",
    "/admin/notifications/notification/", "/admin/notifications/deliveryattempt/",
]  # fmt: skip


def test_every_get_endpoint_reads_without_writing(demo, overdue, client):
    owner = login("ada")
    staff = login("ops")
    _, read_token = do_create_read_token(demo.contract.customer, actor=demo.staff)
    _, billing_token = do_create_billing_token(actor=demo.staff)
    urls = _get_urls(demo, overdue)
    assert set(_named_routes()) - NOT_READS <= set(urls), "a GET endpoint is not covered"

    def bearer(token):
        return {"HTTP_AUTHORIZATION": f"Bearer {token}"}

    requests = []
    for name, paths in urls.items():
        for path in paths:
            if name.startswith("api-billing"):
                requests.append((client, path, bearer(billing_token)))
            elif name.startswith("api-"):
                requests.append((client, path, bearer(read_token)))
                requests.append((owner, path, {}))  # a portal session reads the API too
            else:
                requests.append((owner, path, {}))
    requests += [(staff, path, {}) for path in ADMIN_PAGES]
    requests += [(staff, f"/admin/guarantee/incident/{overdue.pk}/change/", {})]

    for visitor, path, headers in requests:
        with CaptureQueriesContext(connection) as queries:
            response = visitor.get(path, **headers)
            content(response)  # a streamed CSV runs its queries while it is read
        assert response.status_code == 200, path
        writes = [q["sql"] for q in queries if q["sql"].lstrip().upper().startswith(WRITES)]
        assert writes == [], f"GET {path} wrote: {writes}"

    overdue.refresh_from_db()
    assert overdue.outcome == "pending"  # nothing stored the expiry


def test_reads_show_the_outcome_as_of_now_and_agree(demo, overdue, owner, client):
    _, read_token = do_create_read_token(demo.contract.customer, actor=demo.staff)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {read_token}"}

    page = body(owner.get(f"/incidents/{overdue.pk}/"))
    assert 'id="outcome">failed<' in page and "Not recovered within the deadline" in page
    listed = body(owner.get("/incidents/?outcome=failed"))
    assert f"/incidents/{overdue.pk}/" in listed
    assert f"/incidents/{overdue.pk}/" not in body(owner.get("/incidents/?outcome=pending"))
    rows = list(csv.DictReader(io.StringIO(body(owner.get("/incidents.csv")))))
    row = next(r for r in rows if r["subject"] == "inc-overdue")
    assert row["outcome"] == row["computed_outcome"] == "failed"
    api = client.get("/api/v1/incidents?outcome=failed", **auth).json()
    assert "inc-overdue" in {i["subject"] for i in api["results"]}

    # The year's counts, page, CSV and API agree, counting it failed before the expiry runs...
    year = ContractYear.objects.get(contract=demo.contract, number=overdue.year_number)
    before = dict(year.counts)
    years_api = client.get(f"/api/v1/contracts/{demo.contract.pk}/years", **auth).json()
    shown = next(y for y in years_api["years"] if y["number"] == year.number)["counts"]
    assert shown["failed"] == before["failed"] + 1 and shown["pending"] == before["pending"] - 1
    csv_years = list(csv.DictReader(io.StringIO(body(owner.get("/years.csv")))))
    csv_year = next(r for r in csv_years if r["year"] == str(year.number))
    assert int(csv_year["failed"]) == shown["failed"]
    assert int(csv_year["pending"]) == shown["pending"]

    # ... and the same once the expiry has stored it.
    assert expire_pending() >= 1
    year.refresh_from_db()
    assert year.counts["failed"] == shown["failed"]
    again = client.get(f"/api/v1/contracts/{demo.contract.pk}/years", **auth).json()
    assert next(y for y in again["years"] if y["number"] == year.number)["counts"] == shown
