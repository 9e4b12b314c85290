"""Synthetic click data: determinism by (seed, step, rank), shapes, a learnable signal."""

from __future__ import annotations

import importlib.util
import os

import pytest

if importlib.util.find_spec("torchrec") is None:  # pragma: no cover - depends on the install
    if os.environ.get("CI") == "true":
        pytest.fail("torchrec is not installed: `make test` installs it", pytrace=False)
    pytest.skip("torchrec is not installed: `make test` installs it", allow_module_level=True)

import torch

from trainer.config import ModelConfig
from trainer.data import SyntheticClicks, batch_seed

MC = ModelConfig(num_tables=3, rows=100, emb_dim=4, dense_in=5, dense_arch=(8, 4), pooling=3)


def _same(a: SyntheticClicks, b: SyntheticClicks, step: int) -> bool:
    x, y = a.batch(step), b.batch(step)
    return (
        torch.equal(x.dense_features, y.dense_features)
        and torch.equal(x.sparse_features.values(), y.sparse_features.values())
        and torch.equal(x.sparse_features.lengths(), y.sparse_features.lengths())
        and torch.equal(x.labels, y.labels)
    )


def test_a_batch_is_a_function_of_seed_step_and_rank() -> None:
    a = SyntheticClicks(MC, 32, seed=1, rank=0)
    assert _same(a, SyntheticClicks(MC, 32, seed=1, rank=0), 7)
    assert not _same(a, SyntheticClicks(MC, 32, seed=1, rank=1), 7)
    assert not _same(a, SyntheticClicks(MC, 32, seed=2, rank=0), 7)
    assert not _same(a, SyntheticClicks(MC, 32, seed=1, rank=0, stream=1), 7)
    x, y = a.batch(7), a.batch(8)
    assert not torch.equal(x.dense_features, y.dense_features)


def test_batch_order_does_not_matter() -> None:
    """A resumed attempt asks for step 20 first: it must get what the first attempt got."""
    a, b = SyntheticClicks(MC, 16), SyntheticClicks(MC, 16)
    for step in range(5):
        a.batch(step)
    assert _same(a, b, 5)


def test_shapes_and_ranges() -> None:
    batch = SyntheticClicks(MC, 32).batch(0)
    kjt = batch.sparse_features
    assert batch.dense_features.shape == (32, MC.dense_in)
    assert batch.labels.shape == (32,) and set(batch.labels.unique().tolist()) <= {0.0, 1.0}
    assert kjt.keys() == MC.feature_names
    assert kjt.lengths().shape == (MC.num_tables * 32,)
    assert int(kjt.lengths().min()) >= 1 and int(kjt.lengths().sum()) == kjt.values().numel()
    assert int(kjt.values().min()) >= 0 and int(kjt.values().max()) < MC.rows


def test_labels_carry_a_signal() -> None:
    """The labels are neither constant nor independent of the dense features."""
    batch = SyntheticClicks(MC, 4096).batch(0)
    rate = float(batch.labels.mean())
    assert 0.2 < rate < 0.8
    corr = torch.corrcoef(torch.stack([batch.dense_features.sum(dim=1), batch.labels]))[0, 1]
    assert abs(float(corr)) > 0.05


def test_iterate_yields_numbered_steps() -> None:
    steps = [step for step, _ in SyntheticClicks(MC, 4).iterate(3, 6)]
    assert steps == [3, 4, 5]


def test_batch_seed_is_well_mixed() -> None:
    seeds = {batch_seed(0, step, rank) for step in range(100) for rank in range(8)}
    assert len(seeds) == 800
    assert all(0 <= s < 2**63 for s in seeds)
