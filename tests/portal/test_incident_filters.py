"""The incident list filters by contract, year, outcome, category and trigger, and pages."""

import re

from tests.portal.conftest import body
from yoco.guarantee.models import Incident
from yoco.portal.views import PAGE_SIZE


def _count(page: str) -> int:
    return int(re.search(r"([\d,]+) incidents? match", page).group(1).replace(",", ""))


def test_each_filter_narrows_the_list(demo, owner):
    mine = Incident.objects.filter(cluster__customer=demo.contract.customer)
    assert _count(body(owner.get("/incidents/"))) == mine.count()
    cases = {
        f"contract={demo.contract.pk}": mine.filter(contract=demo.contract),
        "year=1": mine.filter(year_number=1),
        "outcome=rolled_back": mine.filter(outcome="rolled_back"),
        "category=gpu_xid": mine.filter(category="gpu_xid"),
        "trigger=preemptive": mine.filter(trigger="preemptive"),
        "year=2&outcome=live_resolved&trigger=unplanned": mine.filter(
            year_number=2, outcome="live_resolved", trigger="unplanned"
        ),
    }
    for query, expected in cases.items():
        assert _count(body(owner.get(f"/incidents/?{query}"))) == expected.count(), query


def test_an_invalid_filter_value_is_reported_not_applied(demo, owner):
    page = body(owner.get("/incidents/?outcome=bogus"))
    assert "Select a valid choice" in page
    assert _count(page) == Incident.objects.filter(cluster__customer=demo.contract.customer).count()


def test_pages_keep_the_filters(demo, owner):
    page = body(owner.get("/incidents/?year=1"))
    assert "Page 1 of" in page and "?year=1&amp;page=2" in page
    first = re.findall(r'href="/incidents/(\d+)/"', page)
    second = re.findall(r'href="/incidents/(\d+)/"', body(owner.get("/incidents/?year=1&page=2")))
    assert len(first) == PAGE_SIZE and second and not set(first) & set(second)
    assert "Page 2 of" in body(owner.get("/incidents/?year=1&page=2"))
