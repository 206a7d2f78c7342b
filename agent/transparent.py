"""Model-transparent mode: protect a training script that knows nothing of the agent.

    yoco-agent run --transparent --workers 4 --spares 2 -- python train.py --epochs 3

The launcher runs `python -m agent.transparent train.py ...` instead of `python train.py ...`.
Before the script starts, this module joins the job (`runtime.attach`, as a model-aware script
would) and patches a few torch entry points:

* `torch.distributed.init_process_group` initialises a *fake* process group of the rank and
  world size the coordinator assigned (`get_rank`, `get_world_size`, `DistributedSampler`,
  `DistributedDataParallel` all work), so nothing the script does talks to the network itself.
* `DistributedDataParallel` gets a comm hook. DDP's own reduction depends on its bucket layout,
  which it rebuilds after the first iteration of every instance (a spare's DDP would sum in a
  different order than the rank it replaces). The hook instead gathers every bucket of the
  iteration and, at the last one, reduces all gradients (and the DDP modules' float buffers,
  averaged, as DDP keeps them in sync) in one flat buffer whose layout is fixed by parameter
  registration order: the agent's `FlatReducer`, with its pause flags and per-rank mirror. That
  moment, the end of a step's backward, is the *step boundary*.
* Constructors of `nn.Module`, optimizers, LR schedulers, `GradScaler`, `DataLoader` and its
  iterators record each object in creation order, so the agent can find the training state
  itself, in the same order in every process.

At the first step boundary the agent collects that state (top-level modules, optimizers,
schedulers, scalers; RNG streams and data-loader positions as per-rank state) into the same
`Registry` model-aware mode uses, scans the script's globals and the locals of its frames for
state it cannot capture (instances of the script's own classes holding tensors, iterators it
cannot position) and reports them: a warning naming them, and `protected: false` with the names
in the job's `job.started` event.

Migration reuses the model-aware machinery (coordinator, transport, mirror) unchanged. What
differs is how a process rejoins the script's control flow, which the agent cannot jump into:

* A *survivor* (unplanned) or a *staying worker* (planned / pre-emptive) sits at a step
  boundary with its step's local gradients; after the group re-forms it simply runs that
  step's reduction again. Its state never needs restoring.
* A *spare* runs the script from the start as its new rank, *replaying* the steps before the
  resume step R without any communication (its updates are thrown away), checks at the
  boundary of step R-1 that its per-rank state (RNG, data position) matches the mirror copy it
  received (restoring it there if not), and loads the received model / optimizer / scheduler /
  scaler state just before the forward of step R. From step R on it is that rank.
"""

from __future__ import annotations

import functools
import io
import itertools
import os
import runpy
import sys
import time
import types
import weakref

import torch
import torch.distributed as dist
from torch import nn

from agent.protocol import ChannelClosed, error_text
from agent.reducer import FlatReducer
from agent.runtime import Run, _bytes_tensor, attach
from agent.state import Registry, decode_per_rank, encode_per_rank
from agent.transport import pair_group, recv_state, send_state

_RUN: TransparentRun | None = None


# -- what the script creates, in creation order ---------------------------------------------------


class _Tracker:
    def __init__(self):
        self.kinds: dict[str, list[weakref.ref]] = {
            k: [] for k in ("modules", "optimizers", "schedulers", "scalers", "loaders", "ddps")
        }

    def add(self, kind: str, obj) -> None:
        try:
            self.kinds[kind].append(weakref.ref(obj))
        except TypeError:
            pass

    def live(self, kind: str) -> list:
        out, seen = [], set()
        for ref in self.kinds[kind]:
            obj = ref()
            if obj is not None and id(obj) not in seen:
                seen.add(id(obj))
                out.append(obj)
        return out


TRACKER = _Tracker()


def _record_init(cls, kind: str) -> None:
    original = cls.__init__
    if getattr(original, "_yoco_wrapped", False):
        return

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        TRACKER.add(kind, self)
        original(self, *args, **kwargs)

    __init__._yoco_wrapped = True
    cls.__init__ = __init__


def install_patches() -> None:
    """Patch torch so that the agent sees what the script builds. Idempotent."""
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader
    from torch.utils.data.dataloader import _BaseDataLoaderIter

    _record_init(nn.Module, "modules")
    _record_init(torch.optim.Optimizer, "optimizers")
    _record_init(torch.optim.lr_scheduler.LRScheduler, "schedulers")
    _record_init(torch.amp.GradScaler, "scalers")
    _record_init(DataLoader, "loaders")

    original_iter = _BaseDataLoaderIter.__init__
    if not getattr(original_iter, "_yoco_wrapped", False):

        @functools.wraps(original_iter)
        def iter_init(self, loader, *args, **kwargs):
            original_iter(self, loader, *args, **kwargs)
            loader._yoco_iterators = getattr(loader, "_yoco_iterators", 0) + 1
            loader._yoco_iterator = weakref.ref(self)

        iter_init._yoco_wrapped = True
        _BaseDataLoaderIter.__init__ = iter_init

    original_ddp = DistributedDataParallel.__init__
    if not getattr(original_ddp, "_yoco_wrapped", False):

        @functools.wraps(original_ddp)
        def ddp_init(self, *args, **kwargs):
            original_ddp(self, *args, **kwargs)
            TRACKER.add("ddps", self)
            self.register_comm_hook(None, _comm_hook)
            self.register_forward_pre_hook(_ddp_forward_pre_hook)

        ddp_init._yoco_wrapped = True
        DistributedDataParallel.__init__ = ddp_init

    if not getattr(dist.init_process_group, "_yoco_wrapped", False):
        original_init = dist.init_process_group

        @functools.wraps(original_init)
        def init_process_group(*args, **kwargs):
            from torch.testing._internal.distributed.fake_pg import FakeStore

            # The script's own group is a fake one: gradients are reduced by the agent's group
            # (the comm hook), which survives migrations; anything else is a local no-op.
            original_init(
                backend="fake", store=FakeStore(), rank=_RUN.rank, world_size=_RUN.world_size
            )

        init_process_group._yoco_wrapped = True
        dist.init_process_group = init_process_group
        dist.distributed_c10d.init_process_group = init_process_group


def _ddp_forward_pre_hook(module, _args):
    if _RUN is not None:
        _RUN.snapshot_buffers(module)


def _comm_hook(_state, bucket):  # no annotation: DDP checks it, and ours would be a string
    future: torch.futures.Future = torch.futures.Future()
    _RUN.bucket_ready(bucket, future)
    return future


# -- the per-rank data position -------------------------------------------------------------------


class DataPositions:
    """Position of every DataLoader: iterators created (epochs), batches yielded by the current
    one, and its sampler's epoch. A spare re-creates it by replaying the script; this checks."""

    def state_dict(self) -> dict:
        positions = []
        for loader in TRACKER.live("loaders"):
            ref = getattr(loader, "_yoco_iterator", None)
            iterator = ref() if ref is not None else None
            positions.append(
                {
                    "iterators": getattr(loader, "_yoco_iterators", 0),
                    "yielded": getattr(iterator, "_num_yielded", 0),
                    "sampler_epoch": getattr(getattr(loader, "sampler", None), "epoch", None),
                }
            )
        return {"loaders": positions}

    def load_state_dict(self, state: dict) -> None:
        mine = self.state_dict()
        if mine != state:
            print(
                f"yoco agent: WARNING data position after replay {mine['loaders']} differs from "
                f"the failed rank's {state['loaders']}; the data pipeline is not deterministic",
                file=sys.stderr,
                flush=True,
            )


# -- finding the state ----------------------------------------------------------------------------

_KNOWN = (
    nn.Module,
    torch.optim.Optimizer,
    torch.optim.lr_scheduler.LRScheduler,
    torch.amp.GradScaler,
    torch.utils.data.DataLoader,
    torch.utils.data.Dataset,
    torch.utils.data.Sampler,
    torch.Tensor,
)
_NOT_STATE = (
    type,
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    functools.partial,
    io.IOBase,
)


def _holds_tensors(obj, depth: int = 0) -> bool:
    if isinstance(obj, torch.Tensor):
        return True
    if depth > 2:
        return False
    if isinstance(obj, dict):
        return any(_holds_tensors(v, depth + 1) for v in obj.values())
    if isinstance(obj, list | tuple | set):
        return any(_holds_tensors(v, depth + 1) for v in obj)
    if hasattr(obj, "__dict__") and depth == 0:
        return any(_holds_tensors(v, depth + 1) for v in vars(obj).values())
    return False


def _counters(obj) -> dict:
    """The plain numbers an object holds, to see whether they change between steps."""
    values = getattr(obj, "__dict__", {})
    return {
        k: v for k, v in values.items() if isinstance(v, int | float) and not isinstance(v, bool)
    }


def _is_user_class(cls, script_dir: str) -> bool:
    if cls.__module__ == "__main__":
        return True
    module = sys.modules.get(cls.__module__)
    path = getattr(module, "__file__", None) or ""
    return path.startswith(script_dir) and "site-packages" not in path


def _is_unpositionable_iterator(obj) -> bool:
    from torch.utils.data.dataloader import _BaseDataLoaderIter

    if isinstance(obj, _BaseDataLoaderIter | io.IOBase):
        return False
    return isinstance(obj, types.GeneratorType | itertools.cycle) or (
        hasattr(type(obj), "__next__") and hasattr(type(obj), "__iter__")
    )


def scan_script_objects(script: str, frame) -> dict[str, object]:
    """Name -> object for the script's globals and the locals of its frames on the stack."""
    found: dict[str, object] = {}
    main = sys.modules.get("__main__")
    if main is not None:
        found.update({k: v for k, v in vars(main).items() if not k.startswith("__")})
    while frame is not None:
        if os.path.abspath(frame.f_code.co_filename) == script:
            for name, value in frame.f_locals.items():
                found.setdefault(name, value)
        frame = frame.f_back
    return found


def classify(objects: dict[str, object], script: str):
    """(capturable user objects by name, unprotected names, counters to watch by name)."""
    script_dir = os.path.dirname(script)
    extras, unprotected, watch = {}, [], {}
    seen = set()
    for name, obj in objects.items():
        if id(obj) in seen or isinstance(obj, _KNOWN + _NOT_STATE) or obj is _RUN:
            continue
        seen.add(id(obj))
        kind = type(obj).__name__
        if _is_unpositionable_iterator(obj):
            unprotected.append(f"{name} ({kind}: an iterator the agent cannot position)")
            continue
        if not _is_user_class(type(obj), script_dir):
            continue
        if hasattr(obj, "state_dict") and hasattr(obj, "load_state_dict"):
            extras[f"user:{name}"] = obj
        elif _holds_tensors(obj):
            unprotected.append(f"{name} ({kind}: holds tensors but has no state_dict)")
        elif _counters(obj):
            watch[name] = obj
    return extras, unprotected, watch


# -- the run --------------------------------------------------------------------------------------


class TransparentRun(Run):
    """A Run driven from step boundaries inside an unmodified script (see the module doc)."""

    def __init__(self, channel, welcome):
        super().__init__(channel, welcome)
        self.script = ""
        self.registry = Registry(data=DataPositions())
        self.started = False  # has joined a process group generation
        self.loaded = True  # False on a spare until the received state is loaded
        self.pending: dict | None = None  # a spare's received replicated state
        self.pending_slot: bytes | None = None  # ... and its per-rank mirror slot
        self.total_numel = 0
        self.boundaries = 0  # step boundaries this process has passed (replayed or real)
        self.offsets: dict[int, tuple[int, int]] = {}  # param data_ptr -> (offset, numel)
        self.buffers: list[torch.Tensor] = []
        self.grad_numel = 0
        self.unprotected: list[str] = []
        self._watch: dict[str, tuple[object, dict]] = {}
        self._buckets: list[tuple] = []
        self._load_hook = None
        # Buffers (BatchNorm statistics) as they were at the start of the current step: a
        # forward changes them before the step boundary, so a replica sends these instead.
        self._step_buffers: dict[int, torch.Tensor] | None = None

    # -- discovery ------------------------------------------------------------------------------

    def discover(self) -> None:
        from torch.nn.parallel import DistributedDataParallel

        ddps = TRACKER.live("ddps")
        modules = [
            m
            for m in TRACKER.live("modules")
            if not isinstance(m, DistributedDataParallel)
            and (next(m.parameters(), None) is not None or next(m.buffers(), None) is not None)
        ]
        children = {id(c) for m in modules for c in m.modules() if c is not m}
        self.registry.models = [m for m in modules if id(m) not in children]
        self.registry.optimizers = TRACKER.live("optimizers")
        self.registry.schedulers = TRACKER.live("schedulers")
        extras = {f"scaler{i}": s for i, s in enumerate(TRACKER.live("scalers"))}
        objects = scan_script_objects(self.script, sys._getframe())
        user, unprotected, watch = classify(objects, self.script)
        extras.update(user)
        self.registry.extras = extras
        self.unprotected = unprotected
        self._watch = {name: (obj, dict(_counters(obj))) for name, obj in watch.items()}
        if unprotected:
            print(
                "yoco agent: WARNING transparent mode cannot capture: "
                + "; ".join(unprotected)
                + ". A migration will not carry this state (give it state_dict/load_state_dict,"
                " or use model-aware mode)",
                file=sys.stderr,
                flush=True,
            )
        # The fixed reduction layout: every trainable parameter in registration order, then
        # the float32 buffers of the DDP-wrapped modules (kept in sync, as DDP does).
        params, seen = [], set()
        for model in self.registry.models:
            for p in model.parameters():
                if p.requires_grad and id(p) not in seen:
                    seen.add(id(p))
                    params.append(p)
        offset = 0
        self.offsets = {}
        for p in params:
            self.offsets[p.data_ptr()] = (offset, p.numel())
            offset += p.numel()
        self.grad_numel = offset
        self.buffers = [b for d in ddps for b in d.module.buffers() if b.dtype == torch.float32]
        self.total_numel = offset + sum(b.numel() for b in self.buffers)

    def _check_watched(self) -> None:
        for name, (obj, before) in list(self._watch.items()):
            if _counters(obj) != before:
                print(
                    f"yoco agent: WARNING {name} ({type(obj).__name__}) changes between steps "
                    "and has no state_dict: a migration will not carry it",
                    file=sys.stderr,
                    flush=True,
                )
                del self._watch[name]

    # -- the step boundary ----------------------------------------------------------------------

    def bucket_ready(self, bucket, future) -> None:
        self._buckets.append(
            (bucket.buffer(), list(bucket.parameters()), list(bucket.gradients()), future)
        )
        if not bucket.is_last():
            return
        buckets, self._buckets = self._buckets, []
        try:
            self.boundary(buckets)
        except BaseException as error:
            for _, _, _, fut in buckets:
                fut.set_exception(error)
            raise
        for buffer, _, _, fut in buckets:
            fut.set_result(buffer)

    def boundary(self, buckets: list[tuple]) -> None:
        index = self.boundaries
        self.boundaries += 1
        if not self.loaded:  # a spare replaying the steps before its resume step
            if self._abort.is_set():
                self._await_coordinator("stalled")
            if index == self.current_step - 1:
                self._check_per_rank()
                self._arm_load()
            return
        if not self.started:
            self._first_boundary()
        self._check_watched()
        while True:
            if self.reducer.pause_agreed:
                self._await_coordinator("paused")
                continue
            if self._abort.is_set():
                self._abandon_step()
                self._await_coordinator("stalled")
                continue
            self._fill(buckets)
            blob = encode_per_rank(self.registry.per_rank_state())
            if self.reducer.all_reduce(
                self.group, self.rank, blob, self._pause_requested, self._abort
            ):
                break
            self._abandon_step()
            self._await_coordinator("stalled")
        self._unfill(buckets)
        self._step_buffers = None  # the next forward takes a fresh snapshot
        self.current_step += 1
        self._step_began = time.perf_counter()

    def snapshot_buffers(self, ddp_module) -> None:
        if self._step_buffers is None and self.loaded:
            self._step_buffers = {
                b.data_ptr(): b.detach().clone() for b in ddp_module.module.buffers()
            }

    def _replicated_state(self) -> dict:
        state = self.registry.replicated_state(self.current_step)
        for model_state in state["models"]:
            for name, tensor in model_state.items():
                saved = (self._step_buffers or {}).get(tensor.data_ptr())
                if saved is not None:
                    model_state[name] = saved
        return state

    def _fill(self, buckets) -> None:
        grads = self.reducer.grads
        grads.zero_()
        for _, params, gradients, _ in buckets:
            for p, g in zip(params, gradients, strict=True):
                offset, n = self.offsets[p.data_ptr()]
                grads[offset : offset + n].copy_(g.reshape(-1))
        offset = self.grad_numel
        for b in self.buffers:
            grads[offset : offset + b.numel()].copy_(b.reshape(-1))
            offset += b.numel()

    def _unfill(self, buckets) -> None:
        grads = self.reducer.grads
        for _, params, gradients, _ in buckets:
            for p, g in zip(params, gradients, strict=True):
                offset, n = self.offsets[p.data_ptr()]
                g.copy_(grads[offset : offset + n].view_as(g))
        offset = self.grad_numel
        with torch.no_grad():
            for b in self.buffers:
                b.copy_(grads[offset : offset + b.numel()].view_as(b))
                offset += b.numel()

    def _first_boundary(self) -> None:
        self.discover()
        self.channel.send(
            {
                "type": "ready",
                "state_bytes": self._state_bytes(),
                "mode": "transparent",
                "protected": not self.unprotected,
                "unprotected": self.unprotected,
            }
        )
        self._await_coordinator(None)

    # -- a spare ------------------------------------------------------------------------------

    def park(self) -> None:
        """A spare waits here, before the script starts, until it is given a rank."""
        self.loaded = False
        self.channel.send({"type": "ready", "state_bytes": 0})
        self._await_coordinator(None)
        if self.current_step == 0:
            self._arm_load()

    def _check_per_rank(self) -> None:
        """At the boundary of step R-1 the replayed per-rank state must equal the failed rank's
        mirror copy, taken at the same point; restore the copy where it does not."""
        theirs = decode_per_rank(self.pending_slot)
        if not _same(self.registry.per_rank_state(), theirs):
            print(
                "yoco agent: replayed RNG / data state differs from the mirror; restoring it",
                file=sys.stderr,
                flush=True,
            )
            self.registry.load_per_rank_state(theirs)

    def _arm_load(self) -> None:
        """Load the received state just before the next forward: after the script applied
        (and thrown away) its own update of the replayed step R-1."""
        from torch.nn.modules.module import register_module_forward_pre_hook

        def load(_module, _args):
            self._load_hook.remove()
            self._load_hook = None
            self.discover()
            self.registry.load_replicated_state(self.pending)
            self.pending = None
            self.loaded = True
            self._step_began = time.perf_counter()
            self._announce_start(steps_rerun=self.boundaries)  # every boundary was replayed

        self._load_hook = register_module_forward_pre_hook(load)

    # -- Run's migration hooks, transparent flavour ---------------------------------------------

    def _send_state(self, command: dict) -> None:
        started = time.perf_counter()
        try:
            group = pair_group(
                self.store, command["transfer"], 0, self.config["transfer_timeout_s"]
            )
            replicated = self._replicated_state() if self.loaded else self.pending
            state = {
                "replicated": replicated,
                "per_rank": _bytes_tensor(self.reducer.mirror_of(command["for_rank"])),
                "numel": self.total_numel,
            }
            reply = {"ok": True, "bytes": send_state(group, state)}
        except Exception as error:  # noqa: BLE001 - any failure is reported, the process lives
            reply = {"ok": False, "error": error_text(error)}
        reply["duration_ms"] = (time.perf_counter() - started) * 1000
        self.channel.send({"type": "sent", "transfer": command["transfer"], **reply})

    def _recv_state(self, command: dict) -> None:
        started = time.perf_counter()
        try:
            if self.started:
                raise RuntimeError(
                    "transparent mode cannot bring a live worker forward to a step its peers "
                    "completed (a rank died inside the all-reduce with 3+ workers)"
                )
            group = pair_group(
                self.store, command["transfer"], 1, self.config["transfer_timeout_s"]
            )
            received = recv_state(group, None)
            self.pending = received.state["replicated"]
            self.pending_slot = received.state["per_rank"].numpy().tobytes()
            self.total_numel = int(received.state["numel"])
            self.current_step = int(self.pending["step"])
            reply = {"ok": True, "bytes": received.nbytes}
        except Exception as error:  # noqa: BLE001 - any failure is reported, the process lives
            reply = {"ok": False, "error": error_text(error)}
        reply["duration_ms"] = (time.perf_counter() - started) * 1000
        self.channel.send({"type": "loaded", "transfer": command["transfer"], **reply})

    def _resume(self, command: dict) -> bool:
        """Join the next generation of the group. Nobody restores anything: survivors and
        staying workers redo only their step's reduction; a spare replays (see the module doc).
        The mirror is refilled with every rank's state as of the start of the current step."""
        self._abort_group()
        if command["restore"] == "checkpoint":
            message = "transparent mode cannot roll back an unmodified script to a checkpoint"
            self.channel.send({"type": "fatal", "message": message})
            raise RuntimeError(message)
        first = not self.started
        self.rank = command["rank"]
        self.world_size = command["world_size"]
        self.role = "worker"
        self.group = self._form_group(command["generation"])
        if self.reducer is None or self.reducer.world_size != self.world_size:
            flat = nn.Parameter(torch.zeros(1).expand(self.total_numel))
            self.reducer = FlatReducer([flat], self.world_size, command["slot_bytes"])
            blob = self.pending_slot or encode_per_rank(self.registry.per_rank_state())
        else:
            blob = self.reducer.mirror_of(self.rank)
            if self._buffer_poisoned:
                self.reducer.replace_buffer()
        self._buffer_poisoned = False
        self._stalled = False
        self._pause_requested = False
        self.reducer.pause_agreed = False
        self._abort.clear()
        if not self.reducer.exchange_per_rank(self.group, self.rank, blob, self._abort):
            self._abandon_step()
            return False
        if first and command["restore"] == "none" and not self._sync_from_rank0():
            self._abandon_step()
            return False
        self.started = True
        self.channel.send({"type": "resumed", "step": self.current_step})
        self._unannounced_generation = command["generation"]
        if self.loaded:  # it goes on with its step now; a spare once it has replayed
            self._announce_start()
        return True

    def finish(self) -> None:
        """The script ended: wait until every rank has, serving migrations meanwhile."""
        if not self.started and self.loaded:
            message = "the script ended without a training step (no DistributedDataParallel step)"
            self.channel.send({"type": "fatal", "message": message})
            return
        # A spare that resumed after the last step replayed the whole script and starts nothing.
        self._announce_start(steps_rerun=0 if self.loaded else self.boundaries)
        while self._await_coordinator("finished") != "done":
            pass


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return (
            isinstance(b, list | tuple)
            and len(a) == len(b)
            and all(_same(x, y) for x, y in zip(a, b, strict=True))
        )
    if type(a).__name__ == "ndarray":
        import numpy

        return numpy.array_equal(a, b)
    return a == b


def main() -> None:
    global _RUN
    if len(sys.argv) < 2:
        print("usage: python -m agent.transparent SCRIPT [ARGS...]", file=sys.stderr)
        sys.exit(2)
    script = os.path.abspath(sys.argv[1])
    install_patches()
    run = attach(run_class=TransparentRun)
    run.script = script
    _RUN = run
    if run.role == "spare":
        run.park()
    os.environ.update(
        RANK=str(run.rank),
        WORLD_SIZE=str(run.world_size),
        LOCAL_RANK=str(torch.cuda.current_device() if torch.cuda.is_available() else 0),
        LOCAL_WORLD_SIZE=str(run.world_size),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT="0",
    )
    sys.argv = [script, *sys.argv[2:]]
    sys.path.insert(0, os.path.dirname(script))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as done:
        if done.code not in (None, 0):
            raise
    try:
        run.finish()
    except ChannelClosed:
        pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    # Run as `python -m agent.transparent`: use the importable module, so the patches, the hook
    # and the run live in one place (`agent.transparent`), not in a second copy named __main__.
    from agent.transparent import main as _main

    _main()
