"""A platform answering 5xx, or too slowly, loses nothing and stores nothing twice: the sender
backs off and resends the very same JSON, which the platform answers `duplicate` when it had
stored it after all."""

import pytest

from agent.spool import Sender, Spool
from tests.e2e.conftest import event, wait_until

pytestmark = pytest.mark.integration


def test_5xx_then_timeout_then_ok(fake_platform, tmp_path):
    fake_platform.up()
    fake_platform.mode = "5xx"
    spool = Spool(tmp_path / "spool.sqlite3")
    sender = Sender(spool, fake_platform.url, fake_platform.key, timeout_s=1.0,
                    backoff_base_s=0.05, backoff_max_s=0.2)  # fmt: skip
    sender.start()
    for n in range(10):
        spool.put(event(n))
    sender.wake()
    wait_until(lambda: fake_platform.requests >= 3, 10, "retries against 503")
    assert spool.pending_count() == 10 and not fake_platform.stored
    assert "HTTP 503" in sender.last_error

    # Slow: the platform stores the batch but answers after the sender's 1 s timeout.
    fake_platform.mode = "slow"
    wait_until(lambda: len(fake_platform.stored) == 10, 15, "the slow platform to store")
    assert spool.pending_count() == 10  # no answer seen, so still pending
    fake_platform.mode = "ok"
    assert sender.stop(timeout_s=10) is True
    assert spool.pending_count() == 0 and len(fake_platform.stored) == 10
    assert max(fake_platform.posts_per_id.values()) >= 2  # resent, stored once
