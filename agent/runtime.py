"""The worker side of the agent: what a training script talks to.

    run = agent.attach()
    model = GPT(cfg).to(run.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    run.register(model=model, optimizer=optimizer, scheduler=scheduler, data=loader)
    for step in run.steps(total_steps):
        loss = model(*run.next_batch())
        loss.backward()     # gradients are averaged over the ranks when it returns, as with DDP
        run.step()          # optimizer.step(), scheduler.step(), zero the gradients

Spares run the same script: `attach()` makes them a spare, they build the model and register
it like everyone else, and `run.steps()` parks them until the coordinator streams a rank's
state into them; from then on they train as that rank. At the first step every rank starts from
rank 0's weights, as DDP's constructor broadcasts them. A step the coordinator abandons (a peer
died mid-step) is simply yielded again with the same step index, RNG state and data position.
"""

from __future__ import annotations

import contextlib
import datetime
import math
import os
import queue
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.utils.data import DataLoader

from agent import checkpoint, priority
from agent.groups import GroupLayer
from agent.loader import LoaderPosition
from agent.mirror import ShardMirror
from agent.protocol import Channel, ChannelClosed, error_text, split_address
from agent.reducer import FlatReducer
from agent.skeleton import flatten
from agent.state import (
    Registry,
    as_dtensors,
    decode_per_rank,
    digest,
    encode_per_rank,
    local_shards,
)
from agent.telemetry import HealthMonitor
from agent.transport import pair_group, recv_state, send_state

ENV_COORDINATOR = "YOCO_COORDINATOR"
# A mesh dimension's name in the script -> its name in job.started's `parallelism` (SPEC 3).
MESH_DIMENSIONS = {"replicate": "dp_replicate", "shard": "dp_shard", "tp": "tp"}


class RegistrationError(RuntimeError):
    pass


class SpareHasNoRank(RuntimeError):
    pass


def attach(run_class: type[Run] | None = None) -> Run:
    """Join the job the launcher started. Reads YOCO_COORDINATOR (HOST:PORT). `run_class`: a
    Run subclass (transparent mode's)."""
    address = os.environ.get(ENV_COORDINATOR)
    if not address:
        raise RuntimeError(
            f"{ENV_COORDINATOR} is not set: start the script under the agent, e.g. "
            "`yoco-agent run --workers 4 --spares 2 -- python train.py`"
        )
    # Same thread count everywhere: CPU kernels may split work (and round) differently otherwise.
    torch.set_num_threads(int(os.environ.get("YOCO_THREADS", "1")))
    channel = Channel.connect(address, float(os.environ.get("YOCO_CONNECT_TIMEOUT_S", "10")))
    local_index = int(os.environ.get("YOCO_LOCAL_INDEX", "0"))
    if torch.cuda.is_available():
        torch.cuda.set_device(local_index % torch.cuda.device_count())
    welcome = channel.request(
        {
            "type": "hello",
            "pid": os.getpid(),
            "node": os.environ.get("YOCO_NODE", socket.gethostname()),
            "device": _device_name(),
        }
    )
    if welcome["type"] == "error":
        channel.close()
        raise RuntimeError(f"the yoco coordinator refused this process: {welcome['message']}")
    return (run_class or Run)(channel, welcome)


def _device_name() -> str:
    if torch.cuda.is_available():
        index = torch.cuda.current_device()
        return f"cuda:{index} {torch.cuda.get_device_name(index)}"
    return "cpu"


class Run:
    def __init__(self, channel: Channel, welcome: dict):
        self.channel = channel
        self.role: str = welcome["role"]
        self._rank: int | None = welcome.get("rank")
        self.world_size: int = welcome["world_size"]
        self.config: dict = welcome["config"]
        self.device = (
            torch.device("cuda", torch.cuda.current_device())
            if torch.cuda.is_available()
            else torch.device("cpu")
        )
        self.store_address: str = welcome["store"]
        self.store = self._store_client(self.store_address)
        self.registry = Registry()
        self._saved_buffers: list[torch.Tensor] = []  # as of the last completed step
        self.current_step = 0
        self.group: dist.ProcessGroup | None = None
        self.reducer: FlatReducer | None = None
        # A sharded job's process groups (device_mesh): re-formed with every generation.
        self.layer: GroupLayer | None = None
        self.mirror: ShardMirror | None = None  # this rank's record and its copy of another's
        self.parallelism: dict[str, int] | None = None
        self._ready_sent = False
        # A sharded spare's first command (recv_state, or resume from a checkpoint), taken in
        # device_mesh() before it built the model; run.steps() carries it out.
        self._first_command: dict | None = None
        self._abort = threading.Event()
        self._pause_requested = False
        self._stalled = False
        self._buffer_poisoned = False
        self._stepped = False
        self._step_began = 0.0
        self._recompute_ms = 0.0
        # The generation of the group this process last resumed in, until it has told the
        # coordinator that it started its first step there (job.resumed waits for that).
        self._unannounced_generation: int | None = None
        self._commands: queue.Queue[dict] = queue.Queue()
        self._cancelled_transfers: set[str] = set()  # whose other side the coordinator saw die
        self.monitor = HealthMonitor.from_config(self.config.get("health", {}), self._alarm)
        threading.Thread(target=self._read_commands, daemon=True, name="yoco-reader").start()
        threading.Thread(target=self._heartbeat, daemon=True, name="yoco-heartbeat").start()
        self.monitor.start()

    # -- what the training script calls -------------------------------------------------------

    @property
    def rank(self) -> int:
        if self._rank is None:
            raise SpareHasNoRank(
                "this process is a standby spare: it has no rank until it takes one over, and "
                "then it receives that rank's RNG streams and registered data position (a "
                "DataLoader's sampler rank included). Check run.is_spare; a spare may build "
                "per-rank objects as any rank if they are registered (see docs/agent.md)"
            )
        return self._rank

    @rank.setter
    def rank(self, value: int) -> None:
        self._rank = value

    @property
    def is_spare(self) -> bool:
        """True on a standby spare that has not taken over a rank yet."""
        return self._rank is None

    def device_mesh(self, names: tuple[str, ...], shape: tuple[int, ...]):
        """A torch DeviceMesh over process groups that survive a rank being replaced
        (agent/groups.py): FSDP2 (`fully_shard(..., mesh=...)`) and DTensor work on it as on
        any mesh. `names` from "replicate", "shard", "tp"; the shape's product is the world
        size. A spare waits here until it is given a rank (its shard of the model depends on
        it), then builds like that rank: the model it builds afterwards is the rank's, and it
        loads that rank's state in run.steps()."""
        unknown = [n for n in names if n not in MESH_DIMENSIONS]
        misplaced = "replicate" in names[1:]  # replicas of a shard are world/replicas apart
        wrong_size = len(names) != len(shape) or math.prod(shape) != self.world_size
        if unknown or misplaced or wrong_size:
            raise RegistrationError(
                f"device_mesh({names}, {shape}): names from {sorted(MESH_DIMENSIONS)}, one per "
                f'dimension, "replicate" first if at all, and a shape whose product is the '
                f"world size ({self.world_size})"
            )
        if self._rank is None:
            self._await_rank()
        timeout = datetime.timedelta(seconds=self.config["collective_timeout_s"])
        self.layer = GroupLayer(self.store, timeout)
        self.layer.init_world(self.rank, self.world_size)
        self.registry.sharded = True
        # A shard with a replica (HSDP) has its live copy there: only shards without one are
        # mirrored to a buddy (agent/mirror.py), which costs every step.
        self.mirror = None if "replicate" in names else ShardMirror()
        self.parallelism = {MESH_DIMENSIONS[n]: size for n, size in zip(names, shape, strict=True)}
        return init_device_mesh(self.device.type, tuple(shape), mesh_dim_names=tuple(names))

    def _await_rank(self) -> None:
        """A spare of a sharded job: ready to be picked, it waits for the rank it takes over.
        The first command given to a picked spare names it: receive that rank's state (a live
        migration), or resume as that rank from a checkpoint (the fallback, agent/recovery.py)."""
        self._send_ready(0)
        while True:
            command = self._commands.get()
            if command["type"] in ("recv_state", "resume"):
                priority.restore_normal()
                self.rank = command["for_rank" if command["type"] == "recv_state" else "rank"]
                self._first_command = command
                return
            if command["type"] == "retire":
                self._retire()
            if command["type"] == "coordinator_lost":
                raise ChannelClosed("lost the yoco coordinator")

    def register(
        self,
        model=None,
        optimizer=None,
        scheduler=None,
        data=None,
        extras: dict | None = None,
        per_rank: dict | None = None,
    ) -> None:
        """Say what the training state is. `model`, `optimizer` and `scheduler` take one object
        or a list; `data` is the data position (state_dict/load_state_dict); `extras` are other
        replicated objects, `per_rank` other objects that differ between ranks. A `DataLoader`
        as `data` is iterated with `next_batch()` and moved with its workers' RNG streams."""
        self.registry.models += _as_list(model)
        self.registry.optimizers += _as_list(optimizer)
        self.registry.schedulers += _as_list(scheduler)
        if isinstance(data, DataLoader):
            data = LoaderPosition(data)
        if data is not None:
            self.registry.data = data
        self.registry.extras.update(extras or {})
        self.registry.per_rank.update(per_rank or {})

    def steps(self, total: int) -> Iterator[int]:
        """Yield the index of the next step to run until `total` steps are completed."""
        if self.registry.is_empty():
            message = (
                "nothing is registered: call run.register(model=..., optimizer=...) before "
                "run.steps(); the agent can only move state it knows about"
            )
            self.channel.send({"type": "fatal", "message": message})
            raise RegistrationError(message)
        state_bytes = self._state_bytes()
        if self.role == "spare":
            self._prepare_spare()
        if not self._ready_sent:
            self._send_ready(state_bytes)
        first, self._first_command = self._first_command, None
        self._await_coordinator(None, first)
        while True:
            while self.current_step < total:
                self._announce_start()
                self._stepped = False
                self._step_began = time.perf_counter()
                yield self.current_step
                if not self._stepped:
                    raise RuntimeError("call run.step() once in every iteration of run.steps()")
                if self._stalled:
                    self._await_coordinator("stalled")
                elif self.reducer.pause_agreed:
                    self._await_coordinator("paused")
                elif self._checkpoint_due():
                    self._checkpoint()
            self._announce_start()  # nothing left to run: "finished" is its first step
            if self._await_coordinator("finished") == "done":
                if isinstance(self.registry.data, LoaderPosition):
                    self.registry.data.close()  # its workers now, not at interpreter exit
                return

    def _send_ready(self, state_bytes: int) -> None:
        unprotected = getattr(self.registry.data, "unprotected", [])
        self.channel.send(
            {
                "type": "ready",
                "state_bytes": state_bytes,
                "protected": not unprotected,
                "unprotected": unprotected,
                "parallelism": self.parallelism,
            }
        )
        self._ready_sent = True

    def step(self) -> bool:
        """End the step: reduce gradients, apply the update, zero gradients. False when the
        step was abandoned because a peer failed; `steps()` then yields it again."""
        self._stepped = True
        broken = self.layer is not None and self.layer.failed  # one of FSDP2's collectives
        if broken or (self.mirror is not None and not self._exchange_mirror()):
            self._abandon_step()
            return False
        blob = encode_per_rank(self.registry.per_rank_state())
        reduced = self.reducer.all_reduce(
            self.group, self.rank, blob, self._pause_requested, self._abort
        )
        if not reduced:
            self._abandon_step()
            return False
        if self.mirror is not None:
            self.mirror.commit()
        self._apply_update()
        self._save_buffers()
        return True

    def _apply_update(self) -> None:
        """The optimizers and schedulers step on the gradients in place; the step is done."""
        for optimizer in self.registry.optimizers:
            optimizer.step()
        for scheduler in self.registry.schedulers:
            scheduler.step()
        self._zero_grads()
        self.current_step += 1

    def _exchange_mirror(self) -> bool:
        """A sharded rank's record to its buddy (agent/mirror.py): the gradient shards the
        update is about to apply, and every few steps its whole shard. False when the exchange
        failed (a peer died): the step is abandoned."""
        grads = [local_shards(p.grad) for p in self._params()]
        return self.mirror.exchange(
            self.group,
            self.rank,
            self.world_size,
            self.current_step,
            lambda: self.registry.transfer_state(self.current_step),
            grads,
            self._abort,
        )

    def _replay(self, grads_per_step: list) -> None:
        """Bring a shard from its mirror's snapshot to the first step not completed: the
        recorded updates applied again, as they were (no forward or backward)."""
        params = self._params()
        for grads in grads_per_step:
            for param, grad in zip(params, as_dtensors(grads, params), strict=True):
                param.grad = grad
            self._apply_update()

    def next_batch(self):
        """The next batch of the DataLoader registered as `data`; epoch after epoch, calling its
        sampler's `set_epoch` at the start of each, as DDP scripts do."""
        if not isinstance(self.registry.data, LoaderPosition):
            raise RegistrationError("next_batch() needs a DataLoader registered as data=")
        return self.registry.data.next_batch()

    @contextlib.contextmanager
    def accumulate(self):
        """Gradient accumulation, DDP's `no_sync()`: run every backward of a step but the last
        inside this block; the gradients add up locally and are reduced once, by the last."""
        reducer = self.reducer
        if reducer is None:
            yield
            return
        reducer.overlap = False
        try:
            yield
        finally:
            reducer.overlap = True

    def _prepare_spare(self) -> None:
        """While it waits, a spare allocates (and touches) everything the state it will receive
        lives in: the gradient buffer, and the optimizers' state, by a step with zero gradients
        and a zero learning rate. The state then streams straight into these tensors, and
        recovery allocates nothing. The values do not matter: every tensor is overwritten."""
        self.reducer = self._new_reducer(64 * 1024)
        if self.registry.sharded:  # no gradient buffer binds them: zero shards of gradients
            for param in self._params():
                param.grad = torch.zeros_like(param)
        for optimizer in self.registry.optimizers:
            if optimizer.state:
                continue
            saved = [group.get("lr") for group in optimizer.param_groups]
            try:
                for group in optimizer.param_groups:
                    if isinstance(group.get("lr"), float | int):
                        group["lr"] = 0.0
                with torch.no_grad():
                    optimizer.step()
            except Exception:  # noqa: BLE001 - e.g. an optimizer needing a closure: skip
                optimizer.state.clear()
            finally:
                for group, lr in zip(optimizer.param_groups, saved, strict=True):
                    if lr is not None:
                        group["lr"] = lr
        self._zero_grads()

    def _params(self) -> list[torch.nn.Parameter]:
        return [p for m in self.registry.models for p in m.parameters()]

    def _zero_grads(self) -> None:
        """A sharded model's gradients are FSDP2's (reduce-scattered in backward), zeroed by the
        optimizers; anyone else's are views of the reducer's flat buffer."""
        if self.registry.sharded:
            for optimizer in self.registry.optimizers:
                optimizer.zero_grad(set_to_none=True)
        else:
            self.reducer.zero_grads()

    # -- failure handling ---------------------------------------------------------------------

    def _new_reducer(self, slot_bytes: int) -> FlatReducer:
        """For a sharded model FSDP2 reduces the gradients and each rank keeps its own buffers:
        the reducer then carries only the step's tail (pause flags, per-rank mirror)."""
        if self.registry.sharded:
            return FlatReducer([], self.world_size, slot_bytes)
        params = self._params()
        buffers = [b for m in self.registry.models for b in m.buffers()]
        reducer = FlatReducer(params, self.world_size, slot_bytes, buffers=buffers)
        reducer.abort = self._abort
        return reducer

    def _save_buffers(self) -> None:
        """Keep the models' buffers as of the last completed step: a forward changes them
        (BatchNorm statistics) before its step is known to complete."""
        buffers = [b for m in self.registry.models for b in m.buffers()]
        if len(self._saved_buffers) != len(buffers):
            self._saved_buffers = [b.detach().clone() for b in buffers]
            return
        for saved, buffer in zip(self._saved_buffers, buffers, strict=True):
            saved.copy_(buffer)

    def _restore_buffers(self) -> None:
        buffers = [b for m in self.registry.models for b in m.buffers()]
        with torch.no_grad():
            for saved, buffer in zip(self._saved_buffers, buffers, strict=False):
                buffer.copy_(saved)

    def _abandon_step(self) -> None:
        if self.mirror is not None:
            self.mirror.drop()
        if self.registry.sharded:
            self._zero_grads()  # FSDP2 would add the redone step's gradients to them
        self._restore_buffers()
        self._stalled = True
        self._recompute_ms = (time.perf_counter() - self._step_began) * 1000
        self._buffer_poisoned = True
        self._abort_group()

    def _abort_group(self) -> None:
        """Unblock anything still waiting on the broken group; its threads may still touch the
        old gradient buffer, which is why the reducer gets a fresh one on resume."""
        if self.group is not None:
            try:
                self.group.abort()
            except RuntimeError:
                pass
        if self.layer is not None:
            self.layer.abort()

    def _await_coordinator(self, report: str | None, first: dict | None = None) -> str:
        """Tell the coordinator where this process stands and follow its commands, `first` (one
        already taken) before the others, until it says to resume (train on) or that the job is
        done."""
        if report is not None:
            self._report(report)
        while True:
            command, first = first or self._commands.get(), None
            kind = command["type"]
            if self.role == "spare" and kind in ("recv_state", "resume"):
                # Becoming a rank: a spare waited at a lower CPU priority (agent/priority.py).
                priority.restore_normal()
            if kind == "send_state":
                self._send_state(command)
            elif kind == "recv_state":
                self._recv_state(command)
            elif kind == "resume":
                if self._resume(command):
                    return "resume"
                self._report("stalled")
            elif kind == "done":
                return "done"
            elif kind == "retire":
                self._retire()
            elif kind == "coordinator_lost":
                raise ChannelClosed("lost the yoco coordinator")

    def _announce_start(self, steps_rerun: int = 0) -> None:
        """Tell the coordinator, once per generation, that this process starts the first step
        after a resume; `steps_rerun`: completed steps whose compute it ran again to get here."""
        if self._unannounced_generation is None:
            return
        self.channel.send(
            {
                "type": "started",
                "generation": self._unannounced_generation,
                "step": self.current_step,
                "steps_rerun": steps_rerun,
            }
        )
        self._unannounced_generation = None

    def _report(self, report: str) -> None:
        self.channel.send(
            {
                "type": report,
                "step": self.current_step,
                "recompute_ms": self._recompute_ms if report == "stalled" else 0,
                "state_bytes": self._state_bytes(),
            }
        )

    def _send_state(self, command: dict) -> None:
        started = time.perf_counter()
        try:
            group = self._pair_group(command, 0)
            per_rank = _bytes_tensor(self.reducer.mirror_of(command["for_rank"]))
            if command.get("mirror"):  # the buddy's copy of the failed rank's shard
                state = {"mirror": self.mirror.copy_held(), "per_rank": per_rank}
            else:
                state = {
                    "replicated": self.registry.transfer_state(self.current_step),
                    "per_rank": per_rank,
                }
            nbytes = send_state(group, state)
            # After the send: the target hashes what it loaded meanwhile (state.digest).
            reply = {"ok": True, "bytes": nbytes, "digest": digest(state)}
        except Exception as error:  # noqa: BLE001 - any failure is reported, the process lives
            reply = {"ok": False, "error": error_text(error)}
        reply["duration_ms"] = (time.perf_counter() - started) * 1000
        self.channel.send({"type": "sent", "transfer": command["transfer"], **reply})

    @staticmethod
    def _store_client(address: str) -> dist.TCPStore:
        host, port = split_address(address)
        return dist.TCPStore(host, port, is_master=False, timeout=datetime.timedelta(seconds=30))

    def _pair_group(self, command: dict, rank: int) -> dist.ProcessGroup:
        """The transfer's group of two (0 sends); given up once the coordinator cancels it. On
        a store connection of its own: a cancelled transfer's rendezvous may still hold its
        connection blocked in a wait, which would stall every later request on it."""
        transfer = command["transfer"]
        return pair_group(
            self._store_client(self.store_address),
            transfer,
            rank,
            self.config["transfer_timeout_s"],
            lambda: transfer in self._cancelled_transfers,
        )

    def _recv_state(self, command: dict) -> None:
        started = time.perf_counter()
        try:
            group = self._pair_group(command, 1)
            own = self.registry.transfer_state(self.current_step)
            if command.get("mirror"):
                received = recv_state(group, {"mirror": {"snapshot": own}})
                # Before the replay below updates the received shards in place.
                moved = digest(received.state)
                copy = received.state["mirror"]
                self.current_step = self.registry.load_transfer_state(copy["snapshot"])
                self._replay(copy["grads"])
            else:
                received = recv_state(group, {"replicated": own})
                self.current_step = self.registry.load_transfer_state(received.state["replicated"])
                moved = digest(received.state)
            per_rank = received.state["per_rank"].numpy().tobytes()
            self.registry.load_per_rank_state(decode_per_rank(per_rank))
            reply = {"ok": True, "bytes": received.nbytes, "digest": moved}
        except Exception as error:  # noqa: BLE001 - any failure is reported, the process lives
            reply = {"ok": False, "error": error_text(error)}
        reply["duration_ms"] = (time.perf_counter() - started) * 1000
        self.channel.send({"type": "loaded", "transfer": command["transfer"], **reply})

    def _resume(self, command: dict) -> bool:
        """Join the next generation of the process group as `rank` and continue at `step`.
        False when a peer failed before the new group could exchange the mirror."""
        self._abort_group()
        self.rank = command["rank"]
        self.world_size = command["world_size"]
        self.role = "worker"
        restore = command["restore"]
        if restore == "checkpoint":
            root = Path(self.config["checkpoint_dir"])
            step = command["step"]
            state = checkpoint.load_state(root, step, shard=self._checkpoint_shard())
            self.current_step = self.registry.load_transfer_state(state)
            self.registry.load_per_rank_state(checkpoint.load_per_rank(root, step, self.rank))
        elif restore == "own":
            # Redo the abandoned step exactly: RNG and data position as they were at its start,
            # which is this rank's own slot of the mirror from the last completed all-reduce.
            self.registry.load_per_rank_state(decode_per_rank(self.reducer.mirror_of(self.rank)))
        self.group = self._form_group(command["generation"], command["backend"])
        if self.layer is not None:
            self.layer.form(command["generation"])
        if self.mirror is not None:
            self.mirror.reset(command["buddy_shift"])
        if self.reducer is None:
            self.reducer = self._new_reducer(command["slot_bytes"])
        else:
            if self._buffer_poisoned:
                # Reuse the gradient buffer once the broken group's collectives have ended
                # (no allocation, no re-bind); a fresh one only if they will not end.
                if self.reducer.settle():
                    self.reducer.zero_grads()
                else:
                    self.reducer.replace_buffer()
            self.reducer.configure(self.world_size, command["slot_bytes"])
        self.reducer.group = self.group
        self._buffer_poisoned = False
        self._stalled = False
        self._pause_requested = False
        self.reducer.pause_agreed = False
        self._abort.clear()
        blob = encode_per_rank(self.registry.per_rank_state())
        if not self.reducer.exchange_per_rank(self.group, self.rank, blob, self._abort):
            self._abandon_step()
            return False
        # A sharded model starts from what each rank built (the same seed on every rank).
        sync = restore == "none" and not self.registry.sharded
        if sync and not self._sync_from_rank0():
            self._abandon_step()
            return False
        self._save_buffers()
        self.channel.send({"type": "resumed", "step": self.current_step})
        self._unannounced_generation = command["generation"]
        return True

    def _sync_from_rank0(self) -> bool:
        """What DDP's constructor does: every rank starts from rank 0's parameters and buffers
        (ranks seeded differently, e.g. `1337 + rank`, build different initial weights); the
        replicated extras (an EMA copy of those weights) too."""

        def floats(state) -> list[torch.Tensor]:
            return [t for t in flatten(state)[1] if t.is_floating_point()]

        extras = {name: obj.state_dict() for name, obj in self.registry.extras.items()}
        extras = {name: state for name, state in extras.items() if floats(state)}
        states = [m.state_dict() for m in self.registry.models] + list(extras.values())
        tensors = [t for state in states for t in floats(state)]
        if not self.reducer.broadcast_from_rank0(self.group, tensors, self._abort):
            return False
        for name, state in extras.items():  # a state_dict may hold copies: load it back
            self.registry.extras[name].load_state_dict(state)
        return True

    def _form_group(self, generation: int, backend: str) -> dist.ProcessGroup:
        """`backend`: the coordinator's choice (devices.group_backend): NCCL only when every
        rank has a GPU of its own."""
        store = dist.PrefixStore(f"pg/{generation}/", self.store)
        timeout = datetime.timedelta(seconds=self.config["collective_timeout_s"])
        if backend == "nccl":
            options = dist.ProcessGroupNCCL.Options()
            options._timeout = timeout
            return dist.ProcessGroupNCCL(store, self.rank, self.world_size, options)
        return dist.ProcessGroupGloo(store, self.rank, self.world_size, timeout)

    def _retire(self) -> None:
        """A replaced worker or an unused spare: leave without running the rest of the script."""
        self.monitor.stop()
        sys.stdout.flush()
        sys.stderr.flush()
        self.channel.close()
        os._exit(0)

    # -- periodic checkpoints -----------------------------------------------------------------

    def _checkpoint_due(self) -> bool:
        every = self.config.get("checkpoint_every", 0)
        return bool(every) and self.current_step % every == 0

    def _checkpoint(self) -> None:
        root = Path(self.config["checkpoint_dir"])
        step = self.current_step
        checkpoint.save_per_rank(root, step, self.rank, self.registry.per_rank_state())
        shard = self._checkpoint_shard()
        if shard is not None or self.rank == 0:
            checkpoint.save_state(root, step, self.registry.transfer_state(step), shard=shard)
        if not self.reducer.barrier(self.group, self._abort):
            self._abandon_step()
            self._await_coordinator("stalled")
            return
        if self.rank == 0:
            checkpoint.mark_complete(root, step, keep=self.config.get("checkpoint_keep", 2))

    def _checkpoint_shard(self) -> int | None:
        """Whose shards of the model state this rank checkpoints and restores: its own in a
        sharded job (every rank writes them); None, the replicated state, which rank 0 writes,
        in any other."""
        return self.rank if self.registry.sharded else None

    # -- background threads -------------------------------------------------------------------

    def _read_commands(self) -> None:
        while True:
            try:
                command = self.channel.receive()
            except ChannelClosed:
                # Without its coordinator nothing can protect this job; stop rather than train on
                # unprotected (the launcher's process group ends the others the same way).
                print("yoco agent: lost the coordinator; exiting", file=sys.stderr, flush=True)
                os._exit(3)
            kind = command["type"]
            if kind == "abort":
                self._abort.set()
                if self.layer is not None:  # unblock FSDP2's collectives too
                    self.layer.abort()
            elif kind == "pause":
                self._pause_requested = True
            elif kind == "inject":
                self.monitor.inject(command["fault"])
            elif kind == "cancel_transfer":  # while _send_state or _recv_state waits for a peer
                self._cancelled_transfers.add(command["transfer"])
            else:
                self._commands.put(command)

    def _heartbeat(self) -> None:
        interval = self.config["heartbeat_interval_s"]
        while True:
            try:
                self.channel.send({"type": "heartbeat", "step": self.current_step})
            except ChannelClosed:
                return
            time.sleep(interval)

    def _alarm(self, alarm: dict) -> None:
        self.channel.send({"type": "alarm", **alarm})

    def _state_bytes(self) -> int:
        state = self.registry.transfer_state(self.current_step)
        return sum(t.numel() * t.element_size() for t in flatten(state)[1])


def _as_list(value) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


def _bytes_tensor(blob: bytes) -> torch.Tensor:
    return torch.frombuffer(bytearray(blob), dtype=torch.uint8)
