"""Small shared figures for experiments (matplotlib Figure objects, never pyplot)."""

from __future__ import annotations

from matplotlib.figure import Figure

from trainleak.attacks.base import Reconstruction
from trainleak.systems.training import History


def loss_curve_figure(
    hist: History, rec: Reconstruction, control: Reconstruction | None = None
) -> Figure:
    """Training loss and minimum margin, and the attack's KKT loss trace (with a control)."""
    fig = Figure(figsize=(10, 3.2))
    ax1, ax2, ax3 = fig.subplots(1, 3)
    ax1.semilogy(hist.step, hist.loss)
    ax1.set(title="training loss", xlabel="step")
    ax2.plot(hist.step, hist.min_margin)
    ax2.set(title="minimum margin", xlabel="step")
    steps = [t["step"] for t in rec.trace]
    ax3.semilogy(steps, [t["kkt"] for t in rec.trace], label="trained release")
    if control is not None:
        ax3.semilogy(
            [t["step"] for t in control.trace],
            [t["kkt"] for t in control.trace],
            label="untrained control",
        )
    ax3.set(title="normalised KKT residual", xlabel="attack step")
    ax3.legend()
    fig.tight_layout()
    return fig
