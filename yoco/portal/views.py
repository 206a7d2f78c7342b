"""The customer portal: every view is scoped to the signed-in user's customer.

A user without a Membership gets 403; another customer's contract or incident is a 404 (the
portal never confirms that it exists). Views read, except the forms that call a `do_*` action
(disputing an incident here, the notification settings in `yoco.portal.settings_views`): every
outcome and count is shown as of the request (`rules.outcome_as_of`), whether or not the
periodic expiry has stored it yet.
"""

import csv
import json
from datetime import timedelta
from decimal import Decimal
from functools import wraps

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ObjectDoesNotExist, PermissionDenied
from django.core.paginator import Paginator
from django.db.models import F, Prefetch
from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from yoco.events.models import Event
from yoco.guarantee import rules
from yoco.guarantee.actions import ActionError, do_open_dispute
from yoco.guarantee.models import Contract, ContractYear, Credit, Dispute, Incident, Job
from yoco.guarantee.years import year_results
from yoco.lib.vocabulary import (
    CATEGORIES,
    EVENT_TYPE_PREFIX,
    MIGRATION_COMPLETED,
    MIGRATION_STARTED,
    OUTCOMES,
    TRIGGERS,
)
from yoco.portal import charts
from yoco.portal.explain import duration, explain
from yoco.portal.spares import contract_advice
from yoco.portal.stats import cached_year_stats, current_year, glance

PAGE_SIZE = 50


def customer_view(view):
    """Login required; the user must belong to a customer, which becomes request.customer."""

    @login_required
    @wraps(view)
    def wrapped(request, *args, **kwargs):
        try:
            membership = request.user.membership
        except ObjectDoesNotExist:
            raise PermissionDenied("This account does not belong to a customer.") from None
        request.customer = membership.customer
        return view(request, *args, **kwargs)

    return wrapped


def _contracts(request):
    return (
        Contract.objects.filter(customer=request.customer)
        .order_by("start", "pk")
        .prefetch_related(
            Prefetch(
                "contract_years",
                queryset=ContractYear.objects.order_by("number").prefetch_related(
                    Prefetch("credits", queryset=Credit.objects.order_by("-pk"))
                ),
            ),
            "clusters",
        )
    )


def _live_credit(year):
    credits = list(year.credits.all())
    return next((c for c in credits if c.state != Credit.VOIDED), credits[0] if credits else None)


def money(amount, currency):
    """An amount for people: rounded half-up to the minor unit, with thousands separators."""
    places = rules.minor_units(currency)
    return f"{Decimal(rules.format_amount(amount, currency)):,.{places}f} {currency}"


@customer_view
def home(request):
    now = timezone.now()
    contracts = list(_contracts(request))
    glances = []
    for contract in contracts:
        years = list(contract.contract_years.all())
        year = current_year(years, now)
        if year is not None:
            year.contract = contract
            glances.append(glance(year, now))

    context = {"glances": glances, "now": now}
    if glances:
        selected = glances[0]
        wanted_contract = request.GET.get("contract", "")
        for item in glances:
            if str(item.contract.pk) == wanted_contract:
                selected = item
        contract = selected.contract
        years = list(contract.contract_years.all())
        year = selected.year
        wanted_year = request.GET.get("year", "")
        for candidate in years:
            if str(candidate.number) == wanted_year:
                candidate.contract = contract
                year = candidate
        focus = selected if year.pk == selected.year.pk else glance(year, now)
        stats = cached_year_stats(contract, year, now, focus.result["counts"])
        protected = stats.protected
        context.update(
            focus=focus,
            focus_years=years,
            stats=stats,
            protected=protected,
            protected_value=(
                money(protected.value, contract.currency) if protected.value is not None else None
            ),
            per_failure_hours=protected.checkpoint_restart_hours_per_failure,
            mean_live_downtime=(
                None
                if stats.mean_live_downtime_s is None
                else duration(timedelta(seconds=float(stats.mean_live_downtime_s)))
            ),
            chart_outcomes=charts.outcomes_per_month(stats),
            chart_recovery=charts.recovery_time(stats, contract.deadline_minutes),
            chart_category=charts.by_category(stats),
            chart_trigger=charts.by_trigger(stats),
            chart_protected=charts.progress_protected(stats),
        )
    return render(request, "portal/dashboard.html", context)


class SparesForm(forms.Form):
    gpus = forms.IntegerField(required=False, min_value=1, max_value=10**7, label="Job GPUs (G)")


@customer_view
def contract_detail(request, pk):
    contract = get_object_or_404(_contracts(request), pk=pk)
    now = timezone.now()
    spares_form = SparesForm(request.GET or None)
    wanted_gpus = spares_form.cleaned_data["gpus"] if spares_form.is_valid() else None
    history, advice = contract_advice(contract, now, wanted_gpus)
    rows = []
    years = list(contract.contract_years.all())
    for year in years:
        year.contract = contract
    for year, result in zip(years, year_results(years, now), strict=True):
        credit = _live_credit(year)
        rows.append(
            {
                "year": year,
                "glance": glance(year, now, result),
                "credit": credit,
                "credit_amount": money(credit.amount, credit.currency) if credit else None,
                "credits": list(year.credits.all()),
            }
        )
    return render(
        request,
        "portal/contract.html",
        {
            "contract": contract,
            "rows": rows,
            "annual_value": money(contract.annual_value, contract.currency),
            "now": now,
            "spares_form": spares_form,
            "history": history,
            "advice": advice,
            "chart_spares": charts.spares(advice, contract.target),
        },
    )


class IncidentFilter(forms.Form):
    contract = forms.TypedChoiceField(required=False, coerce=int, empty_value=None)
    year = forms.IntegerField(required=False, min_value=1, max_value=100)
    outcome = forms.ChoiceField(
        required=False, choices=[("", "Any outcome")] + [(o, o) for o in OUTCOMES]
    )
    category = forms.ChoiceField(
        required=False, choices=[("", "Any category")] + [(c, c) for c in CATEGORIES]
    )
    trigger = forms.ChoiceField(
        required=False, choices=[("", "Any trigger")] + [(t, t) for t in TRIGGERS]
    )
    dispute = forms.ChoiceField(
        required=False,
        choices=[("", "Disputed or not"), ("any", "Disputed")] + Dispute.STATES,
    )

    def __init__(self, *args, contracts=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["contract"].choices = [("", "All contracts")] + [
            (c.pk, f"Contract {c.pk} (from {c.start:%b %Y})") for c in contracts
        ]


def _filtered_incidents(request, now):
    """The customer's incidents the filter form asks for, each with `outcome_now` and
    `computed_outcome_now` (as of `now`)."""
    contracts = list(Contract.objects.filter(customer=request.customer).order_by("start", "pk"))
    form = IncidentFilter(request.GET or None, contracts=contracts)
    # The customer's cluster ids inlined: lets the (cluster, detected_at) index serve the order.
    clusters = list(request.customer.clusters.values_list("pk", flat=True))
    queryset = Incident.objects.filter(cluster_id__in=clusters).as_of(now)
    if form.is_bound:
        form.is_valid()
        wanted = form.cleaned_data
        if wanted.get("contract"):
            queryset = queryset.filter(contract_id=wanted["contract"])
        if wanted.get("year"):
            queryset = queryset.filter(year_number=wanted["year"])
        if wanted.get("outcome"):
            queryset = queryset.with_outcome_as_of(wanted["outcome"], now)
        for name in ("category", "trigger"):
            if wanted.get(name):
                queryset = queryset.filter(**{name: wanted[name]})
        if wanted.get("dispute") == "any":
            queryset = queryset.filter(disputes__isnull=False).distinct()
        elif wanted.get("dispute"):
            queryset = queryset.filter(disputes__state=wanted["dispute"]).distinct()
    # Newest first; incidents still waiting for their failure report (no detection) on top.
    queryset = queryset.order_by(F("detected_at").desc(nulls_first=True), "-pk")
    return form, queryset


@customer_view
def incident_list(request):
    now = timezone.now()
    form, queryset = _filtered_incidents(request, now)
    page = Paginator(queryset.select_related("cluster"), PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "portal/incidents.html",
        {"form": form, "page": page, "query": query.urlencode(), "now": now},
    )


@customer_view
def incident_detail(request, pk):
    incident = get_object_or_404(
        Incident.objects.filter(cluster__customer=request.customer).select_related(
            "cluster", "contract", "override_by"
        ),
        pk=pk,
    )
    events = list(
        Event.objects.filter(cluster=incident.cluster, subject=incident.subject).order_by(
            "time", "event_id"
        )
    )
    job = Job.objects.filter(source=incident.source).first() if incident.source else None
    now = timezone.now()
    timeline = []
    for event in events:
        offset = duration(event.time - incident.detected_at) if incident.detected_at else None
        kind = event.type.removeprefix(EVENT_TYPE_PREFIX)
        timeline.append(
            {
                "event": event,
                "kind": kind,
                "offset": offset,
                "css": kind.replace(".", "-"),
                "data": [(key, _show(value)) for key, value in sorted(event.data.items())],
                "raw": json.dumps(event.raw, indent=2, ensure_ascii=False),
                "after_deadline": bool(incident.deadline_at and event.time > incident.deadline_at),
            }
        )
    return render(
        request,
        "portal/incident.html",
        {
            "incident": incident,
            "disputes": list(incident.disputes.order_by("pk")),
            "dispute_form": DisputeForm(),
            "timeline": timeline,
            "job": job,
            "explanation": explain(incident, events, job, now),
            **_migration_facts(events),
            "downtime": (
                duration(timedelta(milliseconds=incident.downtime_ms))
                if incident.downtime_ms is not None
                else None
            ),
        },
    )


class DisputeForm(forms.Form):
    reason = forms.CharField(
        max_length=5000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Why the outcome is wrong; the account team answers here.",
    )


@require_POST
@customer_view
def incident_dispute(request, pk):
    """Dispute the incident's outcome (SPEC 4.7); the answer shows on the incident page."""
    incident = get_object_or_404(Incident, cluster__customer=request.customer, pk=pk)
    form = DisputeForm(request.POST)
    if not form.is_valid():
        messages.error(request, "A dispute needs a reason (at most 5,000 characters).")
    else:
        try:
            do_open_dispute(incident, reason=form.cleaned_data["reason"], user=request.user)
        except ActionError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, "Dispute sent: the account team answers it here.")
    return redirect("portal:incident", pk=incident.pk)


def _migration_facts(events) -> dict:
    """What the incident's newest migration reported (SPEC 3): the kind of spare it moved the
    state to, and whether the target's digest of that state equalled the source's."""
    started = [e for e in events if e.type == MIGRATION_STARTED]
    completed = [e for e in events if e.type == MIGRATION_COMPLETED]
    return {
        "spare": started[-1].data.get("spare") if started else None,
        "verified": completed[-1].data.get("verified") if completed else None,
    }


def _show(value):
    """An event data value for people: 412316860416 -> 412,316,860,416; {"node": "a"} -> node a."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, dict):
        return ", ".join(f"{k.replace('_', ' ')} {_show(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(_show(v) for v in value)
    return str(value)


class _Echo:
    def write(self, value):
        return value


def _csv_response(filename, header, rows):
    writer = csv.writer(_Echo())

    def stream():
        yield writer.writerow(header)
        for row in rows:
            yield writer.writerow(row)

    response = StreamingHttpResponse(stream(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["Cache-Control"] = "private, no-store"
    return response


def _iso(value):
    return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ").replace(".000000Z", "Z") if value else ""


INCIDENT_COLUMNS = (
    "id", "contract", "year", "cluster", "subject", "job", "detected_at", "deadline_at",
    "trigger", "category", "scope", "outcome", "computed_outcome", "override_reason",
    "downtime_ms", "gpus",
)  # fmt: skip


@customer_view
def incidents_csv(request):
    _, queryset = _filtered_incidents(request, timezone.now())
    values = queryset.values_list(
        "pk", "contract_id", "year_number", "cluster__name", "subject", "source", "detected_at",
        "deadline_at", "trigger", "category", "scope", "outcome_now", "computed_outcome_now",
        "override_reason", "downtime_ms", "gpus",
    )  # fmt: skip

    def rows():
        for row in values.iterator(chunk_size=2000):
            row = list(row)
            row[6], row[7] = _iso(row[6]), _iso(row[7])
            yield ["" if v is None else v for v in row]

    return _csv_response("incidents.csv", INCIDENT_COLUMNS, rows())


@customer_view
def years_csv(request):
    contracts = _contracts(request)
    if request.GET.get("contract", "").isdigit():
        contracts = contracts.filter(pk=int(request.GET["contract"]))
    header = [
        "contract", "year", "start", "end", "state", *OUTCOMES, "eligible", "compliance",
        "target", "meets", "credit_state", "credit_amount", "currency",
    ]  # fmt: skip
    now = timezone.now()
    rows = []
    for contract in contracts:
        years = list(contract.contract_years.all())
        for year in years:
            year.contract = contract
        for year, result in zip(years, year_results(years, now), strict=True):
            credit = _live_credit(year)
            rows.append(
                [
                    contract.pk, year.number, _iso(year.start), _iso(year.end), year.state,
                    *(result["counts"][o] for o in OUTCOMES), result["eligible"],
                    "" if result["compliance"] is None else str(result["compliance"]),
                    format(contract.target.normalize(), "f"),
                    "true" if result["meets"] else "false",
                    credit.state if credit else "",
                    rules.format_amount(credit.amount, credit.currency) if credit else "",
                    credit.currency if credit else "",
                ]
            )  # fmt: skip
    return _csv_response("contract-years.csv", header, rows)
