"""A DataLoader registered as the data position (agent/loader.py): restored into a loader built
elsewhere (a spare's, built as another rank), it yields exactly the batches the original would
have yielded next, NumPy / Python augmentation in its worker processes included."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset
from torch.utils.data.distributed import DistributedSampler

from agent.loader import LoaderPosition


class Augmented(Dataset):
    """Each item draws from the worker's NumPy, Python and torch RNG streams."""

    def __len__(self):
        return 40

    def __getitem__(self, i):
        draws = [np.random.randint(1000), random.randint(0, 1000), int(torch.randint(1000, ()))]
        return torch.tensor([i, *draws])


def seed_worker(worker_id):
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)


def loader(rank: int, workers: int, shuffle_by: str) -> LoaderPosition:
    dataset = Augmented()
    g = torch.Generator().manual_seed(0)
    if shuffle_by == "sampler":
        sampler = DistributedSampler(dataset, num_replicas=2, rank=rank, seed=3)
        plain = DataLoader(dataset, batch_size=4, sampler=sampler, num_workers=workers,
                           worker_init_fn=seed_worker, generator=g)  # fmt: skip
    else:
        plain = DataLoader(dataset, batch_size=4, shuffle=True, num_workers=workers,
                           worker_init_fn=seed_worker, generator=g)  # fmt: skip
    return LoaderPosition(plain)


def seed_process(seed: int) -> None:
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)


def process_streams():
    return torch.get_rng_state(), random.getstate(), np.random.get_state()


def set_process_streams(streams) -> None:
    torch.set_rng_state(streams[0])
    random.setstate(streams[1])
    np.random.set_state(streams[2])


@pytest.mark.parametrize(
    ("workers", "shuffle_by"), [(2, "sampler"), (2, "shuffle"), (0, "sampler")]
)
@pytest.mark.parametrize("taken_after", [3, 7])  # mid-epoch; in the next epoch
def test_restored_loader_continues_exactly(workers, shuffle_by, taken_after):
    seed_process(5)
    reference = loader(1, workers, shuffle_by)
    expected = [reference.next_batch() for _ in range(taken_after + 6)]
    reference.close()

    seed_process(5)
    original = loader(1, workers, shuffle_by)
    got = [original.next_batch() for _ in range(taken_after)]
    state, streams = original.state_dict(), process_streams()
    original.close()

    spare = loader(0, workers, shuffle_by)  # a spare builds as rank 0, before it has a rank
    torch.manual_seed(99)
    spare.load_state_dict(state)
    set_process_streams(streams)  # the process's RNG streams arrive beside the data position
    got += [spare.next_batch() for _ in range(6)]
    spare.close()
    for i, (a, b) in enumerate(zip(got, expected, strict=True)):
        assert torch.equal(a, b), (i, a, b)


class Stream(IterableDataset):
    def __iter__(self):
        return iter(range(8))


def test_worker_randomness_of_an_iterable_dataset_is_reported_unprotected():
    position = LoaderPosition(DataLoader(Stream(), batch_size=2, num_workers=2))
    assert position.unprotected and "IterableDataset" in position.unprotected[0]
    assert LoaderPosition(DataLoader(Stream(), batch_size=2)).unprotected == []
