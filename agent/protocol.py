"""The control channel: one TCP connection per process to the coordinator, one JSON object per
line. A closed connection is itself a signal: the kernel closes a SIGKILLed process's sockets,
so the coordinator learns of the death at once instead of waiting for missed heartbeats."""

from __future__ import annotations

import json
import socket
import threading
import time


class ChannelClosed(ConnectionError):
    pass


def error_text(error: BaseException) -> str:
    """An exception as a reply reports it: its type and message (the same text for the same
    failure in another process, so the coordinator can tell a repeated failure)."""
    return f"{type(error).__name__}: {error}"[:300]


class Channel:
    def __init__(self, sock: socket.socket):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        self._reader = sock.makefile("rb")
        self._send_lock = threading.Lock()

    @classmethod
    def connect(cls, address: str, timeout_s: float) -> Channel:
        """Connect, retrying until `timeout_s`: the coordinator may still be starting."""
        host, port = split_address(address)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return cls(socket.create_connection((host, port), timeout=5))
            except OSError as error:
                if time.monotonic() >= deadline:
                    raise ConnectionError(
                        f"cannot reach the yoco coordinator at {address} within "
                        f"{timeout_s:g} s ({error}). Is `yoco-agent run` (or `yoco-agent "
                        "coordinator`) running, and is YOCO_COORDINATOR right?"
                    ) from error
                time.sleep(0.1)

    def send(self, message: dict) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        with self._send_lock:
            try:
                self.sock.sendall(data)
            except OSError as error:
                raise ChannelClosed(str(error)) from error

    def receive(self) -> dict:
        """Blocks for the next message; ChannelClosed when the peer is gone."""
        self.sock.settimeout(None)
        try:
            line = self._reader.readline()
        except OSError as error:
            raise ChannelClosed(str(error)) from error
        if not line:
            raise ChannelClosed("connection closed")
        return json.loads(line)

    def request(self, message: dict) -> dict:
        self.send(message)
        return self.receive()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"coordinator address must be HOST:PORT, got {address!r}")
    return host, int(port)
