"""When the standby spares of a local job start.

By default (`--spares-start after-workers`) spares start only once the workers have completed
their first training step, one at a time, each after the one before it is ready (connected,
model built, state buffers allocated: SPEC 2.4) or gone, and at a lower CPU priority
(agent/priority.py). On a machine with few cores, spares started beside the workers would share
the CPU with the workers' start-up and their first step (which is slow: it builds the
optimizer's state and warms torch's caches) and delay it; started one by one, the first spare is
ready as early as possible. A failure that finds no spare ready waits for the one still on its
way (`coming`), started now if the first step had not completed, at the workers' priority
(`hurry`).
With `--spares-start with-workers` every spare starts beside the workers, for machines with
cores to spare; `before-training` also holds the first training step until every spare is
ready (or gone), for jobs that must be protected from their first step (and tests whose
failures come at fixed steps).

The coordinator calls every method from its own thread.
"""

from __future__ import annotations

from collections.abc import Callable

WHEN = ("after-workers", "with-workers", "before-training")


class SpareSupply:
    def __init__(
        self, start: Callable[[], int], count: int, hurry: Callable[[int], None], when: str
    ):
        """`start()` starts one spare process and returns its pid; `hurry(pid)` gives a
        starting spare the workers' CPU priority; `when`: one of WHEN."""
        if when not in WHEN:
            raise ValueError(f"spares start {' or '.join(WHEN)}, not {when!r}")
        self._start = start
        self._hurry = hurry
        self._at_launch = when != "after-workers"
        self._batch = count if self._at_launch else 1
        self.holds_first_step = when == "before-training"
        self.remaining = count
        self.loading: set[int] = set()  # pids of the spares started and not ready yet
        self.begun = False

    def launch(self) -> None:
        """The workers have been started: unless after-workers, start every spare now."""
        if self._at_launch:  # even a single spare: before-training waits for it
            self.begin()

    def begin(self) -> None:
        """The workers have completed their first step: start the first spare (if not started
        yet)."""
        self.begun = True
        self._next()

    def ready(self, pid: int) -> None:
        if pid in self.loading:
            self.loading.discard(pid)
            self._next()

    def gone(self, pid: int) -> None:
        """A process ended or was declared dead (a spare that never became ready included)."""
        self.ready(pid)

    def hurry(self) -> None:
        """A failure waits for the spare that is starting: the workers are idle, so it no
        longer needs to yield to them (on a busy machine it would yield to everyone else)."""
        self.begin()
        for pid in self.loading:
            self._hurry(pid)

    def pending(self) -> int:
        """Spares on their way: loading, or not started yet."""
        return self.remaining + len(self.loading)

    def coming(self) -> bool:
        return self.pending() > 0

    def _next(self) -> None:
        while self.begun and len(self.loading) < self._batch and self.remaining > 0:
            self.remaining -= 1
            self.loading.add(self._start())
