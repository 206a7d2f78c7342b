"""A teammate (another user of the same customer) sees the same pages as the owner."""

from tests.portal.conftest import body, portal_urls


def test_teammate_gets_every_view(demo, teammate):
    for url in portal_urls(demo):
        response = teammate.get(url)
        assert response.status_code == 200, url
    assert "inc-live" in body(teammate.get("/incidents/?outcome=live_resolved&page=1&year=2"))
