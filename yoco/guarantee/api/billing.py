"""Billing export (SPEC 5): approved credits paged by the append-only change sequence.

`GET /api/v1/billing/credits?state=approved&cursor=N&limit=M` answers the credits whose
`change_seq` is greater than the cursor, in `change_seq` order. `change_seq` is the id of the
credit's latest audit record: every state or amount change gives the credit a new, larger
number, so a credit that changes again reappears after the cursor, and a reader that keeps
passing back `next_cursor` sees every change once, none skipped (the writers serialise the
sequence, see `yoco.guarantee.actions`). `POST /api/v1/billing/credits/{id}/ack` marks an
approved credit exported; acknowledging it again answers the same. Billing token only.
"""

from decimal import Decimal

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from yoco.accounts.auth import BILLING_AUTHENTICATION, BillingAccess
from yoco.accounts.models import AuditRecord
from yoco.guarantee import actions, rules
from yoco.guarantee.models import Credit
from yoco.lib.openapi import URL_TOO_LONG, error_responses

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


class BillingCreditSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    contract = serializers.IntegerField(help_text="contract id")
    customer = serializers.IntegerField(help_text="customer id")
    customer_name = serializers.CharField()
    year = serializers.IntegerField(help_text="contract year number (from 1)")
    year_start = serializers.DateTimeField()
    year_end = serializers.DateTimeField()
    state = serializers.ChoiceField(choices=[s for s, _ in Credit.STATES])
    amount = serializers.CharField(
        help_text="decimal string with exactly the currency's minor-unit decimals"
    )
    currency = serializers.CharField(help_text="ISO 4217 code")
    basis = serializers.ChoiceField(choices=[Credit.BASIS_ANNUAL_VALUE, Credit.BASIS_ORDER])
    order_value = serializers.CharField(allow_null=True, help_text="booked order value, or null")
    evidence = serializers.DictField(
        help_text="the year's evidence snapshot: counts, incidents with their event ids, "
        "overrides, dispute decisions, rules version (docs/platform.md)",
    )
    change_seq = serializers.IntegerField(help_text="position in the change sequence")
    earned_at = serializers.DateTimeField()
    approved_at = serializers.DateTimeField(allow_null=True)
    approved_by = serializers.CharField(allow_null=True)
    exported_at = serializers.DateTimeField(allow_null=True)
    voided_at = serializers.DateTimeField(allow_null=True)
    void_reason = serializers.CharField(allow_null=True)


class BillingCreditPageSerializer(serializers.Serializer):
    results = BillingCreditSerializer(many=True)
    next_cursor = serializers.IntegerField(
        help_text="pass back as `cursor`: the last change_seq of this page (or the cursor sent)"
    )
    has_more = serializers.BooleanField(help_text="more changes follow next_cursor right now")


def _latest_records(credit_ids: list[int]) -> dict[tuple[str, str], AuditRecord]:
    """The latest approve/export/void record of each credit, by (credit id, action)."""
    latest: dict[tuple[str, str], AuditRecord] = {}
    records = AuditRecord.objects.filter(
        object_type="Credit",
        object_id__in=[str(i) for i in credit_ids],
        action__in=("approve_credit", "export_credit", "void_credit"),
    ).order_by("id")
    for record in records:
        latest[(record.object_id, record.action)] = record
    return latest


def credit_rows(credits: list[Credit]) -> list[dict]:
    latest = _latest_records([c.pk for c in credits])
    rows = []
    for credit in credits:
        year = credit.contract_year
        contract = year.contract

        def record(action, states, credit=credit):
            if credit.state not in states:
                return None
            return latest.get((str(credit.pk), action))

        approved = record("approve_credit", (Credit.APPROVED, Credit.EXPORTED))
        exported = record("export_credit", (Credit.EXPORTED,))
        voided = record("void_credit", (Credit.VOIDED,))
        rows.append(
            {
                "id": credit.pk,
                "contract": contract.pk,
                "customer": contract.customer_id,
                "customer_name": contract.customer.name,
                "year": year.number,
                "year_start": year.start,
                "year_end": year.end,
                "state": credit.state,
                "amount": rules.format_amount(Decimal(credit.amount), credit.currency),
                "currency": credit.currency,
                "basis": credit.basis,
                "order_value": None
                if credit.order_value is None
                else rules.format_amount(Decimal(credit.order_value), credit.currency),
                "evidence": credit.evidence,
                "change_seq": credit.change_seq,
                "earned_at": credit.created,
                "approved_at": approved.at if approved else None,
                "approved_by": approved.actor_label if approved else None,
                "exported_at": exported.at if exported else None,
                "voided_at": voided.at if voided else None,
                "void_reason": voided.reason if voided else None,
            }
        )
    return BillingCreditSerializer(rows, many=True).data


def _int_param(request, name: str, default: int, *, low: int, high: int | None = None) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    if not raw.isascii() or not raw.isdigit():
        raise exceptions.ParseError(f"{name} must be a whole number >= {low}, got {raw!r}")
    value = int(raw)
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise exceptions.ParseError(f"{name} must be {bound}, got {value}")
    return value


class BillingView(APIView):
    authentication_classes = BILLING_AUTHENTICATION
    permission_classes = [BillingAccess]


class BillingCreditListView(BillingView):
    """GET /api/v1/billing/credits"""

    @extend_schema(
        operation_id="billing_credits_list",
        summary="Credit changes after a cursor, in change-sequence order",
        description=(
            "Pages by the append-only change sequence, not by a timestamp: pass the answer's "
            "`next_cursor` back as `cursor` until `has_more` is false; a credit that changes "
            "again (approved, then exported or voided) comes again with a larger `change_seq`. "
            "`state` keeps only credits currently in that state; without it every state comes."
        ),
        parameters=[
            OpenApiParameter(
                "state",
                str,
                enum=[s for s, _ in Credit.STATES],
                description="only credits now in this state (usually `approved`)",
            ),
            OpenApiParameter("cursor", int, description="the last change_seq seen (default 0)"),
            OpenApiParameter(
                "limit", int, description=f"page size, 1..{MAX_LIMIT} (default {DEFAULT_LIMIT})"
            ),
        ],
        responses={
            200: BillingCreditPageSerializer,
            **error_responses(
                400, 401, 403, e400="bad state, cursor or limit", e403="a read or ingest key"
            ),
            **URL_TOO_LONG,
        },
    )
    def get(self, request):
        state = request.query_params.get("state")
        states = [s for s, _ in Credit.STATES]
        if state is not None and state not in states:
            raise exceptions.ParseError(f"state must be one of {', '.join(states)}, got {state!r}")
        cursor = _int_param(request, "cursor", 0, low=0)
        limit = _int_param(request, "limit", DEFAULT_LIMIT, low=1, high=MAX_LIMIT)
        credits = Credit.objects.filter(change_seq__gt=cursor).select_related(
            "contract_year__contract__customer"
        )
        if state is not None:
            credits = credits.filter(state=state)
        page = list(credits.order_by("change_seq")[: limit + 1])
        has_more = len(page) > limit
        page = page[:limit]
        return Response(
            {
                "results": credit_rows(page),
                "next_cursor": page[-1].change_seq if page else cursor,
                "has_more": has_more,
            }
        )


class BillingCreditAckView(BillingView):
    """POST /api/v1/billing/credits/{id}/ack"""

    @extend_schema(
        operation_id="billing_credits_ack",
        summary="Billing took the credit: approved → exported (idempotent)",
        request=None,
        responses={
            200: OpenApiResponse(
                BillingCreditSerializer, description="the credit, now exported (also on a repeat)"
            ),
            **error_responses(
                401,
                403,
                404,
                409,
                e403="a read or ingest key",
                e404="no such credit",
                e409="the credit is not approved (nor exported already)",
            ),  # fmt: skip
        },
    )
    def post(self, request, credit_id: int):
        credit = get_object_or_404(Credit, pk=credit_id)
        try:
            credit, _ = actions.do_export_credit(credit, actor=f"billing:{request.auth.prefix}")
        except actions.ActionError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        credit = Credit.objects.select_related("contract_year__contract__customer").get(
            pk=credit.pk
        )
        return Response(credit_rows([credit])[0])
