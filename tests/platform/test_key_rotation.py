"""Cluster keys: rotate (new key once, old revoked), revoke; the billing token command."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from tests.conftest import cloud_event, post_events
from tests.platform.account_team import staff
from yoco.accounts.actions import do_revoke_key, do_rotate_cluster_key
from yoco.accounts.models import AuditRecord, BillingToken, Cluster, ClusterKey
from yoco.lib.errors import ActionError


def send(api, key):
    return post_events(api, key, [cloud_event("job.started", framework="pytorch", world_size=1)])


def test_rotation_gives_a_new_key_and_revokes_the_old(acme, api):
    old = acme.cluster_keys["east"]
    cluster = Cluster.objects.get(name="east")
    record, new = do_rotate_cluster_key(cluster, actor=staff("alice"), reason="laptop lost")
    assert new != old and record.cluster == cluster and not record.revoked
    assert send(api, old).status_code == 401
    assert send(api, new).status_code == 200
    audit = AuditRecord.objects.get(action="rotate_cluster_key")
    assert audit.object_type == "Cluster" and audit.reason == "laptop lost"
    assert audit.after["active_keys"] == [record.prefix]
    assert audit.before["active_keys"] == [old.partition(".")[0]]
    # the key itself is never stored anywhere readable
    assert not AuditRecord.objects.filter(after__icontains=new).exists()
    assert new not in json.dumps(list(AuditRecord.objects.values("before", "after")))


def test_revoke(acme, api):
    key = acme.cluster_keys["east"]
    record = ClusterKey.objects.get(prefix=key.partition(".")[0])
    bob = staff("bob")
    assert do_revoke_key(record, actor=bob, reason="test") is True
    assert send(api, key).status_code == 401
    assert do_revoke_key(record, actor=bob) is False  # already revoked: nothing written
    (audit,) = AuditRecord.objects.filter(action="revoke_key")
    assert audit.object_id == record.prefix
    assert audit.before["revoked"] is False and audit.after["revoked"] is True


def test_customers_cannot_rotate(acme):
    from tests.platform.account_team import customer_user

    user = customer_user("owner", acme.contract.customer)
    with pytest.raises(ActionError):
        do_rotate_cluster_key(Cluster.objects.get(name="east"), actor=user)


def test_create_billing_token_prints_it_once_as_json(db, api):
    out = StringIO()
    call_command("create_billing_token", "--name", "erp", stdout=out)
    token = json.loads(out.getvalue().strip().splitlines()[-1])["billing_token"]
    assert BillingToken.objects.get().name == "erp"
    response = api.get("/api/v1/billing/credits", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200
    assert AuditRecord.objects.get(action="create_key").object_type == "BillingToken"
