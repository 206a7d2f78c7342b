"""The login form is CSRF-protected (Django's default) and works with its token."""

from django.test import Client

from tests.portal.conftest import PASSWORD


def test_login_without_csrf_token_is_refused(demo):
    client = Client(enforce_csrf_checks=True)
    response = client.post("/accounts/login/", {"username": "ada", "password": PASSWORD})
    assert response.status_code == 403


def test_login_with_csrf_token_reaches_the_dashboard(demo):
    client = Client(enforce_csrf_checks=True)
    page = client.get("/accounts/login/")
    assert page.status_code == 200 and b"csrfmiddlewaretoken" in page.content
    token = page.cookies["csrftoken"].value
    response = client.post(
        "/accounts/login/",
        {"username": "ada", "password": PASSWORD, "csrfmiddlewaretoken": token},
    )
    assert response.status_code == 302 and response["Location"] == "/"
    assert client.get("/").status_code == 200
