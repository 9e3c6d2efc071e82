"""Client data pools for federated experiments: public data for the server, private batches.

Images come from :mod:`trainleak.data` (MNIST, the CIFAR-10 images under the data root,
digits); the tabular set is scikit-learn's bundled breast-cancer table (569 x 30), min-max
scaled to [0, 1] over the whole table [inferred: the server is assumed to know the feature
ranges]. The first ``n_public`` samples (after a seeded shuffle) are public; the rest are the
clients' private pool.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

from trainleak.data import load_cifar10, load_digits, load_mnist
from trainleak.errors import ConfigError

PoolName = Literal["mnist", "cifar10", "digits", "breast_cancer"]


@dataclass(frozen=True)
class Pool:
    """Public and private samples of one data set.

    Attributes:
        name: the data set.
        public_x: samples the server may use ``(n_pub, *input_shape)``.
        x: the private pool.
        y: its labels.
        n_classes: number of classes.
        public_y: labels of the public samples (to train honest models).
    """

    name: str
    public_x: torch.Tensor
    x: torch.Tensor
    y: torch.Tensor
    n_classes: int
    public_y: torch.Tensor

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(int(s) for s in self.x.shape[1:])

    def batch(self, size: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """A private batch drawn without replacement.

        Raises:
            ConfigError: the pool holds fewer than ``size`` samples.
        """
        if size > len(self.x):
            raise ConfigError.invalid("batch_size", f"at most {len(self.x)} for {self.name}", size)
        idx = torch.randperm(len(self.x), generator=generator)[:size]
        return self.x[idx], self.y[idx]


def _raw(name: str, data_dir: str | Path | None, limit: int) -> tuple[torch.Tensor, torch.Tensor]:
    if name == "breast_cancer":
        from sklearn.datasets import load_breast_cancer

        xs, ys = load_breast_cancer(return_X_y=True)
        x = torch.as_tensor(xs, dtype=torch.float32)
        x = (x - x.min(0).values) / (x.max(0).values - x.min(0).values).clamp_min(1e-12)
        return x, torch.as_tensor(ys, dtype=torch.long)

    if name == "mnist":
        ds = load_mnist("train", data_dir, limit=limit)
    elif name == "cifar10":
        ds = load_cifar10("train", data_dir)  # the shared copy holds 4000 images
    elif name == "digits":
        ds = load_digits()
    else:
        raise ConfigError.invalid("dataset", "mnist, cifar10, digits or breast_cancer", name)
    return ds.x, ds.y


def load_pool(
    name: str,
    *,
    n_public: int,
    data_dir: str | Path | None = None,
    limit: int = 12_000,
    seed: int = 0,
) -> Pool:
    """Load ``name``, shuffle with ``seed`` and split it into public and private parts.

    Args:
        name: ``mnist``, ``cifar10``, ``digits`` or ``breast_cancer``.
        n_public: samples given to the server.
        data_dir: the data root (``None``: ``$TRAINLEAK_DATA``).
        limit: most images read from disk.
        seed: seed of the shuffle.

    Returns:
        The :class:`Pool`.
    """
    x, y = _raw(name, data_dir, limit)
    if not 2 <= n_public < len(x):
        raise ConfigError.invalid("n_public", f"an integer in [2, {len(x) - 1}]", n_public)
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    x, y = x[perm], y[perm]
    return Pool(name, x[:n_public], x[n_public:], y[n_public:], int(y.max()) + 1, y[:n_public])
