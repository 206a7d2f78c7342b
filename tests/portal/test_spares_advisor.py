"""The contract page's spare-sizing advisor (SPEC 4.9): its inputs read from the contract's own
history, the table, the recommendation, the chart and the formulas; only the customer's users
see it."""

import json
import re
from datetime import timedelta

from django.utils import timezone

from tests.portal.conftest import body
from yoco.events.models import Event
from yoco.guarantee import sizing
from yoco.guarantee.models import Incident, Job


def _run_job_for(demo, hours: float) -> Job:
    """Give the demo's largest job a first and a last event `hours` apart (its GPU-hours)."""
    job = Job.objects.filter(cluster=demo.cluster).order_by("-gpus").first()
    last = timezone.now() - timedelta(days=1)
    for n, at in enumerate((last - timedelta(hours=hours), last)):
        Event.objects.create(
            cluster=demo.cluster, source=job.source, event_id=f"advisor-{n}", type="x",
            time=at, raw={}, content_hash="-", received_at=at, processed_at=at,
        )  # fmt: skip
    return job


def _gpu_hours(demo) -> tuple[float, int]:
    """The GPU-hours of the cluster's jobs (GPUs × first to last event), summed here in Python."""
    gpus = dict(Job.objects.filter(cluster=demo.cluster).values_list("source", "gpus"))
    spans: dict[str, list] = {}
    for source, at in Event.objects.filter(cluster=demo.cluster).values_list("source", "time"):
        spans.setdefault(source, []).append(at)
    hours = [
        gpus[s] * (max(times) - min(times)).total_seconds() / 3600
        for s, times in spans.items()
        if gpus.get(s)
    ]
    return sum(hours), len(hours)


def _history_counts(demo):
    """The eligible unplanned and pre-emptive failures, counted here independently."""
    now = timezone.now()
    rows = Incident.objects.filter(contract=demo.contract).as_of(now)
    eligible = [
        r.outcome_now
        for r in rows
        if r.trigger in ("unplanned", "preemptive")
        and r.outcome_now in ("live_resolved", "rolled_back", "failed")
    ]
    return len(eligible), eligible.count("live_resolved")


def test_owner_sees_the_advice_from_the_contract_history(demo, owner):
    job = _run_job_for(demo, hours=100)
    gpu_hours, jobs = _gpu_hours(demo)
    assert gpu_hours >= job.gpus * 100
    failures, live = _history_counts(demo)
    assert failures > 0
    expected = sizing.advise(
        failures=failures,
        gpu_hours=gpu_hours,
        live_resolved=live,
        job_gpus=job.gpus,
        return_hours=4,
        target=demo.contract.target,
    )
    page = body(owner.get(f"/contracts/{demo.contract.pk}/"))
    section = page[page.index('id="spares"') :]
    assert f"{failures:,} unplanned and pre-emptive failures" in section
    assert f"{gpu_hours:,.0f} GPU-hours over {jobs} jobs" in section
    assert f"{expected.failure_rate:.3g}" in section
    assert "the contract&#x27;s largest job" in section or "the contract's largest job" in section
    assert "4.00 h" in section
    rows = re.findall(
        r"<tr(?: class=\"recommended\")?>\s*<td class=\"num\" data-label=\"Spares S\">(\d)", section
    )
    assert rows == [str(s) for s in range(9)]
    recommended = f"Recommended: {expected.recommended} spare"
    assert recommended in section
    assert ("Too few failures" in section) != expected.confident
    figure = json.loads(re.search(r'id="fig-spares">(.*?)</script>', section, re.S).group(1))
    assert [round(y, 6) for y in figure["data"][0]["y"]] == [
        round(o.live_rate * 100, 6) for o in expected.options
    ]
    assert "P(N ≥ S)" in section and "Clopper–Pearson" in section  # the formulas


def test_g_can_be_chosen_and_a_bad_g_is_refused(demo, owner):
    url = f"/contracts/{demo.contract.pk}/"
    assert 'id="id_gpus" min="1" value="8"' in body(owner.get(url + "?gpus=8"))
    refused = body(owner.get(url + "?gpus=0"))
    assert "greater than or equal to 1" in refused
    assert 'value="2048"' in refused  # back to the largest job


def test_without_any_history_it_says_it_cannot_be_sure(demo, teammate):
    Incident.objects.filter(contract=demo.contract).update(trigger="planned", outcome="planned")
    section = body(teammate.get(f"/contracts/{demo.contract.pk}/"))
    section = section[section.index('id="spares"') :]
    assert "Recommended: 1 spare." in section  # λ = 0: the smallest S with P_S ≤ 1 %
    assert "Too few failures to be sure" in section


def test_outsider_sees_no_advice_for_our_contract(demo, outsider):
    assert outsider.get(f"/contracts/{demo.contract.pk}/?gpus=8").status_code == 404
