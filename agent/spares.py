"""When the standby spares of a local job start.

Spares start only once the workers are training, one at a time, each after the one before it
is ready (connected, model built, state buffers allocated: SPEC 2.4) or gone, and at a lower CPU
priority (agent/priority.py). On a machine with few cores, spares started beside the workers
would share the CPU with the workers' own start-up and delay the first training step; started
one by one, the first spare is ready as early as possible. A failure that finds no spare ready
waits for the one still on its way (`coming`), at the workers' priority (`hurry`).

The coordinator calls every method from its own thread.
"""

from __future__ import annotations

from collections.abc import Callable


class SpareSupply:
    def __init__(self, start: Callable[[], int], count: int, hurry: Callable[[int], None]):
        """`start()` starts one spare process and returns its pid; `hurry(pid)` gives a
        starting spare the workers' CPU priority."""
        self._start = start
        self._hurry = hurry
        self.remaining = count
        self.begun = False
        self.loading: int | None = None  # pid of the spare started and not ready yet

    def begin(self) -> None:
        """The workers have begun training: start the first spare."""
        self.begun = True
        self._next()

    def ready(self, pid: int) -> None:
        if pid == self.loading:
            self.loading = None
            self._next()

    def gone(self, pid: int) -> None:
        """A process ended or was declared dead (a spare that never became ready included)."""
        self.ready(pid)

    def hurry(self) -> None:
        """A failure waits for the spare that is starting: the workers are idle, so it no
        longer needs to yield to them (on a busy machine it would yield to everyone else)."""
        if self.loading is not None:
            self._hurry(self.loading)

    def pending(self) -> int:
        """Spares on their way: loading, or not started yet."""
        return self.remaining + (self.loading is not None)

    def coming(self) -> bool:
        return self.pending() > 0

    def _next(self) -> None:
        if self.begun and self.loading is None and self.remaining > 0:
            self.remaining -= 1
            self.loading = self._start()
