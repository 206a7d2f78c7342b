"""The customer's own user sees every portal page and download."""

from tests.portal.conftest import portal_urls


def test_owner_gets_every_view(demo, owner):
    for url in portal_urls(demo):
        response = owner.get(url)
        assert response.status_code == 200, url
