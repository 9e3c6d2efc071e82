"""The summary figure of ``optimizer-fingerprints`` (built from summary rows only)."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure

from trainleak.experiments._fingerprint_claims import SummaryRow


def fingerprint_figure(summary: Sequence[SummaryRow]) -> Figure:
    """Own-target and l2-target counts beside the best equal-budget baseline; KKT residuals."""
    keys = list(dict.fromkeys((r.dataset, r.optimizer) for r in summary))

    def mean_of(ds: str, opt: str, methods: tuple[str, ...]) -> float:
        vals = [
            r.ssim_04_mean
            for r in summary
            if (r.dataset, r.optimizer) == (ds, opt) and r.method in methods
        ]
        return max(vals, default=0.0)

    fig = Figure(figsize=(10, 3.5))
    axes = fig.subplots(1, 2)
    labels = [f"{ds}\n{opt}" for ds, opt in keys]
    pos = list(range(len(keys)))
    own = [mean_of(ds, opt, ("own target",)) for ds, opt in keys]
    l2 = [mean_of(ds, opt, ("l2 target",)) for ds, opt in keys]
    base = [
        mean_of(ds, opt, ("random uniform", "held-out images", "public mean + perturbations"))
        for ds, opt in keys
    ]
    axes[0].bar([p - 0.2 for p in pos], own, 0.4, label="own target")
    axes[0].bar([p + 0.2 for p in pos], l2, 0.4, label="l2 target")
    axes[0].plot(pos, base, "k_", ms=20, label="best equal-budget baseline")
    axes[0].set(title="images at SSIM >= 0.4 (mean over seeds)")
    axes[0].set_xticks(pos, labels, fontsize=6)
    axes[0].legend(fontsize=7)
    first = {(r.dataset, r.optimizer): r for r in summary}
    for t in ("l2", "spectral", "linf"):
        axes[1].plot(pos, [getattr(first[k], f"residual_{t}_mean") for k in keys], "o-", label=t)
    axes[1].set(title="KKT residual of the true training set", yscale="log")
    axes[1].set_xticks(pos, labels, fontsize=6)
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    return fig
