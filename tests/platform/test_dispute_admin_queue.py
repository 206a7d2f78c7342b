"""The account team's dispute queue in the admin: open disputes, oldest first; uphold and reject
ask for a reason (and uphold for the outcome) and go through the do_* actions."""

from tests.platform.account_team import fail_once, records, staff
from yoco.guarantee.actions import do_open_dispute
from yoco.guarantee.models import Dispute, Incident

URL = "/admin/guarantee/dispute/"


def act(client, action, pks, **form):
    data = {"action": action, "_selected_action": [str(pk) for pk in pks], **form}
    return client.post(URL, data)


def test_queue_oldest_first_then_answered(acme, api, client):
    fail_once(api, acme, "east", subject="inc-1")
    fail_once(api, acme, "east", subject="inc-2")
    first, second = (
        do_open_dispute(Incident.objects.get(subject=s), reason=f"about {s}", label="t")
        for s in ("inc-1", "inc-2")
    )
    client.force_login(staff("alice"))
    page = client.get(URL).content.decode()
    assert page.index("about inc-1") < page.index("about inc-2")

    form = act(client, "uphold", [first.pk])
    assert 'name="outcome"' in form.content.decode() and 'name="reason"' in form.content.decode()
    act(client, "uphold", [first.pk], apply="1", outcome="excluded", reason="")
    assert Dispute.objects.get(pk=first.pk).state == "open"  # no reason, no answer
    act(client, "uphold", [first.pk], apply="1", outcome="excluded", reason="XID 79 seen")
    act(client, "reject", [second.pk], apply="1", reason="user code")
    assert Dispute.objects.get(pk=first.pk).state == "upheld"
    assert Incident.objects.get(subject="inc-1").outcome == "excluded"
    assert records(second, "reject_dispute")[0].reason == "user code"
    queue = client.get(URL).content.decode()  # the default view: open ones only
    assert "about inc-1" not in queue and "about inc-2" not in queue
    assert "about inc-2" in client.get(URL + "?state=all").content.decode()
