"""Every page renders under the Content-Security-Policy with nothing blocked: the portal (with
its plotly charts drawn) and the admin, in Debian's chromium. Any CSP violation or console
error fails the test."""

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

# Records every violation the page reports, before any of the page's own code runs.
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolations.push(`${e.violatedDirective} blocked ${e.blockedURI || "inline"}`);
});
"""


@pytest.fixture
def data(transactional_db, settings):
    from demo.portal import seed_portal_demo

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return seed_portal_demo(incidents=120, password=PASSWORD)


def _visit(page, url, problems):
    response = page.goto(url)
    assert response.status == 200, url
    assert "script-src 'self'" in response.headers["content-security-policy"], url
    _record(page, problems)


def _record(page, problems):
    page.wait_for_load_state("load")
    problems += [f"{page.url}: {v}" for v in page.evaluate("window.__cspViolations")]


def _console_error(message, problems):
    # The browser asks for /favicon.ico on its own where a page names no icon (the admin's).
    if message.type == "error" and not message.location["url"].endswith("/favicon.ico"):
        problems.append(f"console: {message.text} ({message.location['url']})")


def _sign_in(page, base, login, username, landing):
    _visit(page, base + login, problems=[])
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("[type=submit]")
    page.wait_for_url(base + landing)


def test_no_page_breaks_the_content_security_policy(live_server, data):
    base = live_server.url
    incident = data.showcase["live_resolved"].pk
    problems: list[str] = []
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1366, "height": 900})
        context.add_init_script(RECORD_VIOLATIONS)
        context.set_default_timeout(90_000)  # a loaded CI machine
        page = context.new_page()
        page.on("console", lambda m: _console_error(m, problems))
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))

        _visit(page, f"{base}/accounts/login/", problems)
        _sign_in(page, base, "/accounts/login/", "ada", "/")
        page.wait_for_selector("#chart-outcomes .main-svg")
        assert page.locator(".js-plotly-plot").count() >= 2  # plotly drew under the policy
        _record(page, problems)
        for url in ("/incidents/", f"/incidents/{incident}/", f"/contracts/{data.contract.pk}/"):
            _visit(page, base + url, problems)

        context.clear_cookies()
        _sign_in(page, base, "/admin/login/", "ops", "/admin/")
        _record(page, problems)
        for url in ("/admin/guarantee/credit/", "/admin/guarantee/incident/"):
            _visit(page, base + url, problems)
    assert problems == []
