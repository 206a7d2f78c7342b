"""Catch-up: bringing a joining process to the resume step R of an unmodified script without the
model's compute and without side effects (SPEC 2.3; transparent mode, agent/transparent.py).

A spare cannot jump into the middle of a script's loop, so it runs the loop from the start, but
while it *catches up* (every step before R):

* a module with parameters called from the script (the model, the DDP wrapper) does not run: it
  answers with zero tensors of the shapes and dtypes it answered with before for the same input
  shapes (`OutputShapes`, recorded by every worker during its real steps and sent with the
  state). Backward reaches only those new leaves, so no parameter gets a gradient and the
  optimizers' steps touch nothing (their state is replaced at R anyway). An input signature no
  worker has seen is propagated on fake (meta) tensors: shapes only, no values computed.
* single-process data loaders advance their samplers without loading what is skipped: every
  skipped batch is the loader's first one. The sampler's permutation is reproduced by putting
  the torch RNG, just before the current epoch's iterator is created, where it was on the rank
  being replaced (its data position carries it, transparent.DataPositions).
* nothing is visible: the script's stdout and stderr go to /dev/null (at the file descriptors,
  so C code and handlers created meanwhile are covered too), files opened for writing are
  /dev/null, and `torch.save`, DCP saves, renames and deletes do nothing. `time.sleep` returns at
  once, `GradScaler.unscale_/step/update` do nothing. The script's collectives are the fake
  group's no-ops already.

The values a script computes from the model's outputs during catch-up are those of zeros; the
data position reached at the boundary of step R-1 is checked against the replaced rank's, which
catches control flow that depended on them (transparent.TransparentRun._check_per_rank).
"""

from __future__ import annotations

import builtins
import functools
import importlib.abc
import importlib.util
import io
import os
import pickle
import shutil
import sys
import threading
import time
import warnings

import torch
from torch import nn
from torch.utils import _pytree as pytree

MAX_SIGNATURES = 4096  # per job; a script whose input shapes never repeat is propagated on meta


class CatchUpError(RuntimeError):
    pass


def _leaf_signature(value) -> tuple:
    if isinstance(value, torch.Tensor):
        return ("t", tuple(value.shape), value.dtype, value.requires_grad)
    if value is None or isinstance(value, bool | int | float | str):
        return ("v", value)
    return ("o", type(value).__qualname__)


_AUTOCAST_DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def signature(module_index: int, module: nn.Module, args: tuple, kwargs: dict) -> tuple:
    """What decides the shapes of a module's outputs: the inputs' shapes and dtypes, train or
    eval, grad mode and autocast."""
    if not kwargs and all(type(a) is torch.Tensor for a in args):  # the common call, quickly
        inputs = tuple((tuple(a.shape), a.dtype, a.requires_grad) for a in args)
    else:
        leaves, spec = pytree.tree_flatten((args, kwargs))
        inputs = (str(spec), tuple(_leaf_signature(v) for v in leaves))
    autocast = torch.is_autocast_enabled(_AUTOCAST_DEVICE) and torch.get_autocast_dtype(
        _AUTOCAST_DEVICE
    )
    return (module_index, inputs, module.training, torch.is_grad_enabled(), str(autocast))


class OutputShapes:
    """Input signature -> the structure of the outputs (tensor shapes, dtypes, requires_grad;
    other values as they were). Every process records it during its real steps."""

    def __init__(self):
        self.table: dict[tuple, tuple] = {}

    def record(self, key: tuple, output) -> None:
        if key in self.table or len(self.table) >= MAX_SIGNATURES:
            return
        leaves, spec = pytree.tree_flatten(output)
        described = []
        for leaf in leaves:
            if isinstance(leaf, torch.Tensor):
                described.append(("t", tuple(leaf.shape), leaf.dtype, leaf.requires_grad))
            else:
                described.append(("v", leaf))
        entry = (spec, tuple(described))
        try:
            _pickle(entry)
        except Exception:  # noqa: BLE001 - an output type pickle cannot carry: not recorded
            return
        self.table[key] = entry

    def to_bytes(self) -> bytes:
        return _pickle(self.table)

    def update_from(self, blob: bytes) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # pytree's LeafSpec deprecation
            table = pickle.loads(blob)
        for key, entry in table.items():
            self.table.setdefault(key, entry)

    def build(self, key: tuple, device: torch.device):
        """Zero outputs of the recorded structure; None when the signature was never seen."""
        entry = self.table.get(key)
        if entry is None:
            return None
        spec, described = entry
        leaves = []
        for item in described:
            if item[0] == "t":
                _, shape, dtype, requires_grad = item
                tensor = torch.zeros(shape, dtype=dtype, device=device)
                if requires_grad and torch.is_grad_enabled():
                    tensor.requires_grad_()
                leaves.append(tensor)
            else:
                leaves.append(item[1])
        return pytree.tree_unflatten(leaves, spec)


def _pickle(obj) -> bytes:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # pytree's LeafSpec deprecation
        return pickle.dumps(obj)


def propagate_on_meta(call, module: nn.Module, args: tuple, kwargs: dict):
    """Run the module on fake tensors: the output shapes, no values computed."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    try:
        with FakeTensorMode(allow_non_fake_inputs=True):
            return call(module, *args, **kwargs)
    except Exception as error:  # noqa: BLE001 - any failure means: shapes depend on values
        raise CatchUpError(
            f"cannot catch up through {type(module).__name__}: its output shapes depend on "
            f"values ({type(error).__name__}: {str(error)[:200]})"
        ) from error


_depth = 0  # module calls in progress on the script's thread


def install_module_calls(handler) -> None:
    """Send every module call made from outside another module's forward to
    `handler(module, call, args, kwargs)`, where `call(module, *args, **kwargs)` runs it."""
    original = nn.Module.__call__
    if getattr(original, "_yoco_wrapped", False):
        return

    def __call__(self, *args, **kwargs):
        global _depth
        if _depth:
            return original(self, *args, **kwargs)
        _depth += 1
        try:
            return handler(self, original, args, kwargs)
        finally:
            _depth -= 1

    __call__._yoco_wrapped = True
    nn.Module.__call__ = __call__


class Suppressed:
    """While active: no output on the job's stdout/stderr and no files written."""

    def __init__(self):
        self.active = False
        self._saved: dict[int, int] = {}
        self.real_stderr: io.TextIOBase | None = None

    def begin(self) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        null = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):
            self._saved[fd] = os.dup(fd)
            os.dup2(null, fd)
        os.close(null)
        self.real_stderr = open(os.dup(self._saved[2]), "w", buffering=1)  # noqa: SIM115
        self.active = True

    def end(self) -> None:
        if not self.active:
            return
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, saved in self._saved.items():
            os.dup2(saved, fd)
            os.close(saved)
        self._saved.clear()
        self.active = False

    def warn(self, message: str) -> None:
        """The agent's own warnings reach the job's stderr even while the script's do not."""
        stream = self.real_stderr if self.active else sys.stderr
        print(f"yoco agent: {message}", file=stream, flush=True)


SUPPRESSED = Suppressed()


def _writes(mode: str) -> bool:
    return any(c in mode for c in "wax+")


def when_imported(name: str, patch) -> None:
    """Call `patch(module)` once the module `name` is imported: now if it already is, else
    right after it is executed, before its importer sees it."""
    if name in sys.modules:
        patch(sys.modules[name])
    else:
        sys.meta_path.insert(0, _PatchOnImport(name, patch))


class _PatchOnImport(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, patch):
        self.name = name
        self.patch = patch

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # one module, once; and the real finders answer below
        spec = importlib.util.find_spec(fullname)
        execute = spec.loader.exec_module

        def execute_and_patch(module) -> None:
            execute(module)
            self.patch(module)

        spec.loader.exec_module = execute_and_patch
        return spec


def install_side_effect_guards() -> None:
    """Patch the ways a script changes files or waits, so that they do nothing while
    SUPPRESSED is active. Idempotent."""
    if getattr(builtins.open, "_yoco_wrapped", False):
        return
    original_open = builtins.open

    @functools.wraps(original_open)
    def guarded_open(file, mode="r", *args, **kwargs):
        if (
            SUPPRESSED.active
            and isinstance(mode, str)
            and _writes(mode)
            and threading.current_thread() is threading.main_thread()
        ):
            return original_open(os.devnull, mode.replace("x", "w"), *args, **kwargs)
        return original_open(file, mode, *args, **kwargs)

    guarded_open._yoco_wrapped = True
    builtins.open = guarded_open
    io.open = guarded_open

    def skipped(original, result=None):
        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            # The script's thread only: the agent's own threads (heartbeat) keep their sleeps.
            if SUPPRESSED.active and threading.current_thread() is threading.main_thread():
                return result
            return original(*args, **kwargs)

        return wrapper

    for module, name in (
        (os, "replace"),
        (os, "rename"),
        (os, "remove"),
        (os, "unlink"),
        (os, "rmdir"),
        (shutil, "rmtree"),
        (shutil, "move"),
        (shutil, "copyfile"),
        (shutil, "copy"),
        (shutil, "copy2"),
        (torch, "save"),
        (time, "sleep"),
    ):
        setattr(module, name, skipped(getattr(module, name)))

    def skip_saves(dcp) -> None:
        dcp.save = skipped(dcp.save)
        dcp.async_save = skipped(dcp.async_save)

    # Not imported here (see checkpoint._save), and most scripts never use it: patched the
    # moment anything imports it.
    when_imported("torch.distributed.checkpoint", skip_saves)
    scaler = torch.amp.GradScaler
    for name in ("unscale_", "step", "update"):
        setattr(scaler, name, skipped(getattr(scaler, name)))
