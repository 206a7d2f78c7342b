"""Durable event delivery: a local SQLite spool and the sender that empties it into the platform.

Every event is written to the spool (SQLite in WAL mode, `synchronous=FULL`: committed means on
disk) before `emit` returns; a background thread POSTs what is pending to
`{platform}/api/v1/events` in batches and deletes each event only once the platform has answered
`accepted` or `duplicate` for it. So:

* a platform that is down, slow, restarting or answering 5xx loses nothing: the events wait in the
  spool and are sent again with exponential back-off and full jitter (also across an agent
  restart: the next sender, or `yoco-agent spool flush`, sends what is left);
* nothing is stored twice: an event is resent byte for byte as first serialised, and the platform
  de-duplicates by `source`+`id` (SPEC 3), answering `duplicate`, which counts as delivered;
* an event the platform refuses (`rejected`, `conflict`, or a request it cannot read even alone)
  is logged at WARNING with the reason and moved to a dead-letter table, never retried forever;
* the spool has a size cap (`max_bytes`); a WARNING is logged when it passes `warn_fraction` of
  it, and past the cap new events are refused with an ERROR (counted, shown by `spool show`).
"""

from __future__ import annotations

import json
import logging
import os
import random
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("yoco.agent.spool")

DEFAULT_PATH = "yoco-spool.sqlite3"
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
BATCH_CONTENT_TYPE = "application/cloudevents-batch+json"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pending (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    source TEXT NOT NULL,
    id TEXT NOT NULL,
    body TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL,
    UNIQUE (source, id)
);
CREATE TABLE IF NOT EXISTS dead (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    source TEXT NOT NULL,
    id TEXT NOT NULL,
    body TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT NOT NULL,
    at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""


class SpoolFull(RuntimeError):
    pass


@dataclass
class Pending:
    seq: int
    source: str
    id: str
    body: str


class Spool:
    """The on-disk queue. Safe to share between threads (one connection per thread) and between
    processes (SQLite's locking): the coordinator writes, its sender and `yoco-agent spool` read."""

    def __init__(
        self,
        path: str | os.PathLike = DEFAULT_PATH,
        max_bytes: int = DEFAULT_MAX_BYTES,
        warn_fraction: float = 0.8,
    ):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        self.warn_fraction = warn_fraction
        self._local = threading.local()
        self._warned = False
        with self._db() as db:
            db.executescript(_SCHEMA)

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            self._local.db = db
        return db

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None

    # -- writing ------------------------------------------------------------------------------

    def put(self, event: dict) -> bool:
        """Store one event durably; False if this source+id is spooled already. Raises SpoolFull
        past the cap."""
        body = json.dumps(event, separators=(",", ":"), sort_keys=True)
        db = self._db()
        used = self.used_bytes()
        if used + len(body) > self.max_bytes:
            self._bump("refused")
            raise SpoolFull(
                f"event spool {self.path} is full ({used} of {self.max_bytes} bytes): is the "
                "platform reachable? (`yoco-agent spool show`)"
            )
        cursor = db.execute(
            "INSERT OR IGNORE INTO pending (source, id, body, created) VALUES (?, ?, ?, ?)",
            (event["source"], event["id"], body, time.time()),
        )
        self._check_size(used + len(body))
        return cursor.rowcount == 1

    def _check_size(self, used: int) -> None:
        threshold = self.warn_fraction * self.max_bytes
        if used >= threshold and not self._warned:
            self._warned = True
            log.warning(
                "event spool %s is %.0f %% full (%d of %d bytes): events are not being "
                "delivered to the platform; past the cap new events are refused",
                self.path, 100 * used / self.max_bytes, used, self.max_bytes,
            )  # fmt: skip
        elif used < 0.7 * self.max_bytes:
            self._warned = False

    def _bump(self, key: str, by: int = 1) -> None:
        self._db().execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = value + excluded.value",
            (key, by),
        )

    # -- reading ------------------------------------------------------------------------------

    def used_bytes(self) -> int:
        row = (
            self._db()
            .execute(
                "SELECT (SELECT COALESCE(SUM(length(body)), 0) FROM pending)"
                " + (SELECT COALESCE(SUM(length(body)), 0) FROM dead)"
            )
            .fetchone()
        )
        return int(row[0])

    def pending(self, limit: int = 500) -> list[Pending]:
        rows = self._db().execute(
            "SELECT seq, source, id, body FROM pending ORDER BY seq LIMIT ?", (limit,)
        )
        return [Pending(*row) for row in rows]

    def pending_count(self) -> int:
        return self._db().execute("SELECT COUNT(*) FROM pending").fetchone()[0]

    def dead_letters(self) -> list[dict]:
        rows = self._db().execute(
            "SELECT seq, source, id, status, reason, at, body FROM dead ORDER BY seq"
        )
        keys = ("seq", "source", "id", "status", "reason", "at", "body")
        return [dict(zip(keys, row, strict=True)) for row in rows]

    def counter(self, key: str) -> int:
        row = self._db().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else 0

    def summary(self) -> dict:
        db = self._db()
        oldest = db.execute("SELECT MIN(created) FROM pending").fetchone()[0]
        return {
            "path": str(self.path),
            "pending": self.pending_count(),
            "dead": db.execute("SELECT COUNT(*) FROM dead").fetchone()[0],
            "delivered": self.counter("delivered"),
            "refused_full": self.counter("refused"),
            "used_bytes": self.used_bytes(),
            "max_bytes": self.max_bytes,
            "oldest_pending_age_s": None if oldest is None else round(time.time() - oldest, 1),
        }

    # -- outcomes -----------------------------------------------------------------------------

    def delivered(self, seqs: list[int]) -> None:
        if not seqs:
            return
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            db.executemany("DELETE FROM pending WHERE seq = ?", [(s,) for s in seqs])
            self._bump("delivered", len(seqs))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def dead_letter(self, item: Pending, status: str, reason: str) -> None:
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute(
                "INSERT INTO dead (source, id, body, status, reason, at) VALUES (?, ?, ?, ?, ?, ?)",
                (item.source, item.id, item.body, status, reason, time.time()),
            )
            db.execute("DELETE FROM pending WHERE seq = ?", (item.seq,))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def requeue_dead(self) -> int:
        """Move every dead letter back to pending (after the cause was fixed)."""
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            rows = db.execute("SELECT seq, source, id, body, at FROM dead").fetchall()
            for _, source, id_, body, at in rows:
                db.execute(
                    "INSERT OR IGNORE INTO pending (source, id, body, created) VALUES (?,?,?,?)",
                    (source, id_, body, at),
                )
            db.execute("DELETE FROM dead")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return len(rows)


class Sender:
    """POSTs what is pending in a spool to the platform; one round is `send_once`, the background
    thread (`start`) repeats it with back-off while anything is pending."""

    def __init__(
        self,
        spool: Spool,
        platform_url: str,
        cluster_key: str,
        *,
        batch_size: int = 200,
        timeout_s: float = 30.0,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 30.0,
    ):
        import requests

        self.spool = spool
        self.url = platform_url.rstrip("/") + "/api/v1/events"
        self.batch_size = batch_size
        self.timeout_s = timeout_s
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.session = requests.Session()
        self.session.headers.update(
            {"Authorization": f"Bearer {cluster_key}", "Content-Type": BATCH_CONTENT_TYPE}
        )
        self.failures = 0  # consecutive rounds that delivered nothing
        self.last_error: str | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- one round ----------------------------------------------------------------------------

    def send_once(self) -> bool:
        """Send one batch. True when the platform answered (whatever it said per event), False
        when it must be tried again later (unreachable, slow, 5xx, 429, auth)."""
        batch = self.spool.pending(self.batch_size)
        if not batch:
            return True
        return self._post(batch)

    def _post(self, batch: list[Pending]) -> bool:
        import requests

        body = "[" + ",".join(item.body for item in batch) + "]"
        try:
            response = self.session.post(self.url, data=body.encode(), timeout=(5, self.timeout_s))
        except requests.RequestException as error:
            return self._retry_later(f"platform unreachable: {type(error).__name__}: {error}")
        code = response.status_code
        if code in (200, 207):
            self._apply(batch, response)
            return True
        if code >= 500 or code in (408, 429):
            return self._retry_later(f"platform answered HTTP {code}")
        if code in (401, 403):
            # A configuration problem (wrong or revoked key): keep everything, keep trying slowly.
            return self._retry_later(f"platform refused the cluster key: HTTP {code} "
                                     f"{_snippet(response)} (check YOCO_CLUSTER_KEY)")  # fmt: skip
        # 400 / 413 / 415 …: the request as a whole could not be taken. Split until the event
        # that causes it is alone, then dead-letter that one.
        if len(batch) > 1:
            half = len(batch) // 2
            return self._post(batch[:half]) and self._post(batch[half:])
        self._dead(batch[0], f"http_{code}", f"HTTP {code}: {_snippet(response)}")
        return True

    def _apply(self, batch: list[Pending], response) -> None:
        try:
            answer = response.json()
            results = {r["index"]: r for r in answer["results"]}
        except (ValueError, KeyError, TypeError):
            self._retry_later(f"unreadable answer from the platform: {_snippet(response)}")
            return
        done = []
        for index, item in enumerate(batch):
            result = results.get(index)
            if result is None:
                continue  # not answered: stays pending, sent again
            status = result.get("status")
            if status in ("accepted", "duplicate"):
                done.append(item.seq)
            elif status in ("rejected", "conflict"):
                self._dead(item, status, result.get("error") or status)
        self.spool.delivered(done)
        self.failures = 0
        self.last_error = None

    def _dead(self, item: Pending, status: str, reason: str) -> None:
        log.warning(
            "platform %s event %s (source %s): %s; kept in the spool's dead letters "
            "(`yoco-agent spool show`), not retried",
            status.upper(), item.id, item.source, reason,
        )  # fmt: skip
        self.spool.dead_letter(item, status, reason)

    def _retry_later(self, reason: str) -> bool:
        self.failures += 1
        if reason != self.last_error or self.failures in (1, 5) or self.failures % 20 == 0:
            log.warning(
                "event delivery failed (%s); %d event(s) kept in %s, retrying",
                reason, self.spool.pending_count(), self.spool.path,
            )  # fmt: skip
        self.last_error = reason
        return False

    def backoff_s(self) -> float:
        """Exponential back-off with full jitter, never below a tenth of the base."""
        ceiling = min(self.backoff_max_s, self.backoff_base_s * 2 ** max(0, self.failures - 1))
        return max(self.backoff_base_s / 10, random.uniform(0, ceiling))

    def flush(self, timeout_s: float) -> bool:
        """Send until nothing is pending (True) or `timeout_s` has passed (False). Without a
        background thread, in this one."""
        deadline = time.monotonic() + timeout_s
        while self.spool.pending_count():
            if time.monotonic() >= deadline:
                return False
            if self._thread is not None and self._thread.is_alive():
                time.sleep(0.05)  # the thread sends; stop() woke it from any back-off
                continue
            if not self.send_once():
                time.sleep(min(self.backoff_s(), max(0.0, deadline - time.monotonic())))
        return True

    # -- the background thread ----------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, daemon=True, name="yoco-sender")
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                ok = self.send_once()
            except Exception:  # noqa: BLE001 - the sender must outlive any one bad round
                log.exception("event sender: unexpected error; retrying")
                self.failures += 1
                ok = False
            if ok and self.spool.pending_count():
                continue  # more to send: no waiting
            # Nothing pending: sleep until woken. Failing: back off (an emit does not cut the
            # back-off short, a flush does).
            wait = 1.0 if ok else self.backoff_s()
            deadline = time.monotonic() + wait
            while not self._stop.is_set() and time.monotonic() < deadline:
                if self._wake.wait(timeout=max(0.0, deadline - time.monotonic())):
                    self._wake.clear()
                    if ok or self._flushing:
                        break
        self.spool.close()

    _flushing = False

    def stop(self, timeout_s: float) -> bool:
        """Flush for at most `timeout_s`, then stop the thread. True when nothing is left."""
        self._flushing = True
        self._wake.set()
        empty = self.flush(timeout_s)
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timeout_s + 5)
        return empty


def _snippet(response) -> str:
    text = response.text.strip().replace("\n", " ")
    return text[:300] + ("…" if len(text) > 300 else "")
