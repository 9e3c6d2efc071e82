"""How a malicious server splits a fixed budget of imprint neurons into groups.

Every sample lands in one bin per group, so ``L`` groups of ``K / L`` bins form a random
``L``-uniform hypergraph whose edges are the samples. Peeling recovers every sample only while
the load ``B / K`` stays below the 2-core threshold of that hypergraph (about 0.82 for
``L = 3``, Molloy 2005); above it, splitting the neurons makes every bin fuller and the
decoder starts from fewer single-sample bins than one group of ``K`` bins would give it. At
``B = K = 128`` three groups of 43 bins recover about a quarter of the batch, one group of 128
bins about a third (``exp(-B / K)``). The server therefore chooses ``L`` from the batch size it
sets for its clients, maximising the recovery predicted by density evolution (Luby,
Mitzenmacher, Shokrollahi & Spielman 2001): with ``L = 1`` erasure decoding reads exactly the
bins Robbing the Fed's imprint reads, so the choice can never do worse than imprint on the
same neurons (up to the finite-size fluctuation of the prediction).

Density evolution, in the Poisson limit: a bin's other occupants number Poisson(lambda),
``lambda = L B / K``; ``y`` is the probability that a sample is still unknown through its other
``L - 1`` bins, ``y <- (1 - exp(-lambda y)) ** (L - 1)`` from ``y = 1``, and the predicted
recovered fraction is ``1 - (1 - exp(-lambda y)) ** L``. [The choice rule is this project's;
seed 5's abstract fixes only the multi-group construction.]
"""

from __future__ import annotations

import math

from trainleak.errors import ConfigError


def predicted_recovery(
    batch_size: int, neurons: int, n_groups: int, *, iterations: int = 2000
) -> float:
    """Fraction of a batch that peeling is predicted to recover (density evolution).

    Args:
        batch_size: samples per update ``B``.
        neurons: imprint neurons ``K`` in all (``K / L`` bins per group).
        n_groups: groups ``L``.
        iterations: density-evolution iterations (convergence near a threshold is slow).

    Example:
        >>> round(predicted_recovery(128, 128, 1), 3)  # exp(-1)
        0.368
    """
    for name, v in (("batch_size", batch_size), ("neurons", neurons), ("n_groups", n_groups)):
        if v < 1:
            raise ConfigError.invalid(name, "a positive integer", v)
    lam = n_groups * batch_size / neurons
    y = 1.0
    for _ in range(iterations):
        y_next = (1.0 - math.exp(-lam * y)) ** (n_groups - 1)
        if abs(y_next - y) < 1e-12:
            y = y_next
            break
        y = y_next
    return 1.0 - (1.0 - math.exp(-lam * y)) ** n_groups


def choose_groups(batch_size: int, neurons: int, *, max_groups: int = 3) -> int:
    """The group count in ``1..max_groups`` with the highest predicted recovery.

    Ties (within 1e-9) go to more groups, whose peeling also corrects more collisions in a
    finite batch.

    Example:
        >>> choose_groups(64, 256), choose_groups(128, 128)
        (3, 1)
    """
    if max_groups < 1:
        raise ConfigError.invalid("max_groups", "a positive integer", max_groups)
    best, best_value = 1, -1.0
    for groups in range(1, min(max_groups, neurons) + 1):
        value = predicted_recovery(batch_size, neurons, groups)
        if value >= best_value - 1e-9:
            best, best_value = groups, max(value, best_value)
    return best
