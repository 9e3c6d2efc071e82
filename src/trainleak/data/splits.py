"""Disjoint splits: a private pool for training sets, and held-out data the attacker may know.

Reconstruction experiments must keep the training set's statistics away from the attack. The
data set is cut into disjoint parts by one seeded permutation:

- ``private``: the pool training sets are drawn from (and, when a hyper-parameter is tuned, a
  ``validation`` half of it for tuning and an ``evaluation`` half for the reported runs);
- ``public``: held-out data an attacker may plausibly hold (its mean image, the value range
  derived from it, candidates of equal-budget baselines);
- ``reference``: held-out data used only by the scorer (e.g. the train/held-out distance ratio
  of :mod:`trainleak.metrics.specificity`), never by an attack or a baseline, so that a
  baseline's candidates are never scored against themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from trainleak.data._types import ImageDataset
from trainleak.data.transforms import to_symmetric
from trainleak.errors import ConfigError
from trainleak.validation import check_choice


def split_disjoint(
    ds: ImageDataset, fractions: Sequence[float], *, seed: int = 0
) -> tuple[ImageDataset, ...]:
    """Cut ``ds`` into disjoint random parts of the given fractions.

    Part ``k`` holds ``floor(fractions[k] * len(ds))`` samples (the last part takes the
    remainder when the fractions sum to 1), all drawn by one permutation of a local
    ``torch.Generator`` seeded with ``seed``.

    Args:
        ds: the data set.
        fractions: positive fractions summing to at most 1.
        seed: seed of the permutation.

    Returns:
        One data set per fraction, in the order given; no sample is in two parts.

    Raises:
        ConfigError: for an empty list, a non-positive fraction, a sum above 1, or a part that
            would be empty.

    Example:
        >>> from trainleak.data import load_digits
        >>> a, b = split_disjoint(load_digits(), (0.5, 0.5), seed=3)
        >>> len(a) + len(b)
        1797
    """
    fr = [float(f) for f in fractions]
    if not fr or any(not 0.0 < f <= 1.0 for f in fr) or sum(fr) > 1.0 + 1e-9:
        raise ConfigError.invalid("fractions", "fractions in (0, 1] summing to at most 1", fr)
    n = len(ds)
    sizes = [int(f * n) for f in fr]
    if abs(sum(fr) - 1.0) <= 1e-9:
        sizes[-1] = n - sum(sizes[:-1])
    if any(s < 1 for s in sizes):
        raise ConfigError.invalid("fractions", f"parts of at least one of {n} samples", fr)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    bounds = [0]
    for s in sizes:
        bounds.append(bounds[-1] + s)
    return tuple(ds.subset(perm[a:b]) for a, b in zip(bounds[:-1], bounds[1:]))


PoolName = Literal["all", "validation", "evaluation"]


@dataclass(frozen=True)
class HeldOutSplit:
    """The private pool and the two held-out parts of one data set (all disjoint).

    Attributes:
        private: the pool training sets are drawn from.
        public: held-out data an attacker may know.
        reference: held-out data only the scorer uses.
        seed: the seed of the split.
    """

    private: ImageDataset
    public: ImageDataset
    reference: ImageDataset
    seed: int

    def pool(self, which: PoolName = "all") -> ImageDataset:
        """The private pool, or its ``validation`` / ``evaluation`` half (disjoint halves).

        Hyper-parameters chosen on training sets drawn from the validation half are then
        evaluated on training sets drawn from the evaluation half, never on the same images.
        """
        check_choice("pool", which, ("all", "validation", "evaluation"))
        if which == "all":
            return self.private
        validation, evaluation = split_disjoint(self.private, (0.5, 0.5), seed=self.seed + 1)
        return validation if which == "validation" else evaluation

    def public_mean(self) -> torch.Tensor:
        """The mean image of the public part in ``[-1, 1]`` pixels, shape ``(1, C, H, W)``.

        This (never the training set's mean) is what an attack or its output may use.
        """
        return to_symmetric(self.public.x).double().mean(0, keepdim=True).float()


def heldout_split(
    ds: ImageDataset,
    *,
    seed: int = 0,
    private_fraction: float = 0.5,
    public_fraction: float = 0.25,
) -> HeldOutSplit:
    """Split ``ds`` into a private pool, a public part and a scoring reference part.

    Args:
        ds: the data set.
        seed: seed of the permutation (independent of the seed used to draw training sets).
        private_fraction: share of the private pool.
        public_fraction: share of the public part; the reference part gets the rest.

    Returns:
        A :class:`HeldOutSplit`.

    Raises:
        ConfigError: when the fractions leave no room for the reference part.

    Example:
        >>> from trainleak.data import load_digits
        >>> s = heldout_split(load_digits(), seed=0)
        >>> len(s.private), len(s.public), len(s.reference)
        (898, 449, 450)
    """
    rest = 1.0 - private_fraction - public_fraction
    if rest <= 0:
        raise ConfigError.invalid(
            "public_fraction",
            f"below {1.0 - private_fraction:g} so the reference part is not empty",
            public_fraction,
        )
    private, public, reference = split_disjoint(
        ds, (private_fraction, public_fraction, rest), seed=seed
    )
    return HeldOutSplit(private, public, reference, seed)
