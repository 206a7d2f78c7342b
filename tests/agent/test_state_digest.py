"""The digest of a moved state (state.digest) is equal for the same state on both ends of a
migration and differs as soon as one byte or one value of what moved differs."""

from __future__ import annotations

import pytest
import torch

from agent.skeleton import flatten, unflatten
from agent.state import digest

pytestmark = pytest.mark.agent


def _training_state() -> dict:
    """What a migration moves: model and optimizer state at a step, and the per-rank bytes."""
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(2, 8)).sum().backward()
    optimizer.step()
    return {
        "replicated": {
            "step": 1,
            "models": [model.state_dict()],
            "optimizers": [optimizer.state_dict()],
            "schedulers": [],
            "extras": {},
        },
        "per_rank": torch.frombuffer(bytearray(b"rng and data position"), dtype=torch.uint8),
    }


def _received(state: dict) -> dict:
    """The tree a target rebuilds from the skeleton and tensors it received: fresh tensors."""
    skeleton, tensors = flatten(state)
    return unflatten(skeleton, [t.clone() for t in tensors])


def test_a_received_copy_has_the_sources_digest():
    state = _training_state()
    assert digest(_received(state)) == digest(state)


@pytest.mark.parametrize("which", range(6))
def test_one_flipped_byte_in_any_tensor_changes_the_digest(which):
    state = _training_state()
    received = _received(state)
    tensor = flatten(received)[1][which]
    byte = tensor.reshape(-1)[-1:].view(torch.uint8)
    byte[0] ^= 0x10
    assert digest(received) != digest(state)


def test_a_different_hyper_parameter_changes_the_digest():
    state = _training_state()
    received = _received(state)
    received["replicated"]["optimizers"][0]["param_groups"][0]["lr"] = 2e-3
    assert digest(received) != digest(state)
