"""A platform that is down loses nothing: events wait in the spool (across a restart of the
agent's sender too) and, once it is up, each is delivered exactly once."""

import pytest

from agent.spool import Sender, Spool
from tests.e2e.conftest import event, wait_until

pytestmark = pytest.mark.integration


def test_down_then_up_delivers_each_event_once(fake_platform, tmp_path):
    spool_path = tmp_path / "spool.sqlite3"
    spool = Spool(spool_path)
    sender = Sender(spool, fake_platform.url, fake_platform.key, batch_size=7,
                    backoff_base_s=0.05, backoff_max_s=0.3)  # fmt: skip
    sender.start()
    for n in range(25):
        spool.put(event(n))
        sender.wake()
    wait_until(lambda: sender.failures >= 3, 10, "a few failed rounds")
    assert spool.pending_count() == 25  # nothing lost while down
    # The agent restarts: a new spool object over the same file still holds everything.
    assert sender.stop(timeout_s=0.5) is False
    spool = Spool(spool_path)
    assert spool.pending_count() == 25
    spool.put(event(3))  # the same event again (source+id) is stored once
    assert spool.pending_count() == 25

    fake_platform.up()
    sender = Sender(spool, fake_platform.url, fake_platform.key, batch_size=7,
                    backoff_base_s=0.05, backoff_max_s=0.3)  # fmt: skip
    sender.start()
    assert sender.stop(timeout_s=10) is True
    assert spool.pending_count() == 0
    assert len(fake_platform.stored) == 25
    assert set(fake_platform.posts_per_id.values()) == {1}  # each id sent once, once up
    assert spool.summary()["delivered"] == 25
