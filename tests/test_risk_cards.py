"""Every experiment's risk card, built from its rows: for each one synthetic rows that must
come out ``high`` and rows that must not (an attack no better than its baseline, nothing
recovered beside a bound), the shared count-against-baseline helpers, and a registry check that
no experiment ships without a card builder."""

from __future__ import annotations

import dataclasses
import inspect
import sys
from collections.abc import Mapping
from typing import Any

import pytest
import torch

from trainleak.experiments import available_experiments
from trainleak.experiments import collaboration_collusion as collusion
from trainleak.experiments import deletion_reconstruction as deletion
from trainleak.experiments import distillation_leakage as distillation
from trainleak.experiments import dpsgd_distortion_bound as dpsgd
from trainleak.experiments import gaussian_prototypes as prototypes
from trainleak.experiments import jacobian_uniqueness as jacobian
from trainleak.experiments import kkt_reconstruction as kkt
from trainleak.experiments import optimizer_fingerprints as fingerprints
from trainleak.experiments import subspace_reconstruction as subspace
from trainleak.experiments import unlearning_broadcast as unlearning
from trainleak.experiments import zcdp_transition as zcdp
from trainleak.experiments._kkt_common import ScoreRow
from trainleak.experiments.base import Experiment, ExperimentConfig, Result
from trainleak.experiments.collaboration_collusion_claims import CollusionRow, RefusalRow
from trainleak.experiments.deletion_reconstruction_claims import RecoveryRow as BitsRow
from trainleak.experiments.distillation_leakage_claims import RecoveryRow as DistilledRow
from trainleak.experiments.dpsgd_bound_claims import BoundRow
from trainleak.experiments.jacobian_uniqueness_claims import CriterionRow
from trainleak.experiments.prototype_claims import RunRow as ProtoRow
from trainleak.experiments.risk import (
    AttackFinding,
    RiskCard,
    count_passing,
    riskiest_card,
    threshold_finding,
)
from trainleak.experiments.subspace_claims import ImageRow, WidthRow
from trainleak.experiments.unlearning_broadcast_claims import DetectionRow, SettingRow
from trainleak.experiments.zcdp_transition import TransitionRow
from trainleak.metrics.prototypes import grid_candidates, specific_matches

# -- the shared helpers -----------------------------------------------------------------------


def test_threshold_finding_counts_both_sides_by_one_rule() -> None:
    assert count_passing([0.7, 0.6, 0.59, float("nan")], 0.6) == 2
    assert count_passing([0.1, 0.2, 0.3], 0.2, above=False) == 2
    f = threshold_finding("a", [0.9, 0.8, 0.1], 0.6, rule="r", baselines=[[0.7, 0.0, 0.0], []])
    assert (f.recovered, f.of, f.baseline_recovered, f.certainty) == (2, 3, 1, "ground truth")
    alone = threshold_finding("a", [0.9], 0.6, rule="r")
    assert alone.baseline_recovered is None and "no equal-budget baseline" in alone.detail


def test_riskiest_card_takes_the_worst_release_and_names_it() -> None:
    def found(n: int, base: int) -> AttackFinding:
        return AttackFinding("a", 4, n, 4, certainty="ground truth", baseline_recovered=base)

    card = riskiest_card({"r1": ([found(1, 1)], []), "r2": ([found(3, 0)], []), "r3": ([], [])})
    assert card.level == "high" and card.release == "r2 (the riskiest of 3 releases)"
    assert riskiest_card({"only": ([found(1, 1)], [])}).release == "only"
    assert riskiest_card({}).level == "unmeasured"


# -- kkt-reconstruction and optimizer-fingerprints --------------------------------------------


def _score(method: str, role: str, hits: int, seed: int = 0, opt: str = "gd") -> ScoreRow:
    return ScoreRow(
        n=10, candidates=20, ssim_04=hits, ssim_06=hits, median_ssim=0.1 * hits,
        mean_top10_ssim=0.5, specific=hits, specific_ssim_04=hits, median_ratio=0.9,
        dataset="mnist", optimizer=opt, seed=seed, method=method, role=role,  # type: ignore[arg-type]
    )  # fmt: skip


def _kkt_rows(attack: int, baseline: int) -> list[ScoreRow]:
    return [
        _score("kkt attack", "attack", attack),
        _score("random uniform", "baseline", 0),
        _score("held-out images", "baseline", baseline),
        _score("kkt on untrained net", "control", 9),  # another release
        _score("class means (oracle)", "oracle", 10),  # knows what the attack is not given
    ]


def test_kkt_card_counts_specific_images_against_the_best_baseline() -> None:
    card = kkt.risk_of(_kkt_rows(6, 1), kkt.KKTConfig())
    assert card.level == "high" and card.attack is not None
    assert (card.attack.recovered, card.attack.of, card.attack.baseline_recovered) == (6, 10, 1)
    assert "mnist with gd, seed 0" in card.release and card.attacks_run == 1
    tie = kkt.risk_of(_kkt_rows(2, 2), kkt.KKTConfig())
    assert tie.level == "unproven" and tie.attack is not None and tie.attack.recovered == 2


def test_fingerprint_card_counts_the_l2_variant_and_picks_the_leaking_optimizer() -> None:
    rows = [
        *(_score(m, r, h, opt="adam") for m, r, h in
          (("own target", "attack", 0), ("l2 target", "variant", 0), ("random", "baseline", 0))),
        *(_score(m, r, h, opt="gd") for m, r, h in
          (("own target", "attack", 1), ("l2 target", "variant", 4), ("random", "baseline", 1))),
    ]  # fmt: skip
    card = fingerprints.risk_of(rows, fingerprints.FingerprintConfig())
    assert card.level == "high" and "with gd" in card.release and card.attack is not None
    assert "l2 target" in card.attack.attack and card.attack.recovered == 4
    adam = fingerprints.risk_of(rows[:3], fingerprints.FingerprintConfig())
    assert adam.level == "unproven"


# -- subspace-reconstruction ------------------------------------------------------------------


def _image(method: str, ssim: tuple[float, ...], part: str = "widths") -> ImageRow:
    return ImageRow(part, "digits", 64, "gd", method, 0.01, ssim, 0.5, 0.5, 20.0, 0, 0)  # type: ignore[arg-type]


def test_subspace_card_counts_ssim_06_against_the_trivial_baselines() -> None:
    high = [0.9] * 7 + [0.1] * 3
    rows: list[Any] = [
        WidthRow(25, 0.1, 0.5, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)),  # part (a): no card
        _image("subspace-aware", tuple(high)),
        _image("full space", (0.2,) * 10),
        _image("random uniform", (0.0,) * 10),
        _image("held-out mean image", (0.7,) + (0.2,) * 9),
    ]
    card = subspace.risk_of(rows, subspace.SubspaceConfig())
    assert card.level == "high" and card.attack is not None
    assert card.attack.attack == "subspace-aware" and card.attack.recovered == 7
    assert card.attack.baseline_recovered == 1 and "width-64" in card.release
    mean_only = [*rows[:1], _image("subspace-aware", (0.7,) * 3 + (0.1,) * 7),
                 _image("held-out mean image", (0.7,) * 3 + (0.0,) * 7)]  # fmt: skip
    assert subspace.risk_of(mean_only, subspace.SubspaceConfig()).level == "unproven"


# -- gaussian-prototypes ----------------------------------------------------------------------


def test_prototype_rule_singles_out_records_and_the_grid_baseline_uses_no_data() -> None:
    x = torch.tensor([0.1, 0.5, 0.9])
    assert specific_matches(x, x.clone()) == 3
    assert specific_matches(x, torch.full((3,), 0.5)) == 1  # collapsed: only the middle
    grid = grid_candidates(4, (0.0, 1.0))
    assert torch.allclose(grid, torch.tensor([0.125, 0.375, 0.625, 0.875], dtype=grid.dtype))


def _proto(recovered: int, grid: int, seed: int = 0) -> ProtoRow:
    return ProtoRow(10, "C", 0.01, seed, False, 0.01, 0.9, 0.0, 1e-6, recovered, grid)


def test_prototype_card_must_beat_the_grid() -> None:
    cfg = prototypes.PrototypeConfig()
    card = prototypes.risk_of([_proto(5, 5), _proto(9, 3, seed=1)], cfg)
    assert card.level == "high" and "seed 1" in card.release and card.attack is not None
    assert (card.attack.recovered, card.attack.baseline_recovered) == (9, 3)
    assert prototypes.risk_of([_proto(5, 5), _proto(4, 6, seed=1)], cfg).level == "unproven"


# -- dpsgd-distortion-bound --------------------------------------------------------------------


def _bound_row(identified: tuple[bool, ...], pool: int = 20, eps: float = 8.0) -> BoundRow:
    floats = {f.name: 0.0 for f in dataclasses.fields(BoundRow) if f.type == "float"}
    n = len(identified)
    values = floats | {
        "regime": "concentrating", "epsilon": eps, "sigma": 1.5, "sampling_rate": 0.5,
        "steps": 20, "pool_size": pool, "pool_bound": 0.01, "guo_unbiased": 0.5,
        "hayes_success": 0.4, "posterior_mean": (0.02,) * n, "identified": identified,
        "pool_mean": (0.06,) * n, "population_posterior_mean": (0.06,) * n,
        "public_mean": (0.06,) * n,
    }  # fmt: skip
    return BoundRow(**values)


def test_dpsgd_card_identification_beyond_chance_is_high() -> None:
    cfg = dpsgd.DPSGDBoundConfig()
    card = dpsgd.risk_of([_bound_row((True,) * 8 + (False,) * 12)], cfg)
    assert card.level == "high" and card.attack is not None
    assert (card.attack.recovered, card.attack.baseline_recovered) == (8, 1)  # 20 / 20 by chance
    assert card.bound is not None and card.bound.name.startswith("rate-distortion")
    assert card.gap.scale == "mse" and card.gap.attack_value == pytest.approx(0.02)


def test_dpsgd_card_is_low_when_nothing_beyond_chance_and_a_bound_holds() -> None:
    cfg = dpsgd.DPSGDBoundConfig()
    chance = dpsgd.risk_of([_bound_row((True,) + (False,) * 19)], cfg)  # 1 of 20: chance
    assert chance.level == "low" and chance.bound is not None
    assert chance.bound.name.startswith("rate-distortion") and chance.bound.general
    nothing = dpsgd.risk_of([_bound_row((False,) * 12, pool=1000, eps=1.0)], cfg)
    assert nothing.level == "low" and "epsilon 1" in nothing.release


# -- zcdp-transition ---------------------------------------------------------------------------


def _point(
    rho: float, recovered: int, bound: float | None, setting: str = "sphere"
) -> TransitionRow:
    return TransitionRow(setting, 16, rho, rho / 16, 0.5, 0.01, 0.5, 30, recovered, bound)


def test_zcdp_card_names_the_rho_that_leaks_and_keeps_its_bound() -> None:
    cfg = zcdp.ZCDPTransitionConfig()
    card = zcdp.risk_of([_point(1.6, 0, 0.9), _point(16000.0, 28, 1e-4)], cfg)
    assert card.level == "high" and "rho = 1.6e+04" in card.release
    assert card.attack is not None and (card.attack.recovered, card.attack.of) == (28, 30)
    assert card.bound is not None and card.bound.value == 1e-4
    safe = zcdp.risk_of([_point(1.6, 0, 0.9), _point(16.0, 0, 0.5)], cfg)
    assert safe.level == "low" and safe.bound is not None and safe.bound.value == 0.5  # weakest
    digits = zcdp.risk_of([_point(64.0, 0, None, "digits:none")], cfg)
    assert digits.level == "unproven" and digits.bound is None


# -- jacobian-uniqueness -----------------------------------------------------------------------


def _criterion(b: int, success: bool) -> CriterionRow:
    rank = min(b * 64, 650)
    return CriterionRow(
        model="softmax", d=650, batch_size=b, input_dim=64, rank=rank, null_dim=b * 64 - rank,
        sufficient=b * 64 > 650, non_unique=rank < b * 64, threshold=11,
        collision_gap=1e-9 if rank < b * 64 else None,
        collision_distance=0.5 if rank < b * 64 else None,
        collision_in_box=True if rank < b * 64 else None,
        dlg_mse=1e-5 if success else 0.05, dlg_success=success,
    )  # fmt: skip


def test_jacobian_card_dlg_success_is_high_and_non_uniqueness_does_not_clear() -> None:
    cfg = jacobian.JacobianConfig()
    card = jacobian.risk_of([_criterion(4, True), _criterion(24, False)], cfg)
    assert card.level == "high" and "batch of 4" in card.release and card.bound is None
    above = jacobian.risk_of([_criterion(24, False)], cfg)
    assert above.level == "unproven" and above.bound is not None  # a bound, not a clearance
    assert above.bound.value == 24 * 64 - 650 and "0.5 away" in above.bound.statement


# -- unlearning-broadcast-leak -----------------------------------------------------------------


def _setting(exact: float, certified: float, precision: str = "float64") -> SettingRow:
    return SettingRow("digits/raw", "unrestricted", precision, "all", 0.0, 64, 20, exact, exact,
                      0.99, 0.9, 1e-3, 64, 7.0, certified, 0, 1e-6)  # fmt: skip


def test_unlearning_card_exact_recoveries_are_high() -> None:
    cfg = unlearning.UnlearningBroadcastConfig()
    det = DetectionRow(1.0, 0.0, 0.0)
    card = unlearning.risk_of([_setting(0.1, 0.0, "float16"), _setting(1.0, 1.0), det], cfg)
    assert card.level == "high" and "float64" in card.release and card.attack is not None
    assert (card.attack.recovered, card.attack.certified) == (20, 20)
    assert unlearning.risk_of([_setting(0.0, 0.0), det], cfg).level == "unproven"


# -- deletion-reconstruction -------------------------------------------------------------------


def _bits(k: int, fresh: float, other: float, eps: float = 1.0) -> BitsRow:
    return BitsRow(eps, k, 1000, fresh, fresh - 0.1, 0.731, fresh, other, other, other)


def test_deletion_card_fresh_coins_leak_beyond_chance() -> None:
    cfg = deletion.DeletionConfig()
    card = deletion.risk_of([_bits(0, 0.731, 0.731), _bits(51, 0.999, 0.731)], cfg)
    assert card.level == "high" and "51 deletions, fresh coins" in card.release
    assert card.attack is not None and (card.attack.recovered, card.attack.of) == (999, 1000)
    assert card.attack.baseline_recovered == 500 and card.bound is None  # no limit for fresh


def test_deletion_card_is_low_at_chance_under_the_single_release_limit() -> None:
    card = deletion.risk_of([_bits(0, 0.5, 0.5, eps=0.0)], deletion.DeletionConfig())
    assert card.level == "low" and card.bound is not None
    assert card.bound.name.startswith("single-release")


# -- collaboration-collusion -------------------------------------------------------------------


def _collusion(link: float, inversion: float = float("nan"), tau: float = 1.0) -> CollusionRow:
    return CollusionRow("synthetic", "tradeoff", 4, 0.0, tau, 0.8, inversion, inversion,
                        link, 0.3, link, 0.3, targets=150)  # fmt: skip


def test_collusion_card_counts_linked_records_and_skips_refused_attacks() -> None:
    cfg = collusion.CollusionConfig()
    rows = [_collusion(0.0), _collusion(0.6, 1.0, tau=0.0), RefusalRow(True)]
    card = collusion.risk_of(rows, cfg)
    assert card.level == "high" and card.attack is not None and "tau 0)" in card.release
    assert card.attack.attack == "inversion" and card.attack.recovered == 150
    none = collusion.risk_of([_collusion(0.0)], cfg)
    assert none.level == "unproven" and none.attacks_run == 2  # the refused inversion is out


# -- distillation-leakage ----------------------------------------------------------------------


def _distilled(share: float, baseline: float) -> DistilledRow:
    return DistilledRow("dm", "convnet", "real", 10, 0, 0.6, share, 0.1, 0.3, baseline, 0.0,
                        0.5, 0.8, 100)  # fmt: skip


def test_distillation_card_must_beat_the_auxiliary_baseline() -> None:
    cfg = distillation.DistillationLeakageConfig()
    card = distillation.risk_of([_distilled(0.8, 0.1)], cfg)
    assert card.level == "high" and card.attack is not None
    assert (card.attack.recovered, card.attack.baseline_recovered) == (80, 10)
    assert distillation.risk_of([_distilled(0.2, 0.3)], cfg).level == "unproven"


# -- every registered experiment has a builder ------------------------------------------------


def missing_risk_builders(experiments: Mapping[str, Experiment]) -> list[str]:
    """The library's experiments whose module (the one registering ``run``) has no
    ``risk_of(rows, cfg)``; experiments that tests register from their own modules are not the
    library's and are skipped."""
    missing = []
    for name, exp in sorted(experiments.items()):
        if not exp.run_fn.__module__.startswith("trainleak."):
            continue
        fn = getattr(sys.modules[exp.run_fn.__module__], "risk_of", None)
        if not callable(fn) or len(inspect.signature(fn).parameters) != 2:
            missing.append(f"{name} ({exp.run_fn.__module__})")
    return missing


def _unregistered_run(cfg: ExperimentConfig, progress: object = None) -> Result:
    return Result("fake", {})


def test_every_registered_experiment_module_builds_a_risk_card() -> None:
    missing = missing_risk_builders(available_experiments())
    assert not missing, (
        "experiments without a risk card builder `risk_of(rows, cfg) -> RiskCard` in their "
        f"module (see trainleak.experiments.risk and docs/audit.md): {missing}"
    )
    fake = Experiment("fake", "no card", ExperimentConfig, _unregistered_run)
    assert missing_risk_builders({"fake": fake}) == []  # a test's own experiment
    library = dataclasses.replace(fake, run_fn=kkt.default_lr)  # in a module with a builder
    assert missing_risk_builders({"kkt": library}) == []
    bare = dataclasses.replace(fake, run_fn=count_passing)  # trainleak.experiments.risk: none
    assert missing_risk_builders({"bare": bare}) == ["bare (trainleak.experiments.risk)"]


def test_a_run_without_rows_is_unmeasured() -> None:
    card = kkt.risk_of([], kkt.KKTConfig())
    assert isinstance(card, RiskCard) and card.level == "unmeasured"
