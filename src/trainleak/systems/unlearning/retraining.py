"""Deletion under perfect retraining: base mechanisms and the unlearning wrapper (seed 16).

A curator publishes ``M(D)`` and, after every deletion request, an output distributed as
``M(D')`` on the remaining records ("perfect retraining"). The definition constrains only that
marginal, so the wrapper can draw its coins three ways:

- ``"fresh"``: new coins for every re-release. Each deletion of an adversarial record hands
  the adversary an independent new release on almost the same honest data; ``k`` deletions
  compose like ``k + 1`` runs, and majority vote or averaging reconstructs the honest records.
- ``"coupled"``: the same seed for every re-run, coins consumed in data-set order. Undeleted
  records keep their coins only while deletions do not shift their positions [inferred].
- ``"protected"``: coins are keyed by record and kept (a bulletin board of per-record noisy
  answers; for aggregates, one persistent noise draw). The adversary's view is then simulatable
  from one run on the undeleted data, the protection of the undeleted that Cohen et al. define
  (our simulation-based reading of it is [inferred]).

References:
    Cohen, Kohen, Nissim, Stemmer, *Protecting the Undeleted in Machine Unlearning*, arXiv
    2602.16697 (FORC 2026). Warner (1965) for randomized response. Chaudhuri, Monteleoni,
    Sarwate, *Differentially Private Empirical Risk Minimization*, JMLR 2011, Algorithm 1
    (output perturbation) for DP logistic regression.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np
import torch
from scipy.optimize import minimize

from trainleak.errors import ConfigError
from trainleak.releases.unlearning import DeletionTranscript
from trainleak.validation import check_fields, param

Randomness = Literal["fresh", "coupled", "protected"]


class BaseMechanism(Protocol):
    """A static mechanism: records (and their coins) in, one output out."""

    @property
    def per_record(self) -> bool:
        """Whether outputs are per record (aligned with record ids) or one aggregate."""
        ...

    def release(
        self, values: np.ndarray, rng: np.random.Generator, coins: np.ndarray | None
    ) -> np.ndarray:
        """One run. ``coins`` (n,) are per-record uniforms, when the wrapper keys them."""
        ...


@dataclass(frozen=True)
class RandomizedResponse:
    """Release each bit, flipped with probability ``q = 1 / (1 + e^eps)``: eps-DP per record."""

    eps: float = param(gt=0)
    per_record: bool = True

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def flip_probability(self) -> float:
        """``q = 1 / (1 + e^eps)``."""
        return 1.0 / (1.0 + math.exp(self.eps))

    def release(
        self, values: np.ndarray, rng: np.random.Generator, coins: np.ndarray | None
    ) -> np.ndarray:
        u = coins if coins is not None else rng.random(values.shape[0])
        return np.where(u < self.flip_probability, 1 - values, values)


@dataclass(frozen=True)
class ExactSum:
    """Release the exact sum of the records (allowed by the new definition, not by DP)."""

    per_record: bool = False

    def release(
        self, values: np.ndarray, rng: np.random.Generator, coins: np.ndarray | None
    ) -> np.ndarray:
        return np.asarray(values.sum(axis=0, keepdims=True))


@dataclass(frozen=True)
class DPLogisticRegression:
    """L2-regularised logistic regression with output perturbation (eps-DP).

    Records are rows ``[x, y]`` with ``||x|| <= 1`` and ``y`` in ``{-1, +1}``. The minimiser of
    ``(1/n) sum log(1 + exp(-y theta^T x)) + (lam/2) ||theta||^2`` has L2 sensitivity
    ``2 / (n lam)``; the noise has density proportional to ``exp(-eps ||b|| n lam / 2)``.
    """

    eps: float = param(gt=0)
    lam: float = param(0.01, gt=0)
    per_record: bool = False

    def __post_init__(self) -> None:
        check_fields(self)

    def fit(self, values: np.ndarray) -> np.ndarray:
        """The exact (non-private) minimiser."""
        x, y = values[:, :-1], values[:, -1]
        lam = self.lam

        def obj(theta: np.ndarray) -> tuple[float, np.ndarray]:
            m = y * (x @ theta)
            loss = np.logaddexp(0.0, -m).mean() + 0.5 * lam * theta @ theta
            grad = -(x * (y / (1.0 + np.exp(m)))[:, None]).mean(0) + lam * theta
            return float(loss), grad

        res = minimize(
            obj, np.zeros(x.shape[1]), jac=True, method="L-BFGS-B", options={"gtol": 1e-10}
        )
        return np.asarray(res.x)

    def release(
        self, values: np.ndarray, rng: np.random.Generator, coins: np.ndarray | None
    ) -> np.ndarray:
        theta = self.fit(values)
        d, n = theta.shape[0], values.shape[0]
        direction = rng.standard_normal(d)
        radius = rng.gamma(shape=d, scale=2.0 / (n * self.lam * self.eps))
        return theta + radius * direction / np.linalg.norm(direction)


@dataclass
class UnlearningMechanism:
    """Honour deletion requests by perfect retraining, with a chosen use of randomness.

    Args:
        base: the static mechanism.
        randomness: ``"fresh"``, ``"coupled"`` or ``"protected"`` (see the module docstring).
        seed: the mechanism's seed.

    Example:
        >>> import numpy as np
        >>> mech = UnlearningMechanism(RandomizedResponse(eps=1.0), "protected", seed=0)
        >>> first = mech.fit(np.arange(5), np.array([0, 1, 0, 1, 1]))
        >>> again = mech.delete([4])
        >>> bool((first[:4] == again).all())
        True
    """

    base: BaseMechanism
    randomness: Randomness = param("fresh", choices=Randomness)
    seed: int = 0
    _ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), repr=False)
    _values: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    _coins: dict[int, float] = field(default_factory=dict, repr=False)
    outputs: list[np.ndarray] = field(default_factory=list, repr=False)
    record_ids: list[np.ndarray | None] = field(default_factory=list, repr=False)
    deleted: list[np.ndarray] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        check_fields(self)

    def fit(self, ids: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Publish the first output on records ``values`` with distinct integer ``ids``."""
        ids = np.asarray(ids, dtype=np.int64)
        if len(np.unique(ids)) != len(ids) or len(ids) != len(values):
            raise ConfigError.invalid("ids", "distinct ids, one per record", ids.tolist()[:10])
        self._ids, self._values = ids, np.asarray(values)
        coin_rng = np.random.default_rng([self.seed, 1])
        self._coins = dict(zip(ids.tolist(), coin_rng.random(len(ids)).tolist()))
        return self._publish()

    def delete(self, ids: list[int] | np.ndarray) -> np.ndarray:
        """Delete records ``ids`` and publish the retrained output."""
        ids = np.asarray(ids, dtype=np.int64)
        present = np.isin(ids, self._ids)
        if not present.all() or ids.size == 0:
            raise ConfigError.invalid(
                "ids", "ids of records the curator holds", ids[~present].tolist()
            )
        keep = ~np.isin(self._ids, ids)
        self._ids, self._values = self._ids[keep], self._values[keep]
        self.deleted.append(ids)
        return self._publish()

    def transcript(self, adversary_ids: np.ndarray) -> DeletionTranscript:
        """Everything published so far, as the adversary sees it."""
        return DeletionTranscript(
            outputs=tuple(torch.from_numpy(np.asarray(o, dtype=np.float64)) for o in self.outputs),
            record_ids=tuple(None if r is None else torch.from_numpy(r) for r in self.record_ids),
            adversary_ids=torch.as_tensor(np.asarray(adversary_ids, dtype=np.int64)),
            deleted=tuple(torch.from_numpy(d) for d in self.deleted),
            mechanism=f"{type(self.base).__name__}({self.randomness})",
        )

    def _publish(self) -> np.ndarray:
        k = len(self.outputs)
        if self.randomness == "fresh":
            rng = np.random.default_rng([self.seed, 2, k])
        else:
            rng = np.random.default_rng([self.seed, 2])
        coins = None
        if self.randomness == "protected" and self.base.per_record:
            coins = np.array([self._coins[i] for i in self._ids.tolist()])
        out = self.base.release(self._values, rng, coins)
        self.outputs.append(out)
        self.record_ids.append(self._ids.copy() if self.base.per_record else None)
        return out
