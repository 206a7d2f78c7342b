"""yoco-agent: run a job under the agent, and talk to a running one."""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
from pathlib import Path
from typing import Annotated

from agent.spares import WHEN

try:
    import typer
except ImportError:  # a host with torch only: say what runs there instead
    sys.exit(
        "yoco-agent's command line needs typer and rich (pip install -e '.[agent]'). Without "
        "them a local job runs with: python -m agent.launcher --workers N --spares S -- COMMAND"
    )

app = typer.Typer(
    help=(
        "YOCO agent: keeps a PyTorch data-parallel job running through failures by moving a "
        "failing worker's in-memory training state to a standby spare, and reports every "
        "failure and recovery to the YOCO platform.\n\n"
        "Start a job with `run`; talk to a running one with `status`, `drain` and `inject`; "
        "look at or push the local event spool with `spool`."
    ),
    no_args_is_help=True,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)
spool_app = typer.Typer(
    help="The local event spool: events waiting for the platform, and dead letters.",
    no_args_is_help=True,
)
app.add_typer(spool_app, name="spool")

CoordinatorOpt = Annotated[
    str,
    typer.Option(
        envvar="YOCO_COORDINATOR",
        help="HOST:PORT of the coordinator's control port (printed by `run`).",
    ),
]
EVENTS = "Events"
PlatformOpt = Annotated[
    str | None,
    typer.Option(
        "--platform",
        envvar="YOCO_PLATFORM_URL",
        help="YOCO platform base URL: events are spooled, then sent to URL/api/v1/events.",
        rich_help_panel=EVENTS,
    ),
]
ClusterKeyOpt = Annotated[
    str | None,
    typer.Option(
        envvar="YOCO_CLUSTER_KEY",
        help="the cluster's ingest key (from `manage.py create_contract`).",
        rich_help_panel=EVENTS,
    ),
]
SpoolOpt = Annotated[
    Path,
    typer.Option(
        envvar="YOCO_SPOOL",
        help="SQLite file holding events until the platform has them.",
        rich_help_panel=EVENTS,
    ),
]
SpoolMaxOpt = Annotated[
    int,
    typer.Option(
        envvar="YOCO_SPOOL_MAX_MB",
        help="spool size cap in MiB (warns at 80 %; past it new events are dropped).",
        rich_help_panel=EVENTS,
    ),
]
EventsOpt = Annotated[
    Path | None,
    typer.Option(
        envvar="YOCO_EVENTS",
        help="JSONL event log (default yoco-events.jsonl without --platform; with --platform "
        "a local copy, only if given).",
        rich_help_panel=EVENTS,
    ),
]
DEFAULT_SPOOL = Path("yoco-spool.sqlite3")
HeartbeatTimeoutOpt = Annotated[float, typer.Option(help="seconds")]
StatusFileOpt = Annotated[
    Path | None, typer.Option(help="JSON snapshot of the job, rewritten as it changes")
]


def _logging() -> None:
    logging.basicConfig(
        level=logging.INFO if os.environ.get("YOCO_VERBOSE") else logging.WARNING,
        format="yoco agent: %(levelname)s %(message)s",
        stream=sys.stderr,
    )


def _sink(events, platform, cluster_key, spool, spool_max_mb):
    """The platform through the spool when a URL is given (plus a JSONL copy if asked),
    else a JSONL file."""
    from agent.reporter import HttpSink, JsonlSink, TeeSink

    if not platform:
        return JsonlSink(events or Path("yoco-events.jsonl"))
    if not cluster_key:
        typer.echo(
            "--platform needs the cluster's key: --cluster-key or YOCO_CLUSTER_KEY", err=True
        )
        raise typer.Exit(2)
    http = HttpSink(platform, cluster_key, spool, max_bytes=spool_max_mb * 1024 * 1024)
    return TeeSink(http, JsonlSink(events)) if events else http


def _settings(workers: int, cluster: str, job: str, **kwargs):
    from agent.settings import Settings

    return Settings(world_size=workers, cluster=cluster, job=job, **kwargs)


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    options_metavar="[OPTIONS] -- COMMAND [ARGS]...",
)
def run(
    ctx: typer.Context,
    workers: Annotated[int, typer.Option(help="world size (data-parallel ranks)")] = 1,
    spares: Annotated[int, typer.Option(help="standby processes")] = 0,
    spares_start: Annotated[
        str,
        typer.Option(
            help="after-workers: one by one once the workers train (few cores); with-workers: "
            "all at once beside them; before-training: as with-workers, and the first step "
            "waits until every spare is ready"
        ),
    ] = WHEN[0],
    cluster: Annotated[
        str, typer.Option(envvar="YOCO_CLUSTER", help="cluster name (in the events' source)")
    ] = "local",
    job: Annotated[str, typer.Option(envvar="YOCO_JOB", help="job name (default job-PID)")] = "",
    events: EventsOpt = None,
    platform: PlatformOpt = None,
    cluster_key: ClusterKeyOpt = None,
    spool: SpoolOpt = DEFAULT_SPOOL,
    spool_max_mb: SpoolMaxOpt = 256,
    config: Annotated[Path | None, typer.Option(help="TOML file with a [health] table")] = None,
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    advertise: Annotated[str | None, typer.Option(help="address workers dial")] = None,
    port: Annotated[int, typer.Option(help="control port (0: any free one)")] = 0,
    store_port: Annotated[int, typer.Option(help="TCPStore port (0: any free one)")] = 0,
    heartbeat_timeout: HeartbeatTimeoutOpt = 1.0,
    join_timeout: Annotated[float, typer.Option(help="seconds")] = 60.0,
    checkpoint_dir: Annotated[
        Path | None,
        typer.Option(help="fallback checkpoints (DCP) go here (model-aware mode only)"),
    ] = None,
    checkpoint_every: Annotated[int, typer.Option(help="steps (0: never)")] = 0,
    respawn: Annotated[
        bool, typer.Option(help="start a cold process when no spare is left (then roll back)")
    ] = True,
    status_file: StatusFileOpt = None,
    model: Annotated[str, typer.Option(help="model name for job.started")] = "",
    connect: Annotated[
        str | None,
        typer.Option(help="join a remote coordinator instead of starting one (multi-node)"),
    ] = None,
    procs: Annotated[int, typer.Option(help="with --connect: processes on this node")] = 1,
    transparent: Annotated[
        bool,
        typer.Option(help="protect an unmodified script: the agent finds the state itself"),
    ] = False,
):
    """Run a training command under the agent: a coordinator, WORKERS ranks and SPARES standby
    processes, each running the command after `--`.

    Example: `yoco-agent run --workers 4 --spares 2 --cluster acme-east --platform
    https://yoco.example.com -- python train.py`
    """
    from agent.launcher import LocalProcesses, run_local_job

    if spares_start not in WHEN:
        raise typer.BadParameter(f"one of {', '.join(WHEN)}", param_hint="--spares-start")
    _logging()
    command = list(ctx.args)
    if transparent:
        from agent.launcher import transparent_command

        command = transparent_command(command)
    if connect:
        processes = LocalProcesses(command, connect)
        for _ in range(procs):
            processes.start()
        codes = [p.wait() for p in processes.processes]
        raise typer.Exit(max(codes))
    outcome = run_local_job(
        _settings(
            workers,
            cluster,
            job or f"job-{os.getpid()}",
            host=host,
            advertise=advertise or (host if host != "0.0.0.0" else socket.gethostname()),
            port=port,
            store_port=store_port,
            model=model or next((Path(a).stem for a in command if a.endswith(".py")), ""),
            heartbeat_timeout_s=heartbeat_timeout,
            join_timeout_s=join_timeout,
            checkpoint_dir=str(checkpoint_dir) if checkpoint_dir else None,
            checkpoint_every=checkpoint_every,
            health=_health(config),
            status_file=str(status_file) if status_file else None,
            mode="transparent" if transparent else "model_aware",
        ),
        _sink(events, platform, cluster_key, spool, spool_max_mb),
        command,
        workers,
        spares,
        respawn,
        spares_start,
    )
    raise typer.Exit(0 if outcome == "completed" else 1)


def _health(config: Path | None) -> dict:
    from dataclasses import asdict

    from agent.policy import load_thresholds

    return {"thresholds": asdict(load_thresholds(config))}


@app.command()
def coordinator(
    workers: Annotated[int, typer.Option(help="world size (data-parallel ranks)")],
    host: Annotated[str, typer.Option(help="address to listen on")] = "0.0.0.0",
    advertise: Annotated[str | None, typer.Option(help="address nodes dial")] = None,
    port: Annotated[int, typer.Option(help="control port")] = 29400,
    store_port: Annotated[int, typer.Option(help="TCPStore port")] = 29401,
    cluster: Annotated[str, typer.Option(envvar="YOCO_CLUSTER", help="cluster name")] = "local",
    job: Annotated[str, typer.Option(envvar="YOCO_JOB", help="job name")] = "job",
    events: EventsOpt = None,
    platform: PlatformOpt = None,
    cluster_key: ClusterKeyOpt = None,
    spool: SpoolOpt = DEFAULT_SPOOL,
    spool_max_mb: SpoolMaxOpt = 256,
    config: Annotated[Path | None, typer.Option(help="TOML file with a [health] table")] = None,
    join_timeout: Annotated[float, typer.Option(help="seconds")] = 300.0,
    checkpoint_dir: Annotated[Path | None, typer.Option()] = None,
    checkpoint_every: Annotated[int, typer.Option(help="steps (0: never)")] = 0,
    heartbeat_timeout: HeartbeatTimeoutOpt = 1.0,
    status_file: StatusFileOpt = None,
    await_spares: Annotated[
        int, typer.Option(help="the first step waits until this many spares (any node) are ready")
    ] = 0,
):
    """Run only the coordinator; nodes join it with `run --connect HOST:PORT` (multi-node)."""
    from agent.launcher import run_local_job

    _logging()
    status = run_local_job(
        _settings(
            workers,
            cluster,
            job,
            host=host,
            advertise=advertise or socket.gethostname(),
            port=port,
            store_port=store_port,
            join_timeout_s=join_timeout,
            checkpoint_dir=str(checkpoint_dir) if checkpoint_dir else None,
            checkpoint_every=checkpoint_every,
            heartbeat_timeout_s=heartbeat_timeout,
            health=_health(config),
            status_file=str(status_file) if status_file else None,
            await_spares=await_spares,
        ),
        _sink(events, platform, cluster_key, spool, spool_max_mb),
        [],
        0,
        0,
        False,
    )
    raise typer.Exit(0 if status == "completed" else 1)


def _request(address: str, request: dict) -> dict:
    from agent.protocol import control_request

    reply = control_request(address, request)
    if not reply.get("ok"):
        typer.echo(f"error: {reply.get('error')}", err=True)
        raise typer.Exit(1)
    return reply


@app.command()
def drain(
    coordinator: CoordinatorOpt,
    rank: Annotated[int | None, typer.Option(help="the rank to move")] = None,
    node: Annotated[str | None, typer.Option(help="move every rank on this node")] = None,
):
    """Planned migration (maintenance): move a rank, or every rank of a node, to spares."""
    if (rank is None) == (node is None):
        typer.echo("give exactly one of --rank or --node", err=True)
        raise typer.Exit(2)
    typer.echo(json.dumps(_request(coordinator, {"type": "drain", "rank": rank, "node": node})))


@app.command()
def inject(
    kind: Annotated[str, typer.Argument(help="thermal | ecc | xid | kill")],
    coordinator: CoordinatorOpt,
    rank: Annotated[int, typer.Option(help="the rank whose health monitor sees the fault")],
    xid: Annotated[int | None, typer.Option(help="with `xid`: which one (default 79)")] = None,
):
    """Inject a fault into a rank's health monitor (tests and demos): `thermal` and `ecc` start
    a pre-emptive migration; `kill` and a fatal `xid` (79, 48, …) an unplanned one."""
    if kind not in ("thermal", "ecc", "xid", "kill"):
        typer.echo(f"unknown fault {kind!r}", err=True)
        raise typer.Exit(2)
    request = {"type": "inject", "kind": kind, "rank": rank, "xid": xid}
    typer.echo(json.dumps(_request(coordinator, request)))


@app.command()
def status(
    coordinator: CoordinatorOpt,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="refresh until Ctrl-C")] = False,
    interval: Annotated[float, typer.Option(help="seconds between refreshes")] = 1.0,
    as_json: Annotated[bool, typer.Option("--json", help="print the raw status as JSON")] = False,
):
    """A running job: ranks, spares, their health, and migrations in flight."""
    if as_json:
        typer.echo(json.dumps(_request(coordinator, {"type": "status"}), indent=2))
        return
    from rich.console import Console
    from rich.live import Live

    console = Console()
    if not watch:
        console.print(_status_view(_request(coordinator, {"type": "status"})))
        return
    with Live(console=console, refresh_per_second=4, screen=False) as live:
        try:
            while True:
                try:
                    view = _status_view(_request(coordinator, {"type": "status"}))
                except (ConnectionError, OSError, typer.Exit):
                    view = f"[yellow]coordinator {coordinator} not answering (job over?)[/]"
                live.update(view)
                time.sleep(interval)
        except KeyboardInterrupt:
            pass


def _status_view(status: dict):
    from rich.console import Group
    from rich.table import Table

    members = status.get("members", [])
    workers = sorted((m for m in members if m["role"] == "worker"), key=lambda m: m["rank"])
    spares = [m for m in members if m["role"] in ("spare", "receiving")]
    gone = [m for m in members if m["role"] in ("dead", "retired")]
    title = (
        f"job at {status.get('address')} · step {status.get('step')} · generation "
        f"{status.get('generation')} · {len(workers)} ranks, {len(spares)} spares"
    )
    table = Table(title=title, title_justify="left")
    for column in ("rank", "role", "pid", "node", "device", "step", "heartbeat", "health"):
        table.add_column(column, justify="right" if column in ("rank", "pid", "step") else "left")
    for m in workers + spares + gone:
        age = m.get("heartbeat_age_s")
        if m["role"] in ("dead", "retired"):
            health = f"[dim]{m['role']}[/]"
        elif m.get("alarm"):
            health = f"[yellow]{m['alarm']}[/]"
        elif age is not None and age > 1.0:
            health = f"[red]silent {age:.1f} s[/]"
        else:
            health = "[green]ok[/]"
        style = "dim" if m["role"] in ("dead", "retired") else None
        table.add_row(
            "" if m["rank"] is None else str(m["rank"]),
            m["role"],
            str(m["pid"]),
            m["node"],
            m.get("device", ""),
            str(m["step"]),
            "" if age is None else f"{age:.1f} s ago",
            health,
            style=style,
        )
    parts = [table]
    for incident in status.get("incidents") or []:
        parts.append(
            f"[bold yellow]recovering[/] {incident['incident']}: rank {incident['rank']} "
            f"{incident['trigger']} ({incident['category']}: {incident['detail']})"
        )
    transfer = status.get("transfer")
    if transfer:
        parts.append(
            f"[bold cyan]streaming[/] rank {transfer['rank']}'s state: pid "
            f"{transfer['source_pid']} → pid {transfer['target_pid']}"
        )
    if len(parts) == 1:
        parts.append("[green]no migration in flight[/]")
    return Group(*parts)


def _open_spool(spool: Path):
    from agent.spool import Spool

    if not spool.exists():
        typer.echo(f"no spool at {spool} (set --spool or YOCO_SPOOL)", err=True)
        raise typer.Exit(1)
    return Spool(spool)


@spool_app.command("show")
def spool_show(
    spool: SpoolOpt = DEFAULT_SPOOL,
    as_json: Annotated[bool, typer.Option("--json", help="print as JSON")] = False,
    bodies: Annotated[bool, typer.Option(help="print each dead letter's event")] = False,
):
    """Events waiting for the platform, and dead letters with the platform's reasons."""
    store = _open_spool(spool)
    summary = store.summary()
    dead = store.dead_letters()
    if as_json:
        summary["dead_letters"] = [
            {k: v for k, v in d.items() if bodies or k != "body"} for d in dead
        ]
        typer.echo(json.dumps(summary, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    used = 100 * summary["used_bytes"] / summary["max_bytes"]
    age = summary["oldest_pending_age_s"]
    console.print(
        f"spool {summary['path']}: [bold]{summary['pending']}[/] pending"
        + (f" (oldest {age:.0f} s)" if age is not None else "")
        + f", {summary['delivered']} delivered, [bold]{summary['dead']}[/] dead letters, "
        f"{summary['used_bytes']} bytes ({used:.1f} % of the cap)"
        + (
            f", [red]{summary['refused_full']} refused while full[/]"
            if summary["refused_full"]
            else ""
        )  # fmt: skip
    )
    if dead:
        table = Table(title="dead letters (not retried; `spool flush --requeue-dead` sends again)")
        for column in ("id", "source", "status", "reason"):
            table.add_column(column, overflow="fold")
        for d in dead:
            table.add_row(d["id"], d["source"], d["status"], d["reason"])
        console.print(table)
        if bodies:
            for d in dead:
                console.print_json(d["body"])


@spool_app.command("flush")
def spool_flush(
    platform: Annotated[
        str, typer.Option("--platform", envvar="YOCO_PLATFORM_URL", help="YOCO platform base URL")
    ],  # fmt: skip
    cluster_key: Annotated[
        str, typer.Option(envvar="YOCO_CLUSTER_KEY", help="the cluster's ingest key")
    ],  # fmt: skip
    spool: SpoolOpt = DEFAULT_SPOOL,
    timeout: Annotated[float, typer.Option(help="give up after this many seconds")] = 60.0,
    requeue_dead: Annotated[
        bool, typer.Option(help="first move the dead letters back to pending")
    ] = False,
):
    """Send every pending event now (retrying with back-off until TIMEOUT)."""
    from agent.spool import Sender

    _logging()
    store = _open_spool(spool)
    if requeue_dead:
        typer.echo(f"requeued {store.requeue_dead()} dead letter(s)")
    before = store.pending_count()
    sender = Sender(store, platform, cluster_key)
    done = sender.flush(timeout)
    left = store.pending_count()
    dead = len(store.dead_letters())
    typer.echo(f"sent {before - left} event(s); {left} pending, {dead} dead letter(s)")
    raise typer.Exit(0 if done else 1)


def main() -> None:
    app(prog_name="yoco-agent")


if __name__ == "__main__":
    sys.exit(main())
