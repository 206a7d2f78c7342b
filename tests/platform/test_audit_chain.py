"""The audit trail is a hash chain: `manage.py verify_audit` finds a record changed, removed
or slipped in behind the platform's back, names the first break, and the chain stays whole
under concurrent writers."""

import importlib
import threading

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from tests.platform.account_team import staff
from yoco.accounts import chain
from yoco.accounts.actions import do_create_billing_token
from yoco.accounts.models import AuditRecord


def verify() -> str:
    from io import StringIO

    out = StringIO()
    call_command("verify_audit", stdout=out)
    return out.getvalue()


def three_records(contract_factory) -> list[AuditRecord]:
    contract_factory()  # create_contract
    alice = staff("alice")
    do_create_billing_token(name="erp", actor=alice, reason="ERP export")
    do_create_billing_token(name="backup", actor=alice, reason="second system")
    records = list(AuditRecord.objects.order_by("pk"))
    assert len(records) == 3
    return records


def test_each_record_holds_its_hash_and_the_one_before(contract_factory):
    first, second, third = three_records(contract_factory)
    assert first.previous_hash == chain.GENESIS
    assert (second.previous_hash, third.previous_hash) == (first.hash, second.hash)
    assert third.hash == chain.record_hash(**chain.content_of(third))
    assert "audit chain whole: 3 records" in verify()


@pytest.mark.parametrize(
    "tamper",
    [
        "UPDATE guarantee_auditrecord SET reason = 'nothing to see' WHERE id = %s",
        "UPDATE guarantee_auditrecord SET actor_label = 'bob' WHERE id = %s",
        "UPDATE guarantee_auditrecord SET after = NULL WHERE id = %s",
    ],
)
def test_a_row_changed_in_the_database_is_named(contract_factory, tamper):
    _, second, _ = three_records(contract_factory)
    with connection.cursor() as cursor:
        cursor.execute(tamper, [second.pk])
    with pytest.raises(CommandError, match=f"audit record {second.pk} breaks the chain.*changed"):
        verify()


def test_a_rehashed_row_breaks_the_next_link(contract_factory):
    # Whoever changes a row and recomputes its hash still breaks its successor's link.
    _, second, third = three_records(contract_factory)
    second.reason = "rewritten"
    forged = chain.record_hash(**chain.content_of(second))
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE guarantee_auditrecord SET reason = %s, hash = %s WHERE id = %s",
            ["rewritten", forged, second.pk],
        )
    with pytest.raises(CommandError, match=f"audit record {third.pk} breaks.*removed or inserted"):
        verify()


def test_a_removed_row_is_found(contract_factory):
    _, second, third = three_records(contract_factory)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM guarantee_auditrecord WHERE id = %s", [second.pk])
    with pytest.raises(CommandError, match=f"audit record {third.pk} breaks"):
        verify()


def test_the_migration_chains_the_records_made_before_it(contract_factory):
    records = three_records(contract_factory)
    with connection.cursor() as cursor:  # as they were before the chain existed
        cursor.execute("UPDATE guarantee_auditrecord SET previous_hash = '', hash = 'old-' || id")
    with pytest.raises(CommandError):
        verify()
    from django.apps import apps

    migration = importlib.import_module("yoco.accounts.migrations.0003_audit_hash_chain")
    migration.chain_existing(apps, None)
    assert [r.hash for r in AuditRecord.objects.order_by("pk")] == [r.hash for r in records]
    verify()


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_keep_one_chain():
    if connection.vendor != "postgresql":
        pytest.skip("concurrent writers need PostgreSQL (SQLite serialises every write)")
    alice = staff("alice")
    errors = []

    def write(n):
        try:
            for i in range(5):
                do_create_billing_token(name=f"t{n}-{i}", actor=alice)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert AuditRecord.objects.count() == 30
    assert "audit chain whole: 30 records" in verify()
