"""A real Celery worker over Redis SIGKILLed while it sends a webhook: the notification is
delivered afterwards with the same webhook-id (the receiver keeps it once), every e-mail goes
out once, and nothing stays undelivered."""

import email
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import requests

from tests.conftest import cloud_event
from tests.e2e.conftest import ROOT, wait_until
from tests.platform.webhook_receiver import Receiver

REDIS_URL = os.environ.get("YOCO_TEST_REDIS_URL")

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not REDIS_URL, reason="set YOCO_TEST_REDIS_URL (CI does) for Redis"),
]

SETUP = """
import json
from yoco.accounts.models import Customer
from yoco.notifications.actions import do_add_contact, do_add_endpoint
customer = Customer.objects.get()
do_add_contact(customer, email="ops@acme.test", actor=None)
do_add_contact(customer, email="am@yoco.test", kind="account_team", actor=None)
_, secret = do_add_endpoint(url="%s/acme", customer=customer, actor=None)
print(json.dumps(secret))
"""

STATES = """
import json
from yoco.notifications.models import Notification
print(json.dumps(sorted(Notification.objects.values_list("channel", "state", "attempts"))))
"""


class HangingReceiver(Receiver):
    """Holds the first request open until `release` is set (the worker dies meanwhile)."""

    def __init__(self):
        super().__init__()
        self.release = threading.Event()
        self.first_arrived = threading.Event()
        handler = self.server.RequestHandlerClass
        original = handler.do_POST
        receiver = self

        def do_post(request):
            if not receiver.first_arrived.is_set():
                receiver.first_arrived.set()
                receiver.release.wait(30)
            original(request)

        handler.do_POST = do_post


def test_worker_killed_mid_send(platform, tmp_path):
    mail_dir = tmp_path / "mail"
    platform.env.update(
        CELERY_BROKER_URL=REDIS_URL,
        EMAIL_BACKEND="django.core.mail.backends.filebased.EmailBackend",
        EMAIL_FILE_PATH=str(mail_dir),
        YOCO_NOTIFY_SEND_TIMEOUT_SECONDS="2",  # a claim's lease: 6 s
        YOCO_NOTIFY_BACKOFF_SECONDS="0",
    )
    subprocess.run([sys.executable, "-m", "celery", "-A", "yoco", "purge", "-f"],
                   env=platform.env, cwd=ROOT, check=True, capture_output=True)  # fmt: skip
    created = platform.create_contract("east")
    with HangingReceiver() as receiver:
        out = platform.manage("shell", "-c", SETUP % receiver.url)
        receiver.secrets["/acme"] = json.loads(out.strip().splitlines()[-1])
        worker = _start_worker(platform, tmp_path)
        try:
            platform.start()
            event = cloud_event("failure.detected", subject="inc-1", trigger="unplanned",
                                category="gpu_xid")  # fmt: skip
            response = requests.post(
                f"{platform.url}/api/v1/events",
                data=json.dumps([event]),
                headers={"Content-Type": "application/cloudevents-batch+json",
                         "Authorization": f"Bearer {created['cluster_keys']['east']}"},
                timeout=30,
            )  # fmt: skip
            assert response.status_code == 200, response.text
            wait_until(lambda: _folded(platform), 60, "the worker to fold the incident")
            # The deadline passes (no scheduler here: the command): at risk → 3 notifications.
            platform.manage("close_years", "--now", "2026-06-01T00:00:00Z")
            assert receiver.first_arrived.wait(60), "the worker never sent the webhook"
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(10)
        finally:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGKILL)
        receiver.release.set()  # the receiver got it; the sender died before hearing back
        wait_until(lambda: receiver.deliveries, 10, "the held request to finish")
        time.sleep(6.5)  # the dead worker's lease runs out
        for _ in range(5):
            platform.manage("deliver_notifications")
            states = json.loads(platform.manage("shell", "-c", STATES).strip().splitlines()[-1])
            if all(state == "delivered" for _, state, _ in states):
                break
        assert [s for _, s, _ in states] == ["delivered"] * 3, states

    (webhook_id,) = receiver.received["/acme"]  # one change, one endpoint: one message kept
    assert receiver.deliveries[webhook_id] == 2  # sent again after the kill, the same id
    assert receiver.unverified == 0
    event = receiver.received["/acme"][webhook_id]
    assert event["type"] == "io.yoco.year.status_changed" and event["data"]["status"] == "at_risk"
    messages = [email.message_from_bytes(p.read_bytes()) for p in mail_dir.iterdir()]
    recipients = sorted(m["To"] for m in messages)
    assert recipients == ["am@yoco.test", "ops@acme.test"]  # one each, none twice


def _folded(platform) -> bool:
    code = "from yoco.guarantee.models import Incident; print(Incident.objects.count())"
    return platform.manage("shell", "-c", code).strip().endswith("1")


def _start_worker(platform, tmp_path):
    log = open(tmp_path / "worker.log", "ab")  # noqa: SIM115 - lives as long as the worker
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "yoco", "worker", "--pool", "solo",
         "--loglevel", "WARNING"],
        env=platform.env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
