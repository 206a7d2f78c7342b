"""The dispute form and the notifications settings page in a real browser (Debian's chromium
through Playwright): dispute an incident and see it open; add a webhook endpoint, read its
secret once, send a test that a real receiver verifies, and see it in the delivery log."""

import pytest

from tests.platform.account_team import fail_once
from tests.platform.webhook_receiver import Receiver
from tests.portal.browser import CHROMIUM, chromium
from tests.portal.conftest import PASSWORD

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="/usr/bin/chromium is missing (apt-get install -y chromium; CI installs it)",
    ),
]


@pytest.fixture
def incident(transactional_db, settings, contract_factory, api):
    from django.contrib.auth import get_user_model

    from yoco.accounts.models import Membership
    from yoco.guarantee.models import Incident

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    created = contract_factory()
    user = get_user_model().objects.create_user("ada", password=PASSWORD)
    Membership.objects.create(user=user, customer=created.contract.customer)
    fail_once(api, created, "east")
    return Incident.objects.get()


def _sign_in(page, base):
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", "ada")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")


def test_dispute_and_notification_settings(live_server, incident):
    base = live_server.url
    with Receiver() as receiver, chromium() as browser:
        page = browser.new_page(viewport={"width": 1366, "height": 900})
        _sign_in(page, base)

        page.goto(f"{base}/incidents/{incident.pk}/")
        page.fill("#dispute-form textarea[name=reason]", "The GPU failed (XID 79), not our code")
        page.click("#dispute-form button[type=submit]")
        page.wait_for_selector("#messages")
        disputes = page.inner_text("#disputes").lower()
        assert "the gpu failed (xid 79), not our code" in disputes and "open" in disputes

        page.click("nav.mainnav >> text=Notifications")
        page.fill("#contact-form input[name=email]", "ops@acme.test")
        page.click("#contact-form button[type=submit]")
        page.wait_for_selector("#contacts >> text=ops@acme.test")
        page.fill("#endpoint-form input[name=url]", f"{receiver.url}/acme")
        page.click("#endpoint-form button[type=submit]")
        secret = page.inner_text("#secret").strip()
        assert secret.startswith("whsec_")
        receiver.secrets["/acme"] = secret

        page.goto(f"{base}/notifications/")
        assert page.locator("#secret").count() == 0  # shown once
        page.click("#endpoints button:has-text('Send test')")
        page.wait_for_selector("#delivery-log >> text=io.yoco.test")
        assert "delivered" in page.inner_text("#delivery-log").lower()
        assert receiver.types("/acme") == ["io.yoco.test"] and receiver.unverified == 0
