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
  moment, the end of a step's backward, is the *step boundary*. A script without DDP that
  all-reduces gradients itself has its boundary at the next `optimizer.step()` (a global
  optimizer step pre-hook): the same reduction, over every registered parameter's `.grad`.
* Constructors of `nn.Module`, optimizers, LR schedulers, `GradScaler`, `DataLoader` and its
  iterators record each object in creation order, so the agent can find the training state
  itself, in the same order in every process; every module call from the script's own code
  goes through `TransparentRun.module_call` (output shapes recorded, or faked: catch-up).

At the first step boundary the agent collects that state (top-level modules, optimizers,
schedulers, scalers; RNG streams and data-loader positions as per-rank state) into the same
`Registry` model-aware mode uses, scans the script's globals and the locals of its frames for
state it cannot capture (instances of the script's own classes holding tensors, iterators it
cannot position) and reports them: a warning naming them, and `protected: false` with the names
in the job's `job.started` event. With `--checkpoint-every N` it saves that state as DCP at the
boundary of every N-th step.

Migration reuses the model-aware machinery (coordinator, transport, mirror) unchanged. What
differs is how a process rejoins the script's control flow, which the agent cannot jump into:

* A *survivor* (unplanned) or a *staying worker* (planned / pre-emptive) sits at a step
  boundary with its step's local gradients; after the group re-forms it simply runs that
  step's reduction again. Its state never needs restoring.
* A *spare* runs the script from the start as its new rank and *catches up* to the resume step
  R without the model's compute and without side effects (agent/catchup.py), takes the per-rank
  state (RNG, data position) of the rank it replaces from the mirror copy it received at the
  boundary of step R-1, and loads the received model / optimizer / scheduler / scaler state at
  the next module call. From step R on it is that rank. After a rollback every rank is such a
  process, catching up to the checkpoint's step.
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
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.utils import _pytree as pytree

from agent import catchup, checkpoint
from agent.catchup import SUPPRESSED, OutputShapes, propagate_on_meta
from agent.protocol import ChannelClosed, error_text
from agent.reducer import FlatReducer
from agent.runtime import Run, _bytes_tensor, attach
from agent.state import (
    Registry,
    decode_per_rank,
    digest,
    encode_per_rank,
    load_rng_state,
    rng_state,
)
from agent.transport import recv_state, send_state

_RUN: TransparentRun | None = None


# -- what the script creates, in creation order ---------------------------------------------------


class _Tracker:
    def __init__(self):
        self.kinds: dict[str, list[weakref.ref]] = {
            k: [] for k in ("modules", "optimizers", "schedulers", "scalers", "loaders", "ddps")
        }
        # Creation index of every object: the same object has the same index in every process
        # running the script (how a recorded module or loader is found in another process).
        self.index: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def add(self, kind: str, obj) -> None:
        try:
            self.kinds[kind].append(weakref.ref(obj))
            self.index.setdefault(obj, len(self.kinds[kind]) - 1)
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
    from torch.utils.data.dataloader import _BaseDataLoaderIter, _SingleProcessDataLoaderIter

    _record_init(nn.Module, "modules")
    _record_init(torch.optim.Optimizer, "optimizers")
    _record_init(torch.optim.lr_scheduler.LRScheduler, "schedulers")
    _record_init(torch.amp.GradScaler, "scalers")
    _record_init(DataLoader, "loaders")

    catchup.install_side_effect_guards()
    catchup.install_module_calls(_module_call)
    if not getattr(_optimizer_step_pre_hook, "_yoco_registered", False):
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        register_optimizer_step_pre_hook(_optimizer_step_pre_hook)
        _optimizer_step_pre_hook._yoco_registered = True

    original_iter = _BaseDataLoaderIter.__init__
    if not getattr(original_iter, "_yoco_wrapped", False):

        @functools.wraps(original_iter)
        def iter_init(self, loader, *args, **kwargs):
            if _RUN is not None:
                _RUN.position_sampler(loader)
            # The sampler draws its permutation from the torch RNG (now, or at the first batch):
            # with this a catching-up spare can reproduce the epoch (DataPositions).
            loader._yoco_rng = torch.get_rng_state()
            original_iter(self, loader, *args, **kwargs)
            loader._yoco_iterators = getattr(loader, "_yoco_iterators", 0) + 1
            loader._yoco_iterator = weakref.ref(self)

        iter_init._yoco_wrapped = True
        _BaseDataLoaderIter.__init__ = iter_init

    original_next = _SingleProcessDataLoaderIter._next_data
    if not getattr(original_next, "_yoco_wrapped", False):

        @functools.wraps(original_next)
        def next_data(self):
            if _RUN is None or not _RUN.skip_data:
                return original_next(self)
            # Catching up: advance the sampler, load nothing; every skipped batch is the first.
            index = self._next_index()
            template = getattr(self, "_yoco_template", None)
            if template is None:
                template = self._yoco_template = self._dataset_fetcher.fetch(index)
            return template

        next_data._yoco_wrapped = True
        _SingleProcessDataLoaderIter._next_data = next_data

    for module in (dist, dist.distributed_c10d):
        original_all_reduce = module.all_reduce
        if not getattr(original_all_reduce, "_yoco_wrapped", False):

            @functools.wraps(original_all_reduce)
            def all_reduce(*args, _original=original_all_reduce, **kwargs):
                # A script that averages gradients itself: the next optimizer step is its step
                # boundary (on the fake group the call itself is a no-op).
                if _RUN is not None:
                    _RUN.script_reduced = True
                return _original(*args, **kwargs)

            all_reduce._yoco_wrapped = True
            module.all_reduce = all_reduce

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


def _module_call(module, call, args, kwargs):
    if _RUN is None:
        return call(module, *args, **kwargs)
    return _RUN.module_call(module, call, args, kwargs)


def _optimizer_step_pre_hook(_optimizer, _args, _kwargs):
    if _RUN is not None and _RUN.script_reduced and not TRACKER.live("ddps"):
        _RUN.script_reduced = False
        _RUN.boundary(None)


def _comm_hook(_state, bucket):  # no annotation: DDP checks it, and ours would be a string
    future: torch.futures.Future = torch.futures.Future()
    _RUN.bucket_ready(bucket, future)
    return future


# -- the per-rank data position -------------------------------------------------------------------


class DataPositions:
    """Position of every DataLoader: iterators created (epochs), batches yielded by the current
    one, its sampler's epoch, and the torch RNG state its current iterator was created with (the
    sampler's permutation comes from it). A catching-up spare reaches it by running the loop
    (`TransparentRun.position_sampler`); this checks that it did."""

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
                    "rng": getattr(loader, "_yoco_rng", None),
                }
            )
        return {"loaders": positions}

    def load_state_dict(self, state: dict) -> None:
        mine = self.state_dict()
        if not _same(mine, state):
            shown = [{k: v for k, v in p.items() if k != "rng"} for p in state["loaders"]]
            reached = [{k: v for k, v in p.items() if k != "rng"} for p in mine["loaders"]]
            SUPPRESSED.warn(
                f"WARNING data position after catch-up {reached} differs from the replaced "
                f"rank's {shown}: the script's data order depends on values catch-up does not "
                "compute, or is not deterministic"
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
        # Catch-up (agent/catchup.py): module outputs faked / loaders skipping / load at the
        # next module call.
        self.fake_model = False
        self.skip_data = False
        self.load_armed = False
        self.shapes = OutputShapes()
        self.script_reduced = False  # the script all-reduced something since the last boundary
        self._zero_grads: dict[int, torch.Tensor] = {}
        self._catch_up_began = (0.0, 0.0)  # wall and CPU clocks when catch-up began
        self.total_numel = 0
        # Model calls since the last step boundary, and the random streams as the last real one
        # left them (see _per_rank_state).
        self.model_calls = 0
        self._after_model_call: dict | None = None
        self.boundaries = 0  # step boundaries this process has passed (replayed or real)
        self.offsets: dict[int, tuple[int, int]] = {}  # param data_ptr -> (offset, numel)
        self.buffers: list[torch.Tensor] = []
        self.grad_numel = 0
        self.unprotected: list[str] = []
        self._watch: dict[str, tuple[object, dict]] = {}
        self._buckets: list[tuple] = []
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

    def boundary(self, buckets: list[tuple] | None) -> None:
        """The end of a step's backward: DDP's buckets, or None for a script that averages
        gradients itself (every registered parameter's .grad, at its optimizer step)."""
        index = self.boundaries
        self.boundaries += 1
        if not self.loaded:  # a spare catching up to its resume step
            if self._abort.is_set():
                self._await_coordinator("stalled")
            if index == self.current_step - 1:
                self.skip_data = False  # the batches of step R are the real ones
                self._check_per_rank()
                self._arm_load()
            self.model_calls = 0
            return
        if not self.started:
            self._first_boundary()
        self._check_watched()
        checkpointed = self.current_step > 0 and self._checkpoint_due()
        if checkpointed:
            self._save_checkpoint()
        while True:
            if self.reducer.pause_agreed:
                self._await_coordinator("paused")
                continue
            if self._abort.is_set():
                self._abandon_step()
                self._await_coordinator("stalled")
                continue
            self._fill(buckets)
            blob = encode_per_rank(self._per_rank_state())
            if self.reducer.all_reduce(
                self.group, self.rank, blob, self._pause_requested, self._abort
            ):
                break
            self._abandon_step()
            self._await_coordinator("stalled")
        self._unfill(buckets)
        self.model_calls = 0
        if checkpointed and self.rank == 0:
            # Every rank wrote its part before entering this step's all-reduce, which is done.
            checkpoint.mark_complete(
                Path(self.config["checkpoint_dir"]),
                self.current_step,
                keep=self.config.get("checkpoint_keep", 2),
            )
        self._step_buffers = None  # the next forward takes a fresh snapshot
        self.current_step += 1
        self._step_began = time.perf_counter()

    def _per_rank_state(self) -> dict:
        """The registry's per-rank state, and how many model calls this step made so far with
        the random streams as the last of them left them: where a spare catching up puts its
        streams right after its own (faked) call of that count (_follow_replaced_rank)."""
        calls = {"count": self.model_calls, "rng": self._after_model_call}
        return {**self.registry.per_rank_state(), "model_calls": calls}

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

    def _pairs(self, buckets):
        """(parameter, gradient) of a step: DDP's buckets, or the registered parameters'."""
        if buckets is not None:
            for _, params, gradients, _ in buckets:
                yield from zip(params, gradients, strict=True)
            return
        for model in self.registry.models:
            for p in model.parameters():
                if p.data_ptr() in self.offsets:
                    if p.grad is None:
                        p.grad = torch.zeros_like(p)
                    yield p, p.grad

    def _save_checkpoint(self) -> None:
        """At the boundary of step N, before its reduction: the state at the start of step N,
        i.e. after N completed steps (model-aware mode's checkpoint of step N). Per-rank: this
        rank's slot of the mirror, taken at the boundary of step N-1."""
        root, step = Path(self.config["checkpoint_dir"]), self.current_step
        checkpoint.save_per_rank(
            root, step, self.rank, decode_per_rank(self.reducer.mirror_of(self.rank))
        )
        if self.rank == 0:
            state = self._replicated_state()
            state["transparent"] = {
                "numel": self.total_numel,
                "output_shapes": _bytes_tensor(self.shapes.to_bytes()),
            }
            checkpoint.save_state(root, step, state)

    def _load_checkpoint(self, step: int, rank: int) -> None:
        """A fresh process restarting the script after a rollback: the checkpoint of `step` is
        what it catches up to, as a spare does to a received state."""
        root = Path(self.config["checkpoint_dir"])
        state = checkpoint.load_state(root, step)
        extra = state.pop("transparent")
        self.total_numel = int(extra["numel"])
        self.shapes.update_from(extra["output_shapes"].numpy().tobytes())
        self.pending = state
        self.pending_slot = encode_per_rank(checkpoint.load_per_rank(root, step, rank))
        self.current_step = step

    def _fill(self, buckets) -> None:
        grads = self.reducer.grads
        grads.zero_()
        for p, g in self._pairs(buckets):
            offset, n = self.offsets[p.data_ptr()]
            grads[offset : offset + n].copy_(g.reshape(-1))
        offset = self.grad_numel
        for b in self.buffers:
            grads[offset : offset + b.numel()].copy_(b.reshape(-1))
            offset += b.numel()

    def _unfill(self, buckets) -> None:
        grads = self.reducer.grads
        for p, g in self._pairs(buckets):
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
        """A spare waits here, before the script starts, until it is given a rank; then it
        catches up (agent/catchup.py) while the script runs to its resume step."""
        self.loaded = False
        # What a DDP script imports on its way (DistributedDataParallel imports dynamo): seconds
        # on a busy host, better spent waiting than catching up.
        import torch._dynamo  # noqa: F401

        self.channel.send({"type": "ready", "state_bytes": 0})
        self._await_coordinator(None)
        self.fake_model = self.skip_data = True
        self._catch_up_began = _clocks()
        SUPPRESSED.begin()
        if self.current_step == 0:
            self.skip_data = False
            self._arm_load()

    def _check_per_rank(self) -> None:
        """At the boundary of step R-1: take the replaced rank's per-rank state from its mirror
        copy, taken at the same point."""
        theirs = decode_per_rank(self.pending_slot)
        if self.model_calls != theirs["model_calls"]["count"]:
            SUPPRESSED.warn(
                f"WARNING catching up, step {self.current_step - 1} made {self.model_calls} "
                f"model calls where the replaced rank made {theirs['model_calls']['count']}: "
                "the script's control flow depends on values catch-up does not compute"
            )
        # The RNG streams differ (the model's own draws, e.g. dropout, were skipped): restoring
        # them is the normal case. The data position is compared by DataPositions.
        self.registry.load_per_rank_state(theirs)

    def _arm_load(self) -> None:
        """Load the received state at the next module call: after the script's own (harmless)
        update of step R-1, before anything of step R runs on the model."""
        self.load_armed = True

    def _load(self) -> None:
        self.load_armed = False
        self.discover()
        self.registry.load_replicated_state(self.pending)
        self.pending = None
        self.loaded = True
        self.fake_model = False
        SUPPRESSED.end()
        wall, cpu = (now - then for now, then in zip(_clocks(), self._catch_up_began, strict=True))
        print(
            f"yoco agent: caught up {self.boundaries} steps in {wall:.3f} s "
            f"({cpu:.3f} s CPU) without the model's compute",
            file=sys.stderr,
            flush=True,
        )
        self._step_began = time.perf_counter()
        self._announce_start()  # no completed step's compute was run again: none lost

    def position_sampler(self, loader) -> None:
        """Catching up, about to create the iterator of the replaced rank's current epoch: put
        the torch RNG where it was then, so the sampler draws the same permutation."""
        if self.loaded or not self.skip_data:
            return
        index = TRACKER.index.get(loader)
        targets = decode_per_rank(self.pending_slot)["data"]["loaders"]
        if index is None or index >= len(targets):
            return
        target = targets[index]
        if (
            getattr(loader, "_yoco_iterators", 0) + 1 == target["iterators"]
            and target["rng"] is not None
        ):
            torch.set_rng_state(target["rng"])

    # -- module calls -------------------------------------------------------------------------

    def module_call(self, module, call, args, kwargs):
        """Every module call from the script's own code: recorded while training, answered with
        zero outputs of the recorded shapes while catching up."""
        if self.load_armed:
            self._load()
        if next(module.parameters(), None) is None:
            return call(module, *args, **kwargs)
        key = catchup.signature(TRACKER.index.get(module, -1), module, args, kwargs)
        self.model_calls += 1
        if not self.fake_model:
            output = call(module, *args, **kwargs)
            self.shapes.record(key, output)
            self._after_model_call = rng_state()
            return output
        device = next(module.parameters()).device
        output = self.shapes.build(key, device)
        if output is None:
            inner = getattr(module, "module", module) if _is_ddp(module) else module
            self.shapes.record(key, propagate_on_meta(call, inner, args, kwargs))
            output = self.shapes.build(key, device)
        leaves = [t for t in pytree.tree_leaves(output) if isinstance(t, torch.Tensor)]
        leaves = [t for t in leaves if t.requires_grad]
        if leaves and _is_ddp(module) and module.require_backward_grad_sync:
            _at_end_of_backward(leaves, lambda: self.boundary(None))
        elif leaves and not _is_ddp(module):
            # A script averaging gradients itself reads every parameter's .grad after backward:
            # give it zeros (one buffer, reused), as a real backward would give it values.
            _at_end_of_backward(leaves, lambda: self._zero_grads_for(module))
        self._follow_replaced_rank()
        return output

    def _follow_replaced_rank(self) -> None:
        """Catching up, in the step before the resume step R, right after the model call that
        was the replaced rank's last one in that step: take the random streams as that call
        left them there (the faked call drew nothing, e.g. no dropout masks) and load real
        batches again. What the script draws or loads from here to the step boundary is used
        in step R: nanoGPT fetches the next batch between forward and backward."""
        if self.boundaries != self.current_step - 1:
            return
        theirs = decode_per_rank(self.pending_slot)["model_calls"]
        if self.model_calls == theirs["count"]:
            load_rng_state(theirs["rng"])
            self.skip_data = False

    def _zero_grads_for(self, module) -> None:
        params = [p for p in module.parameters() if p.requires_grad]
        flat = self._zero_grads.get(id(module))
        if flat is None:
            flat = self._zero_grads[id(module)] = torch.zeros(sum(p.numel() for p in params))
        offset = 0
        for p in params:
            if p.grad is None:
                p.grad = flat[offset : offset + p.numel()].view_as(p).to(p.dtype)
            offset += p.numel()

    # -- Run's migration hooks, transparent flavour ---------------------------------------------

    def _send_state(self, command: dict) -> None:
        started = time.perf_counter()
        try:
            group = self._pair_group(command, 0)
            replicated = self._replicated_state() if self.loaded else self.pending
            state = {
                "replicated": replicated,
                "per_rank": _bytes_tensor(self.reducer.mirror_of(command["for_rank"])),
                "numel": self.total_numel,
                "output_shapes": _bytes_tensor(self.shapes.to_bytes()),
            }
            nbytes = send_state(group, state)
            reply = {"ok": True, "bytes": nbytes, "digest": digest(state)}
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
            group = self._pair_group(command, 1)
            received = recv_state(group, None)
            self.pending = received.state["replicated"]
            self.pending_slot = received.state["per_rank"].numpy().tobytes()
            self.total_numel = int(received.state["numel"])
            self.shapes.update_from(received.state["output_shapes"].numpy().tobytes())
            self.current_step = int(self.pending["step"])
            reply = {"ok": True, "bytes": received.nbytes, "digest": digest(received.state)}
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
            if self.started:  # the coordinator restarts every rank on a fresh process
                message = "transparent mode cannot roll back a running script to a checkpoint"
                self.channel.send({"type": "fatal", "message": message})
                raise RuntimeError(message)
            self._load_checkpoint(command["step"], command["rank"])
        first = not self.started
        self.rank = command["rank"]
        self.world_size = command["world_size"]
        self.role = "worker"
        self.group = self._form_group(command["generation"], command["backend"])
        if self.reducer is None or self.reducer.world_size != self.world_size:
            flat = nn.Parameter(torch.zeros(1).expand(self.total_numel))
            self.reducer = FlatReducer([flat], self.world_size, command["slot_bytes"])
            blob = self.pending_slot or encode_per_rank(self._per_rank_state())
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
        if self.loaded:  # it goes on with its step now; a spare once it has caught up
            self._announce_start()
        return True

    def finish(self) -> None:
        """The script ended: wait until every rank has, serving migrations meanwhile."""
        if not self.started and self.loaded:
            message = "the script ended without a training step (no DistributedDataParallel step)"
            self.channel.send({"type": "fatal", "message": message})
            return
        if not self.loaded and self.boundaries < self.current_step:
            message = (
                f"catching up to step {self.current_step}, the script ended after "
                f"{self.boundaries} step boundaries: its control flow depends on values catch-up "
                "does not compute"
            )
            self.channel.send({"type": "fatal", "message": message})
            return
        # A spare that resumed after the last step caught up through the whole script (without
        # the model's compute) and starts nothing.
        self._announce_start()
        while self._await_coordinator("finished") != "done":
            pass


def _clocks() -> tuple[float, float]:
    """Wall time and this thread's CPU time."""
    return time.perf_counter(), time.thread_time()


def _at_end_of_backward(outputs: list[torch.Tensor], callback) -> None:
    """Run `callback` once, at the end of the first backward that reaches any of a faked module
    call's outputs (each a leaf of its own), where a real call's DDP reducer finishes. A backward
    may reach only some of them: a model returning `(logits, loss)`, whose loss is
    backpropagated, reaches the loss alone."""
    pending = [True]

    def hook(_grad) -> None:
        if pending:
            pending.clear()
            torch.autograd.Variable._execution_engine.queue_callback(callback)

    for output in outputs:
        output.register_hook(hook)


def _is_ddp(module) -> bool:
    from torch.nn.parallel import DistributedDataParallel

    return isinstance(module, DistributedDataParallel)


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
