"""Attacks on transformer FedSGD updates
(:class:`~trainleak.releases.transformer_update.TransformerUpdate`): the DAGER span test,
TIGER's subspace-distance optimisation, and the gradient-matching and bag-of-words baselines."""
