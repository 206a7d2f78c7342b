"""Anyone not signed in is sent to the login page, for every page and download."""

from tests.portal.conftest import portal_urls, private_urls


def test_anonymous_is_redirected_to_login(demo, anonymous):
    for url in portal_urls(demo) + private_urls(demo):
        response = anonymous.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/accounts/login/?next="), url
