"""A `DataLoader` registered as the data position (`run.register(data=loader)`).

The position of a loader with worker processes is more than a batch counter: which samples the
sampler has handed out, each worker's place in its share of them, the seed its workers were
started with, and the RNG streams *inside* each worker (NumPy / Python / torch augmentations,
seeded per worker the way torchvision and timm scripts do from torch's worker seed). torchdata's
`StatefulDataLoader` keeps all but the last: it snapshots the sampler, the base seed and every
worker's dataset state with each batch. The last is added here: the dataset is wrapped so that
its state, taken inside the worker after each batch, carries that worker's RNG streams, and a
restarted worker puts them back after its `worker_init_fn` ran. A loader restored from a
snapshot therefore yields exactly the batches the original would have yielded next.

Around that: the epoch (the sampler's `set_epoch` at every new pass, as DDP scripts call it),
the sampler's rank (a spare builds its loader before it knows the rank it will take over), and
the loader's own generator, from which every epoch's iterator draws its seeds.
"""

from __future__ import annotations

import pickle
import random

import numpy
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset
from torchdata.stateful_dataloader import StatefulDataLoader
from torchdata.stateful_dataloader.sampler import RandomSampler as StatefulRandomSampler


class WorkerRandomness(Dataset):
    """A map-style dataset whose state (taken in the worker process that uses it) is that
    process's RNG streams, plus the wrapped dataset's own state if it has one."""

    def __init__(self, dataset: Dataset):
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index):
        return self.dataset[index]

    def state_dict(self) -> dict:
        streams = (random.getstate(), numpy.random.get_state(), torch.get_rng_state())
        state = {"rng": pickle.dumps(streams, protocol=pickle.HIGHEST_PROTOCOL)}
        if hasattr(self.dataset, "state_dict"):
            state["dataset"] = self.dataset.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        python, numpy_state, torch_state = pickle.loads(state["rng"])
        random.setstate(python)
        numpy.random.set_state(numpy_state)
        torch.set_rng_state(torch_state)
        if "dataset" in state:
            self.dataset.load_state_dict(state["dataset"])


def _stateful_copy(loader: DataLoader) -> StatefulDataLoader:
    """The same loader as a StatefulDataLoader that snapshots after every batch."""
    options = {
        "num_workers": loader.num_workers,
        "collate_fn": loader.collate_fn,
        "pin_memory": loader.pin_memory,
        "timeout": loader.timeout,
        "worker_init_fn": loader.worker_init_fn,
        "multiprocessing_context": loader.multiprocessing_context,
        "generator": loader.generator,
        "persistent_workers": loader.persistent_workers,
        "snapshot_every_n_steps": 1,
    }
    if loader.num_workers > 0:
        options["prefetch_factor"] = loader.prefetch_factor
    dataset = loader.dataset
    if isinstance(dataset, IterableDataset):
        options.update(batch_size=loader.batch_size, drop_last=loader.drop_last)
        return StatefulDataLoader(dataset, **options)
    sampler = loader.sampler
    if type(sampler) is torch.utils.data.RandomSampler:
        # torch's draws a new seed at every pass, so a resumed pass would be shuffled anew;
        # torchdata's keeps its generator's state in the snapshot.
        sampler = StatefulRandomSampler(
            dataset, sampler.replacement, sampler._num_samples, sampler.generator
        )
    if loader.batch_size is not None:
        options.update(sampler=sampler, batch_size=loader.batch_size, drop_last=loader.drop_last)
    elif loader.batch_sampler is not None:  # the script's own batch sampler
        options.update(batch_sampler=loader.batch_sampler)
    else:  # automatic batching off: one sample at a time
        options.update(sampler=sampler, batch_size=None)
    if loader.num_workers > 0:  # without workers the streams are the process's own (per-rank)
        dataset = WorkerRandomness(dataset)
    return StatefulDataLoader(dataset, **options)


class LoaderPosition:
    """Batches of a registered loader, epoch after epoch, and their exact position."""

    def __init__(self, loader: DataLoader):
        self.loader = _stateful_copy(loader)
        self.sampler = self.loader.sampler
        self.epoch = 0
        self._iterator = None
        self.unprotected: list[str] = []
        if isinstance(loader.dataset, IterableDataset) and loader.num_workers > 0:
            self.unprotected.append(
                f"data ({type(loader.dataset).__name__}: the RNG streams inside the workers of "
                "an IterableDataset loader are not captured)"
            )

    def next_batch(self):
        """The next batch; at the end of a pass the next epoch starts (`set_epoch` first)."""
        while True:
            if self._iterator is None:
                if hasattr(self.sampler, "set_epoch"):
                    self.sampler.set_epoch(self.epoch)
                self._iterator = iter(self.loader)
            try:
                return next(self._iterator)
            except StopIteration:
                self._iterator = None
                self.epoch += 1

    def close(self) -> None:
        """End the current pass's worker processes (the loader forgets its iterator on an empty
        load, and the iterator's workers end when it is collected)."""
        self._iterator = None
        self.loader.load_state_dict({})

    def state_dict(self) -> dict:
        generator = self.loader.generator
        return {
            "epoch": self.epoch,
            "rank": getattr(self.sampler, "rank", None),
            "generator": generator.get_state() if generator is not None else None,
            # Asked before its first batch, a StatefulDataLoader would start its workers.
            "loader": self.loader.state_dict() if self._iterator is not None else None,
        }

    def load_state_dict(self, state: dict) -> None:
        self.epoch = state["epoch"]
        if state["rank"] is not None:
            self.sampler.rank = state["rank"]
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(self.epoch)
        self._iterator = None  # ends the old iterator's workers
        if state["loader"] is not None:
            # The resumed iterator draws a fresh seed (from the loader's generator, or the global
            # torch RNG) before the snapshot overrides it: draws the original never made.
            rng = torch.get_rng_state()
            self.loader.load_state_dict(state["loader"])
            self._iterator = iter(self.loader)
            torch.set_rng_state(rng)
        if state["generator"] is not None:
            self.loader.generator.set_state(state["generator"])
