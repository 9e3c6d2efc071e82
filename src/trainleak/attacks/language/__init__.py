"""Attacks on transformer FedSGD updates (:class:`~trainleak.releases.language.TransformerUpdate`):
the DAGER span test, TIGER's subspace-distance optimisation, and two baselines."""
