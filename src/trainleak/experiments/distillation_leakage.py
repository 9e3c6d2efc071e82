"""Seed 13 (IRA): a released distilled data set reveals its algorithm and architecture, lets the
adversary infer membership and recover training images.

The victim distils its private records with one of the candidate algorithms (DC, DM, MTT) and
architectures (MLP, ConvNet, LeNet-style, small ResNet), from real images or from noise. The
adversary has auxiliary data from the same distribution, builds a shadow bank from it (cached
by content hash), fingerprints the release, predicts (algorithm, architecture) with a random
forest, trains a white-box surrogate of the predicted architecture on the release, and scores
membership (nearest synthetic image, surrogate loss, offline LiRA) and recovery (nearest
synthetic image). Every distilled set is also checked by the distillation protocol against
random real subsets of the same size. The non-distilled reference is a model trained on the
private data itself, attacked by its loss and by offline LiRA.

Chen et al., "Turning Black Box into White Box: Dataset Distillation Leaks", arXiv 2603.01053,
2026; everything beyond the abstract is [inferred] (seed brief section 13).
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
import time
from pathlib import Path

import torch

from trainleak.attacks.base import Attack
from trainleak.attacks.distillation import (
    InformationRevelation,
    LiRAMembership,
    LossMembership,
    NearestSyntheticMembership,
    NearestSyntheticRecovery,
    held_out_accuracy,
)
from trainleak.errors import ConfigError
from trainleak.experiments._distillation_figures import confusion_figure, pairs, roc_figure, tile
from trainleak.experiments.base import Result, evaluate_claims, experiment, rows_table
from trainleak.experiments.distillation_leakage_claims import (
    CLAIMS,
    DistillationLeakageConfig,
    MembershipRow,
    RecoveryRow,
    RevelationRow,
    Row,
    UtilityRow,
    risk_of,
)
from trainleak.metrics.distillation import recovery_scores
from trainleak.models.fitting import accuracy
from trainleak.models.spec import ModelSpec
from trainleak.parallel import cpu_times, one_thread, pmap_started
from trainleak.progress import Progress
from trainleak.releases.distilled import DistilledSet
from trainleak.releases.knowledge import Knowledge
from trainleak.scenarios.distillation import (
    Task,
    adversary_knowledge,
    attack_scores,
    candidate_specs,
    reference_scores,
    score_membership,
    split_task,
)
from trainleak.scenarios.distillation_bank import (
    DistillJob,
    build_shadow_bank,
    default_cache_dir,
    prefill,
    shadow_jobs,
)
from trainleak.systems.distillation import (
    DCConfig,
    DistillationRun,
    DistillConfig,
    DMConfig,
    EvalProtocol,
    Evaluation,
    Init,
    MTTConfig,
    evaluate_random_subsets,
    evaluate_set,
    train_on,
)

Key = tuple[str, str, str, int]
"""(algorithm, architecture, init, seed) of a target set."""
SetKey = tuple[str, str, str, int, int]
"""(algorithm, architecture, init, ipc, seed) of a set the utility check evaluates."""


def _configs(cfg: DistillationLeakageConfig, init: str, ipc: int) -> dict[str, DistillConfig]:
    init_: Init = "real" if init == "real" else "noise"
    all_: dict[str, DistillConfig] = {
        "dc": DCConfig(
            ipc=ipc,
            init=init_,
            iterations=cfg.dc_iterations,
            augment=cfg.augment or cfg.dc_augment,
        ),
        "dm": DMConfig(ipc=ipc, init=init_, iterations=cfg.dm_iterations, augment=cfg.augment),
        "mtt": MTTConfig(ipc=ipc, init=init_, iterations=cfg.mtt_iterations, augment=cfg.augment),
    }
    return {a: all_[a] for a in cfg.algorithms}


def _cache(cfg: DistillationLeakageConfig) -> Path | None:
    if not cfg.use_cache:
        return None
    return Path(cfg.cache_dir) if cfg.cache_dir else default_cache_dir()


def shadow_bank_jobs(
    cfg: DistillationLeakageConfig, task: Task, specs: dict[str, ModelSpec]
) -> list[DistillJob]:
    """The distillation of every shadow set of the run's bank (auxiliary halves only: the
    same jobs whatever the release), in the bank's order."""
    configs = _configs(cfg, "real", cfg.ipc)
    seeds = range(cfg.shadow_seeds)
    jobs = shadow_jobs(task.aux, task.num_classes, configs, specs, seeds, device=cfg.device)
    return [j[-1] for j in jobs]


def _target_jobs(
    cfg: DistillationLeakageConfig, task: Task, specs: dict[str, ModelSpec]
) -> dict[Key, DistillJob]:
    """The distillation of the private data for every (algorithm, architecture, init, seed)."""
    out: dict[Key, DistillJob] = {}
    for init in ("real", "noise"):
        for algo, dcfg in _configs(cfg, init, cfg.ipc).items():
            for kind, spec in specs.items():
                for s in range(cfg.target_seeds):
                    out[(algo, kind, init, s)] = DistillJob(
                        *task.private, task.num_classes, spec, dcfg, 1000 + s, device=cfg.device
                    )
    return out


def _utility_jobs(
    cfg: DistillationLeakageConfig, task: Task, specs: dict[str, ModelSpec]
) -> dict[tuple[str, str, int, int], DistillJob]:
    """The real-initialised sets the utility check needs beyond the targets, by (algorithm,
    architecture, ipc, seed): at ``cfg.ipc`` every architecture's sets after the targets'
    seeds, at the other ``utility_ipcs`` the utility architecture's: every setting then has
    ``utility_sets`` sets (more where the targets alone have more)."""
    out: dict[tuple[str, str, int, int], DistillJob] = {}
    for ipc in dict.fromkeys([cfg.ipc, *cfg.utility_ipcs]):
        kinds = list(specs) if ipc == cfg.ipc else [cfg.utility_architecture]
        first = cfg.target_seeds if ipc == cfg.ipc else 0
        for algo, dcfg in _configs(cfg, "real", ipc).items():
            for kind in kinds:
                for s in range(first, cfg.utility_sets):
                    out[(algo, kind, ipc, s)] = DistillJob(
                        *task.private,
                        task.num_classes,
                        specs[kind],
                        dcfg,
                        1000 + s,
                        device=cfg.device,
                    )
    return out


def _targets(
    jobs: dict[Key, DistillJob], cache: Path | None, progress: Progress | None
) -> dict[Key, DistillationRun]:
    """The target runs (from the cache, or distilled now)."""
    out: dict[Key, DistillationRun] = {}
    for key, job in jobs.items():
        out[key] = job.run(cache)
        if progress is not None:
            progress("target sets", len(out), len(jobs))
    return out


def _revelation_rows(
    targets: dict[Key, DistillationRun],
    know: Knowledge,
    ira: InformationRevelation,
    progress: Progress | None = None,
) -> list[RevelationRow]:
    rows = []
    for i, ((algo, kind, init, s), run) in enumerate(targets.items()):
        if progress is not None:  # the first call fingerprints the bank: report it started
            progress("revelation", i, len(targets))
        rev = ira.reveal(run.release, know)
        rows.append(
            RevelationRow(
                algo,
                kind,
                init,
                s,
                rev.algorithm,
                rev.architecture,
                rev.algorithm_proba.get(algo, 0.0),
                rev.architecture_proba.get(kind, 0.0),
            )
        )
    if progress is not None:
        progress("revelation", len(targets), len(targets))
    return rows


def _membership_attacks(cfg: DistillationLeakageConfig) -> dict[str, Attack[DistilledSet]]:
    steps, sur = cfg.fingerprint_steps, cfg.surrogate_steps
    return {
        "nn": NearestSyntheticMembership(),
        # the former defaults, kept beside it for comparison: Euclidean distances (until the
        # fifth pass), and before that the synthetic-side calibration only
        "nn_euclidean": NearestSyntheticMembership(metric="euclidean"),
        "nn_synthetic": NearestSyntheticMembership(calibration="synthetic", metric="euclidean"),
        "loss": LossMembership(steps=steps, surrogate_steps=sur),
        "lira": LiRAMembership(steps=steps, surrogate_steps=sur, shadows=cfg.lira_shadows),
    }


def _positives(targets: dict[Key, DistillationRun], key: Key) -> torch.Tensor:
    """The initialisation indices of the real-initialised twin of ``key``."""
    twin = targets[(key[0], key[1], "real", key[3])]
    if twin.init_indices is None:
        raise RuntimeError("a real-initialised run without initialisation indices")
    return twin.init_indices


def _membership_rows(
    cfg: DistillationLeakageConfig,
    task: Task,
    targets: dict[Key, DistillationRun],
    know: Knowledge,
    curves: dict[str, tuple[torch.Tensor, torch.Tensor]],
    progress: Progress | None = None,
) -> list[MembershipRow]:
    attacks = _membership_attacks(cfg)
    n = len(task.private[0])
    everyone = torch.arange(n)
    rows = []
    for i, (key, run) in enumerate(targets.items()):
        if progress is not None:
            progress("membership", i, len(targets))
        init_pos = _positives(targets, key)
        for method, scores in attack_scores(run.release, know, attacks).items():
            for name, pos in (("init", init_pos), ("members", everyone)):
                m = score_membership(scores, pos, n)
                rows.append(
                    MembershipRow(
                        *key[:3], key[3], method, name, m.auroc, m.tpr_1, m.tpr_01, m.n_pos, m.n_neg
                    )
                )
            if key[0] == cfg.algorithms[0] and key[1] == cfg.utility_architecture and key[3] == 0:
                label = torch.zeros(len(scores), dtype=torch.bool)
                label[init_pos] = True
                keep = torch.cat([init_pos, torch.arange(n, len(scores))])
                curves[f"{method}, {key[2]} init"] = (scores[keep], label[keep])
    if progress is not None:
        progress("membership", len(targets), len(targets))
    return rows


def _reference_rows(
    cfg: DistillationLeakageConfig, task: Task, specs: dict[str, ModelSpec], protocol: EvalProtocol
) -> list[MembershipRow]:
    """The non-distilled reference: each architecture trained on the private data."""
    n = len(task.private[0])
    rows = []
    for kind, spec in specs.items():
        for method, scores in reference_scores(task, spec, protocol, cfg.shadow_seeds).items():
            m = score_membership(scores, torch.arange(n), n)
            rows.append(
                MembershipRow(
                    "real",
                    kind,
                    "none",
                    0,
                    method,
                    "members",
                    m.auroc,
                    m.tpr_1,
                    m.tpr_01,
                    m.n_pos,
                    m.n_neg,
                )
            )
    return rows


def _aux_baseline(task: Task, ipc: int, seed: int) -> torch.Tensor:
    """``ipc`` random auxiliary images per class: the recovery baseline's candidates."""
    g = torch.Generator().manual_seed(5_000 + seed)
    ax, ay = task.aux
    picks = []
    for c in range(task.num_classes):
        idx = torch.nonzero(ay == c).flatten()
        picks.append(idx[torch.randperm(len(idx), generator=g)[:ipc]])
    return ax[torch.cat(picks)]


def _recovery_rows(
    cfg: DistillationLeakageConfig,
    task: Task,
    targets: dict[Key, DistillationRun],
    know: Knowledge,
    images: dict[str, object],
) -> list[RecoveryRow]:
    attack = NearestSyntheticRecovery()
    rows = []
    t, st = cfg.recovery_threshold, cfg.strict_threshold
    for key, run in targets.items():
        sources = task.private[0][_positives(targets, key)]
        rec = attack(run.release, know)
        sc = recovery_scores(sources, rec.inputs)
        base = recovery_scores(sources, _aux_baseline(task, cfg.ipc, key[3]))
        rows.append(
            RecoveryRow(
                *key[:3],
                cfg.ipc,
                key[3],
                sc.mean,
                sc.share_above(t),
                sc.share_above(st),
                base.mean,
                base.share_above(t),
                base.share_above(st),
                t,
                st,
                len(sources),
            )
        )
        if key[1] == cfg.utility_architecture and key[3] == 0:
            images[f"recovered_{key[0]}_{key[2]}_init"] = pairs(
                sources[:40], rec.inputs[sc.matched[:40]]
            )
            images[f"distilled_{key[0]}_{key[2]}_init"] = tile(run.release.images, cfg.ipc)
    return rows


@dataclasses.dataclass(frozen=True, eq=False)
class _Eval:
    """One piece of the utility check, run by :func:`_evaluate` (in a worker, or here):
    ``set``: fresh networks on a released set; ``random``: on random private subsets of
    ``ipc`` per class; ``full``: one network on all private data, its test accuracy."""

    what: str
    spec: ModelSpec
    protocol: EvalProtocol
    test: tuple[torch.Tensor, torch.Tensor]
    data: tuple[torch.Tensor, torch.Tensor]
    release: DistilledSet | None = None
    ipc: int = 0
    seed: int = 0


def _evaluate(job: _Eval) -> Evaluation | float:
    # each side chooses its learning rate on the private data (the distiller's own), never test
    if job.what == "full":
        return accuracy(train_on(*job.data, job.spec, job.protocol, seed=0), *job.test)
    if job.what == "random":
        return evaluate_random_subsets(
            *job.data, job.ipc, job.spec, job.test, job.protocol, select=job.data
        )
    if job.release is None:
        raise ConfigError("a set evaluation without its release")
    return evaluate_set(
        job.release, job.spec, job.test, job.protocol, seed=job.seed, select=job.data
    )


def _random_protocol(cfg: DistillationLeakageConfig, protocol: EvalProtocol) -> EvalProtocol:
    """How the random real subsets are trained: exactly as the distilled sets (steps, lr,
    batch, augmentation), one fresh network per subset, with as many subsets as the distilled
    side trains networks (``utility_sets x eval_models``) unless ``random_draws`` says."""
    draws = cfg.random_draws or cfg.utility_sets * cfg.eval_models
    return dataclasses.replace(protocol, models=draws)


def _utility_evals(
    cfg: DistillationLeakageConfig,
    task: Task,
    specs: dict[str, ModelSpec],
    targets: dict[Key, DistillationRun],
    cache: Path | None,
    protocol: EvalProtocol,
) -> tuple[dict[SetKey, _Eval], dict[tuple[str, int], _Eval], dict[str, _Eval]]:
    """The utility check's pieces: every released set, the random subsets of each
    (architecture, ipc) and the full-data reference of each architecture."""
    test = (torch.cat([task.aux[0], task.holdout[0]]), torch.cat([task.aux[1], task.holdout[1]]))
    rand = _random_protocol(cfg, protocol)
    # the full-data reference trains at the grid's last rate (its selection data would be its
    # own training set)
    one = protocol.single_rate()
    runs = {(a, f, i, cfg.ipc, s): r for (a, f, i, s), r in targets.items()}
    for (algo, kind, ipc, seed), dj in _utility_jobs(cfg, task, specs).items():
        runs[(algo, kind, "real", ipc, seed)] = dj.run(cache)
    full = {k: _Eval("full", spec, one, test, task.private) for k, spec in specs.items()}
    base = {
        (kind, ipc): _Eval("random", specs[kind], rand, test, task.private, ipc=ipc)
        for (_, kind, _, ipc, _) in runs
    }
    sets = {
        key: _Eval("set", specs[key[1]], protocol, test, task.private, run.release, seed=key[4])
        for key, run in runs.items()
    }
    return sets, base, full


def _utility_rows(
    sets: dict[SetKey, _Eval],
    base: dict[tuple[str, int], _Eval],
    full: dict[str, _Eval],
    done: dict[_Eval, Evaluation | float],
) -> list[UtilityRow]:
    """One row per released set, from the finished evaluations ``done``."""
    rows = []
    for (algo, kind, init, ipc, s), ej in sets.items():
        ev, rd, ref = done[ej], done[base[(kind, ipc)]], done[full[kind]]
        if not isinstance(ev, Evaluation) or not isinstance(rd, Evaluation):
            raise TypeError("a utility evaluation returned no Evaluation")
        if isinstance(ref, Evaluation):
            raise TypeError("the full-data reference returned no accuracy")
        accs, rand_accs = ev.accuracies, rd.accuracies
        rows.append(
            UtilityRow(
                algo,
                kind,
                ipc,
                init,
                s,
                sum(accs) / len(accs),
                sum(rand_accs) / len(rand_accs),
                float(ref),
                accs,
                rand_accs,
                ev.lr,
                rd.lr,
            )
        )
    return rows


@experiment(
    "distillation-leakage",
    "Dataset distillation leaks: algorithm/architecture revelation, membership, recovery (seed 13)",
    DistillationLeakageConfig,
)
def run(cfg: DistillationLeakageConfig, progress: Progress | None = None) -> Result:
    """Shadow bank, targets, revelation, membership, recovery and utility; then claims."""
    start, cpu = time.perf_counter(), sum(cpu_times())
    # built first, so a bad learning-rate grid fails before any distillation
    protocol = EvalProtocol.from_rates(
        cfg.eval_lr_grid,
        steps=cfg.eval_steps,
        models=cfg.eval_models,
        augment=cfg.augment,
        device=cfg.device,
    )
    task = split_task(cfg.dataset, cfg.n_private, cfg.n_aux, cfg.n_holdout, cfg.seed)
    specs = candidate_specs(list(cfg.architectures), task.input_shape, task.num_classes)
    with contextlib.ExitStack() as stack:
        cache = _cache(cfg)
        if cache is None and cfg.workers > 1:  # the workers hand their sets over on disk
            cache = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        result = _run(cfg, protocol, task, specs, cache, progress, start, cpu)
    return result


def _run(
    cfg: DistillationLeakageConfig,
    protocol: EvalProtocol,
    task: Task,
    specs: dict[str, ModelSpec],
    cache: Path | None,
    progress: Progress | None,
    start: float,
    cpu: float,
) -> Result:
    configs = _configs(cfg, "real", cfg.ipc)
    target_jobs = _target_jobs(cfg, task, specs)
    if cache is not None:
        # every distillation of the run, spread over the workers (the stages below read them)
        jobs = shadow_bank_jobs(cfg, task, specs) + [*target_jobs.values()]
        prefill([*jobs, *_utility_jobs(cfg, task, specs).values()], cache, cfg.workers, progress)
    distilled_s = time.perf_counter() - start
    bank = build_shadow_bank(
        task.aux,
        task.num_classes,
        configs,
        specs,
        range(cfg.shadow_seeds),
        cache_dir=cache,
        progress=progress,
        device=cfg.device,
    )
    timing = {"parallel_distill_s": distilled_s, "shadow_bank_s": time.perf_counter() - start}
    targets = _targets(target_jobs, cache, progress)
    timing["targets_s"] = time.perf_counter() - start - timing["shadow_bank_s"]
    know = adversary_knowledge(task, specs, list(cfg.algorithms), bank)
    ira = InformationRevelation(steps=cfg.fingerprint_steps)
    curves: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    images: dict[str, object] = {}
    rows: list[Row] = []
    sets, base, full = _utility_evals(cfg, task, specs, targets, cache, protocol)
    evals = [*full.values(), *base.values(), *sets.values()]
    # the utility networks train in the workers while this process runs the attacks on one
    # thread (a second one did not speed the attacks up: docs/decisions.md, fourteenth pass)
    with pmap_started(_evaluate, evals, cfg.workers) as collect:
        with one_thread() if cfg.workers > 1 else contextlib.nullcontext():
            rows += _revelation_rows(targets, know, ira, progress)
            rows += _membership_rows(cfg, task, targets, know, curves, progress)
            rows += _reference_rows(cfg, task, specs, protocol)
            rows += _recovery_rows(cfg, task, targets, know, images)
            held = held_out_accuracy(bank, list(specs.values()), task.aux, ira.fingerprint_spec())
        timing["attacks_s"] = (
            time.perf_counter() - start - timing["shadow_bank_s"] - timing["targets_s"]
        )
        done = dict(zip(evals, collect(progress, "utility"), strict=True))
    rows += _utility_rows(sets, base, full, done)
    timing.update(total_s=time.perf_counter() - start, cpu_s=sum(cpu_times()) - cpu)
    return _result(cfg, rows, held, timing, curves, images)


def _result(
    cfg: DistillationLeakageConfig,
    rows: list[Row],
    held: dict[str, float],
    timing: dict[str, float],
    curves: dict[str, tuple[torch.Tensor, torch.Tensor]],
    images: dict[str, object],
) -> Result:
    res = Result(experiment="distillation-leakage", config=cfg.model_dump())
    res.claims = evaluate_claims(CLAIMS, rows, cfg)
    res.risk = risk_of(rows, cfg)
    res.metrics.update({f"held_out_shadow_{k}": v for k, v in held.items()})
    res.metrics.update(timing)
    for name, kind in (
        ("utility", UtilityRow),
        ("revelation", RevelationRow),
        ("membership", MembershipRow),
        ("recovery", RecoveryRow),
    ):
        res.tables[name] = rows_table(r for r in rows if isinstance(r, kind))
    res.images.update(images)  # type: ignore[arg-type]
    rev = [r for r in rows if isinstance(r, RevelationRow) and r.init == "real"]
    if rev:
        res.figures["confusion"] = confusion_figure(rev)
    if curves:
        res.figures["roc"] = roc_figure(curves)
    res.notes = _NOTES
    return res


_NOTES = (
    "Private set D (members), auxiliary set (adversary), held-out set (non-members), disjoint. "
    "Targets: every (algorithm, architecture) distilled from D, from real images and from noise, "
    "at `ipc` images per class. Shadow bank: every pair distilled by the adversary from random "
    "halves of the auxiliary data, one half per shadow seed, cached on disk by content hash. "
    "Revelation: random forests on fingerprints (image statistics and published metadata; each "
    "candidate architecture's gradient- and distribution-matching residuals against auxiliary "
    "records the set was not distilled from), feature groups chosen by leave-one-seed-out "
    "accuracy on the bank, the algorithm gated by the published metadata; held-out shadow "
    "accuracy is leave-one-seed-out on the bank (choice included). Membership methods: 'nn' "
    "nearest synthetic image with two-sided local calibration, distances whitened by the shadow "
    "sets' displacements, 'nn_euclidean' the same with Euclidean distances (the former default), "
    "'nn_synthetic' Euclidean with the synthetic side only (the default before that), 'loss' "
    "and 'lira' through the surrogate. Membership "
    "positives: 'init' = the images the real-initialised twin started from (the same records for "
    "its noise-initialised twin), 'members' = all of D; negatives: the held-out set. TPR at 0.1% "
    "FPR is the share of positives scored above every negative when there are fewer than 1000 "
    "negatives. Recovery: best SSIM (8x8 images upsampled to 16x16) of each initialisation image "
    "over the released images. Utility: test accuracy (auxiliary plus held-out records) of fresh "
    "networks trained on the set, beside random real subsets of the same size (trained the same "
    "way: steps, learning rate, batch, augmentation; MTT's learned rate is part of its release; "
    "as many subsets, one network each, as the distilled side trains networks) "
    "and all of D; every real-initialised setting (algorithm x architecture x ipc) has "
    "`utility_sets` distilled sets (seeds 1000, 1001, ...; the target's first), and the claim "
    "decides each setting by a one-sided 95% Welch bound on the gain with a set (its networks' "
    "mean) as the unit, so the bound covers the variation between distillations. "
    "[inferred]: the whole IRA "
    "pipeline, the fingerprint features, the DM loss normalisation, the small-scale algorithm "
    "settings."
)
