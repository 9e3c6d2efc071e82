"""Dataset distillation and the information revelation attack on digits, at test scale.

Each check is a real effect on fixed seeds with a margin: distilled sets beat random real
subsets of the same size, the meta-classifier beats chance on shadow sets it never saw, and a
real-initialised set exposes its initialisation images where a noise-initialised one does not.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
import torch
from pydantic import ValidationError

from trainleak.attacks.distillation import (
    FingerprintSpec,
    LiRAMembership,
    LossMembership,
    NearestSyntheticMembership,
    NearestSyntheticRecovery,
    held_out_accuracy,
    restore_images,
)
from trainleak.data import load_digits
from trainleak.errors import ConfigError
from trainleak.experiments.distillation_leakage import _random_protocol, _utility_jobs
from trainleak.experiments.distillation_leakage import run as run_experiment
from trainleak.experiments.distillation_leakage_claims import CLAIMS, DistillationLeakageConfig
from trainleak.metrics.distillation import recovery_scores
from trainleak.metrics.membership import auroc, tpr_at_fpr
from trainleak.models import model_spec
from trainleak.models.fitting import fit
from trainleak.models.registry import build_model
from trainleak.releases.knowledge import Knowledge
from trainleak.scenarios.distillation import candidate_specs, split_task
from trainleak.scenarios.distillation_bank import build_shadow_bank
from trainleak.systems.distillation import (
    ALGORITHMS,
    DCConfig,
    DistillConfig,
    DMConfig,
    EvalProtocol,
    MTTConfig,
    distill,
    random_subset_accuracy,
    set_accuracy,
)
from trainleak.systems.distillation.mtt import choose_expert_lr, latest_start, lr_cap, start_rate

DS = load_digits()
PRIVATE = (DS.x[:500], DS.y[:500])
AUX = (DS.x[500:1000], DS.y[500:1000])
HOLDOUT = (DS.x[1000:1200], DS.y[1000:1200])
TEST = (DS.x[500:], DS.y[500:])
MLP = model_spec("mlp", input_shape=(1, 8, 8), hidden=[32], out_dim=10)
SMALL_CONV = model_spec("convnet", input_shape=(1, 8, 8), out_dim=10, width=4)
PROTOCOL = EvalProtocol(steps=200, models=2)


def _fast(name: str, ipc: int = 1, init: str = "real") -> DistillConfig:
    configs: dict[str, DistillConfig] = {
        "dm": DMConfig(ipc=ipc, iterations=100, init=init),  # type: ignore[arg-type]
        "dc": DCConfig(ipc=ipc, iterations=10, init=init),  # type: ignore[arg-type]
        "mtt": MTTConfig(
            ipc=ipc,
            iterations=30,
            n_experts=2,
            expert_epochs=6,
            max_start_epoch=4,
            expert_steps=2,
            expert_lr=0.05,
            lr_init=0.05,
            init=init,  # type: ignore[arg-type]
        ),
    }
    return configs[name]


@lru_cache(maxsize=1)
def _random_accuracies() -> list[float]:
    one = EvalProtocol(steps=200, models=1)
    return [random_subset_accuracy(*PRIVATE, 1, MLP, TEST, one, seed=s) for s in range(6)]


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_each_method_beats_random_real_subsets_of_the_same_size(name: str) -> None:
    run = distill(*PRIVATE, 10, MLP, _fast(name), seed=0)
    assert len(run.release) == 10 and run.release.hard_labels.tolist() == list(range(10))
    acc = set_accuracy(run.release, MLP, TEST, PROTOCOL)
    random = _random_accuracies()
    # measured: random 0.62 (six draws), dc 0.80, dm 0.81, mtt 0.79
    assert acc >= statistics.mean(random) + 0.08, (name, acc, random)
    assert (run.release.lr is not None) == (name == "mtt")


@pytest.mark.parametrize("name", ["dc", "dm"])
def test_differentiable_siamese_augmentation_is_a_working_switch(name: str) -> None:
    cfg = dataclasses.replace(_fast(name), augment=True)
    run = distill(*PRIVATE, 10, MLP, cfg, seed=0)
    plain = distill(*PRIVATE, 10, MLP, _fast(name), seed=0)
    assert run.release.content_hash() != plain.release.content_hash()
    # measured: DSA 0.80 for both against random 0.62
    assert (
        set_accuracy(run.release, MLP, TEST, PROTOCOL)
        >= statistics.mean(_random_accuracies()) + 0.08
    )


def test_distillation_is_deterministic_under_its_seed() -> None:
    a = distill(*PRIVATE, 10, MLP, _fast("dm"), seed=3)
    b = distill(*PRIVATE, 10, MLP, _fast("dm"), seed=3)
    c = distill(*PRIVATE, 10, MLP, _fast("dm"), seed=4)
    assert a.release.content_hash() == b.release.content_hash() != c.release.content_hash()


def test_meta_classifier_beats_chance_on_held_out_shadow_sets() -> None:
    # the small-scale settings this test was measured with (before issue 16 changed the
    # algorithms' defaults; at the interim defaults, image step 0.01, and this tiny scale the
    # algorithm accuracy was 0.61, the architecture 0.94; not measured at the final 0.003):
    # the check is the meta-classifier, not the defaults
    configs: dict[str, DistillConfig] = {
        "dm": DMConfig(ipc=1, iterations=40, lr_img=0.003, batch_real=32),
        "dc": DCConfig(
            ipc=1,
            iterations=4,
            lr_img=0.003,
            batch_real=32,
            inner_steps=5,
            net_steps=5,
            net_lr=0.01,
        ),
        "mtt": MTTConfig(
            ipc=1,
            iterations=15,
            n_experts=1,
            expert_epochs=5,
            max_start_epoch=3,
            expert_steps=2,
            expert_lr=0.05,
            lr_init=0.05,
            syn_steps=10,
        ),
    }
    archs = {"mlp": MLP, "convnet": SMALL_CONV}
    aux = (AUX[0][:300], AUX[1][:300])
    bank = build_shadow_bank(aux, 10, configs, archs, seeds=(0, 1, 2))
    fp = FingerprintSpec(steps=20, inits=1, aux_eval=200, objective_inits=1)
    acc = held_out_accuracy(bank, list(archs.values()), aux, fp, n_trees=50)
    assert acc["n"] == 18
    # measured 0.83 / 0.89 (0.83 / 0.94 with 4 networks per residual; the former dynamics
    # fingerprint 0.78 / 0.94); chance 1/3 and 1/2
    assert acc["algorithm"] >= 1 / 3 + 0.3, acc
    assert acc["architecture"] >= 1 / 2 + 0.3, acc


def _membership_knowledge() -> Knowledge:
    cand = (torch.cat([PRIVATE[0], HOLDOUT[0]]), torch.cat([PRIVATE[1], HOLDOUT[1]]))
    return Knowledge(auxiliary=AUX, candidates=cand)


def test_real_initialised_set_leaks_membership_and_images_noise_initialised_does_not() -> None:
    real = distill(*PRIVATE, 10, MLP, _fast("dm", ipc=10), seed=0)
    noise = distill(*PRIVATE, 10, MLP, _fast("dm", ipc=10, init="noise"), seed=0)
    assert real.init_indices is not None
    positives, n = real.init_indices, len(PRIVATE[0])
    know = _membership_knowledge()
    results = {}
    for name, run in (("real", real), ("noise", noise)):
        scores = NearestSyntheticMembership()(run.release, know).scores
        assert scores is not None
        s = torch.cat([scores[positives], scores[n:]])
        m = torch.arange(len(s)) < len(positives)
        rec = NearestSyntheticRecovery()(run.release, know)
        ssim = recovery_scores(PRIVATE[0][positives], rec.inputs)
        results[name] = (auroc(s, m), tpr_at_fpr(s, m, 0.01), ssim.share_above(0.9))
    # measured: real AUROC 0.999, TPR@1% 0.98, share >= 0.9 SSIM 0.96; noise 0.62, 0.07, 0.0
    assert results["real"][0] >= 0.95 and results["real"][1] >= 0.5, results
    assert results["noise"][0] <= 0.75, results
    # at SSIM >= 0.5 even class-mean-like images match 8x8 digits; 0.9 separates copies
    assert results["real"][2] >= 0.7 and results["noise"][2] <= 0.2, results


def test_local_calibration_beats_the_nearest_distance_and_the_synthetic_side_only() -> None:
    # a DM set that moved from its initialisation (larger image steps than _fast), so the
    # plain nearest distance confuses typical digits with the sources
    real = distill(*PRIVATE, 10, MLP, DMConfig(ipc=10, iterations=200, lr_img=0.03), seed=0)
    assert real.init_indices is not None
    positives, n = real.init_indices, len(PRIVATE[0])
    know = _membership_knowledge()
    found = {}
    for cal in ("none", "synthetic", "local"):
        scores = NearestSyntheticMembership(calibration=cal)(real.release, know).scores
        assert scores is not None
        s = torch.cat([scores[positives], scores[n:]])
        m = torch.arange(len(s)) < len(positives)
        found[cal] = (auroc(s, m), tpr_at_fpr(s, m, 0.01))
    # measured: none 0.942 / 0.44, synthetic 0.940 / 0.37, local 0.979 / 0.76
    for old in ("none", "synthetic"):
        assert found["local"][0] >= found[old][0] + 0.02, found
        assert found["local"][1] >= found[old][1] + 0.2, found


def test_nearest_synthetic_membership_rejects_an_unknown_calibration() -> None:
    with pytest.raises(ConfigError):
        NearestSyntheticMembership(calibration="lira")


def test_surrogate_membership_exposes_the_initialisation_images_of_a_real_initialised_set() -> None:
    cfg = _fast("dm", ipc=10)
    real = distill(*PRIVATE, 10, MLP, cfg, seed=0)
    bank = build_shadow_bank(AUX, 10, {"dm": cfg}, {"mlp": MLP}, seeds=(0, 1))
    know = Knowledge(
        candidate_algorithms=("dm",),
        candidate_architectures=(MLP,),
        auxiliary=AUX,
        shadow_bank=bank,
        candidates=_membership_knowledge().candidates,
    )
    assert real.init_indices is not None
    n = len(PRIVATE[0])
    found = {}
    for attack in (
        LossMembership(architecture="mlp", surrogate_steps=200),
        LiRAMembership(architecture="mlp", surrogate_steps=200, shadows=2),
    ):
        scores = attack(real.release, know).scores
        assert scores is not None
        s = torch.cat([scores[real.init_indices], scores[n:]])
        found[attack.name] = auroc(s, torch.arange(len(s)) < len(real.init_indices))
    # measured: loss 0.59, LiRA 0.72 (offline calibration by shadow surrogates helps)
    assert found["ira-membership-loss"] >= 0.55, found
    assert found["ira-membership-lira"] >= 0.65, found
    assert found["ira-membership-lira"] > found["ira-membership-loss"], found


@pytest.mark.slow
def test_distillation_leakage_end_to_end_tiny(tmp_path: Path) -> None:
    cfg = DistillationLeakageConfig(
        n_private=300,
        n_aux=300,
        n_holdout=100,
        architectures=["mlp", "convnet"],
        ipc=2,
        utility_ipcs=[1, 2],
        utility_architecture="mlp",
        dc_iterations=3,
        dm_iterations=20,
        mtt_iterations=5,
        eval_steps=30,
        fingerprint_steps=10,
        surrogate_steps=30,
        lira_shadows=2,
        shadow_seeds=2,
        cache_dir=str(tmp_path),
    )
    res = run_experiment(cfg, None)
    assert len(res.claims) == len(CLAIMS) and {"utility", "membership"} <= set(res.tables)
    assert {"confusion", "roc"} <= set(res.figures) and res.images
    seen: list[tuple[str, int, int]] = []
    # every distillation now comes from the cache
    again = run_experiment(cfg, lambda label, done, total: seen.append((label, done, total)))
    assert again.tables["recovery"] == res.tables["recovery"]
    # the attacks report their progress too, from 0 to the number of targets
    for label in ("revelation", "membership"):
        got = [(d, t) for lab, d, t in seen if lab == label]
        assert got[0] == (0, 12) and got[-1] == (12, 12) and len(got) == 13
    utility = [d for lab, d, _ in seen if lab == "utility"]
    assert utility == list(range(1, len(utility) + 1)) and utility
    assert again.metrics["shadow_bank_s"] < res.metrics["shadow_bank_s"]


def test_restoration_undoes_a_class_common_shift_and_contrast_loss() -> None:
    """Released images = sources washed out (contrast 0.5) and moved by one shift per class:
    histogram matching to the auxiliary class restores them, the raw images do not."""
    idx = torch.arange(0, 100)
    src, lab = PRIVATE[0][idx], PRIVATE[1][idx]
    shifts = torch.linspace(0.1, 0.3, 10)[lab].view(-1, 1, 1, 1)
    washed = (0.5 * src + shifts).clamp(0, 1)
    raw = recovery_scores(src, washed).share_above(0.9)
    fixed = recovery_scores(src, restore_images(washed, lab, *AUX, "histogram")).share_above(0.9)
    assert raw <= 0.2 and fixed >= raw + 0.5, (raw, fixed)
    # nothing to undo: restoration keeps every image within reach of its source
    same = recovery_scores(src, restore_images(src, lab, *AUX, "histogram")).share_above(0.8)
    assert same >= 0.8, same


def test_auto_restoration_matches_moved_classes_and_keeps_natural_near_copies() -> None:
    """A population whose images differ in contrast (as natural photographs do): near-copies
    of sources (small noise) keep their own contrast under ``auto`` and lose it under
    ``histogram``; washed-out, shifted copies are restored by ``auto`` as by ``histogram``."""
    gen = torch.Generator().manual_seed(3)
    order = torch.randperm(len(DS.x), generator=gen)  # the file is ordered by writer
    contrast = torch.rand(len(DS.x), 1, 1, 1, generator=gen) * 0.8 + 0.2
    pop, labels = (DS.x * contrast)[order], DS.y[order]
    aux = (pop[500:1000], labels[500:1000])
    src, lab = pop[:100], labels[:100]
    near = (src + 0.01 * torch.randn(src.shape, generator=gen)).clamp(0, 1)

    def share(images: torch.Tensor, mode: str) -> float:
        out = restore_images(images, lab, *aux, mode, torch.Generator().manual_seed(0))
        return recovery_scores(src, out.clamp(0, 1)).share_above(0.9)

    kept, matched = share(near, "auto"), share(near, "histogram")
    assert kept >= 0.9 and kept >= matched + 0.2, (kept, matched)
    shifts = torch.linspace(0.1, 0.3, 10)[lab].view(-1, 1, 1, 1)
    washed = (0.5 * src + shifts).clamp(0, 1)
    raw, fixed = share(washed, "none"), share(washed, "auto")
    assert fixed >= raw + 0.25 and fixed == share(washed, "histogram"), (raw, fixed)


def _fast_experts_mtt(**overrides: Any) -> MTTConfig:
    """A one-image-per-class MTT run whose one expert is far faster than the student (rate 0.5
    against 5 synthetic steps), which pushes the learned rate around."""
    return MTTConfig(
        **{
            "ipc": 1,
            "n_experts": 1,
            "expert_epochs": 2,
            "max_start_epoch": 0,
            "expert_steps": 2,
            "expert_lr": 0.5,
            "expert_batch": 32,
            "syn_steps": 5,
            "lr_lr": 0.5,
            **overrides,
        }
    )


def test_mtt_released_rate_is_bounded_and_trains_a_fresh_network_stably() -> None:
    # experts far faster than the student (lr 0.5 against 5 steps at 0.05) push the learned
    # rate up: measured 0.094 unbounded, here held at lr_max
    cfg = _fast_experts_mtt(iterations=20, lr_init=0.05, lr_max=0.06)
    run = distill(*PRIVATE, 10, MLP, cfg, seed=0)
    assert run.release.lr is not None and run.release.lr <= 0.06 + 1e-6, run.release.lr
    for s in range(2):
        net = build_model(MLP, seed=s)
        g = torch.Generator().manual_seed(s)
        res = fit(
            net,
            run.release.images,
            run.release.labels,
            steps=100,
            lr=run.release.lr,
            generator=g,
            log_at=[0],
        )
        assert math.isfinite(res.final_loss) and res.final_loss < res.losses[0] / 4, res
    with pytest.raises(ConfigError, match="lr_max"):
        MTTConfig(lr_init=0.05, lr_max=0.01)
    cfg = MTTConfig(lr_init=0.2)
    assert lr_cap(cfg, start_rate(cfg, 0.05)) == pytest.approx(0.4)  # default: twice the start
    # without lr_init the learnable rate starts at the experts' rate
    assert start_rate(MTTConfig(), 0.1) == pytest.approx(0.1)
    assert start_rate(MTTConfig(lr_max=0.03), 0.1) == pytest.approx(0.03)


def _log_rate_steps(cfg: MTTConfig) -> list[float]:
    run = distill(*PRIVATE, 10, MLP, cfg, seed=0)
    rates = [t["lr"] for t in run.trace if "lr" in t]
    return [abs(math.log(b / a)) for a, b in zip(rates, rates[1:], strict=False)]


def test_mtt_clips_the_rate_gradient_so_one_overshooting_trajectory_cannot_collapse_it() -> None:
    # with momentum m the change of log(lr) in one step is at most lr_lr * clip / (1 - m);
    # unclipped, the same run moves it 0.65 in one step (13 times the bound; at lr_lr = 1 the
    # rate collapses to 0 within five iterations), so the bound fails without the clip
    base = _fast_experts_mtt(iterations=12, lr_max=10.0, log_every=1)
    bound = base.lr_lr * 0.05 / (1 - base.momentum)
    clipped = _log_rate_steps(dataclasses.replace(base, lr_grad_clip=0.05))
    assert max(clipped) <= bound * 1.001, (max(clipped), bound)  # measured: at the bound
    free = _log_rate_steps(dataclasses.replace(base, lr_grad_clip=1e6))
    assert max(free) > 3 * bound, (max(free), bound)
    with pytest.raises(ConfigError, match="lr_grad_clip"):
        MTTConfig(lr_grad_clip=0.0)


def test_mtt_projects_into_the_range_once_so_background_pixels_do_not_drift_up() -> None:
    # clamping after every step turns the noise of the matching gradient into a one-sided
    # drift of pixels at a bound (the 0 background of digits): measured mean of the pixels
    # that start at 0, small ConvNet, 20 iterations: 0.039 clamped every step, 0.023 now
    conv = model_spec("convnet", input_shape=(1, 8, 8), out_dim=10, width=4, norm=True)
    cfg = MTTConfig(
        ipc=10,
        iterations=20,
        n_experts=1,
        expert_epochs=4,
        max_start_epoch=2,
        expert_steps=2,
        expert_lr=0.05,
    )
    run = distill(*PRIVATE, 10, conv, cfg, seed=0)
    assert run.init_indices is not None
    background = PRIVATE[0][run.init_indices] == 0
    images = run.release.images
    assert float(images.min()) >= 0.0 and float(images.max()) <= 1.0
    assert float(images[background].mean()) <= 0.031, float(images[background].mean())


def test_mtt_expert_rate_is_chosen_on_held_out_private_data_and_avoids_both_failures() -> None:
    # a rate that diverges and one that barely moves the network both lose to a sound one
    g = torch.Generator().manual_seed(0)
    # (measured: held-out loss 0.14 at 0.5, 2.33 at 1e-4, about 100 at 200)
    base = MTTConfig(expert_epochs=6, max_start_epoch=0, expert_batch=16)
    cfg = dataclasses.replace(base, expert_lr_grid=(0.5, 200.0))
    rate, losses = choose_expert_lr(*PRIVATE, MLP, cfg, g)
    assert rate == 0.5 and losses[0.5] < 1.0 < losses[200.0], losses
    cfg = dataclasses.replace(base, expert_lr_grid=(1e-4, 0.5))
    rate, losses = choose_expert_lr(*PRIVATE, MLP, cfg, g)
    assert rate == 0.5 and losses[0.5] < losses[1e-4] - 1.0, losses
    # a fixed rate is used as given, without probes
    assert choose_expert_lr(*PRIVATE, MLP, dataclasses.replace(base, expert_lr=0.07), g) == (
        0.07,
        {},
    )
    with pytest.raises(ConfigError, match="expert_lr_grid"):
        MTTConfig(expert_lr_grid=())
    with pytest.raises(ConfigError, match="expert_lr_grid"):
        MTTConfig(expert_lr_grid=(0.1, -1.0))


def test_mtt_latest_start_grows_with_images_per_class_like_the_original() -> None:
    # MTT's CIFAR-10 table starts at most 2, 20, 40 of 50 epochs in at 1, 10, 50 images per
    # class; ours grows one epoch per image per class up to 8, inside the experts' length.
    assert [latest_start(MTTConfig(ipc=i)) for i in (1, 2, 5, 8, 10, 50)] == [1, 2, 5, 8, 8, 8]
    assert latest_start(MTTConfig(ipc=10, expert_epochs=6, expert_steps=3)) == 3
    assert latest_start(MTTConfig(ipc=1, expert_epochs=3, expert_steps=3)) == 0
    assert latest_start(MTTConfig(ipc=10, max_start_epoch=1)) == 1  # an explicit choice wins
    with pytest.raises(ConfigError, match="expert_steps"):
        MTTConfig(expert_epochs=2, expert_steps=3)


def test_utility_jobs_complete_every_setting_to_utility_sets() -> None:
    """The utility check distils, beyond the targets, exactly what brings every
    real-initialised setting to ``utility_sets`` sets: at the targets' ipc every
    architecture's next seeds, at the other ipcs the utility architecture's first ones."""
    task = split_task("digits", 100, 100, 20)
    specs = candidate_specs(["mlp", "convnet"], tuple(task.private[0].shape[1:]), 10)
    cfg = DistillationLeakageConfig(
        algorithms=["dc", "dm"], architectures=["mlp", "convnet"], utility_sets=3
    )
    jobs = _utility_jobs(cfg, task, specs)
    at_ipc = {(a, f, 10, s) for a in ("dc", "dm") for f in ("mlp", "convnet") for s in (1, 2)}
    at_one = {(a, "convnet", 1, s) for a in ("dc", "dm") for s in (0, 1, 2)}
    assert set(jobs) == at_ipc | at_one
    assert all(j.seed == 1000 + k[3] and j.config.ipc == k[2] for k, j in jobs.items())
    assert all(j.config.init == "real" for j in jobs.values())
    # targets already at three seeds: only the other ipc needs sets
    more = cfg.model_copy(update={"target_seeds": 3})
    assert set(_utility_jobs(more, task, specs)) == at_one


def test_random_subsets_get_as_many_networks_as_the_distilled_side() -> None:
    """The utility baseline's budget: one network per random subset, as many subsets as the
    distilled side trains networks (sets x networks per set), unless set explicitly; every
    other training choice is the distilled sets' own."""
    protocol = EvalProtocol(models=4, steps=30, lr=0.05)
    cfg = DistillationLeakageConfig(utility_sets=3, eval_models=4)
    rand = _random_protocol(cfg, protocol)
    assert rand.models == 12 and dataclasses.replace(rand, models=4) == protocol
    assert _random_protocol(cfg.model_copy(update={"utility_sets": 5}), protocol).models == 20
    assert _random_protocol(cfg.model_copy(update={"random_draws": 6}), protocol).models == 6
    with pytest.raises(ValidationError):
        DistillationLeakageConfig(random_draws=0)


def test_the_experiment_distils_dc_with_dsa_and_the_others_as_augment_says() -> None:
    """DC runs in its DSA form by default (``dc_augment``); DM and MTT follow ``augment``.
    Switching ``dc_augment`` off gives plain gradient matching under another cache key (a
    cached DSA set is never served for a plain one)."""
    task = split_task("digits", 100, 100, 20)
    specs = candidate_specs(["mlp"], tuple(task.private[0].shape[1:]), 10)
    base = {"algorithms": ["dc", "dm", "mtt"], "architectures": ["mlp"], "utility_ipcs": [10]}
    on = _utility_jobs(DistillationLeakageConfig(**base), task, specs)
    assert {k[0]: j.config.augment for k, j in on.items()} == {
        "dc": True,
        "dm": False,
        "mtt": False,
    }
    off = _utility_jobs(DistillationLeakageConfig(**base, dc_augment=False), task, specs)
    assert not any(j.config.augment for j in off.values())
    everything = _utility_jobs(
        DistillationLeakageConfig(**base, augment=True, dc_augment=False), task, specs
    )
    assert all(j.config.augment for j in everything.values())
    dc_on, dc_off = on[("dc", "mlp", 10, 1)], off[("dc", "mlp", 10, 1)]
    assert dc_on.key() != dc_off.key()
