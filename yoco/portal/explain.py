"""Why an incident got its outcome, in plain language, following SPEC 4.3's rule table."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from yoco.events.models import Incident, Job
from yoco.guarantee import rules

RULE_TITLES = {
    rules.PLANNED: "Planned maintenance",
    rules.EXCLUDED: "Excluded from the guarantee",
    rules.ROLLED_BACK: "Rolled back to a checkpoint",
    rules.LIVE_RESOLVED: "Resolved live",
    rules.FAILED: "Not recovered within the deadline",
    rules.PENDING: "Recovery in progress",
}


@dataclass
class Explanation:
    rule: str
    title: str
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


def explain(incident: Incident, events: list, job: Job | None, now: datetime) -> Explanation:
    """`events` are the incident's stored Event rows, oldest first."""
    facts = [e.as_fact() for e in events]
    found = rules.detection(facts)
    computed = incident.computed_outcome
    if found is None or incident.detected_at is None:
        return Explanation(
            rule="none",
            title="Waiting for a failure report",
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
                f"It was detected on {_when(found.time)}, outside every contract year of "
                "this cluster, so it counts in none."
            ],
        )

    deadline = found.time + contract.deadline
    reasons = [
        f"Detected on {_when(found.time)}: trigger {found.trigger}, category "
        f"{found.category.replace('_', ' ')}, scope {found.scope.replace('_', ' ')}. The "
        f"recovery deadline was {contract.deadline_minutes} minutes later, {_when(deadline)}."
    ]
    completed = [f for f in facts if f.type == rules.MIGRATION_COMPLETED]
    restored = [f for f in facts if f.type == rules.CHECKPOINT_RESTORED]
    resumes = [f for f in facts if f.type == rules.JOB_RESUMED]
    failures = [f for f in facts if f.type == rules.MIGRATION_FAILED]

    if computed == rules.PLANNED:
        reasons.append(
            "Its trigger is planned: maintenance is not a failure. Planned incidents are "
            "counted and shown apart and never affect compliance."
        )
    elif computed == rules.EXCLUDED:
        frameworks = job.frameworks if job else []
        unsupported = [fw for fw in frameworks if fw and fw not in contract.frameworks]
        if found.scope == rules.SCOPE_NETWORK_WIDE:
            reasons.append(
                "Its scope is network-wide: a failure of the whole fabric cannot be solved by "
                "moving one job, so the guarantee excludes it."
            )
        elif found.category in contract.excluded_categories:
            reasons.append(
                f"Its category, {found.category.replace('_', ' ')}, is excluded by the "
                f"contract (excluded categories: {', '.join(contract.excluded_categories)})."
            )
        elif unsupported:
            reasons.append(
                f"Its job reported framework {', '.join(unsupported)}, which the contract does "
                f"not support (supported: {', '.join(contract.frameworks)})."
            )
        else:
            reasons.append("It was excluded by the account team.")
    elif computed == rules.ROLLED_BACK:
        if restored:
            first = restored[0]
            reasons.append(
                f"The job was restored from a checkpoint at {_when(first.time)}, losing "
                f"{first.data.get('steps_lost', 0):,} steps of training: a rollback, not a "
                "live recovery."
            )
        else:
            lossy = next(f for f in completed if f.data.get("steps_lost", 0) > 0)
            reasons.append(
                f"The migration completed at {_when(lossy.time)} but lost "
                f"{lossy.data['steps_lost']:,} steps: a rollback, not a live recovery."
            )
    elif computed == rules.LIVE_RESOLVED:
        clean = next(f for f in completed if f.data.get("steps_lost") == 0)
        resume = min((f for f in resumes if f.time <= deadline), key=lambda f: f.time)
        reasons.append(
            f"The migration completed at {_when(clean.time)} without losing a step, and the "
            f"job resumed {duration(resume.time - found.time)} after detection, within the "
            f"{contract.deadline_minutes}-minute deadline."
        )
    elif computed == rules.FAILED:
        if resumes and any(f.data.get("steps_lost") == 0 for f in completed):
            late = min(resumes, key=lambda f: f.time)
            reasons.append(
                f"The job resumed {duration(late.time - found.time)} after detection, after "
                f"the {contract.deadline_minutes}-minute deadline."
            )
        elif resumes:
            reasons.append(
                "The job resumed, but no migration completed without loss before it: the "
                "resume was not a live recovery."
            )
        elif failures:
            last = failures[-1]
            reasons.append(
                f"The migration failed at {_when(last.time)} (“{last.data.get('reason', '')}”) "
                "and nothing recovered the job before the deadline."
            )
        else:
            reasons.append("No recovery was reported before the deadline.")
    elif computed == rules.PENDING:
        reasons.append(
            f"It is still within its deadline (another {duration(deadline - now)}); the outcome "
            "is decided when the job resumes or the deadline passes."
        )

    explanation = Explanation(
        rule=computed or "none", title=RULE_TITLES.get(computed, "Not decided"), reasons=reasons
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
    outcome = incident.outcome
    if outcome in rules.ELIGIBLE:
        explanation.counting = (
            f"It counts as {outcome.replace('_', ' ')} in year {incident.year_number} of "
            f"contract {contract.pk}: eligible, so it enters compliance."
        )
    elif outcome:
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
