"""Shared fixtures. Platform tests run on whatever DATABASE_URL names (PostgreSQL in CI)."""

import itertools
from datetime import date
from decimal import Decimal

import pytest

_ids = itertools.count(1)


def cloud_event(type_suffix: str, *, cluster="east", job="job-1", subject=None, time=None, **data):
    """A valid SPEC 3 event; override any field through `data`."""
    event = {
        "specversion": "1.0",
        "id": f"evt-{next(_ids)}",
        "source": f"/clusters/{cluster}/jobs/{job}",
        "type": f"io.yoco.{type_suffix}",
        "time": time or "2026-03-01T10:00:00Z",
        "data": data,
    }
    if subject is not None:
        event["subject"] = subject
    return event


@pytest.fixture
def contract_factory(db):
    from yoco.guarantee.actions import do_create_contract

    def make(**overrides):
        params = dict(
            customer_name="Acme AI",
            start=date(2026, 1, 1),
            years=2,
            annual_value=Decimal("1200000.00"),
            currency="USD",
            clusters=["east"],
        )
        params.update(overrides)
        return do_create_contract(**params)

    return make


@pytest.fixture
def acme(contract_factory):
    """The owner customer: one contract over cluster 'east', with its keys."""
    return contract_factory()


@pytest.fixture
def outsider(contract_factory):
    """Another customer, with its own contract over cluster 'north'."""
    return contract_factory(customer_name="Other Labs", clusters=["north"])


@pytest.fixture
def api():
    """An API client whose requests run their on-commit work (the Celery-eager fold) as a real
    request would: tests run inside a transaction that never commits."""
    from django.test import TestCase
    from rest_framework.test import APIClient

    class CommittingClient(APIClient):
        def request(self, **kwargs):
            with TestCase.captureOnCommitCallbacks(execute=True):
                return super().request(**kwargs)

    return CommittingClient()


def post_events(api, key, events, *, single=False):
    import json

    content_type = (
        "application/cloudevents+json" if single else "application/cloudevents-batch+json"
    )
    return api.post(
        "/api/v1/events",
        data=json.dumps(events),
        content_type=content_type,
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )


def get_json(api, url, token):
    response = api.get(url, HTTP_AUTHORIZATION=f"Bearer {token}")
    return response
