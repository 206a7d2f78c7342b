"""Login throttling (django-axes) on the portal's and the admin's sign-in: after
AXES_FAILURE_LIMIT wrong passwords for a username from one address, even the right password is
refused until the cool-off has passed; another address is not locked out."""

from datetime import timedelta

import pytest
import time_machine
from django.conf import settings as django_settings
from django.test import Client
from django.utils import timezone

PASSWORD = "right-password-1"
ADDRESS = "203.0.113.7"

LOGINS = {
    # login page → where a successful sign-in goes
    "/accounts/login/": "/",
    "/admin/login/": "/admin/",
}


@pytest.fixture
def staff_user(db, settings):
    from django.contrib.auth.models import User

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return User.objects.create_user("alice", password=PASSWORD, is_staff=True)


def sign_in(client, url, password, address=ADDRESS):
    return client.post(
        url, {"username": "alice", "password": password, "next": LOGINS[url]}, REMOTE_ADDR=address
    )


def signed_in(response, url) -> bool:
    return response.status_code == 302 and response["Location"] == LOGINS[url]


@pytest.mark.parametrize("url", list(LOGINS))
def test_wrong_passwords_lock_out_until_the_cool_off(staff_user, url):
    limit = django_settings.AXES_FAILURE_LIMIT
    client = Client()
    answers = [sign_in(client, url, "wrong").status_code for _ in range(limit)]
    assert answers == [200] * (limit - 1) + [429]  # the form again, then locked

    locked = sign_in(client, url, PASSWORD)
    assert locked.status_code == 429 and not signed_in(locked, url)
    assert "Too many failed sign-ins" in locked.content.decode()
    assert "_auth_user_id" not in client.session

    other_address = sign_in(Client(), url, PASSWORD, address="198.51.100.9")
    assert signed_in(other_address, url)

    later = timezone.now() + django_settings.AXES_COOLOFF_TIME + timedelta(seconds=1)
    with time_machine.travel(later, tick=False):
        after = sign_in(client, url, PASSWORD)
    assert signed_in(after, url)
