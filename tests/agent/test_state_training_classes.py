"""The state of every optimizer in `torch.optim`, every LR scheduler in
`torch.optim.lr_scheduler` (and `swa_utils.SWALR`) and `GradScaler`, taken after a few real
steps, crosses the transport (a real gloo pair) and the checkpoint fallback unchanged, and a
fresh instance that loads it trains on exactly like the original."""

from __future__ import annotations

import copy

import pytest

from tests.agent import training_zoo as zoo
from tests.agent.roundtrip import Pair, assert_same, through_checkpoint

pytestmark = pytest.mark.agent
ROUTES = ["transport", "checkpoint"]


@pytest.fixture(scope="module")
def pair():
    pair = Pair("training-classes")
    yield pair
    pair.close()


def _carry(route: str, state, pair, tmp_path):
    back = pair.send(state) if route == "transport" else through_checkpoint(state, tmp_path)
    assert_same(back, state)
    return back


def test_every_class_in_torch_has_a_recipe():
    assert "OneCycleLR" in zoo.SCHEDULERS and "AdamW" in zoo.OPTIMIZERS
    missing = sorted(set(zoo.SCHEDULERS) - set(zoo.SCHEDULER_RECIPES))
    assert not missing, f"new scheduler classes in torch, add a recipe to training_zoo: {missing}"


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", zoo.OPTIMIZERS)
def test_optimizer_state_round_trips_and_trains_on_identically(name, route, pair, tmp_path):
    model = zoo.model_for(name)
    optimizer = zoo.make_optimizer(name, model)
    zoo.train_optimizer(name, model, optimizer, range(3))
    back = _carry(route, optimizer.state_dict(), pair, tmp_path)

    twin = copy.deepcopy(model)
    twin_optimizer = zoo.make_optimizer(name, twin)
    twin_optimizer.load_state_dict(back)
    zoo.train_optimizer(name, model, optimizer, range(3, 5))
    zoo.train_optimizer(name, twin, twin_optimizer, range(3, 5))
    assert_same(twin.state_dict(), model.state_dict())
    assert_same(twin_optimizer.state_dict(), optimizer.state_dict())


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("variant", sorted(zoo.SCHEDULER_VARIANTS))
def test_scheduler_state_round_trips_and_schedules_on_identically(variant, route, pair, tmp_path):
    model, optimizer, scheduler = zoo.scheduler_setup(variant)
    zoo.train_scheduler(model, optimizer, scheduler, range(4))
    back_optimizer = _carry(route, optimizer.state_dict(), pair, tmp_path / "o")
    back = _carry(route, scheduler.state_dict(), pair, tmp_path / "s")

    twin, twin_optimizer, twin_scheduler = zoo.scheduler_setup(variant, seed=1)
    twin.load_state_dict(model.state_dict())
    twin_optimizer.load_state_dict(back_optimizer)
    twin_scheduler.load_state_dict(back)
    zoo.train_scheduler(model, optimizer, scheduler, range(4, 9))
    zoo.train_scheduler(twin, twin_optimizer, twin_scheduler, range(4, 9))
    assert_same(twin_scheduler.state_dict(), scheduler.state_dict())
    assert_same(twin_optimizer.state_dict(), optimizer.state_dict())
    assert_same(twin.state_dict(), model.state_dict())


@pytest.mark.parametrize("route", ROUTES)
def test_grad_scaler_state_round_trips_and_scales_on_identically(route, pair, tmp_path):
    model, optimizer, scaler = zoo.scaler_setup()
    zoo.train_scaler(model, optimizer, scaler, range(3))
    back = _carry(route, scaler.state_dict(), pair, tmp_path)
    assert back["scale"] != 2.0**8  # it did grow: there was state to carry

    twin, twin_optimizer, twin_scaler = zoo.scaler_setup(seed=1)
    twin.load_state_dict(model.state_dict())
    twin_optimizer.load_state_dict(optimizer.state_dict())
    twin_scaler.load_state_dict(back)
    zoo.train_scaler(model, optimizer, scaler, range(3, 6))
    zoo.train_scaler(twin, twin_optimizer, twin_scaler, range(3, 6))
    assert_same(twin_scaler.state_dict(), scaler.state_dict())
    assert_same(twin.state_dict(), model.state_dict())
