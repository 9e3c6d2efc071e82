"""Pooling model-inversion replicates (target seeds) with class-level intervals: the crossed
class x seed bootstrap, the experiment's per-class hits and the benchmark's pooled figures."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from trainleak.errors import ShapeError
from trainleak.experiments._inversion_common import class_hits_row, count_class_hits
from trainleak.metrics.intervals import (
    class_bootstrap_interval,
    crossed_class_interval,
    paired_class_difference_interval,
    paired_class_ratio_interval,
    paired_crossed_ratio_interval,
)

C, K = 20, 8  # classes, images per class


def _crossed(rates: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-image hits of a (replicate, class) array of hit counts out of K."""
    hits, classes, reps = [], [], []
    for r, row in enumerate(rates):
        for c, k in enumerate(row):
            hits += [1.0] * int(k) + [0.0] * (K - int(k))
            classes += [c] * K
            reps += [r] * K
    return np.array(hits), np.array(classes), np.array(reps)


def test_one_replicate_is_the_class_bootstrap() -> None:
    rng = np.random.default_rng(1)
    h, c, r = _crossed(rng.integers(0, K + 1, size=(1, C)))
    assert crossed_class_interval(h, c, r) == class_bootstrap_interval(h, c)
    d, _, _ = _crossed(rng.integers(0, K + 1, size=(1, C)))
    got = paired_crossed_ratio_interval((h, c, r), (d, c, r))
    assert got == paired_class_ratio_interval(h, c, d, c)


def test_classes_that_carry_over_between_seeds_count_once() -> None:
    # every class equally hard on three targets: three seeds add no evidence about classes,
    # so the crossed interval keeps the one-seed width; (seed, class) cells as units would
    # pass 60 for 20 and shrink it by about sqrt(3)
    row = np.random.default_rng(2).integers(0, K + 1, size=C)
    h, c, r = _crossed(np.stack([row] * 3))
    lo, hi = crossed_class_interval(h, c, r)
    one = class_bootstrap_interval(*_crossed(row[None])[:2])
    cells = class_bootstrap_interval(h, r * 1000 + c)
    assert hi - lo == pytest.approx(one[1] - one[0], rel=0.15)
    assert hi - lo > 1.4 * (cells[1] - cells[0])


def test_seeds_that_differ_widen_the_interval_only_when_resampled() -> None:
    # three targets, one much easier: resampling seeds shows it, fixing them does not
    rng = np.random.default_rng(3)
    base = rng.integers(2, 6, size=C)
    h, c, r = _crossed(np.stack([base, base, base + 3]))
    lo, hi = crossed_class_interval(h, c, r)
    flo, fhi = crossed_class_interval(h, c, r, resample_replicates=False)
    assert lo <= h.mean() <= hi and flo <= h.mean() <= fhi
    assert hi - lo > 1.5 * (fhi - flo)


def test_the_crossed_ratio_keeps_the_pairing() -> None:
    h, c, r = _crossed(np.random.default_rng(4).integers(1, K + 1, size=(3, C)))
    assert paired_crossed_ratio_interval((h, c, r), (h, c, r)) == (1.0, 1.0, 1.0)
    half = np.where(c < 10, h, 0.0)  # the same attack losing classes 10-19
    f, lo, hi = paired_crossed_ratio_interval((half, c, r), (h, c, r))
    assert f == pytest.approx(half.mean() / h.mean()) and lo < f < hi < 1.0
    with pytest.raises(ShapeError, match="num"):
        paired_crossed_ratio_interval((h[:5], c, r), (h, c, r))
    with pytest.raises(ShapeError, match="hits"):
        crossed_class_interval(h, c[:5], r)


def test_class_hits_row_counts_each_class() -> None:
    counted = count_class_hits(
        "standard", "adaptive", "standard", (1.0, 0.0, 1.0, 1.0), (2, 2, 0, 2), 3
    )
    row = class_hits_row(counted)
    assert row["hits"] == "1 0 2" and row["images"] == "1 0 3"


def _bench() -> ModuleType:
    path = Path(__file__).parents[1] / "benchmarks" / "model_inversion.py"
    spec = importlib.util.spec_from_file_location("mi_bench", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def _run(seed: int, rates: dict[str, list[int]]) -> dict[str, Any]:
    got = {k: {"hits": v, "images": [K] * C} for k, v in rates.items()}
    return {"target_seed": seed, "class_hits": {"standard": got}}


def test_the_benchmark_pools_target_seeds_by_class() -> None:
    easy = [K] * 10 + [0] * 10  # classes 0-9 always found, 10-19 never
    neg_std = [4] * 10 + [0] * 10
    summary = {
        "adaptive": _run(0, {"standard/adaptive": easy, "negls/standard": neg_std}),
        "adaptive_tseed1": _run(1, {"standard/adaptive": easy, "negls/standard": neg_std}),
        "adaptive_tseed0": _run(0, {"standard/adaptive": [0] * C}),  # seed 0 again
        "adaptive_tseed2_counts_only": {"counts": {"standard/adaptive": [0, 160]}},
        "adaptive_tseed3": {"counts": {"standard/adaptive": [0, 160]}},  # no per-class hits
        "adaptive_budget4x": _run(5, {"standard/adaptive": [0] * C}),  # not a replicate
    }
    summary["adaptive"]["class_hits"]["standard"]["negls/adaptive"] = {
        "hits": [K] * 10 + [0] * 10,
        "images": [K] * C,
    }
    summary["adaptive_tseed1"]["class_hits"]["standard"]["negls/adaptive"] = {
        "hits": [4] * 10 + [0] * 10,
        "images": [K] * C,
    }
    out = _bench().pooled(summary)
    assert out["runs"] == ["adaptive", "adaptive_tseed1"]
    assert out["skipped"] == ["adaptive_tseed0", "adaptive_tseed3"]
    acc = out["standard/adaptive"]
    assert acc["acc1"] == 0.5 and acc["per_run"] == [0.5, 0.5]
    assert acc["between_seed_r"] == pytest.approx(1.0)
    # 20 classes, half found on both seeds: the class interval, not one of 320 images
    assert acc["hi"] - acc["lo"] > 0.3 and acc["cells"][1] - acc["cells"][0] < acc["hi"] - acc["lo"]
    factor = out["factor/negls"]
    assert factor["factor"] == pytest.approx(1.5) and factor["per_run"] == [2.0, 1.0]
    assert factor["lo"] < 1.5 < factor["hi"]
    assert "factor/standard" not in out  # one attack on the undefended target only


def test_paired_difference_interval_keeps_the_pairing() -> None:
    rng = np.random.default_rng(3)
    groups = np.repeat(np.arange(20), 8)
    a = (rng.random(160) < 0.8).astype(float)
    b = a.copy()
    b[rng.choice(np.flatnonzero(a), 16, replace=False)] = 0.0  # b misses 16 of a's hits
    d, lo, hi = paired_class_difference_interval(a, b, groups)
    assert d == pytest.approx(0.1) and 0.0 < lo < d < hi
    # the marginal intervals of the same outcomes overlap: only the pairing separates them
    assert class_bootstrap_interval(b, groups)[1] > class_bootstrap_interval(a, groups)[0]
    # the same outcomes shuffled between the two columns at random: the difference spans 0
    swap = rng.random(160) < 0.5
    x, y = np.where(swap, a, b), np.where(swap, b, a)
    _, lo2, hi2 = paired_class_difference_interval(x, y, groups)
    assert lo2 < 0.0 < hi2
    with pytest.raises(ShapeError, match="paired outcomes"):
        paired_class_difference_interval(a, b[:5], groups)


def _atat_run(seed: int, models: dict[str, tuple[float, list[int]]]) -> dict[str, Any]:
    """An atat-privacy summary: per model, (clean accuracy, per-class hits of K images)."""
    return {
        "target_seed": seed,
        "models": {
            m: {"clean": c, "acc1": sum(h) / (K * C), "robust": 0.0} for m, (c, h) in models.items()
        },
        "class_hits": {
            "standard": {m: {"hits": h, "images": [K] * C} for m, (_, h) in models.items()}
        },
    }


def test_the_atat_target_pools_target_seeds_by_tag() -> None:
    std = [6] * 20  # 0.75
    half = [3] * 20  # 0.375: half the standard's
    most = [5] * 20  # 0.625
    summary = {
        "atat_x": _atat_run(
            0, {"standard": (0.85, std), "atat-a": (0.85, half), "atat-b": (0.85, most)}
        ),
        "atat_tseed1_x": _atat_run(
            1, {"standard": (0.85, std), "atat-a": (0.80, half), "atat-b": (0.85, most)}
        ),
        "atat_tseed1_y": _atat_run(1, {"standard": (0.85, half)}),  # another group
        "atat": _atat_run(0, {"standard": (0.85, half)}),
    }
    bench = _bench()
    out = bench.pooled_atat(summary, "_x")
    assert out["runs"] == ["atat_tseed1_x", "atat_x"]
    a, b = out["models"]["atat-a"], out["models"]["atat-b"]
    assert a["clean"] == pytest.approx(0.825) and a["clean_per_run"] == [0.80, 0.85]
    assert a["ratio"][0] == pytest.approx(0.5) and b["ratio"][0] == pytest.approx(5 / 6)
    assert "ratio" not in out["models"]["standard"]
    # atat-a: 2.5 points of clean accuracy lost on average, within the 3 allowed; half
    assert out["best_atat"] == "atat-a" and out["target_atat_half"]
    # identical classes on every seed: no spread, the interval is the point
    assert out["interval_below_half"]
    # the same runs with atat-a 5 points below the standard: only atat-b qualifies
    summary["atat_tseed1_x"]["models"]["atat-a"]["clean"] = 0.75
    out = bench.pooled_atat(summary, "_x")
    assert out["best_atat"] == "atat-b" and not out["target_atat_half"]
    # one run of a group: nothing to pool
    assert "models" not in bench.pooled_atat(summary, "_y")
    # half on average, but all of it on half the classes: the point meets the target, the
    # class interval reaches above one half
    spread = [6] * 10 + [0] * 10
    for key in ("atat_x", "atat_tseed1_x"):
        summary[key]["class_hits"]["standard"]["atat-b"]["hits"] = spread
    out = bench.pooled_atat(summary, "_x")
    assert out["models"]["atat-b"]["ratio"][0] == pytest.approx(0.5)
    assert out["target_atat_half"] and not out["interval_below_half"]
