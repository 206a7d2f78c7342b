"""Screenshots of the portal and the credit admin, taken with Debian's chromium.

    python manage.py portal_screenshots [--output docs/screenshots] [--incidents 4000]

Starts a live server on a throwaway test database (in memory with SQLite, `test_<name>` with
PostgreSQL) seeded by `yoco.portal.demo.seed_portal_demo`, signs in as a customer and as a
staff user, and writes PNGs. The configured database itself is never touched.
"""

import os
from pathlib import Path

from django.conf import settings
from django.contrib.staticfiles.handlers import StaticFilesHandler
from django.core.management.base import BaseCommand, CommandError
from django.db import connections
from django.test.testcases import LiveServerThread

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip
PASSWORD = "screenshot-password-1"


class Command(BaseCommand):
    help = "Write PNG screenshots of the portal and the credit admin (see docs/portal.md)."
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--output", default=str(Path(settings.BASE_DIR) / "docs/screenshots"))
        parser.add_argument("--incidents", type=int, default=4000)
        parser.add_argument("--chromium", default=str(CHROMIUM))

    def handle(self, *args, output, incidents, chromium, **options):
        if not Path(chromium).exists():
            raise CommandError(f"{chromium} is missing: apt-get install -y chromium")
        out = Path(output)
        out.mkdir(parents=True, exist_ok=True)
        connection = connections["default"]
        old_name = connection.settings_dict["NAME"]
        connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
        settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
        server = None
        try:
            from yoco.portal.demo import seed_portal_demo

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
            base = f"http://localhost:{server.port}"
            written = self._shoot(base, data, out, chromium)
        finally:
            if server is not None:
                server.terminate()
                if connection.vendor == "sqlite" and connection.is_in_memory_db():
                    connection.dec_thread_sharing()
            connection.creation.destroy_test_db(old_name, verbosity=0)
        for path in written:
            self.stdout.write(str(path))

    def _shoot(self, base, data, out, chromium):
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
                    self._login(page, f"{base}/accounts/login/", data.owner.username)
                    page.wait_for_url(f"{base}/")
                    page.wait_for_selector("#chart-protected .main-svg")
                    page.wait_for_timeout(400)
                    suffix = "" if not mobile else "-phone"
                    written.append(
                        self._save(page, out / f"dashboard{suffix}.png", full=not mobile)
                    )
                    page.goto(f"{base}/incidents/{data.showcase['live_resolved'].pk}/")
                    shot = out / f"incident{suffix}.png"
                    written.append(self._save(page, shot, full=not mobile))
                    if not mobile:
                        page.goto(f"{base}/incidents/{data.showcase['overridden'].pk}/")
                        written.append(self._save(page, out / "incident-override.png"))
                        page.goto(f"{base}/incidents/?year=2")
                        written.append(self._save(page, out / "incidents.png", full=False))
                        page.goto(f"{base}/contracts/{data.contract.pk}/")
                        written.append(self._save(page, out / "contract.png"))
                    page.close()
                page = browser.new_page(viewport={"width": 1440, "height": 900})
                self._login(page, f"{base}/admin/login/?next=/admin/", data.staff.username)
                page.wait_for_url(f"{base}/admin/")
                page.evaluate("localStorage.setItem('django.admin.navSidebarIsOpen', 'false')")
                page.goto(f"{base}/admin/guarantee/credit/")
                written.append(self._save(page, out / "credit-admin.png", full=False))
                page.close()
            finally:
                browser.close()
        return written

    def _login(self, page, url, username):
        page.goto(url)
        page.fill("#id_username", username)
        page.fill("#id_password", PASSWORD)
        page.click("[type=submit]")

    def _save(self, page, path, full=True):
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(path), full_page=full)
        return path
