"""What the dashboard shows, aggregated in the database (never one Python row per incident).

Two grouped queries per contract year feed every chart: one grouped by (month, outcome,
category, trigger) with the sums "progress protected" needs, one grouped by (downtime bucket,
outcome). With 100,000 incidents they return a few hundred rows.
"""

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.core.cache import cache
from django.db.models import Case, Count, DecimalField, IntegerField, Max, Sum, Value, When
from django.db.models.functions import Cast

from yoco.events.models import Event
from yoco.guarantee import rules
from yoco.guarantee.models import Contract, ContractYear, Incident
from yoco.guarantee.status import year_status
from yoco.guarantee.years import year_result
from yoco.lib import savings
from yoco.lib.vocabulary import LIVE_RESOLVED, OUTCOMES

# Recovery-time buckets (upper edges in seconds; the last is open).
EXACT = DecimalField(max_digits=40, decimal_places=0)
DOWNTIME_EDGES = (30, 60, 120, 180, 300, 600, 900, 1800, 3600)
DOWNTIME_LABELS = (
    "< 30 s", "30–60 s", "1–2 min", "2–3 min", "3–5 min", "5–10 min", "10–15 min",
    "15–30 min", "30–60 min", "≥ 60 min",
)  # fmt: skip


def current_year(years: list[ContractYear], now: datetime) -> ContractYear | None:
    """The year containing `now`; before the first, the first; after the last, the last."""
    if not years:
        return None
    for year in years:
        if year.start <= now < year.end:
            return year
    return years[0] if now < years[0].start else years[-1]


@dataclass
class Glance:
    """One contract year at a glance."""

    contract: Contract
    year: ContractYear
    result: dict
    status: str
    status_label: str
    status_detail: str
    days_left: int
    remaining_budget: int | None
    interval: tuple[float, float] | None
    target_ratio: Decimal

    @property
    def compliance_pct(self) -> Decimal | None:
        value = self.result["compliance"]
        return None if value is None else value * 100

    @property
    def gauge_pct(self) -> float:
        value = self.result["compliance"]
        return 0.0 if value is None else float(value * 100)


def glance(year: ContractYear, now: datetime, result: dict | None = None) -> Glance:
    """`result`: the year's `year_result` as of `now`, when the caller has it already."""
    contract = year.contract
    result = result or year_result(year, now)
    live, eligible = result["counts"]["live_resolved"], result["eligible"]
    shown = year_status(
        live=live,
        eligible=eligible,
        target=contract.target,
        closed=year.state == ContractYear.CLOSED,
        ended=now >= year.end,
        closed_at=year.closed_at,
    )
    return Glance(
        contract=contract,
        year=year,
        result=result,
        status=shown.status,
        status_label=shown.label,
        status_detail=shown.detail,
        days_left=max(0, (year.end - now).days) if now < year.end else 0,
        remaining_budget=rules.remaining_budget(live, eligible, contract.target),
        interval=rules.clopper_pearson(live, eligible),
        target_ratio=contract.target / 100,
    )


def month_starts(start: datetime, end: datetime) -> list[datetime]:
    months = []
    cursor = start.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    while cursor < end:
        months.append(cursor)
        cursor = cursor.replace(year=cursor.year + cursor.month // 12, month=cursor.month % 12 + 1)
    return months


@dataclass
class YearStats:
    months: list[datetime]
    outcomes_by_month: dict[str, list[int]]  # outcome -> count per month
    by_category: dict[tuple[str, str], int]  # (category, trigger) -> count
    by_trigger: dict[str, int]
    downtime: dict[str, list[int]]  # outcome -> count per DOWNTIME_LABELS bucket
    protected_by_month: list[Decimal]  # GPU-hours per month
    protected: savings.ProtectedProgress
    live_counted: int
    live_skipped: int
    mean_live_downtime_s: Decimal | None
    total: int


def cached_year_stats(
    contract: Contract, year: ContractYear, now: datetime, counts: dict[str, int]
) -> YearStats:
    """`year_stats`, kept in Django's cache for YOCO_PORTAL_CACHE_SECONDS (default 60; 0 = off).

    The key holds everything the figures depend on that is cheap to read: the contract's terms,
    the year's `counts` as of now (refreshed by every fold, expiry and override, and moved by
    deadlines passing), the newest event
    and incident ids (O(1) reads of the primary keys) and the month. What it cannot see (a fold
    still running after its events were stored) shows within the timeout.
    """
    seconds = getattr(settings, "YOCO_PORTAL_CACHE_SECONDS", 60)
    if seconds <= 0:
        return year_stats(contract, year, now)
    versions = [
        Event.objects.aggregate(m=Max("pk"))["m"],
        Incident.objects.aggregate(m=Max("pk"))["m"],
    ]
    terms = [
        contract.checkpoint_interval_minutes, contract.restart_minutes,
        str(contract.gpu_hour_price), contract.currency, contract.deadline_minutes,
    ]  # fmt: skip
    state = [contract.pk, year.pk, year.number, year.state, counts, terms, versions]
    digest = hashlib.sha256(json.dumps([state, f"{now:%Y-%m}"], default=str).encode())
    key = f"yoco:portal:year-stats:{digest.hexdigest()}"
    stats = cache.get(key)
    if stats is None:
        stats = year_stats(contract, year, now)
        cache.set(key, stats, seconds)
    return stats


def year_stats(contract: Contract, year: ContractYear, now: datetime) -> YearStats:
    incidents = Incident.objects.filter(
        contract=contract, year_number=year.number, outcome__isnull=False
    ).as_of(now)
    # Month and downtime bucket as CASE expressions (plain comparisons every database evaluates
    # natively; SQLite runs TruncMonth as a Python function per row), grouped with the outcome:
    # at most 12 × 6 × 11 groups, plain sums, no per-row FILTER clauses.
    months = month_starts(year.start, year.end)
    month_of = Case(
        *[When(detected_at__lt=m, then=Value(i)) for i, m in enumerate(months[1:])],
        default=Value(len(months) - 1),
        output_field=IntegerField(),
    )
    bucket_of = Case(
        When(downtime_ms__isnull=True, then=Value(-1)),
        *[When(downtime_ms__lt=e * 1000, then=Value(i)) for i, e in enumerate(DOWNTIME_EDGES)],
        default=Value(len(DOWNTIME_EDGES)),
        output_field=IntegerField(),
    )
    rows = (
        incidents.annotate(month=month_of, bucket=bucket_of)
        .values("month", "outcome_now", "bucket")
        .annotate(
            n=Count("id"),
            with_gpus=Count("gpus"),
            gpus_sum=Sum(Cast("gpus", EXACT)),
            # In exact decimals: two values up to 2^53 - 1 (what ingest admits) multiply past
            # a bigint.
            gpu_ms=Sum(Cast("gpus", EXACT) * Cast("downtime_ms", EXACT)),
            downtime_ms_sum=Sum(Cast("downtime_ms", EXACT)),
        )
        .order_by()
    )
    outcomes = {o: [0] * len(months) for o in OUTCOMES}
    downtime = {o: [0] * len(DOWNTIME_LABELS) for o in OUTCOMES}
    month_gpus = [0] * len(months)
    month_gpu_ms = [0] * len(months)
    live_counted = live_total = 0
    downtime_sum = downtime_n = total = 0
    for row in rows:
        i, outcome, bucket, n = row["month"], row["outcome_now"], row["bucket"], row["n"]
        total += n
        outcomes[outcome][i] += n
        if bucket >= 0:
            downtime[outcome][bucket] += n
        if outcome == LIVE_RESOLVED:
            live_total += n
            if bucket >= 0:  # a downtime: measurable when the GPU count is known too
                live_counted += row["with_gpus"]
                month_gpus[i] += int(row["gpus_sum"] or 0)
                month_gpu_ms[i] += int(row["gpu_ms"] or 0)
                downtime_sum += int(row["downtime_ms_sum"] or 0)
                downtime_n += n
    by_category: dict[tuple[str, str], int] = {}
    by_trigger: dict[str, int] = {}
    for row in incidents.values("category", "trigger").annotate(n=Count("id")).order_by():
        key = (row["category"] or "unknown", row["trigger"] or "unknown")
        by_category[key] = by_category.get(key, 0) + row["n"]
        by_trigger[key[1]] = by_trigger.get(key[1], 0) + row["n"]

    # Show the year up to now (and any later month that holds incidents, e.g. clock skew).
    shown = len(month_starts(year.start, min(year.end, max(now, year.start)))) or 1
    while shown < len(months) and any(values[shown] for values in outcomes.values()):
        shown += 1
    months = months[:shown]
    outcomes = {o: values[:shown] for o, values in outcomes.items()}
    month_gpus, month_gpu_ms = month_gpus[:shown], month_gpu_ms[:shown]

    # The savings model is linear, so a month's incidents enter as one (Σ GPUs, GPU-weighted
    # mean downtime) pair: Σ gpus × downtime is exactly Σ over the month's incidents.
    def pairs(selection):
        return [(gpus, Decimal(gpu_ms) / 1000 / gpus) for gpus, gpu_ms in selection if gpus]

    terms = dict(
        checkpoint_interval_hours=Decimal(contract.checkpoint_interval_minutes) / 60,
        restart_minutes=contract.restart_minutes,
        gpu_hour_price=contract.gpu_hour_price,
        currency=contract.currency,
    )
    per_month = [
        savings.protected_gpu_hours(pairs([(g, ms)]), **terms).gpu_hours
        for g, ms in zip(month_gpus, month_gpu_ms, strict=True)
    ]
    protected = savings.protected_gpu_hours(
        pairs(zip(month_gpus, month_gpu_ms, strict=True)), **terms
    )

    return YearStats(
        months=months,
        outcomes_by_month=outcomes,
        by_category=by_category,
        by_trigger=by_trigger,
        downtime=downtime,
        protected_by_month=per_month,
        protected=protected,
        live_counted=live_counted,
        live_skipped=live_total - live_counted,
        mean_live_downtime_s=(Decimal(downtime_sum) / 1000 / downtime_n) if downtime_n else None,
        total=total,
    )
