"""A job's settings, as the operator gave them (yoco-agent run / coordinator), and the control
port they name. Free of torch: the launcher binds the port and starts the workers before it
imports torch (launcher.run_local_job)."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field


@dataclass
class Settings:
    world_size: int
    host: str = "0.0.0.0"
    advertise: str = "127.0.0.1"  # the address processes use to reach us
    port: int = 0
    store_port: int = 0
    cluster: str = "local"
    job: str = "job"
    model: str = ""
    heartbeat_interval_s: float = 0.1
    heartbeat_timeout_s: float = 1.0  # a silent process is declared dead after this
    join_timeout_s: float = 60.0
    collective_timeout_s: float = 30.0
    transfer_timeout_s: float = 120.0
    checkpoint_dir: str | None = None
    checkpoint_every: int = 0
    checkpoint_keep: int = 2
    health: dict = field(default_factory=dict)
    status_file: str | None = None
    mode: str = "model_aware"  # or "transparent" (agent/transparent.py)
    # Spares that must be ready, from any node, before the first step (`coordinator
    # --await-spares`): a multi-node job protected from its first step.
    await_spares: int = 0


def control_server(settings: Settings) -> socket.socket:
    """The coordinator's control port, listening: every process keeps one connection to it."""
    return socket.create_server((settings.host, settings.port), backlog=256)


def control_address(settings: Settings, server: socket.socket) -> str:
    """The address processes dial to reach the control port."""
    return f"{settings.advertise}:{server.getsockname()[1]}"
