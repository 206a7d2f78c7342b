"""The portal's verification page re-derives a closed year and its credit from their evidence
snapshots and says that they agree, or lists the differences once a snapshot was changed behind
the platform's back; it is the customer's alone (404 otherwise) and exists for closed years."""

import copy

import pytest
from django.test import Client

from tests.platform.account_team import customer_user
from tests.platform.closed_year import close_missed_year
from tests.portal.conftest import body
from yoco.guarantee.models import Credit


@pytest.fixture
def closed(acme, api):
    return close_missed_year(api, acme)


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def verify_url(closed, number=1):
    return f"/contracts/{closed.year.contract_id}/years/{number}/verify"


def test_the_year_and_its_credit_agree(acme, closed):
    page = body(client_of(customer_user("ada", acme.contract.customer)).get(verify_url(closed)))
    assert page.count("agrees") == 2 and "differs" not in page
    assert f"Credit {closed.credit.pk} (earned)" in page
    assert closed.year.evidence["rules_version"] in page


def test_a_changed_snapshot_shows_its_differences(acme, closed):
    evidence = copy.deepcopy(closed.credit.evidence)
    evidence["counts"]["live_resolved"] += 1
    Credit.objects.filter(pk=closed.credit.pk).update(evidence=evidence)
    page = body(client_of(customer_user("ada", acme.contract.customer)).get(verify_url(closed)))
    assert "agrees" in page and "differs" in page  # the year still agrees, the credit not
    assert "live_resolved: snapshot 2, re-derived 1" in page


def test_another_customer_and_an_open_year_get_404(acme, contract_factory, closed):
    other = contract_factory(customer_name="Other Labs", clusters=["north"])
    outsider = client_of(customer_user("olga", other.contract.customer))
    assert outsider.get(verify_url(closed)).status_code == 404
    teammate = client_of(customer_user("grace", acme.contract.customer))
    assert teammate.get(verify_url(closed)).status_code == 200
    assert teammate.get(verify_url(closed, 2)).status_code == 404
