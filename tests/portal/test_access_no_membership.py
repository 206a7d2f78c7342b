"""A signed-in user who belongs to no customer (e.g. staff) gets 403 from the portal."""

from django.test import Client

from tests.portal.conftest import PASSWORD, portal_urls


def test_user_without_membership_gets_403(demo):
    client = Client()
    assert client.login(username="ops", password=PASSWORD)  # staff, no Membership
    for url in portal_urls(demo):
        assert client.get(url).status_code == 403, url
