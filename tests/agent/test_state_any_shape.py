"""Any nested state a `state_dict()` can return crosses the transport (a real gloo pair over
loopback) and the checkpoint fallback and comes back equal: same types all the way down (a
tuple stays a tuple, an int key stays an int, a str is never taken for a tensor), tensors and
floats bit for bit, whatever their dtype, shape or layout."""

from __future__ import annotations

import random
import shutil
import tempfile
from collections import OrderedDict
from pathlib import Path

import numpy
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.skeleton import EncodingError, encode
from tests.agent.roundtrip import Pair, assert_same, through_checkpoint

pytestmark = pytest.mark.agent

DTYPES = [
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
    torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128,
]  # fmt: skip


@st.composite
def tensors(draw):
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(st.lists(st.integers(0, 4), max_size=3))
    numel = 1
    for n in shape:
        numel *= n
    size = torch.empty(0, dtype=dtype).element_size()
    raw = draw(st.binary(min_size=numel * size, max_size=numel * size))
    flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(0)
    if dtype == torch.bool:
        value = (flat.to(torch.uint8) % 2).bool().reshape(shape)
    else:
        value = flat.to(torch.uint8).view(dtype).reshape(shape)  # any bit pattern, NaNs too
    layout = draw(st.sampled_from(["contiguous", "transposed", "strided", "expanded"]))
    if layout == "transposed" and value.dim() >= 2:
        value = value.transpose(0, -1)
    elif layout == "strided" and value.dim() >= 1:
        value = value[::2]
    elif layout == "expanded" and value.dim() == 0:
        value = value.expand(3)
    return value


LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(-(2**130), 2**130)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.complex_numbers(allow_nan=False)
    | st.text(max_size=12)  # str has .index, the old placeholder test
    | st.binary(max_size=8)
    | tensors()
)
KEYS = st.text(max_size=6) | st.integers(-5, 5) | st.tuples(st.integers(0, 3), st.text(max_size=2))


def _ordered(pairs: dict) -> OrderedDict:
    return OrderedDict(pairs)


STATES = st.recursive(
    LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(KEYS, inner, max_size=4)
        | st.dictionaries(KEYS, inner, max_size=3).map(_ordered)
    ),
    max_leaves=12,
)


@pytest.fixture(scope="module")
def pair():
    pair = Pair("any-shape")
    yield pair
    pair.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(state=STATES)
def test_any_nested_state_crosses_transport_and_checkpoint_unchanged(pair, state):
    assert_same(pair.send(state), state)
    root = Path(tempfile.mkdtemp(prefix="yoco-any-shape-"))
    try:
        assert_same(through_checkpoint(state, root), state)
    finally:
        shutil.rmtree(root)


def test_rng_states_of_every_kind_cross_unchanged(pair, tmp_path):
    generator = numpy.random.default_rng(11)
    generator.random(3)
    numpy.random.seed(5)
    numpy.random.standard_normal()  # leaves a cached gaussian in the legacy state
    random.seed(3)
    state = {
        "python": random.getstate(),
        "numpy": numpy.random.get_state(),
        "numpy_generator": generator.bit_generator.state,  # PCG64: 128-bit ints
        "torch": torch.get_rng_state(),
        "torch_generator": torch.Generator().manual_seed(9).get_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    expected = (random.random(), numpy.random.random(), generator.random())
    for back in (pair.send(state), through_checkpoint(state, tmp_path)):
        assert_same(back, state)
        random.setstate(back["python"])
        numpy.random.set_state(back["numpy"])
        restored = numpy.random.default_rng()
        restored.bit_generator.state = back["numpy_generator"]
        assert (random.random(), numpy.random.random(), restored.random()) == expected


def test_state_that_cannot_be_sent_is_refused_by_path():
    with pytest.raises(EncodingError, match="optimizer/hook"):
        encode({"optimizer": {"hook": lambda: 0}})
