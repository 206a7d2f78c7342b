"""A closed year's evidence snapshot, and re-deriving the year from it.

When a year closes, its snapshot names everything its result follows from: the terms, each
counted incident with its events (ids) and the job.started events that say its job's frameworks,
the account team's overrides and the dispute decisions in force, the closing time and the rules
version. The snapshot's SHA-256 goes into the closing's (and the credit's) audit record, which the
audit hash chain protects. `verify_year` and `verify_credit` load the named events, re-derive the
year with the rules version the snapshot names (`rules.derive_year`) and list every difference.
"""

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from yoco.accounts.chain import canonical_sha256
from yoco.accounts.models import AuditRecord
from yoco.events.models import Event
from yoco.guarantee import rules
from yoco.guarantee.fold import fact_of
from yoco.guarantee.models import ContractYear, Credit, Dispute, Incident
from yoco.guarantee.years import eligible
from yoco.lib.vocabulary import JOB_STARTED, OUTCOMES

# Events loaded per query when a snapshot is re-derived (bounded IN lists).
EVENTS_PER_QUERY = 5000


class EvidenceError(Exception):
    """The evidence cannot be re-derived at all (an open year, a snapshot that names no events)."""


def _iso(instant: datetime | None) -> str | None:
    return instant.astimezone(UTC).isoformat() if instant else None


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text)


def evidence_hash(evidence: dict) -> str:
    """The snapshot's SHA-256 (canonical JSON), as the audit records and the statement show it."""
    return canonical_sha256(evidence)


def snapshot(year: ContractYear, counts: dict[str, int], now: datetime) -> dict:
    """The evidence of `year` closing at `now` with the stored `counts` (inside the closing
    transaction, after time alone has decided what it decides by `now`)."""
    contract = year.contract
    year_incidents = Incident.objects.filter(
        contract_id=year.contract_id, year_number=year.number, outcome__isnull=False
    )
    incidents = list(year_incidents.select_related("override_by").order_by("pk"))
    clusters = {incident.cluster_id for incident in incidents}
    events: dict[tuple[int, str], list[int]] = {}
    for pk, cluster_id, subject in (
        Event.objects.foldable()
        .filter(cluster_id__in=clusters, subject__in=year_incidents.values("subject"))
        .order_by("pk")
        .values_list("pk", "cluster_id", "subject")
    ):
        events.setdefault((cluster_id, subject), []).append(pk)
    job_events: dict[tuple[int, str], list[int]] = {}
    for pk, cluster_id, source in (
        Event.objects.foldable()
        .filter(
            cluster_id__in=clusters,
            type=JOB_STARTED,
            source__in=year_incidents.values("source"),
        )
        .order_by("pk")
        .values_list("pk", "cluster_id", "source")
    ):
        job_events.setdefault((cluster_id, source), []).append(pk)
    decisions = Dispute.objects.filter(incident__in=year_incidents).exclude(state=Dispute.OPEN)
    return {
        "rules_version": rules.RULES_VERSION,
        "year": {
            "contract": contract.pk,
            "number": year.number,
            "begin": _iso(year.start),
            "end": _iso(year.end),
        },
        "closed_at": _iso(now),
        "target": str(contract.target),
        "terms": {
            "deadline_minutes": contract.deadline_minutes,
            "frameworks": sorted(contract.frameworks),
            "excluded_categories": sorted(contract.excluded_categories),
        },
        "counts": counts,
        "eligible": eligible(counts),
        "incident_ids": [incident.pk for incident in incidents],
        "incidents": [
            {
                "id": incident.pk,
                "outcome": incident.outcome,
                "events": events.get((incident.cluster_id, incident.subject), []),
                "job_events": job_events.get((incident.cluster_id, incident.source), []),
            }
            for incident in incidents
        ],
        "overrides": [
            {
                "incident": incident.pk,
                "outcome": incident.override_outcome,
                "reason": incident.override_reason,
                "by": incident.override_by.username if incident.override_by_id else None,
                "at": _iso(incident.override_at),
            }
            for incident in incidents
            if incident.override_outcome
        ],
        "disputes": [
            {
                "id": dispute.pk,
                "incident": dispute.incident_id,
                "state": dispute.state,
                "answer": dispute.answer,
                "answered_at": _iso(dispute.answered_at),
            }
            for dispute in decisions.order_by("pk")
        ],
    }


@dataclass
class Verification:
    """A snapshot re-derived: the rules version used, the result, and every difference found
    (none: the snapshot agrees with its inputs and with its audit record)."""

    rules_version: str
    evidence_hash: str
    derived: rules.YearDerivation | None = None
    differences: list[str] = field(default_factory=list)

    @property
    def agrees(self) -> bool:
        return not self.differences


def _inputs(evidence: dict, differences: list[str]) -> rules.YearInputs:
    """The rules' inputs the snapshot names, its events loaded; a named event that is gone is
    a difference."""
    named = sorted(
        {pk for entry in evidence["incidents"] for pk in entry["events"] + entry["job_events"]}
    )
    facts = {}
    for start in range(0, len(named), EVENTS_PER_QUERY):
        for event in Event.objects.filter(pk__in=named[start : start + EVENTS_PER_QUERY]):
            facts[event.pk] = fact_of(event)
    missing = [pk for pk in named if pk not in facts]
    if missing:
        differences.append(f"events named by the snapshot are missing: {missing}")
    overrides = {entry["incident"]: entry["outcome"] for entry in evidence["overrides"]}
    terms = evidence["terms"]
    return rules.YearInputs(
        begin=_instant(evidence["year"]["begin"]),
        end=_instant(evidence["year"]["end"]),
        terms=rules.Terms(
            deadline=timedelta(minutes=terms["deadline_minutes"]),
            supported_frameworks=frozenset(terms["frameworks"]),
            excluded_categories=frozenset(terms["excluded_categories"]),
        ),
        target=Decimal(evidence["target"]),
        now=_instant(evidence["closed_at"]),
        incidents=tuple(
            rules.IncidentInputs(
                id=entry["id"],
                events=tuple(facts[pk] for pk in entry["events"] if pk in facts),
                job_frameworks=frozenset(
                    facts[pk].data.get("framework") for pk in entry["job_events"] if pk in facts
                ),
                override=overrides.get(entry["id"]),
            )
            for entry in evidence["incidents"]
        ),
    )


def _compare(evidence: dict, derived: rules.YearDerivation, differences: list[str]) -> None:
    """Every way the snapshot's own result differs from the re-derived one."""
    if evidence["incident_ids"] != [entry["id"] for entry in evidence["incidents"]]:
        differences.append("incident_ids does not list the incidents the snapshot describes")
    for outcome in OUTCOMES:
        stored = evidence["counts"].get(outcome, 0)
        if stored != derived.counts[outcome]:
            differences.append(
                f"{outcome}: snapshot {stored}, re-derived {derived.counts[outcome]}"
            )
    if evidence["eligible"] != derived.eligible:
        differences.append(
            f"eligible: snapshot {evidence['eligible']}, re-derived {derived.eligible}"
        )
    for entry in evidence["incidents"]:
        again = derived.outcomes[entry["id"]]
        if entry["outcome"] != again:
            differences.append(
                f"incident {entry['id']}: snapshot {entry['outcome']}, re-derived {again or 'none'}"
            )


def verify(evidence: dict, *, audited_hash: str | None = None) -> Verification:
    """Re-derive the year `evidence` describes with the rules version it names.

    Raises `rules.UnknownRulesVersion` for a version never released and `EvidenceError` for a
    snapshot that names no inputs (earned before snapshots named them)."""
    version = evidence.get("rules_version")
    derive = rules.released(version)
    if "incidents" not in evidence or "year" not in evidence:
        raise EvidenceError(
            "this snapshot names no events (it was taken before snapshots named them): "
            "there is nothing to re-derive the year from"
        )
    result = Verification(rules_version=version, evidence_hash=evidence_hash(evidence))
    differences = result.differences
    if audited_hash is not None and audited_hash != result.evidence_hash:
        differences.append(
            f"the snapshot's hash {result.evidence_hash} is not the {audited_hash} its audit "
            "record holds: the snapshot was changed after it was taken"
        )
    try:
        derived = result.derived = derive(_inputs(evidence, differences))
        _compare(evidence, derived, differences)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise EvidenceError(f"the snapshot is malformed ({type(exc).__name__}: {exc})") from None
    return result


def _audited_hash(action: str, obj) -> str | None:
    record = (
        AuditRecord.objects.filter(
            action=action, object_type=type(obj).__name__, object_id=str(obj.pk)
        )
        .order_by("-pk")
        .first()
    )
    return (record.after or {}).get("evidence_hash") if record else None


def verify_year(year: ContractYear) -> Verification:
    """A closed year's snapshot re-derived, checked against its closing's audit record and
    against the counts the year stores."""
    if year.state != ContractYear.CLOSED:
        raise EvidenceError(f"year {year.number} is open: its result is not final yet")
    result = verify(year.evidence, audited_hash=_audited_hash("close_year", year))
    if year.counts != year.evidence.get("counts"):
        result.differences.append("the year's stored counts are not the snapshot's")
    return result


def verify_credit(credit: Credit) -> Verification:
    """A credit's snapshot re-derived, checked against its earning's audit record; the year it
    describes must miss its target."""
    result = verify(credit.evidence, audited_hash=_audited_hash("earn_credit", credit))
    if result.derived.meets:
        result.differences.append("the re-derived year meets its target: no credit is due")
    return result
