"""Synthetic click data: deterministic batches from (seed, step, rank).

A batch is a pure function of the seed, the global step and the rank, so a resumed attempt sees the
very batches the failed one would have seen, with no data-loader state to checkpoint. Labels come
from a fixed hidden "true" model (a linear score of the dense features plus a per-id bias), so the
DLRM has something real to learn and its loss falls.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torchrec.datasets.utils import Batch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from trainer.config import ModelConfig

_MIX = 0x9E3779B97F4A7C15  # 64-bit golden ratio, for seed mixing
_MASK = (1 << 63) - 1


def batch_seed(seed: int, step: int, rank: int, stream: int = 0) -> int:
    """The generator seed of one batch: a well-mixed function of its coordinates."""
    h = seed & _MASK
    for part in (stream, step, rank):
        h = ((h ^ (part & _MASK)) * _MIX + 0x632BE59BD9B4E019) & _MASK
        h ^= h >> 29
    return h


@dataclass(frozen=True)
class SyntheticClicks:
    """Batches of ``batch_size`` samples for one rank of a data-parallel job.

    Args:
        model: the model's shape (tables, rows, dense inputs, pooling).
        batch_size: samples per rank per step.
        seed: the data seed; the hidden true model depends on it alone.
        rank: this rank; ranks see disjoint batches of the same global step.
        stream: 0 for training, 1 for evaluation (a held-out stream).
    """

    model: ModelConfig
    batch_size: int
    seed: int = 0
    rank: int = 0
    stream: int = 0

    def _truth(self) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(batch_seed(self.seed, -1, -1, stream=-1))
        w = torch.randn(self.model.dense_in, generator=g) / self.model.dense_in**0.5
        id_bias = torch.randn(self.model.num_tables, 97, generator=g)
        return w, id_bias

    def batch(self, step: int) -> Batch:
        """The batch of global step ``step`` on this rank."""
        m, b = self.model, self.batch_size
        g = torch.Generator().manual_seed(batch_seed(self.seed, step, self.rank, self.stream))
        dense = torch.randn(b, m.dense_in, generator=g)
        # lengths are feature-major: all of f0's samples, then f1's, ...
        lengths = torch.randint(1, 2 * m.pooling, (m.num_tables, b), generator=g)
        total = int(lengths.sum())
        # skewed ids: a few hot rows, a long tail (as in real click logs)
        values = (torch.rand(total, generator=g) ** 3 * m.rows).long().clamp_(max=m.rows - 1)
        w, id_bias = self._truth()
        feature_of = torch.repeat_interleave(torch.arange(m.num_tables), lengths.sum(dim=1))
        bias = id_bias[feature_of, values % 97]
        sample_of = torch.repeat_interleave(torch.arange(b).repeat(m.num_tables), lengths.flatten())
        sparse_score = torch.zeros(b).index_add_(0, sample_of, bias) / lengths.sum(dim=0)
        logit = dense @ w + sparse_score
        labels = (torch.rand(b, generator=g) < torch.sigmoid(2 * logit)).to(torch.float32)
        kjt = KeyedJaggedTensor.from_lengths_sync(
            keys=m.feature_names, values=values, lengths=lengths.flatten().to(torch.int32)
        )
        return Batch(dense_features=dense, sparse_features=kjt, labels=labels)

    def iterate(self, start: int, stop: int) -> Iterator[tuple[int, Batch]]:
        """``(step, batch)`` for global steps ``start <= step < stop``."""
        for step in range(start, stop):
            yield step, self.batch(step)
