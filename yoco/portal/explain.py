"""Why an incident has its outcome, in plain language.

The outcome and its reason come from one evaluation of the rules (`rules.decide`, as of now);
this module only words the reason it returns, never re-reads SPEC 4.3 itself.
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from yoco.guarantee import rules
from yoco.guarantee.fold import fact_of
from yoco.guarantee.models import Incident, Job
from yoco.guarantee.years import terms_of
from yoco.lib.vocabulary import (
    ELIGIBLE,
    EXCLUDED,
    FAILED,
    LIVE_RESOLVED,
    PENDING,
    PLANNED,
    ROLLED_BACK,
)

RULE_TITLES = {
    PLANNED: "Planned maintenance",
    EXCLUDED: "Excluded from the guarantee",
    ROLLED_BACK: "Rolled back to a checkpoint",
    LIVE_RESOLVED: "Resolved live",
    FAILED: "Not recovered within the deadline",
    PENDING: "Recovery in progress",
}


@dataclass
class Explanation:
    rule: str
    title: str
    outcome: str | None = None  # as of now, after any override
    reasons: list[str] = field(default_factory=list)
    counting: str = ""
    override: dict | None = None


def duration(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    sign = "−" if seconds < 0 else ""
    seconds = abs(seconds)
    if seconds < 60:
        return f"{sign}{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{sign}{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{sign}{hours} h {minutes:02d} min"


def _when(instant: datetime) -> str:
    return instant.strftime("%d %b %Y, %H:%M:%S UTC")


def _words(name: str) -> str:
    return name.replace("_", " ")


def _reason(decision: rules.Decision, terms: rules.Terms, now: datetime) -> str:
    """The sentence for the clause of SPEC 4.3 that decided (`decision.reason`)."""
    found, deadline, cited = decision.detection, decision.deadline, decision.cited
    minutes = int(terms.deadline.total_seconds() // 60)
    match decision.reason:
        case rules.PLANNED_TRIGGER:
            return (
                "Its trigger is planned: maintenance is not a failure. Planned incidents are "
                "counted and shown apart and never affect compliance."
            )
        case rules.NETWORK_WIDE:
            return (
                "Its scope is network-wide: a failure of the whole fabric cannot be solved by "
                "moving one job, so the guarantee excludes it."
            )
        case rules.EXCLUDED_CATEGORY:
            return (
                f"Its category, {_words(found.category)}, is excluded by the contract "
                f"(excluded categories: {', '.join(sorted(terms.excluded_categories))})."
            )
        case rules.UNSUPPORTED_FRAMEWORK:
            return (
                f"Its job reported framework {', '.join(decision.unsupported)}, which the "
                f"contract does not support (supported: "
                f"{', '.join(sorted(terms.supported_frameworks))})."
            )
        case rules.CHECKPOINT_RESTORE:
            restore = cited[0]
            return (
                f"The job was restored from a checkpoint at {_when(restore.time)}, losing "
                f"{restore.data.get('steps_lost', 0):,} steps of training: a rollback, not a "
                "live recovery."
            )
        case rules.LOSSY_MIGRATION:
            lossy = cited[0]
            return (
                f"The migration completed at {_when(lossy.time)} but lost "
                f"{lossy.data['steps_lost']:,} steps: a rollback, not a live recovery."
            )
        case rules.LIVE_RESUME:
            clean, resume = cited
            return (
                f"The migration completed at {_when(clean.time)} without losing a step, and the "
                f"job resumed {duration(resume.time - found.time)} after detection, within the "
                f"{minutes}-minute deadline."
            )
        case rules.LATE_RESUME:
            resume = cited[1]
            return (
                f"The job resumed {duration(resume.time - found.time)} after detection, after "
                f"the {minutes}-minute deadline."
            )
        case rules.RESUME_WITHOUT_MIGRATION:
            return (
                "The job resumed, but no migration completed without loss before it: the "
                "resume was not a live recovery."
            )
        case rules.MIGRATION_FAILURE:
            failure = cited[0]
            return (
                f"The migration failed at {_when(failure.time)} "
                f"(“{failure.data.get('reason', '')}”) and nothing recovered the job before "
                "the deadline."
            )
        case rules.NO_RECOVERY:
            return "No recovery was reported before the deadline."
        case rules.WITHIN_DEADLINE:
            return (
                f"It is still within its deadline (another {duration(deadline - now)}); the "
                "outcome is decided when the job resumes or the deadline passes."
            )
    raise ValueError(f"no wording for the reason {decision.reason!r}")


def explain(incident: Incident, events: list, job: Job | None, now: datetime) -> Explanation:
    """`events` are the incident's stored Event rows, oldest first; `now` the time of the read."""
    facts = [fact_of(e) for e in events]
    if incident.detected_at is None or rules.detection(facts) is None:
        return Explanation(
            rule="none",
            title="Waiting for a failure report",
            outcome=rules.outcome_as_of(incident.outcome, incident.deadline_at, now),
            reasons=[
                "No failure.detected event has arrived for this incident yet. Its recovery "
                "events are kept and listed, and it counts toward no contract year until one "
                "arrives."
            ],
        )
    contract = incident.contract
    if contract is None:
        return Explanation(
            rule="none",
            title="Outside every contract year",
            reasons=[
                f"It was detected on {_when(incident.detected_at)}, outside every contract year "
                "of this cluster, so it counts in none."
            ],
        )

    terms = terms_of(contract)
    decision = rules.decide(
        facts,
        job_frameworks=job.frameworks if job else (),
        terms=terms,
        now=now,
    )
    found = decision.detection
    reasons = [
        f"Detected on {_when(found.time)}: trigger {found.trigger}, category "
        f"{_words(found.category)}, scope {_words(found.scope)}. The recovery deadline was "
        f"{contract.deadline_minutes} minutes later, {_when(decision.deadline)}.",
        _reason(decision, terms, now),
    ]
    computed = decision.outcome
    outcome = incident.override_outcome or computed
    explanation = Explanation(
        rule=computed, title=RULE_TITLES[computed], outcome=outcome, reasons=reasons
    )
    if incident.override_outcome:
        explanation.override = {
            "from": computed,
            "to": incident.override_outcome,
            "reason": incident.override_reason,
            "by": _author(incident),
            "at": incident.override_at,
        }
        explanation.rule = incident.override_outcome
        title = RULE_TITLES.get(incident.override_outcome, incident.override_outcome)
        explanation.title = f"{title} (by the account team)"
    if outcome in ELIGIBLE:
        explanation.counting = (
            f"It counts as {_words(outcome)} in year {incident.year_number} of "
            f"contract {contract.pk}: eligible, so it enters compliance."
        )
    else:
        explanation.counting = (
            f"It is counted as {outcome} in year {incident.year_number} of contract "
            f"{contract.pk}, outside compliance."
        )
    return explanation


def _author(incident: Incident) -> str:
    user = incident.override_by
    if user is None:
        return "the account team"
    return user.get_full_name() or user.get_username()
