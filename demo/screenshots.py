"""Screenshots of the portal and the credit admin, taken with Debian's chromium.

    .venv/bin/python -m demo.screenshots [--output docs/screenshots] [--incidents 4000]

Starts a live server on a throwaway test database (in memory with SQLite, `test_<name>` with
PostgreSQL) seeded by `demo.portal.seed_portal_demo`, signs in as a customer and as a
staff user, and writes PNGs. The configured database itself is never touched.
"""

import argparse
import os
import sys
from pathlib import Path

import django

ROOT = Path(__file__).resolve().parent.parent

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip
PASSWORD = "screenshot-password-1"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo.screenshots", description=__doc__)
    parser.add_argument("--output", default=str(ROOT / "docs/screenshots"))
    parser.add_argument("--incidents", type=int, default=4000)
    parser.add_argument("--chromium", default=str(CHROMIUM))
    args = parser.parse_args(argv)
    if not Path(args.chromium).exists():
        parser.error(f"{args.chromium} is missing: apt-get install -y chromium")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "yoco.settings")
    django.setup()
    for path in take(Path(args.output), args.incidents, args.chromium):
        print(path)
    return 0


def take(out: Path, incidents: int, chromium: str) -> list[Path]:
    """Seed a throwaway database, serve it and write the PNGs into `out`."""
    from django.conf import settings
    from django.contrib.staticfiles.handlers import StaticFilesHandler
    from django.db import connections
    from django.test.testcases import LiveServerThread

    from demo.portal import seed_portal_demo

    out.mkdir(parents=True, exist_ok=True)
    connection = connections["default"]
    old_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    server = None
    try:
        data = seed_portal_demo(incidents=incidents, password=PASSWORD)
        override = {}
        if connection.vendor == "sqlite" and connection.is_in_memory_db():
            connection.inc_thread_sharing()
            override = {"default": connection}
        server = LiveServerThread(
            "localhost", StaticFilesHandler, connections_override=override, port=0
        )
        server.daemon = True
        server.start()
        server.is_ready.wait()
        if server.error:
            raise server.error
        return _shoot(f"http://localhost:{server.port}", data, out, chromium)
    finally:
        if server is not None:
            server.terminate()
            if connection.vendor == "sqlite" and connection.is_in_memory_db():
                connection.dec_thread_sharing()
        connection.creation.destroy_test_db(old_name, verbosity=0)


def _shoot(base, data, out, chromium):
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from playwright.sync_api import sync_playwright

    written = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium, headless=True, args=CHROMIUM_ARGS
        )
        try:
            for viewport, mobile in (
                ({"width": 1440, "height": 900}, False),
                ({"width": 390, "height": 844}, True),
            ):
                page = browser.new_page(
                    viewport=viewport, device_scale_factor=1 if not mobile else 2,
                    is_mobile=mobile,
                )  # fmt: skip
                _login(page, f"{base}/accounts/login/", data.owner.username)
                page.wait_for_url(f"{base}/")
                page.wait_for_selector("#chart-protected .main-svg")
                page.wait_for_timeout(400)
                suffix = "" if not mobile else "-phone"
                written.append(_save(page, out / f"dashboard{suffix}.png", full=not mobile))
                page.goto(f"{base}/incidents/{data.showcase['live_resolved'].pk}/")
                shot = out / f"incident{suffix}.png"
                written.append(_save(page, shot, full=not mobile))
                if not mobile:
                    page.goto(f"{base}/incidents/{data.showcase['overridden'].pk}/")
                    written.append(_save(page, out / "incident-override.png"))
                    page.goto(f"{base}/incidents/?year=2")
                    written.append(_save(page, out / "incidents.png", full=False))
                    page.goto(f"{base}/contracts/{data.contract.pk}/")
                    written.append(_save(page, out / "contract.png"))
                page.close()
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            _login(page, f"{base}/admin/login/?next=/admin/", data.staff.username)
            page.wait_for_url(f"{base}/admin/")
            page.evaluate("localStorage.setItem('django.admin.navSidebarIsOpen', 'false')")
            page.goto(f"{base}/admin/guarantee/credit/")
            written.append(_save(page, out / "credit-admin.png", full=False))
            page.close()
        finally:
            browser.close()
    return written


def _login(page, url, username):
    page.goto(url)
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("[type=submit]")


def _save(page, path, full=True):
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(path), full_page=full)
    return path


if __name__ == "__main__":
    sys.exit(main())
