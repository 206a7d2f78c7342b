"""The dashboard shows the current year at a glance: compliance, status, budget, interval."""

from django.utils import timezone

from tests.portal.conftest import body
from yoco.guarantee import rules
from yoco.guarantee.models import ContractYear
from yoco.guarantee.years import year_result


def test_dashboard_shows_the_current_year(demo, owner):
    year = ContractYear.objects.select_related("contract").get(contract=demo.contract, number=2)
    result = year_result(year)
    live, eligible = result["counts"]["live_resolved"], result["eligible"]
    page = body(owner.get("/"))
    assert f"{result['compliance'] * 100:.1f} %" in page
    assert "target 90 %" in page
    budget = rules.remaining_budget(live, eligible, year.contract.target)
    assert f"{budget:,}" in page and "Remaining budget" in page
    low, high = rules.clopper_pearson(live, eligible)
    assert f"{low * 100:.1f} % – {high * 100:.1f} %" in page
    assert f"{(year.end - timezone.now()).days:,}" in page  # days left
    assert 'data-status="met"' in page  # year 2 of the demo is on track


def test_a_closed_missed_year_shows_missed(demo, owner):
    page = body(owner.get(f"/?contract={demo.contract.pk}&year=1"))
    assert 'data-status="missed"' in page


def test_charts_are_server_built_and_plotly_is_local(demo, owner):
    page = body(owner.get("/"))
    for figure in ("fig-outcomes", "fig-recovery", "fig-category", "fig-trigger", "fig-protected"):
        assert f'id="{figure}"' in page
    assert "/static/vendor/plotly.min.js" in page
    assert "cdn" not in page.lower()
