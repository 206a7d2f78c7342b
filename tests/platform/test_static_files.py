"""Production serves its own static files: after `collectstatic`, gunicorn with DEBUG off (no
`runserver --insecure`) answers the pages' hashed static URLs, compressed and cached for good."""

import re

import pytest
import requests

from tests.e2e.conftest import Platform

pytestmark = pytest.mark.integration


@pytest.fixture
def platform(tmp_path):
    platform = Platform(tmp_path)
    platform.env.update(DEBUG="0", STATIC_ROOT=str(tmp_path / "static"))
    platform.manage("migrate", "-v0")
    platform.manage("collectstatic", "--noinput", "-v0")
    platform.start()
    yield platform
    platform.stop()


def test_gunicorn_serves_the_hashed_static_files(platform):
    page = requests.get(f"{platform.url}/accounts/login/", timeout=30)
    assert page.status_code == 200
    stylesheet = re.search(r'href="(/static/portal/portal\.[0-9a-f]{12}\.css)"', page.text)
    assert stylesheet, page.text[:500]  # the manifest's content-hashed name

    answer = requests.get(platform.url + stylesheet.group(1), timeout=30,
                          headers={"Accept-Encoding": "gzip"})  # fmt: skip
    assert answer.status_code == 200
    assert answer.headers["Content-Type"].startswith("text/css")
    assert answer.headers["Content-Encoding"] == "gzip"
    assert "immutable" in answer.headers["Cache-Control"]
    assert ".topbar" in answer.text

    missing = requests.get(f"{platform.url}/static/portal/nothing-here.css", timeout=30)
    assert missing.status_code == 404
