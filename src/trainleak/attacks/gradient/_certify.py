"""Certify a decoded batch: a pivot chain, then a Kantorovich bound for the samples left.

See :mod:`trainleak.attacks.gradient._certificate` for the statement and its proof. This
module gathers the quantities (the linearisation, the per-sample-unit rows of the update, the
rounding bound), runs the pivot chain and the core bound
(:mod:`trainleak.attacks.gradient._certificate_core`), and checks that every first-layer row's
residual is one the proven bounds allow (a decoded batch that leaves a residual no batch within
its bounds could leave is refused: the true batch is then elsewhere). Only complete batches are
certified: with samples missing, nothing bounds where they reach.
"""

from __future__ import annotations

import math

import torch

from trainleak.attacks.gradient._certificate import (
    Certificate,
    CertificateSettings,
    own_rounding,
    rounding_bound,
)
from trainleak.attacks.gradient._certificate_core import core_bound
from trainleak.attacks.gradient._certificate_pivot import pivot_chain
from trainleak.attacks.gradient._certificate_refine import refine_chain
from trainleak.attacks.gradient._certificate_scale import scale_error
from trainleak.attacks.gradient._certificate_span import span_core_bound
from trainleak.attacks.gradient._linearisation import Linearisation, linearise
from trainleak.attacks.gradient.layout import difference_rows
from trainleak.models.functional import FirstLayerSplit
from trainleak.models.spec import StateDict


class BatchCertifier:
    """Holds one decoded batch and the update it must explain.

    Args:
        split: the model seen at its first layer.
        update: the released update.
        transform: the decoder's row transform ``(row, next)``.
        unit: factor turning the update into per-sample units (``B`` for a plain mean).
        batch_size: ``B`` (given or inferred), or ``None``.
        settings: tolerances.
        fitted_scale: whether ``unit`` includes a rescaling the decoder fitted (then the scale
            is an unknown of the proof, see :mod:`._certificate_scale`).
    """

    def __init__(
        self,
        split: FirstLayerSplit,
        update: StateDict,
        transform: tuple[torch.Tensor, torch.Tensor],
        unit: float,
        batch_size: int | None,
        settings: CertificateSettings,
        fitted_scale: bool = False,
    ) -> None:
        self.split, self.transform, self.settings = split, transform, settings
        self.fitted = fitted_scale
        self.b = batch_size
        row, nxt = transform
        gw = difference_rows(update[split.weight_key], row, nxt)
        gb = difference_rows(update[split.bias_key], row, nxt)
        self.measured = unit * torch.cat([gw, gb.unsqueeze(1)], dim=1)

    def certify(self, x: torch.Tensor, labels: torch.Tensor, residual_rel: float) -> Certificate:
        """Certificate of the decoded samples ``x`` (``(n, d)``) with ``labels``."""
        n = int(x.shape[0])
        if n == 0:
            return Certificate.refuse(0, "no sample decoded")
        if self.b is None:
            return Certificate.refuse(n, "batch size unknown and the update rescaled")
        if n != self.b:
            return Certificate.refuse(n, f"{n} samples decoded for a batch of {self.b}")
        if not residual_rel <= self.settings.residual_rtol:
            return Certificate.refuse(n, f"the whole update's residual is {residual_rel:.3g}")
        lin = linearise(self.split, x, labels, self.transform)
        noise = rounding_bound(
            lin, self.measured, self.settings.rounding, self.settings.unit_roundoff
        ) + own_rounding(lin, self.measured)
        resid = self._rest(lin, torch.arange(n))
        if self.fitted:
            e_scale = scale_error(lin, resid, noise, self.measured)
            if isinstance(e_scale, str):
                return Certificate.refuse(n, e_scale)
            meas = torch.stack(
                [self.measured[:, :-1].norm(dim=1), self.measured[:, -1].abs()], dim=1
            )
            noise = 2 * noise + e_scale * meas
        return self._prove(lin, resid, noise)

    def _prove(self, lin: Linearisation, resid: torch.Tensor, noise: torch.Tensor) -> Certificate:
        """Pivot chain, then the core (or the whole batch) through a Kantorovich bound."""
        n = lin.n
        chain = refine_chain(lin, resid, noise, pivot_chain(lin, resid, noise, math.inf))
        error, radius = chain.error.clone(), lin.radius.clone()
        core = torch.nonzero(~(error <= self.settings.tol)).squeeze(1)
        chain.dev_c[core], chain.dev_v[core] = 0.0, 0.0  # the core's moves are bounded below
        allowance = chain.row_allowance(lin.xt_norm)
        if core.numel() == 0:
            return self._conclude(error, radius, resid, allowance + noise.norm(dim=1))
        rows = lin.q[core].norm(dim=1).amax(0) > 0  # the core's block is zero elsewhere
        a = float((resid.norm(dim=1) + allowance + noise.norm(dim=1))[rows].norm())
        got = core_bound(lin.subset(core), a, self.settings.tol, self.settings.max_core)
        if got.reason and n * n <= self.settings.max_span:  # the whole batch as one core
            core, allowance = torch.arange(n), torch.zeros_like(allowance)
            a = float((resid.norm(dim=1) + noise.norm(dim=1)).norm())
            got = span_core_bound(lin, a, self.settings.tol, self.settings.max_span)
        elif got.reason.startswith("core of"):  # too large for the direct bound
            got = span_core_bound(lin.subset(core), a, self.settings.tol, self.settings.max_span)
        if got.reason:
            return Certificate.refuse(
                n, f"{core.numel()} samples without a pivot row: {got.reason}"
            )
        error[core], radius[core] = got.error, got.radius
        sub = lin.subset(core)
        dev_c = sub.lipschitz(got.error) * got.error
        moves = dev_c * sub.xt_norm.unsqueeze(1) + (sub.coefficients().abs() + dev_c) * got.error
        return self._conclude(error, radius, resid, allowance + moves.sum(0) + noise.norm(dim=1))

    def _rest(self, lin: Linearisation, keep: torch.Tensor) -> torch.Tensor:
        """Rows left after subtracting the samples ``keep`` at their decoded values."""
        c = lin.coefficients()[keep]
        xt = torch.cat([lin.x[keep], torch.ones(int(keep.numel()), 1, dtype=lin.x.dtype)], 1)
        k, r = torch.nonzero(c, as_tuple=True)
        if 10 * k.numel() >= c.numel():
            return self.measured - c.T @ xt
        # few members per row (an imprint layer): the same sums over the non-zero terms only
        return self.measured.index_add(0, r, -c[k, r].unsqueeze(1) * xt[k])

    def _conclude(
        self, error: torch.Tensor, radius: torch.Tensor, resid: torch.Tensor, allowed: torch.Tensor
    ) -> Certificate:
        """Check the bounds against the tolerance and the residual against the bounds."""
        n, tol = int(error.numel()), self.settings.tol
        excess = float((resid.norm(dim=1) - allowed).max())
        if excess > 0:
            return Certificate.refuse(
                n, f"a first-layer row's residual exceeds what the bounds allow by {excess:.3g}"
            )
        if not bool((error <= tol).all()):
            return Certificate.refuse(n, f"error bound {float(error.max()):.3g} above {tol:g}")
        if not bool((radius > error).all()):
            return Certificate.refuse(n, "an activation region is narrower than the error bound")
        return Certificate(
            certified=torch.ones(n, dtype=torch.bool),
            error_bound=error.to(torch.float64),
            radius=radius.to(torch.float64),
            batch=True,
            details={"max_error_bound": float(error.max()), "min_radius": float(radius.min())},
        )


def default_tolerance(dtype: torch.dtype) -> float:
    """The input tolerance: 1e-6 for float64 updates (the exact-recovery threshold), 1e-4 for
    float32."""
    return 1e-6 if dtype == torch.float64 else 1e-3


def unit_roundoff(dtype: torch.dtype) -> float:
    """Unit roundoff ``u = eps / 2`` of ``dtype``."""
    return float(torch.finfo(dtype).eps) / 2
