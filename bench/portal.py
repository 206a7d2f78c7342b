"""Portal server time with 100,000 incidents for one customer.

    .venv/bin/python bench/portal.py                 # SQLite, a fresh file in a temp folder
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/yoco_bench_portal \
        .venv/bin/python bench/portal.py

With a PostgreSQL DATABASE_URL the named database is dropped and created again (it must be a
benchmark database). Seeds one customer (`demo.portal.seed_portal_demo`: a three-year
contract, its first year closed, 100,000 incidents written with bulk_create), then times the
dashboard and the incident list through Django's test client, in process: the figure is the
server's time for the whole request (middleware, queries, templates, plotly JSON), no network.
`dashboard_p95_ms` is measured with the chart cache off (every request aggregates 100,000
incidents); `dashboard_cached_p95_ms` with it on, as served (YOCO_PORTAL_CACHE_SECONDS).
Writes bench/results/portal.json; results of the other database vendor already in that file are
kept under "by_database". Target: p95 <= 200 ms for both pages.
"""

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# The tests' settings: production's, with a throwaway SECRET_KEY and static files by name.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
if not os.environ.get("DATABASE_URL"):
    _tmp = tempfile.mkdtemp(prefix="yoco-bench-portal-")
    os.environ["DATABASE_URL"] = f"sqlite:///{_tmp}/portal.sqlite3"

from bench.common import RESULTS, write_result  # noqa: E402

INCIDENTS = 100_000
REQUESTS = 40
WARMUP = 3
TARGET_P95_MS = 200


def fresh_database() -> None:
    url = os.environ["DATABASE_URL"]
    if url.startswith(("postgres://", "postgresql://")):
        import psycopg

        name = url.rsplit("/", 1)[1]
        admin = url.rsplit("/", 1)[0] + "/postgres"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))
    return ordered[index]


def timed(client, url: str) -> dict:
    for _ in range(WARMUP):
        assert client.get(url).status_code == 200, url
    samples = []
    for _ in range(REQUESTS):
        start = time.perf_counter()
        response = client.get(url)
        samples.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, url
    return {
        "url": url,
        "requests": REQUESTS,
        "p50_ms": round(statistics.median(samples), 1),
        "p95_ms": round(percentile(samples, 0.95), 1),
        "max_ms": round(max(samples), 1),
    }


def main() -> None:
    fresh_database()
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    call_command("migrate", verbosity=0)
    from demo.portal import seed_portal_demo
    from yoco.guarantee.models import Incident

    started = time.perf_counter()
    showcase = 6  # incidents the demo tells as events, on top of the bulk ones
    data = seed_portal_demo(incidents=INCIDENTS - showcase)
    seeded_s = time.perf_counter() - started
    total = Incident.objects.filter(cluster__customer=data.contract.customer).count()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # fresh statistics, as a running database would have

    client = Client()
    client.force_login(data.owner)
    settings.YOCO_PORTAL_CACHE_SECONDS = 60
    cached = timed(client, "/")
    settings.YOCO_PORTAL_CACHE_SECONDS = 0
    pages = {
        "dashboard": timed(client, "/"),
        "dashboard_cached": cached,
        "incidents": timed(client, "/incidents/"),
        "incidents_filtered": timed(client, "/incidents/?year=2&outcome=rolled_back"),
        "incidents_last_page": timed(client, "/incidents/?page=2000"),
        "contract": timed(client, f"/contracts/{data.contract.pk}/"),
    }
    run = {
        "dashboard_p50_ms": pages["dashboard"]["p50_ms"],
        "dashboard_p95_ms": pages["dashboard"]["p95_ms"],
        "dashboard_cached_p95_ms": pages["dashboard_cached"]["p95_ms"],
        "incidents_p50_ms": pages["incidents"]["p50_ms"],
        "incidents_p95_ms": pages["incidents"]["p95_ms"],
        "incidents": total,
        "database": connection.vendor,
        "pages": pages,
        "seed_s": round(seeded_s, 1),
        "target_p95_ms": TARGET_P95_MS,
        "setup": "Django test client in process (server time, no network), one customer, "
        f"{REQUESTS} timed requests per page after {WARMUP} warm-up requests; dashboard with "
        "the chart cache off unless named cached",
    }
    previous = {}
    path = RESULTS / "portal.json"
    if path.exists():
        try:
            previous = json.loads(path.read_text()).get("by_database", {})
        except (ValueError, AttributeError):
            previous = {}
    keys = ("dashboard_p50_ms", "dashboard_p95_ms", "dashboard_cached_p95_ms",
            "incidents_p50_ms", "incidents_p95_ms", "incidents")  # fmt: skip
    summary = {k: run[k] for k in keys}
    run["by_database"] = {**previous, connection.vendor: summary}
    written = write_result("portal", run)
    print(json.dumps({k: v for k, v in run.items() if k != "pages"}, indent=2))
    for name, page in pages.items():
        print(f"{name:22s} p50 {page['p50_ms']:7.1f} ms   p95 {page['p95_ms']:7.1f} ms")
    print(f"wrote {written}")


if __name__ == "__main__":
    main()
