"""GET /api/v1/billing/credits: paged by the append-only change sequence (SPEC 5)."""

import pytest

from tests.platform.account_team import billing_token, missed_credits, records, staff
from yoco.guarantee.actions import (
    do_approve_credit,
    do_book_order,
    do_export_credit,
    do_void_credit,
)
from yoco.guarantee.models import Credit

URL = "/api/v1/billing/credits"


def page(api, token, **params):
    response = api.get(URL, params, HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200, response.content
    return response.json()


def drain(api, token, cursor=0, **params):
    """Follow next_cursor until has_more is false; return every row and the last cursor."""
    rows = []
    while True:
        body = page(api, token, cursor=cursor, **params)
        rows += body["results"]
        assert body["next_cursor"] >= cursor
        cursor = body["next_cursor"]
        if not body["has_more"]:
            return rows, cursor


def test_credit_shape(contract_factory, api):
    (credit,) = missed_credits(contract_factory, api)
    alice = staff("alice")
    do_approve_credit(credit, actor=alice)
    body = page(api, billing_token(), state="approved")
    assert body["has_more"] is False
    (row,) = body["results"]
    credit.refresh_from_db()
    year = credit.contract_year
    assert row["id"] == credit.pk
    assert row["contract"] == year.contract_id
    assert row["customer"] == year.contract.customer_id
    assert row["customer_name"] == "Customer 0"
    assert row["year"] == 1
    assert row["year_start"] == "2026-01-01T00:00:00Z"
    assert row["state"] == "approved"
    assert row["amount"] == "300000.00" and row["currency"] == "USD"
    assert row["basis"] == "annual_value_estimate" and row["order_value"] is None
    assert row["evidence"]["counts"]["failed"] == 1
    assert row["evidence"]["rules_version"]
    assert row["change_seq"] == credit.change_seq == body["next_cursor"]
    assert row["approved_by"] == "alice" and row["approved_at"].endswith("Z")
    assert row["exported_at"] is None and row["voided_at"] is None


def test_amount_has_exactly_the_minor_unit_decimals(contract_factory, api):
    from decimal import Decimal

    from tests.platform.account_team import AFTER_YEAR_1, fail_once
    from yoco.guarantee.actions import do_close_due_years

    created = contract_factory(
        customer_name="Dinar", clusters=["kw"], currency="KWD", annual_value=Decimal("1234.566")
    )
    fail_once(api, created, "kw")
    do_close_due_years(now=AFTER_YEAR_1)
    (row,) = page(api, billing_token())["results"]
    assert row["amount"] == "308.642" and row["currency"] == "KWD"  # 25 % of 1234.566, half-up


def test_pages_follow_the_change_sequence_without_gaps_or_repeats(contract_factory, api):
    credits = missed_credits(contract_factory, api, n=5)
    token = billing_token()
    rows, cursor = drain(api, token, limit=2)
    assert [r["id"] for r in rows] == [c.pk for c in credits]
    seqs = [r["change_seq"] for r in rows]
    assert seqs == sorted(seqs) and len(set(seqs)) == 5
    assert page(api, token, cursor=cursor) == {
        "results": [],
        "next_cursor": cursor,
        "has_more": False,
    }


def test_a_credit_that_changes_again_reappears_after_the_cursor(contract_factory, api):
    first, second, third = missed_credits(contract_factory, api, n=3)
    token = billing_token()
    alice, bob = staff("alice"), staff("bob")
    _, cursor = drain(api, token)

    do_approve_credit(second, actor=alice)
    do_approve_credit(first, actor=alice)
    rows, cursor = drain(api, token, cursor, limit=1)
    assert [(r["id"], r["state"]) for r in rows] == [
        (second.pk, "approved"),
        (first.pk, "approved"),
    ]

    do_book_order(second, order_value=2_000_000, actor=alice)  # back to earned, new amount
    do_void_credit(third, actor=bob, reason="duplicate contract")
    do_export_credit(first, actor="billing:test")
    rows, cursor = drain(api, token, cursor, limit=2)
    assert [(r["id"], r["state"]) for r in rows] == [
        (second.pk, "earned"),
        (third.pk, "voided"),
        (first.pk, "exported"),
    ]
    assert rows[0]["amount"] == "500000.00" and rows[0]["basis"] == "renewal_order"
    assert rows[1]["void_reason"] == "duplicate contract"
    assert rows[2]["exported_at"] is not None and rows[2]["approved_by"] == "alice"
    # each credit's change_seq is its latest audit record
    for row in rows:
        assert row["change_seq"] == records(Credit.objects.get(pk=row["id"]))[-1].pk


def test_state_filter_keeps_only_credits_now_in_that_state(contract_factory, api):
    first, second = missed_credits(contract_factory, api, n=2)
    token = billing_token()
    do_approve_credit(second, actor=staff("alice"))
    assert [r["id"] for r in page(api, token, state="approved")["results"]] == [second.pk]
    assert [r["id"] for r in page(api, token, state="earned")["results"]] == [first.pk]
    assert page(api, token, state="voided")["results"] == []


@pytest.mark.parametrize(
    "params",
    [
        {"state": "paid"},
        {"state": ""},
        {"cursor": "-1"},
        {"cursor": "abc"},
        {"cursor": "1.5"},
        {"limit": "0"},
        {"limit": "1001"},
    ],
)
def test_bad_parameters_are_400(db, api, params):
    response = api.get(URL, params, HTTP_AUTHORIZATION=f"Bearer {billing_token()}")
    assert response.status_code == 400
    body = response.json()
    assert list(body) == ["detail"]  # the error body of every endpoint (SPEC 5)
    assert body["detail"].startswith(next(iter(params)))  # names the bad parameter


def test_schema_documents_the_export(db, api):
    response = api.get("/api/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    text = response.content.decode()
    assert "/api/v1/billing/credits" in text and "/api/v1/billing/credits/{credit_id}/ack" in text
    assert "next_cursor" in text and "has_more" in text
