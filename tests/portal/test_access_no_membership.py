"""A signed-in user who belongs to no customer (e.g. staff) gets 403 from the portal."""

from tests.portal.conftest import login, portal_urls


def test_user_without_membership_gets_403(demo):
    client = login("ops")  # staff, no Membership
    for url in portal_urls(demo):
        assert client.get(url).status_code == 403, url
