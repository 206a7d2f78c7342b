"""Progress protected (SPEC 4.6) on the dashboard matches the savings model, with its formula."""

from decimal import Decimal

from tests.portal.conftest import body
from yoco.guarantee.models import Incident
from yoco.lib import savings
from yoco.portal.stats import year_stats


def test_dashboard_figure_equals_the_model_over_every_incident(demo, owner):
    from django.utils import timezone

    year = demo.contract.contract_years.get(number=2)
    live = Incident.objects.filter(contract=demo.contract, year_number=2, outcome="live_resolved")
    expected = savings.protected_gpu_hours(
        [(i.gpus, None if i.downtime_ms is None else Decimal(i.downtime_ms) / 1000) for i in live],
        checkpoint_interval_hours=Decimal("1.5"),
        restart_minutes=15,
        gpu_hour_price=Decimal("2"),
    )
    stats = year_stats(demo.contract, year, timezone.now())
    assert abs(stats.protected.gpu_hours - expected.gpu_hours) < Decimal("1e-9")
    assert stats.live_counted == expected.incidents
    page = body(owner.get("/"))
    assert "protected = Σ GPUs × (interval ÷ 2 + restart − downtime)" in page
    assert f"{expected.gpu_hours:,.0f}" in page
    assert f"{expected.value:,.2f} USD" in page
