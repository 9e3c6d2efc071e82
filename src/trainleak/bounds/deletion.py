"""Recovery bounds for deletion requests under perfect retraining (seed system 16).

With per-record randomized response at privacy ``eps`` (flip probability
``q = 1 / (1 + e^eps)``) and fresh coins on every re-release, ``k`` deletions of adversarial
records give ``m = k + 1`` independent noisy copies of every honest bit. Majority vote recovers
a bit with probability

    P[Bin(m, 1 - q) > m / 2] + P[Bin(m, 1 - q) = m / 2] / 2  >=  1 - exp(-2 m (1/2 - q)^2)

(Hoeffding). Against that, no adversary recovers a uniform bit from one eps-DP release with
probability above ``e^eps / (1 + e^eps)``; ``m`` fresh releases compose to ``m eps``.

References:
    Cohen, Kohen, Nissim, Stemmer, *Protecting the Undeleted in Machine Unlearning*, arXiv
    2602.16697 (2026) (the attack's premise); Hoeffding (1963); the instantiation with
    randomized response is [inferred] (trainleak's seed briefs, section 16).
"""

from __future__ import annotations

import math

from scipy.stats import binom

from trainleak.bounds.base import BoundResult
from trainleak.errors import ConfigError
from trainleak.validation import check_positive


def majority_vote_recovery(eps: float, deletions: int) -> BoundResult:
    """Expected fraction of honest bits majority vote recovers after ``deletions`` re-releases.

    Args:
        eps: per-release privacy of randomized response.
        deletions: number ``k`` of adversarial deletions (``k + 1`` releases in all).

    Returns:
        ``BoundResult`` of kind ``"lower"`` on the recovery rate (guaranteed by the attack on
        uniform bits), value = the exact binomial rate; components hold the Hoeffding lower
        bound, the DP-composition upper bound and the single-release rate.

    Raises:
        ConfigError: ``eps <= 0`` or ``deletions < 0``.

    Example:
        >>> r = majority_vote_recovery(1.0, 51)
        >>> r.value > 0.99
        True
    """
    check_positive("eps", eps)
    if deletions < 0:
        raise ConfigError.invalid("deletions", "an integer >= 0", deletions)
    q = 1.0 / (1.0 + math.exp(eps))
    m = deletions + 1
    p = 1.0 - q
    exact = float(binom.sf(m // 2, m, p))  # P[X > floor(m / 2)]
    if m % 2 == 0:  # ties are broken by a fair coin
        exact += 0.5 * float(binom.pmf(m // 2, m, p))
    hoeffding = 1.0 - math.exp(-2.0 * m * (0.5 - q) ** 2)
    return BoundResult(
        value=exact,
        unit="fraction of honest bits recovered (expected)",
        kind="lower",
        components={
            "flip_probability": q,
            "releases": m,
            "hoeffding_lower": hoeffding,
            "single_release_rate": p,
            "composition_upper": single_release_limit(m * eps).value,
        },
        assumptions="uniform independent bits; fresh coins on every re-release; majority vote",
    )


def single_release_limit(eps: float) -> BoundResult:
    """No adversary recovers a uniform bit from an eps-DP release w.p. above ``e^eps/(1+e^eps)``.

    Args:
        eps: the release's privacy parameter (pure DP).

    Returns:
        ``BoundResult`` of kind ``"upper"`` on the per-bit recovery rate (and, in components,
        the distinguishing advantage ``tanh(eps / 2)`` on neighbouring data sets).
    """
    check_positive("eps", eps)
    rate = 1.0 / (1.0 + math.exp(-eps))
    return BoundResult(
        value=rate,
        unit="fraction of honest bits recovered",
        kind="upper",
        components={"advantage": math.tanh(eps / 2.0)},
        assumptions="one eps-DP release (or a view simulatable from one); uniform prior on the bit",
    )
