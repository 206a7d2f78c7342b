"""The one-command demo (`bash .ci/demo`, the README's first command).

It sets the platform up on the embedded default (its own SQLite file, var/demo.sqlite3, and
Celery eager), loads the demo customer's history, gives that customer a contract over a live
cluster, serves the platform the way production does (gunicorn, DEBUG off, its own secret key,
static files collected and served by WhiteNoise; plain HTTP on 127.0.0.1, so without the TLS
variables of docs/platform.md), runs a real multi-process training under the agent with its events
going to the server through the agent's durable spool, injects four failures (an unplanned kill,
a pre-emptive thermal alarm, a planned drain, and a kill with no spare left, which must fall back
to a checkpoint), waits until the platform has every event, and prints each contract year's
counts, compliance and credit as the platform's API reports them.

Everything runs as separate processes (manage.py, the server, `yoco-agent run`): this module
imports neither torch nor the agent. Ctrl-C stops every process it started.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
VAR = ROOT / "var"
PYTHON = sys.executable
CUSTOMER = "Acme AI"  # fixtures/demo.json's customer
PORTAL_LOGIN = ("demo", "demo-portal-2026")  # fixtures/demo.json's portal user
LIVE_CLUSTER = "acme-live"
STEPS = 150
# Small enough for 2 CPU cores with 5 processes; slowed so the failures land between steps.
GPT_ARGS = ["--dim", "32", "--heads", "2", "--layers", "2", "--seq", "16", "--batch", "4",
            "--vocab", "64", "--seed", "7", "--step-sleep", "0.15"]  # fmt: skip

# A pipe or a log file gets tables as wide as a terminal would.
console = Console(width=None if sys.stdout.isatty() else 120)


class Demo:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.host = args.host
        self.port = args.port
        self.url = f"http://{self.host}:{self.port}"
        self.env = dict(os.environ, PYTHONPATH=str(ROOT), DJANGO_SETTINGS_MODULE="yoco.settings")
        if not os.environ.get("DATABASE_URL"):
            self.env["DATABASE_URL"] = f"sqlite:///{VAR / 'demo.sqlite3'}"
        self.env.update(production_env(self.host))
        self.run_dir = VAR / "demo-run"
        self.children: list[subprocess.Popen] = []
        self.server: subprocess.Popen | None = None
        self.agent: subprocess.Popen | None = None
        self._shown: set[str] = set()

    # -- processes ----------------------------------------------------------------------------

    def manage(self, *args: str) -> str:
        result = subprocess.run(
            [PYTHON, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True, text=True
        )
        if result.returncode != 0:
            raise DemoError(f"manage.py {' '.join(args)} failed:\n{result.stdout}{result.stderr}")
        return result.stdout

    def spawn(self, command: list[str], log: Path, env: dict | None = None) -> subprocess.Popen:
        """A child in its own session (its own process group), so that it and everything it
        starts can be ended together, and Ctrl-C reaches only us."""
        with open(log, "ab") as out:
            process = subprocess.Popen(
                command, cwd=ROOT, env=env or self.env, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        self.children.append(process)
        return process

    def stop_everything(self) -> None:
        """Agent first (SIGINT lets it end its workers), then the server: terminate, wait, kill.
        Worker processes run in sessions of their own; the agent's status file names them."""
        for process in reversed(self.children):
            _end_group(process, signal.SIGINT if process is self.agent else signal.SIGTERM)
        for member in self._status().get("members", []):
            try:
                os.killpg(member["pid"], signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.children.clear()

    # -- steps --------------------------------------------------------------------------------

    def setup_platform(self) -> dict:
        VAR.mkdir(exist_ok=True)
        creds_path = VAR / "demo-live.json"
        if self.args.fresh:
            for path in (VAR / "demo.sqlite3", creds_path, VAR / "demo-spool.sqlite3"):
                path.unlink(missing_ok=True)
        with console.status("migrating the demo database (var/demo.sqlite3)…"):
            self.manage("migrate", "--noinput", "-v0")
        console.print("[green]✓[/] platform database ready "
                      f"({self.env['DATABASE_URL'].split('://')[0]}, Celery eager)")  # fmt: skip
        with console.status("loading the demo customer's history (fixtures/demo.json)…"):
            out = self.manage("load_demo")
        console.print(f"[green]✓[/] demo fixtures: {out.strip().splitlines()[-1]}")
        if creds_path.exists():
            creds = json.loads(creds_path.read_text())
            console.print(f"[green]✓[/] reusing the live cluster {creds['cluster']} "
                          f"(contract {creds['contract']})")  # fmt: skip
            return creds
        year_start = dt.date.today().replace(month=1, day=1).isoformat()
        cluster = LIVE_CLUSTER
        for attempt in range(5):
            try:
                out = self.manage("create_contract", "--customer", CUSTOMER, "--start",
                                  year_start, "--years", "3", "--annual-value", "600000.00",
                                  "--currency", "USD", "--cluster", cluster)  # fmt: skip
                break
            except DemoError:
                if attempt == 4:
                    raise
                cluster = f"{LIVE_CLUSTER}-{int(time.time())}"  # the name is taken already
        created = json.loads(out.strip().splitlines()[-1])
        creds = {
            "cluster": cluster,
            "contract": created["contract"],
            "cluster_key": created["cluster_keys"][cluster],
            "read_token": created["read_token"],
        }
        creds_path.write_text(json.dumps(creds))
        creds_path.chmod(0o600)
        console.print(f"[green]✓[/] contract {creds['contract']} for {CUSTOMER} over the live "
                      f"cluster {cluster}, from {year_start}")  # fmt: skip
        return creds

    def start_server(self) -> None:
        if _port_busy(self.host, self.port):
            raise DemoError(f"{self.host}:{self.port} is in use: stop what runs there, or pass "
                            "--port")  # fmt: skip
        with console.status("collecting the static files (var/static)…"):
            self.manage("collectstatic", "--noinput", "-v0")
        self.server = self.spawn(gunicorn_command(self.host, self.port), VAR / "demo-server.log")
        with console.status(f"starting the platform at {self.url}…"):
            deadline = time.monotonic() + 60
            while True:
                try:
                    requests.get(f"{self.url}/api/v1/schema", timeout=2)
                    break
                except requests.RequestException as error:
                    if self.server.poll() is not None or time.monotonic() > deadline:
                        log = VAR / "demo-server.log"
                        raise DemoError(f"the server did not start; see {log}") from error
                    time.sleep(0.2)
        console.print(f"[green]✓[/] platform serving at {self.url}")

    def run_training(self, creds: dict) -> dict:
        import shutil

        shutil.rmtree(self.run_dir, ignore_errors=True)
        self.run_dir.mkdir(parents=True)
        job = f"demo-{dt.datetime.now(dt.UTC):%Y%m%d-%H%M%S}"
        command = [
            PYTHON, "-m", "agent.cli", "run", "--workers", "2", "--spares", "3",
            # The failures come at fixed steps, the first at 20: protected from the first step.
            "--spares-start", "before-training",
            "--cluster", creds["cluster"], "--job", job,
            "--platform", self.url, "--spool", str(VAR / "demo-spool.sqlite3"),
            "--events", str(self.run_dir / "events.jsonl"),
            "--status-file", str(self.run_dir / "status.json"),
            "--checkpoint-dir", str(self.run_dir / "checkpoints"), "--checkpoint-every", "20",
            "--heartbeat-timeout", "3", "--join-timeout", "120",
            "--", PYTHON, "agent/examples/gpt.py", "--steps", str(STEPS), *GPT_ARGS,
        ]  # fmt: skip
        env = dict(self.env, YOCO_CLUSTER_KEY=creds["cluster_key"], YOCO_CONNECT_TIMEOUT_S="30")
        env.pop("DATABASE_URL", None)  # the agent knows nothing of the platform's database
        console.print(f"[bold]training[/] a small GPT for {STEPS} steps: 2 workers + 3 spares "
                      f"under `yoco-agent run` (job {job}, log var/demo-run/agent.log)"
                      )  # fmt: skip
        self.agent = self.spawn(command, self.run_dir / "agent.log", env)

        plan = [
            (20, "unplanned", "SIGKILL rank 0's process (a crashed worker)", self._kill),
            (50, "preemptive", "thermal alarm on rank 1 (97 °C)", self._thermal),
            (80, "planned", "drain rank 0 (maintenance)", self._drain),
            (110, "unplanned", "SIGKILL rank 1 with no spare left → checkpoint", self._kill_1),
        ]
        done = []
        with Progress(
            TextColumn("[progress.description]{task.description}"), BarColumn(),
            TextColumn("step {task.completed:.0f}/{task.total:.0f}"), TimeElapsedColumn(),
            console=console, transient=False,
        ) as progress:  # fmt: skip
            task = progress.add_task("starting processes", total=STEPS)
            while self.agent.poll() is None:
                status = self._status()
                step = status.get("step", 0)
                spares = sum(1 for m in status.get("members", []) if m["role"] == "spare")
                progress.update(task, completed=step,
                                description=f"training · {spares} spare(s) free")  # fmt: skip
                resumed = len(self._events("job.resumed"))
                ready = sum(m["role"] == "spare" and m.get("ready", True)
                            for m in status.get("members", []))  # fmt: skip
                warm = done or ready >= 3  # spares build their model too before the first
                if plan and warm and resumed == len(done) and step >= plan[0][0]:
                    at, trigger, what, action = plan.pop(0)
                    progress.console.print(f"  [yellow]⚡ step {step}[/]: {what}")
                    action(status)
                    done.append((trigger, what, time.monotonic()))
                for line in self._new_recoveries():
                    progress.console.print(line)
                time.sleep(0.1)
            progress.update(task, completed=self._status().get("step", 0))
        for line in self._new_recoveries():
            console.print(line)
        code = self.agent.returncode
        self.children.remove(self.agent)
        self.agent = None
        if code != 0:
            raise DemoError(f"the training job failed (exit {code}); see "
                            f"{self.run_dir / 'agent.log'}")  # fmt: skip
        if plan:
            raise DemoError(f"the job ended before every failure was injected ({len(plan)} left)")
        console.print("[green]✓[/] training completed; the agent flushed its event spool")
        return {"job": job}

    # The four failures. Ranks are looked up when the failure is due: a migration moves them.
    def _pid(self, status: dict, rank: int) -> int:
        for member in status.get("members", []):
            if member["role"] == "worker" and member["rank"] == rank:
                return member["pid"]
        raise DemoError(f"no worker holds rank {rank}: {status}")

    def _kill(self, status: dict) -> None:
        os.kill(self._pid(status, 0), signal.SIGKILL)

    def _kill_1(self, status: dict) -> None:
        os.kill(self._pid(status, 1), signal.SIGKILL)

    def _thermal(self, status: dict) -> None:
        self._cli(status, "inject", "thermal", "--rank", "1")

    def _drain(self, status: dict) -> None:
        self._cli(status, "drain", "--rank", "0")

    def _cli(self, status: dict, *args: str) -> None:
        subprocess.run([PYTHON, "-m", "agent.cli", *args, "--coordinator", status["address"]],
                       cwd=ROOT, env=self.env, check=True, capture_output=True,
                       timeout=60)  # fmt: skip

    def _status(self) -> dict:
        try:
            return json.loads((self.run_dir / "status.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    def _events(self, kind: str | None = None) -> list[dict]:
        path = self.run_dir / "events.jsonl"
        if not path.exists():
            return []
        events = []
        for line in path.read_text().splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line being written
            if kind is None or event["type"] == "io.yoco." + kind:
                events.append(event)
        return events

    def _new_recoveries(self) -> list[str]:
        """One line per incident the agent has closed (its job.resumed), from its event log."""
        lines = []
        by_subject: dict[str, list[dict]] = {}
        for event in self._events():
            if event.get("subject"):
                by_subject.setdefault(event["subject"], []).append(event)
        for subject, events in by_subject.items():
            kinds = {e["type"].removeprefix("io.yoco."): e["data"] for e in events}
            if subject in self._shown or "job.resumed" not in kinds:
                continue
            self._shown.add(subject)
            detected = kinds["failure.detected"]
            if "checkpoint.restored" in kinds:
                restored = kinds["checkpoint.restored"]
                how = (f"[red]rolled back[/] to the checkpoint at step "
                       f"{restored['checkpoint_step']} ({restored['steps_lost']} steps lost)"
                       )  # fmt: skip
            else:
                done = kinds["migration.completed"]
                how = (f"[green]live migration[/], {done['bytes'] / 1e6:.1f} MB moved, "
                       f"resumed at step {done['resumed_step']}, 0 steps lost")  # fmt: skip
            lines.append(f"  [green]✓[/] {detected['trigger']} {detected['category']} on rank "
                         f"{detected['rank']}: {how} in "
                         f"{kinds['job.resumed']['downtime_ms'] / 1000:.1f} s")  # fmt: skip
        return lines

    def wait_delivered(self, creds: dict) -> list[dict]:
        """Every event the agent wrote is on the platform, and each incident has its outcome."""
        emitted = self._events()
        subjects = {e["subject"] for e in emitted if e.get("subject")}
        headers = {"Authorization": f"Bearer {creds['read_token']}"}
        deadline = time.monotonic() + 120
        with console.status("waiting for the platform to hold every event…"):
            while True:
                page = requests.get(f"{self.url}/api/v1/incidents",
                                    params={"contract": creds["contract"]},
                                    headers=headers, timeout=30).json()  # fmt: skip
                ours = [i for i in page["results"] if i["subject"] in subjects]
                stored = sum(len(i["events"]) for i in ours)
                wanted = sum(1 for e in emitted if e.get("subject"))
                settled = all(i["outcome"] not in (None, "pending") for i in ours)
                if len(ours) == len(subjects) and stored >= wanted and settled:
                    break
                if time.monotonic() > deadline:
                    raise DemoError(
                        f"the platform holds {stored} of {wanted} incident events; see "
                        "`yoco-agent spool show --spool var/demo-spool.sqlite3`"
                    )
                time.sleep(0.5)
        console.print(f"[green]✓[/] the platform holds all {len(emitted)} events of the run "
                      f"({len(subjects)} incidents)")  # fmt: skip
        return ours

    def summary(self, creds: dict, incidents: list[dict]) -> None:
        table = Table(title="The run that just happened, as the platform sees it",
                      title_justify="left")  # fmt: skip
        for column in ("incident", "trigger", "category", "outcome", "events"):
            table.add_column(column)
        colour = {"live_resolved": "green", "rolled_back": "red", "planned": "cyan"}
        for incident in sorted(incidents, key=lambda i: i["detected_at"] or ""):
            c = colour.get(incident["outcome"], "yellow")
            table.add_row(incident["subject"][:16] + "…", incident["trigger"],
                          incident["category"], f"[{c}]{incident['outcome']}[/]",
                          str(len(incident["events"])))  # fmt: skip
        console.print(table)

        ids = json.loads(self.manage("shell", "-c", (
            "import json; from yoco.guarantee.models import Contract; print(json.dumps(list("
            f"Contract.objects.filter(customer__name={CUSTOMER!r}).order_by('pk')"
            ".values_list('pk', flat=True))))")).strip().splitlines()[-1])  # fmt: skip
        headers = {"Authorization": f"Bearer {creds['read_token']}"}
        table = Table(title=f"{CUSTOMER}: the guarantee per contract year (GET /api/v1/contracts"
                      "/{id}/years)", title_justify="left")  # fmt: skip
        columns = ("contract", "year", "period", "state", "live", "rolled back", "failed",
                   "pending", "excluded", "planned", "compliance", "meets", "credit")  # fmt: skip
        for column in columns:
            left = column in ("contract", "period", "state", "credit")
            table.add_column(column, justify="left" if left else "right")
        for contract in ids:
            years = requests.get(f"{self.url}/api/v1/contracts/{contract}/years",
                                 headers=headers, timeout=30).json()["years"]  # fmt: skip
            for year in years:
                counts = year["counts"]
                credit = year["credit"]
                live = " (this run)" if contract == creds["contract"] else ""
                table.add_row(
                    f"{contract}{live}", str(year["number"]),
                    f"{year['start'][:10]} → {year['end'][:10]}", year["state"],
                    *(str(counts[k]) for k in ("live_resolved", "rolled_back", "failed",
                                               "pending", "excluded", "planned")),
                    f"{float(year['compliance']) * 100:.1f} %" if year["compliance"] else "–",
                    "[green]yes[/]" if year["meets"] else "[red]no[/]",
                    f"{credit['amount']} {credit['currency']} ({credit['state']})"
                    if credit else "–",
                )  # fmt: skip
        console.print(table)
        user, password = PORTAL_LOGIN
        console.print(f"\nPortal: [bold]{self.url}/[/]  login [bold]{user}[/] / "
                      f"[bold]{password}[/]  (contract {creds['contract']} is this run's)"
                      )  # fmt: skip


class DemoError(RuntimeError):
    pass


# docs/platform.md's production variables that apply to plain HTTP on 127.0.0.1.
DEMO_VARIABLES = ("DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "STATIC_ROOT")


def production_env(host: str) -> dict[str, str]:
    """The demo's production settings; its secret key is made once and kept in var/."""
    key_file = VAR / "demo-secret-key"
    if not key_file.exists():
        VAR.mkdir(exist_ok=True)
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    hosts = dict.fromkeys([host, "127.0.0.1", "localhost"])
    return {
        "DEBUG": "0",
        "SECRET_KEY": key_file.read_text().strip(),
        "ALLOWED_HOSTS": ",".join(hosts),
        "STATIC_ROOT": str(VAR / "static"),
    }


def gunicorn_command(host: str, port: int) -> list[str]:
    gunicorn = str(Path(PYTHON).parent / "gunicorn")
    return [gunicorn, "yoco.wsgi", "-b", f"{host}:{port}", "-w", "2", "--timeout", "120"]


def _port_busy(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def _end_group(process: subprocess.Popen, first: int, grace_s: float = 10.0) -> None:
    """Signal the process group, wait, then SIGKILL what is left."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, first)
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        except ProcessLookupError:
            return
    try:
        os.killpg(process.pid, signal.SIGKILL)  # anything it left in its group
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default=os.environ.get("YOCO_DEMO_HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("YOCO_DEMO_PORT", 8000)))
    parser.add_argument("--keep-serving", action="store_true",
                        help="leave the platform running at the end, for the portal (Ctrl-C "
                        "stops it)")  # fmt: skip
    parser.add_argument("--fresh", action="store_true",
                        help="start from an empty demo database (var/demo.sqlite3)")  # fmt: skip
    args = parser.parse_args(argv)
    # Ctrl-C even when started in the background by a script (which leaves SIGINT ignored), and
    # SIGTERM the same: both end in the same clean-up.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    demo = Demo(args)
    started = time.monotonic()
    try:
        creds = demo.setup_platform()
        demo.start_server()
        demo.run_training(creds)
        incidents = demo.wait_delivered(creds)
        demo.summary(creds, incidents)
        console.print(f"[dim]demo finished in {time.monotonic() - started:.0f} s[/]")
        if args.keep_serving:
            console.print("The platform keeps serving; Ctrl-C stops it.")
            demo.server.wait()
        else:
            console.print(
                "The platform is stopped now; to browse the portal run the demo with "
                "--keep-serving, or start it again with\n  "
                + " ".join(f"{k}={demo.env[k]}" for k in ("DATABASE_URL", *DEMO_VARIABLES))
                + " "
                + " ".join(gunicorn_command(args.host, args.port)).replace(str(ROOT) + "/", "")
            )
        return 0
    except KeyboardInterrupt:
        console.print("\n[yellow]interrupted: stopping everything the demo started…[/]")
        return 130
    except DemoError as error:
        console.print(f"[red]demo failed:[/] {error}")
        return 1
    finally:
        demo.stop_everything()


if __name__ == "__main__":
    sys.exit(main())
