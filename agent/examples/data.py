"""Synthetic training data, generated on the fly and fully determined by (seed, rank, position).

The position is the data state: the agent moves it with the rank, so a spare continues with the
very batch the failed rank would have drawn next.
"""

from __future__ import annotations

import torch


class SyntheticTokens:
    """Token sequences with a learnable pattern (each token predicts the next, with noise)."""

    def __init__(self, seed: int, rank: int, batch: int, seq: int, vocab: int):
        self.seed, self.rank, self.batch, self.seq, self.vocab = seed, rank, batch, seq, vocab
        self.position = 0

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(
            self.seed * 1_000_003 + self.rank * 10_007 + self.position
        )
        self.position += 1
        start = torch.randint(0, self.vocab, (self.batch, 1), generator=g)
        stride = torch.randint(1, 4, (self.batch, 1), generator=g)
        tokens = (start + stride * torch.arange(self.seq + 1)) % self.vocab
        noise = torch.rand(tokens.shape, generator=g) < 0.05
        tokens = torch.where(noise, torch.randint_like(tokens, self.vocab, generator=g), tokens)
        return tokens[:, :-1], tokens[:, 1:]

    def state_dict(self) -> dict:
        return {"rank": self.rank, "position": self.position}

    def load_state_dict(self, state: dict) -> None:
        self.rank, self.position = state["rank"], state["position"]


class SyntheticRegression:
    """Inputs and targets of a fixed random teacher network, for the MLP example."""

    def __init__(self, seed: int, rank: int, batch: int, features: int):
        self.seed, self.rank, self.batch, self.features = seed, rank, batch, features
        teacher = torch.Generator().manual_seed(seed)
        self.teacher = torch.randn(features, 1, generator=teacher)
        self.position = 0

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(
            self.seed * 1_000_003 + self.rank * 10_007 + self.position
        )
        self.position += 1
        x = torch.randn(self.batch, self.features, generator=g)
        return x, torch.tanh(x @ self.teacher)

    def state_dict(self) -> dict:
        return {"rank": self.rank, "position": self.position}

    def load_state_dict(self, state: dict) -> None:
        self.rank, self.position = state["rank"], state["position"]
