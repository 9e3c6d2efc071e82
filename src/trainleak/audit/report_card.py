"""The risk card in HTML, and the index page's attack-against-bound plot.

Both read the card as stored in ``result.json`` (the JSON form of
:class:`~trainleak.experiments.risk.RiskCard`); a run without a card (an experiment that does
not summarise its strongest attack) gets a card saying so, with its claims count, never an
empty space.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

from matplotlib.figure import Figure

CARD_CSS = """
.card{border:2px solid #d0d7de;border-radius:.6rem;padding:.8rem 1.1rem;margin:1rem 0 1.6rem;
background:#fbfcfd}.card h3{margin:.1rem 0 .6rem;font-size:1.1rem}
.verdict{font-size:1.05rem;font-weight:600;padding:.55rem .8rem;border-radius:.4rem;margin:.4rem 0}
.lv-high{background:#ffebe9;color:#82071e;border-left:6px solid #cf222e}
.lv-review{background:#fff8c5;color:#6a4a00;border-left:6px solid #bf8700}
.lv-low{background:#dafbe1;color:#0f5323;border-left:6px solid #1a7f37}
.lv-unproven,.lv-unmeasured,.lv-none{background:#f3f5f7;color:#30363d;border-left:6px solid #8c959f}
.level{display:inline-block;font-size:.75rem;text-transform:uppercase;letter-spacing:.06em;
padding:.05rem .45rem;border-radius:.7rem;margin-right:.5rem;background:rgba(0,0,0,.08)}
.badge{display:inline-block;font-size:.72rem;text-transform:uppercase;letter-spacing:.05em;
padding:.05rem .5rem;border-radius:.7rem;white-space:nowrap}
.b-high{background:#ffebe9;color:#82071e}
.b-review{background:#fff8c5;color:#6a4a00}.b-low{background:#dafbe1;color:#0f5323}
.b-unproven,.b-unmeasured,.b-none{background:#eaeef2;color:#30363d}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.25rem .9rem;margin:.5rem 0 0}
dl.facts dt{font-weight:600;color:#57606a}dl.facts dd{margin:0}
"""

LEVEL_TITLES = {
    "high": "high risk",
    "review": "not cleared",
    "low": "low measured risk",
    "unproven": "not shown safe",
    "unmeasured": "nothing measured",
    "none": "no risk card",
}


def card_html(risk: Mapping[str, Any] | None, claims: Sequence[Mapping[str, Any]]) -> str:
    """The card at the top of a run's section."""
    if not risk:
        held = sum(bool(c.get("holds")) for c in claims)
        return (
            '<div class="card"><h3>Risk card</h3><div class="verdict lv-none">'
            '<span class="level">no risk card</span>This run does not summarise a strongest '
            f"attack against a bound; {held} of {len(claims)} of its claims hold (below)."
            "</div></div>"
        )
    level = str(risk.get("level", "none"))
    attack, bound, gap = risk.get("attack"), risk.get("bound"), risk.get("gap") or {}
    facts = [
        ("Release", _e(str(risk.get("release", "")))),
        ("Strongest attack", _attack_text(attack, int(risk.get("attacks_run") or 0))),
        ("Strongest bound", _bound_text(bound)),
        ("Gap", _e(str(gap.get("text", "")))),
    ]
    rows = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
    return (
        f'<div class="card" data-level="{_e(level)}"><h3>Risk card</h3>'
        f'<div class="verdict lv-{_e(level)}"><span class="level">'
        f"{_e(LEVEL_TITLES.get(level, level))}</span>{_e(str(risk.get('verdict', '')))}</div>"
        f'<dl class="facts">{rows}</dl></div>'
    )


def _attack_text(attack: Mapping[str, Any] | None, runs: int) -> str:
    if not attack:
        return "none ran" + (f" ({runs} considered)" if runs else "")
    rec, of = attack.get("recovered"), attack.get("of")
    how = "unknown" if rec is None else (f"{rec} of {of}" if of else str(rec))
    base = attack.get("baseline_recovered")
    parts = [
        f"<b>{_e(str(attack.get('attack')))}</b>: {how} "
        f"{_e(str(attack.get('unit') or 'records'))} recovered",
        _e(str(attack.get("quality_metric") or "")),
        f"certainty: {_e(str(attack.get('certainty')))}",
    ]
    if base is not None:
        kind = attack.get("baseline_kind") or "a baseline given the same budget"
        parts.append(f"{_e(str(kind))}: {base}")
    if attack.get("detail"):
        parts.append(f"own evidence: {_e(str(attack['detail']))}")
    return "; ".join(p for p in parts if p)


def _bound_text(bound: Mapping[str, Any] | None) -> str:
    if not bound:
        return "none applies"
    scope = "" if bound.get("general", True) else " (not valid for every attack)"
    return (
        f"<b>{_e(str(bound.get('name')))}</b>{scope}: {_e(str(bound.get('statement')))}"
        f"<br><small>assumes: {_e(str(bound.get('assumptions') or 'nothing further'))}</small>"
    )


def index_plot(points: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """The strongest attack against the strongest bound of every run that has both on one
    scale, as an embedded PNG (one panel per scale), or a sentence saying none has."""
    by_scale: dict[str, list[tuple[str, float, float]]] = {"mse": [], "success": []}
    for label, risk in points:
        gap = (risk or {}).get("gap") or {}
        a, b, scale = gap.get("attack_value"), gap.get("bound_value"), gap.get("scale")
        if scale in by_scale and _finite(a) and _finite(b):
            by_scale[scale].append((label, float(b), float(a)))
    panels = [(s, v) for s, v in by_scale.items() if v]
    if not panels:
        return (
            "<p><em>Attack against bound: no run has its strongest attack and its strongest "
            "bound on one scale.</em></p>"
        )
    fig = Figure(figsize=(5.2 * len(panels), 4.2))
    for ax, (scale, pts) in zip(fig.subplots(1, len(panels), squeeze=False)[0], panels):
        _panel(ax, scale, pts)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return (
        '<figure><img src="data:image/png;base64,' + data + '" alt="attack against bound">'
        "<figcaption>Strongest attack against strongest bound, one point per run. Error: an "
        "attack may not fall below the diagonal (the lower bound); success: it may not rise "
        "above it (the upper bound).</figcaption></figure>"
    )


def _panel(ax: Any, scale: str, pts: list[tuple[str, float, float]]) -> None:
    xs, ys = [p[1] for p in pts], [p[2] for p in pts]
    lo = min(min(xs), min(ys))
    hi = max(max(xs), max(ys))
    if scale == "mse":
        lo, hi = max(lo, 1e-12) / 2, hi * 2
        ax.set(xscale="log", yscale="log")
        ax.fill_between([lo, hi], [lo, lo], [lo, hi], color="#cf222e", alpha=0.08)
        ax.set(xlabel="lower bound: MSE per coordinate", ylabel="best attack: MSE per coordinate")
    else:
        lo, hi = 0.0, 1.0
        ax.fill_between([lo, hi], [lo, hi], [hi, hi], color="#cf222e", alpha=0.08)
        ax.set(xlabel="upper bound: success probability", ylabel="best attack: fraction recovered")
    ax.plot([lo, hi], [lo, hi], color="grey", ls="--", lw=1)
    ax.scatter(xs, ys, color="#0969da", zorder=3)
    for label, x, y in pts:
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set(xlim=(lo, hi), ylim=(lo, hi), title="error" if scale == "mse" else "success")


def _finite(v: Any) -> TypeGuard[float]:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _e(text: str) -> str:
    return html.escape(text, quote=True)
