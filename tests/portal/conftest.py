"""Portal fixtures: two customers with data, and a client per kind of visitor."""

import pytest
from django.http import HttpRequest
from django.test import Client

PASSWORD = "demo-password-1"


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """PBKDF2's deliberate slowness is not under test here."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.YOCO_PORTAL_CACHE_SECONDS = 0  # every request computes its charts


@pytest.fixture
def demo(db):
    """Acme AI (users ada = owner, grace = teammate, ops = staff) with 300 incidents."""
    from demo.portal import seed_portal_demo

    return seed_portal_demo(incidents=300, password=PASSWORD)


@pytest.fixture
def other(demo):
    """Another customer (Other Labs, user olga) with its own contract, incidents and credit."""
    from demo.portal import seed_portal_demo

    return seed_portal_demo(
        customer_name="Other Labs",
        cluster_name="north",
        incidents=40,
        password=PASSWORD,
        usernames=("olga", "oscar"),
        staff_username=None,
        showcase=True,
        seed=11,
    )


def login(username):
    """A client signed in with the password (django-axes checks it, so it needs a request)."""
    client = Client()
    assert client.login(request=HttpRequest(), username=username, password=PASSWORD)
    return client


@pytest.fixture
def owner(demo):
    return login("ada")


@pytest.fixture
def teammate(demo):
    return login("grace")


@pytest.fixture
def outsider(other):
    return login("olga")


@pytest.fixture
def anonymous():
    return Client()


def portal_urls(data):
    """Every portal page and download of one customer's data set."""
    show = data.showcase
    return [
        "/",
        f"/?contract={data.contract.pk}&year=1",
        f"/contracts/{data.contract.pk}/",
        f"/contracts/{data.contract.pk}/years/1/verify",
        "/incidents/",
        f"/incidents/?contract={data.contract.pk}&outcome=live_resolved",
        *(f"/incidents/{incident.pk}/" for incident in show.values()),
        "/incidents.csv",
        f"/incidents.csv?contract={data.contract.pk}",
        "/years.csv",
        f"/years.csv?contract={data.contract.pk}",
    ]


def private_urls(data):
    """The pages that name one of the customer's objects: 404 for anyone else."""
    return [
        f"/contracts/{data.contract.pk}/",
        f"/contracts/{data.contract.pk}/years/1/verify",
        f"/contracts/{data.contract.pk}/years/1/statement.pdf",
        *(f"/incidents/{incident.pk}/" for incident in data.showcase.values()),
    ]


def content(response) -> bytes:
    """The response's bytes; a streamed one is read to its end (running its queries)."""
    return b"".join(response.streaming_content) if response.streaming else response.content


def body(response) -> str:
    return content(response).decode()
