"""Every optimizer class in `torch.optim` and every LR scheduler class in
`torch.optim.lr_scheduler` / `torch.optim.swa_utils`, each with a recipe to build and train it
a few real steps. The classes are enumerated from the modules, so a class a new torch adds and
no recipe covers fails the tests by name instead of going unnoticed."""

from __future__ import annotations

import inspect
import random

import numpy
import torch
from torch import nn
from torch.optim import lr_scheduler, swa_utils


def _classes(module, base) -> list[str]:
    return sorted(
        name
        for name, cls in vars(module).items()
        if inspect.isclass(cls)
        and issubclass(cls, base)
        and cls is not base
        and not name.startswith("_")
        and cls.__module__.startswith("torch.optim")
    )


OPTIMIZERS = _classes(torch.optim, torch.optim.Optimizer)
SCHEDULERS = _classes(lr_scheduler, lr_scheduler.LRScheduler) + _classes(
    swa_utils, lr_scheduler.LRScheduler
)

OPTIMIZER_OPTIONS = {
    "SGD": {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01},
    "Adam": {"lr": 0.01, "amsgrad": True},
    "AdamW": {"lr": 0.01, "weight_decay": 0.1},
    "LBFGS": {"lr": 0.1, "history_size": 3, "max_iter": 2},
    "RMSprop": {"lr": 0.01, "momentum": 0.5, "centered": True},
}


def model_for(optimizer: str, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    if optimizer == "SparseAdam":
        return nn.Embedding(10, 4, sparse=True)
    if optimizer == "Muon":  # 2-D parameters only
        return nn.Sequential(nn.Linear(4, 3, bias=False), nn.Tanh(), nn.Linear(3, 2, bias=False))
    return nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))


def loss_of(model: nn.Module, step: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 + step)
    if isinstance(model, nn.Embedding):
        return model(torch.randint(0, 10, (6,), generator=g)).pow(2).mean()
    return (model(torch.randn(5, 4, generator=g)) - 0.5).pow(2).mean()


def make_optimizer(name: str, model: nn.Module) -> torch.optim.Optimizer:
    options = OPTIMIZER_OPTIONS.get(name, {"lr": 0.01})
    return getattr(torch.optim, name)(model.parameters(), **options)


def train_optimizer(name: str, model, optimizer, steps: range) -> None:
    for step in steps:

        def closure(step=step):
            optimizer.zero_grad()
            loss = loss_of(model, step)
            loss.backward()
            return loss

        optimizer.step(closure)


class Warmup:
    """A picklable schedule with state of its own: LambdaLR saves its __dict__."""

    def __init__(self, steps: int):
        self.steps = steps
        self.calls = 0

    def __call__(self, epoch: int) -> float:
        self.calls += 1
        return min(1.0, (epoch + 1) / self.steps)


S = lr_scheduler
SCHEDULER_RECIPES = {
    "LambdaLR": lambda o: S.LambdaLR(o, lambda e: 0.9**e),  # a lambda: state_dict drops it
    "MultiplicativeLR": lambda o: S.MultiplicativeLR(o, Warmup(3)),
    "StepLR": lambda o: S.StepLR(o, step_size=2, gamma=0.5),
    "MultiStepLR": lambda o: S.MultiStepLR(o, milestones=[1, 3], gamma=0.5),
    "ConstantLR": lambda o: S.ConstantLR(o, factor=0.5, total_iters=3),
    "LinearLR": lambda o: S.LinearLR(o, start_factor=0.3, total_iters=4),
    "ExponentialLR": lambda o: S.ExponentialLR(o, gamma=0.9),
    "SequentialLR": lambda o: S.SequentialLR(
        o, [S.LinearLR(o, start_factor=0.3, total_iters=2), S.ExponentialLR(o, 0.9)], [2]
    ),
    "PolynomialLR": lambda o: S.PolynomialLR(o, total_iters=6, power=2.0),
    "CosineAnnealingLR": lambda o: S.CosineAnnealingLR(o, T_max=5),
    "ChainedScheduler": lambda o: S.ChainedScheduler(
        [S.ConstantLR(o, factor=0.5, total_iters=2), S.ExponentialLR(o, 0.9)], optimizer=o
    ),
    "ReduceLROnPlateau": lambda o: S.ReduceLROnPlateau(o, patience=0, factor=0.5),
    "CyclicLR": lambda o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=2),
    "CosineAnnealingWarmRestarts": lambda o: S.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2),
    "OneCycleLR": lambda o: S.OneCycleLR(o, max_lr=0.1, total_steps=20),
    "SWALR": lambda o: swa_utils.SWALR(o, swa_lr=0.05, anneal_epochs=3),
}
# LambdaLR once more with a schedule whose state the state_dict does carry.
SCHEDULER_VARIANTS = {
    **SCHEDULER_RECIPES,
    "LambdaLR[callable object]": lambda o: S.LambdaLR(o, Warmup(4)),
}


def train_scheduler(model, optimizer, scheduler, steps: range) -> None:
    for step in steps:
        optimizer.zero_grad()
        loss = loss_of(model, step)
        loss.backward()
        optimizer.step()
        if isinstance(scheduler, S.ReduceLROnPlateau):
            scheduler.step(loss.item() if step % 2 else 1.0)  # plateaus, so it reduces
        else:
            scheduler.step()


def scheduler_setup(variant: str, seed: int = 0):
    model = model_for("SGD", seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return model, optimizer, SCHEDULER_VARIANTS[variant](optimizer)


def scaler_setup(seed: int = 0):
    model = model_for("SGD", seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8, growth_interval=2)
    return model, optimizer, scaler


def train_scaler(model, optimizer, scaler, steps: range) -> None:
    for step in steps:
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = loss_of(model, step)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()


def everything(seed: int = 0) -> dict:
    """The state of every optimizer, scheduler and a GradScaler after three real steps, and
    every kind of RNG state: what the cross-process test sends."""
    torch.manual_seed(seed)
    state: dict = {"optimizers": {}, "schedulers": {}}
    for name in OPTIMIZERS:
        model = model_for(name, seed)
        optimizer = make_optimizer(name, model)
        train_optimizer(name, model, optimizer, range(3))
        state["optimizers"][name] = (model.state_dict(), optimizer.state_dict())
    for variant in SCHEDULER_VARIANTS:
        model, optimizer, scheduler = scheduler_setup(variant, seed)
        train_scheduler(model, optimizer, scheduler, range(3))
        state["schedulers"][variant] = (optimizer.state_dict(), scheduler.state_dict())
    model, optimizer, scaler = scaler_setup(seed)
    train_scaler(model, optimizer, scaler, range(3))
    state["scaler"] = scaler.state_dict()
    random.seed(seed)
    numpy.random.seed(seed)
    generator = numpy.random.default_rng(seed)
    generator.random()
    state["rng"] = {
        "python": random.getstate(),
        "numpy": numpy.random.get_state(),
        "numpy_generator": generator.bit_generator.state,
        "torch": torch.get_rng_state(),
    }
    return state
