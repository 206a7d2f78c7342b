"""The portal in a real browser: sign in, status, a rendered chart, filters, an incident, the CSV,
and another customer's URLs refused. Debian's chromium, headless, through Playwright."""

import csv
import io

import pytest

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
def data(transactional_db, settings):
    from demo.portal import seed_portal_demo

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    ours = seed_portal_demo(incidents=400, password=PASSWORD)
    theirs = seed_portal_demo(
        customer_name="Other Labs",
        cluster_name="north",
        incidents=30,
        password=PASSWORD,
        usernames=("olga", "oscar"),
        staff_username=None,
        seed=3,
    )
    return ours, theirs


def _sign_in(page, base, username):
    page.goto(f"{base}/")
    assert "/accounts/login/" in page.url
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")


def test_customer_journey(live_server, data):
    ours, theirs = data
    base = live_server.url
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1366, "height": 900}, accept_downloads=True)
        _sign_in(page, base, "ada")

        # Status at a glance and a chart drawn by the local plotly.js.
        status = page.locator(".glance .badge").first
        assert status.inner_text() in ("On track", "At risk", "Met", "Missed")
        assert page.locator(".glance .big-number").first.inner_text().endswith("%")
        page.wait_for_selector("#chart-outcomes .js-plotly-plot svg, #chart-outcomes .main-svg")
        assert page.locator("#chart-outcomes .plot-container").count() == 1
        assert page.locator("#chart-protected .plot-container").count() == 1
        assert "Σ GPUs" in page.inner_text("#protected-formula")

        # Filter the incidents.
        page.click("nav.mainnav >> text=Incidents")
        page.select_option("select[name=outcome]", "rolled_back")
        page.fill("#id_year", "2")
        page.click("#filters button[type=submit]")
        page.wait_for_url("**/incidents/?*outcome=rolled_back*")
        outcomes = page.locator("#incident-table .outcome").all_inner_texts()
        assert outcomes and all(text.lower() == "rolled back" for text in outcomes)

        # Download the CSV of exactly those.
        with page.expect_download() as info:
            page.click("#download-csv")
        download = info.value
        assert download.suggested_filename == "incidents.csv"
        rows = list(csv.DictReader(io.StringIO(open(download.path(), encoding="utf-8").read())))
        assert rows and {r["outcome"] for r in rows} == {"rolled_back"}
        assert {r["year"] for r in rows} == {"2"}
        assert len(rows) == int(page.inner_text(".page-head .muted").split()[0].replace(",", ""))

        # Open one: its timeline and why.
        page.goto(f"{base}/incidents/{ours.showcase['live_resolved'].pk}/")
        assert page.inner_text("#outcome").lower() == "live resolved"
        assert "Resolved live" in page.inner_text("#why")
        assert page.locator("#timeline li").count() == 4

        # Another customer's URLs are refused.
        for url in (
            f"/contracts/{theirs.contract.pk}/",
            f"/incidents/{theirs.showcase['live_resolved'].pk}/",
        ):
            response = page.goto(base + url)
            assert response.status == 404, url


def test_phone_layout_has_no_horizontal_scroll(live_server, data):
    base = live_server.url
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 390, "height": 844}, is_mobile=True)
        _sign_in(page, base, "grace")
        page.wait_for_selector("#chart-outcomes .main-svg")
        for url in ("/", "/incidents/"):
            page.goto(base + url)
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, (url, width)
