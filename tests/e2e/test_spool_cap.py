"""The spool's size cap: a WARNING well before it (80 %), then new events refused past it (the
coordinator carries on; the refusal is counted)."""

import logging

import pytest

from agent.reporter import HttpSink
from agent.spool import Spool, SpoolFull
from tests.e2e.conftest import event

pytestmark = pytest.mark.integration


def test_warns_at_80_percent_and_refuses_past_the_cap(tmp_path, caplog):
    one = len(str(event(0)))  # roughly one event's JSON
    spool = Spool(tmp_path / "spool.sqlite3", max_bytes=one * 10)
    with caplog.at_level(logging.WARNING, logger="yoco.agent.spool"):
        stored = 0
        while True:
            try:
                spool.put(event(stored))
            except SpoolFull:
                break
            stored += 1
            warned = [r for r in caplog.records if "full" in r.getMessage()]
            if stored * one < 0.75 * one * 10:
                assert not warned
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "% full" in warned[0], warned
    assert 8 <= stored <= 11
    assert spool.summary()["refused_full"] == 1


def test_http_sink_keeps_running_when_full(tmp_path, caplog):
    # No platform at all (a closed port): the sink fills up, logs, and never raises.
    sink = HttpSink("http://127.0.0.1:9", "key", tmp_path / "spool.sqlite3", max_bytes=2000,
                    flush_timeout_s=0.2, backoff_base_s=0.05)  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="yoco.agent.spool"):
        for n in range(30):
            sink.emit(event(n))
        sink.close()
    messages = [r.getMessage() for r in caplog.records]
    assert any("dropped" in m for m in messages)
    assert any("not yet delivered" in m for m in messages)
