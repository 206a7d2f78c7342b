"""A closed year's annual statement: what the customer files with finance (the portal renders it
as a PDF). Everything on it is the year's frozen result: its counts, the outcomes its evidence
snapshot names, its credit, the rules version and the snapshot's hash."""

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from yoco.guarantee import rules
from yoco.guarantee.evidence import evidence_hash
from yoco.guarantee.models import ContractYear, Credit, Incident
from yoco.guarantee.years import result_of


@dataclass(frozen=True)
class StatementIncident:
    id: int
    detected_at: datetime | None
    category: str | None
    trigger: str | None
    outcome: str
    overridden: bool
    downtime_ms: int | None


@dataclass(frozen=True)
class Statement:
    year: ContractYear
    counts: dict[str, int]
    eligible: int
    compliance: Decimal | None
    interval: tuple[float, float] | None  # Clopper-Pearson, 95 %, on the live-resolution rate
    meets: bool
    credit: Credit | None
    incidents: list[StatementIncident]
    rules_version: str | None
    evidence_hash: str | None


def statement_of(year: ContractYear) -> Statement:
    """The statement of a closed year (ValueError for an open one)."""
    if year.state != ContractYear.CLOSED:
        raise ValueError(f"year {year.number} is open: it has no statement yet")
    result = result_of(year.counts, year.contract.target)
    counts = result["counts"]
    evidence = year.evidence
    # The outcomes the year closed with; before snapshots named them, the incidents' own.
    closed_outcomes = {entry["id"]: entry["outcome"] for entry in evidence.get("incidents", [])}
    overridden = {entry["incident"] for entry in evidence.get("overrides", [])}
    rows = Incident.objects.filter(
        contract_id=year.contract_id, year_number=year.number, outcome__isnull=False
    ).order_by("detected_at", "pk")
    if closed_outcomes:
        rows = Incident.objects.filter(pk__in=closed_outcomes).order_by("detected_at", "pk")
    incidents = [
        StatementIncident(
            id=incident.pk,
            detected_at=incident.detected_at,
            category=incident.category,
            trigger=incident.trigger,
            outcome=closed_outcomes.get(incident.pk, incident.outcome),
            overridden=(
                incident.pk in overridden if evidence else incident.override_outcome is not None
            ),
            downtime_ms=incident.downtime_ms,
        )
        for incident in rows
    ]
    credit = year.credits.exclude(state=Credit.VOIDED).first()
    return Statement(
        year=year,
        counts=counts,
        eligible=result["eligible"],
        compliance=result["compliance"],
        interval=rules.clopper_pearson(counts["live_resolved"], result["eligible"]),
        meets=result["meets"],
        credit=credit,
        incidents=incidents,
        rules_version=evidence.get("rules_version"),
        evidence_hash=evidence_hash(evidence) if evidence else None,
    )
