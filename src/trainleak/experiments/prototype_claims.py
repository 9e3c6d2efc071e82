"""Rows and claims of ``gaussian-prototypes`` (seed 11), as pure functions of the rows.

One :class:`RunRow` per trained network (width N, loss mask, temperature, seed). Each claim is
a function ``(rows, config) -> Claim`` listed in :data:`CLAIMS`; the display summaries are
built from the rows by :func:`summary`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainleak.experiments.base import Claim, ClaimFn, claim

MASKS: list[tuple[int, ...]] = list(itertools.product((0, 1), repeat=3))


def mask_name(mask: tuple[int, ...]) -> str:
    """``baseline`` for (0, 0, 0), else the active losses joined by ``+`` (C, S, O)."""
    parts = [tag for tag, on in zip("CSO", mask) if on]
    return "+".join(parts) if parts else "baseline"


MASK_NAMES: list[str] = [mask_name(m) for m in MASKS]
OVERLAP_PAIRS = (("O", "baseline"), ("C+O", "C"), ("S+O", "S"), ("C+S+O", "C+S"))


@dataclass(frozen=True)
class RunRow:
    """One trained Gaussian MLP, released and reconstructed by its prototypes.

    ``err`` is the Hungarian-matched mean |x_i - p_pi(i)| over the data range, ``sr`` the
    specialisation ratio, ``outside_hull`` the share of prototypes outside [min x, max x],
    ``fit_mse`` the final training MSE; ``size`` is the width N (= the number of training
    points); ``sweep`` marks the extra temperature-sweep runs.
    """

    size: int
    mask: str
    tau: float
    seed: int
    sweep: bool
    err: float
    sr: float
    outside_hull: float
    fit_mse: float


def main_rows(rows: Sequence[RunRow], cfg: Any) -> list[RunRow]:
    """The mask x size x seed study at the default temperature."""
    return [r for r in rows if not r.sweep and r.tau == cfg.tau]


def sweep_rows(rows: Sequence[RunRow]) -> list[RunRow]:
    """Separation only at the largest N, every temperature (the default one included)."""
    n = max(r.size for r in rows)
    return [r for r in rows if r.size == n and r.mask == "S"]


def _group(rows: Sequence[RunRow], n: int, mask: str) -> list[RunRow]:
    return [r for r in rows if r.size == n and r.mask == mask]


def _mean(rows: Sequence[RunRow], field: str) -> float:
    return float(np.mean([getattr(r, field) for r in rows]))


def summary(rows: Sequence[RunRow]) -> list[dict[str, Any]]:
    """Display table: mean (and std of err) over seeds for each (N, mask, tau)."""
    keys = sorted(
        {(r.size, r.mask, r.tau) for r in rows},
        key=lambda k: (k[0], MASK_NAMES.index(k[1]), k[2]),
    )
    table = []
    for n, m, t in keys:
        sel = [r for r in rows if (r.size, r.mask, r.tau) == (n, m, t)]
        err = np.array([r.err for r in sel])
        table.append(
            {
                "N": n,
                "mask": m,
                "tau": t,
                "runs": len(sel),
                "err_mean": float(err.mean()),
                "err_std": float(err.std()),
                "sr_mean": _mean(sel, "sr"),
                "outside_hull_mean": _mean(sel, "outside_hull"),
                "fit_mse_median": float(np.median([r.fit_mse for r in sel])),
            }
        )
    return table


def claim_coverage_best(rows: Sequence[RunRow], cfg: Any) -> Claim:
    """At every N the best mask uses coverage, and coverage alone beats the plain fit."""
    main = main_rows(rows, cfg)
    sizes = sorted({r.size for r in main})
    err = {(n, m): _mean(_group(main, n, m), "err") for n in sizes for m in MASK_NAMES}
    best = {n: min(MASK_NAMES, key=lambda m: err[(n, m)]) for n in sizes}
    return claim(
        "Coverage gives the lowest mean reconstruction error at every N: the best mask at each "
        "N uses coverage, and coverage alone beats the plain fit",
        all(
            "C" in best[n] and round(err[(n, "C")], 4) < round(err[(n, "baseline")], 4)
            for n in sizes
        ),
        sizes=sizes,
        best_mask=[best[n] for n in sizes],
        err_coverage=[round(err[(n, "C")], 4) for n in sizes],
        err_baseline=[round(err[(n, "baseline")], 4) for n in sizes],
    )


def claim_coverage_raises_sr(rows: Sequence[RunRow], cfg: Any) -> Claim:
    """Coverage alone has a higher mean specialisation ratio than the plain fit at every N."""
    main = main_rows(rows, cfg)
    sizes = sorted({r.size for r in main})
    sr = {m: [round(_mean(_group(main, n, m), "sr"), 3) for n in sizes] for m in ("baseline", "C")}
    return claim(
        "Coverage raises the specialisation ratio over the plain fit at every N",
        all(a > b for a, b in zip(sr["C"], sr["baseline"])),
        sizes=sizes,
        sr_coverage=sr["C"],
        sr_baseline=sr["baseline"],
    )


def claim_overlap_harmful(rows: Sequence[RunRow], cfg: Any) -> Claim:
    """Adding the overlap loss to any mask raises the mean error, at every N."""
    main = main_rows(rows, cfg)
    sizes = sorted({r.size for r in main})
    harm = [
        _mean(_group(main, n, o), "err") > _mean(_group(main, n, b), "err")
        for n in sizes
        for o, b in OVERLAP_PAIRS
    ]
    return claim(
        "Overlap is harmful: adding the overlap loss to any mask raises the mean error, at every N",
        all(harm),
        share_of_comparisons_harmed=sum(harm) / len(harm),
        comparisons=len(harm),
        err_overlap_only=[round(_mean(_group(main, n, "O"), "err"), 4) for n in sizes],
    )


def claim_harm_not_fit_failure(rows: Sequence[RunRow], cfg: Any) -> Claim:
    """Overlap runs fit as well as the rest but push more prototypes outside the hull."""
    table = summary(main_rows(rows, cfg))
    on = [r for r in table if "O" in r["mask"]]
    off = [r for r in table if "O" not in r["mask"]]
    fit_on = float(np.median([r["fit_mse_median"] for r in on]))
    fit_off = float(np.median([r["fit_mse_median"] for r in off]))
    hull_on = float(np.mean([r["outside_hull_mean"] for r in on]))
    hull_off = float(np.mean([r["outside_hull_mean"] for r in off]))
    return claim(
        "The harm is not a fitting failure: overlap-active runs fit the targets as well as the "
        "rest (median fit MSE within 2x, or both below 1e-4) while pushing more prototypes "
        "outside the data's hull",
        (fit_on <= 2 * fit_off or max(fit_on, fit_off) < 1e-4) and hull_on > hull_off,
        fit_mse_overlap=fit_on,
        fit_mse_other=fit_off,
        outside_hull_overlap=hull_on,
        outside_hull_other=hull_off,
    )


def claim_separation_large_tau(rows: Sequence[RunRow], cfg: Any) -> Claim:
    """The separation-only hull escape grows with tau and starts near the plain fit's."""
    sweep = summary(sweep_rows(rows))
    main = main_rows(rows, cfg)
    taus = [r["tau"] for r in sweep]
    hull = [round(r["outside_hull_mean"], 3) for r in sweep]
    base_hull = _mean(_group(main, max(r.size for r in main), "baseline"), "outside_hull")
    return claim(
        "Separation alone expels prototypes only at large tau: the hull-escape share grows with "
        "tau and stays near the plain fit's at the smallest tau",
        len(sweep) >= 2 and hull[-1] > hull[0] and hull[0] <= base_hull + 0.05,
        tau=taus,
        outside_hull=hull,
        baseline_outside_hull=round(base_hull, 3),
    )


CLAIMS: tuple[ClaimFn, ...] = (
    claim_coverage_best,
    claim_coverage_raises_sr,
    claim_overlap_harmful,
    claim_harm_not_fit_failure,
    claim_separation_large_tau,
)
