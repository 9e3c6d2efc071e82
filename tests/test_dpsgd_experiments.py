"""The two experiments run end to end on tiny configs and their validity claims hold."""

from __future__ import annotations

import pytest

from trainleak.experiments import get_experiment


@pytest.mark.slow
def test_dpsgd_distortion_bound_tiny() -> None:
    exp = get_experiment("dpsgd-distortion-bound")
    cfg = exp.make_config({"epsilons": [2.0, 8.0], "n_others": 100, "pool_size": 150,
                           "n_targets": 6, "map_targets": 1, "map_steps": 2, "steps": 40,
                           "features": False, "hayes_samples": 2000,
                           "validity_noise_multipliers": [1.5], "validity_targets": 60,
                           "validity_others": 30})  # fmt: skip
    res = exp.run(cfg)
    assert res.claims[0].text.startswith("Validity: the pool-prior bound")
    assert res.claims[0].holds, res.claims[0].evidence
    assert res.claims[0].evidence["informative"]  # the check could have failed
    assert [r["regime"] for r in res.tables["bound_vs_attacks"]] == ["sweep"] * 2 + [
        "concentrating"
    ]
    assert "mse_vs_epsilon" in res.figures
    assert res.risk is not None and res.risk.bound is not None and res.risk.bound.general


def test_zcdp_transition_tiny() -> None:
    exp = get_experiment("zcdp-transition")
    cfg = exp.make_config({"dims": [8, 16], "rho_over_dim": [0.1, 10.0, 1000.0], "trials": 30,
                           "subspace_dim": 32, "subspace_rank": 4})  # fmt: skip
    res = exp.run(cfg)
    assert res.claims[0].holds  # the bound stays below the attack everywhere
    assert {r["setting"] for r in res.tables["transition"]} >= {"sphere", "subspace:known"}
    card = res.risk  # at rho/d = 1000 the informed attack recovers the records
    assert card is not None and card.level == "high" and card.attack is not None
    assert card.attack.of == 30 and card.attack.recovered > 15
