"""Where events go. The coordinator talks to an `EventSink`: a JSONL file (`JsonlSink`) or
the platform through a durable local spool (`HttpSink`, see agent/spool.py)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Protocol


class EventSink(Protocol):
    def emit(self, event: dict) -> None: ...

    def close(self) -> None: ...


class JsonlSink:
    """Appends one event per line and fsyncs it: an event the coordinator reported survives the
    coordinator's own crash."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._lock = threading.Lock()

    def emit(self, event: dict) -> None:
        line = json.dumps(event, separators=(",", ":"), sort_keys=True)
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        with self._lock:
            self._file.close()


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


class HttpSink:
    """Durable delivery to the platform: each event is committed to the local spool
    (`agent/spool.py`) before `emit` returns, and a background sender POSTs the spool to
    `{platform_url}/api/v1/events`. `close` flushes for at most `flush_timeout_s`; what is left
    stays in the spool for the next run or `yoco-agent spool flush`."""

    def __init__(
        self,
        platform_url: str,
        cluster_key: str,
        spool_path: str | os.PathLike,
        *,
        max_bytes: int | None = None,
        flush_timeout_s: float = 15.0,
        **sender_options,
    ):
        from agent.spool import DEFAULT_MAX_BYTES, Sender, Spool

        self.spool = Spool(spool_path, max_bytes=max_bytes or DEFAULT_MAX_BYTES)
        self.sender = Sender(self.spool, platform_url, cluster_key, **sender_options)
        self.flush_timeout_s = flush_timeout_s
        self.sender.start()

    def emit(self, event: dict) -> None:
        from agent.spool import SpoolFull, log

        try:
            self.spool.put(event)
        except SpoolFull as error:
            log.error("event %s (%s) dropped: %s", event.get("id"), event.get("type"), error)
            return
        self.sender.wake()

    def close(self) -> None:
        from agent.spool import log

        if not self.sender.stop(self.flush_timeout_s):
            log.warning(
                "%d event(s) not yet delivered after %.0f s; they stay in %s "
                "(`yoco-agent spool flush --spool %s` sends them)",
                self.spool.pending_count(), self.flush_timeout_s, self.spool.path,
                self.spool.path,
            )  # fmt: skip
        self.spool.close()


class TeeSink:
    """Every event to each of several sinks (the HTTP spool and a local JSONL record)."""

    def __init__(self, *sinks: EventSink):
        self.sinks = sinks

    def emit(self, event: dict) -> None:
        for sink in self.sinks:
            sink.emit(event)

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()
