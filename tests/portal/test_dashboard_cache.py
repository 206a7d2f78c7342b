"""The chart cache never hides a change of the year's result: its key holds the stored counts."""

from django.core.cache import cache

from tests.portal.conftest import body
from yoco.guarantee.models import Incident
from yoco.guarantee.years import refresh_years


def _live_in_month_json(page: str) -> str:
    start = page.index('id="fig-outcomes">')
    return page[start : page.index("</script>", start)]


def test_a_fold_that_changes_the_counts_shows_at_once(demo, owner, settings):
    settings.YOCO_PORTAL_CACHE_SECONDS = 60
    cache.clear()
    before = _live_in_month_json(body(owner.get("/")))
    assert _live_in_month_json(body(owner.get("/"))) == before  # served from the cache
    incident = Incident.objects.filter(
        contract=demo.contract, year_number=2, outcome="live_resolved"
    ).first()
    Incident.objects.filter(pk=incident.pk).update(outcome="failed", computed_outcome="failed")
    refresh_years([(demo.contract.pk, 2)])  # what every fold, expiry and override does
    after = _live_in_month_json(body(owner.get("/")))
    assert after != before
