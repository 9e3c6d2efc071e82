"""Benchmark: Inverting Gradients on breaching's ConvNet, beside breaching's anchor figures.

The work is the anchor's (``shared/docs/anchors/reference-runs.md``): the eight-convolution
BatchNorm ConvNet at width 16 (187,114 parameters on CIFAR-10, 186,826 on MNIST), untrained
(PyTorch's default initialisation, seed 0), one FedSGD gradient of the mean cross-entropy over
B = 1 or 4 private images, labels given, images in [0, 1] with the box known, 2000 iterations,
one thread. Every cell is scored with standard PSNR and Gaussian-window SSIM on [0, 1]
(``trainleak.metrics.image``), B = 4 after a one-to-one NCC matching.

Beside each cell: breaching's published figures (anchor), the public-mean image as an
equal-knowledge baseline (the mean of the server's public images, one candidate per private
image), and the per-iteration CPU time of three implementations timed in this run on the same
release: the landed loop before this change (``before``), the current attack, and the current
attack with channels-last layout.

Settings: TV weight 0.05, uniform start, lr 0.03 (breaching's 0.1 in units of the data's
standard deviation, about 0.3, expressed on [0, 1]); ``--init prior-mean --lr 0.01`` starts at
the public mean image instead. ``--calibrate N`` sweeps TV weight and start on a calibration
image drawn with a seed distinct from the evaluation images (see docs/decisions.md for what
that sweep showed). ``--render`` rewrites the Markdown table from the JSON rows.

Run: ``TRAINLEAK_DATA=../shared/data nice .venv/bin/python benchmarks/inverting_gradients.py
[--iterations 2000] [--trials 2] [--device cuda]``; writes
``benchmarks/results/inverting_gradients.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import torch

from trainleak.attacks.gradient._common import release_model
from trainleak.attacks.gradient._objectives import (
    GradientDistance,
    candidate_gradient,
    total_variation,
)
from trainleak.attacks.gradient.inverting import InvertingGradients
from trainleak.metrics.image import psnr, ssim
from trainleak.metrics.matching import match_hungarian
from trainleak.models import build_model, model_spec
from trainleak.models.functional import state_of
from trainleak.releases import Knowledge
from trainleak.releases.federated import GradientUpdate
from trainleak.systems.federated import fedsgd_update
from trainleak.systems.federated.data import Pool, load_pool

OUT = Path(__file__).resolve().parent / "results"
# reference-runs.md, breaching @ 8bd99d52: (data, B, BatchNorm) -> (PSNR, SSIM, CPU s / 1k its)
ANCHOR: dict[tuple[str, int, str], tuple[float, float, float]] = {
    ("mnist", 1, "eval"): (11.67, 0.119, 31.8),
    ("mnist", 1, "train"): (11.48, 0.083, 34.5),
    ("mnist", 4, "train"): (9.95, 0.033, 88.5),
    ("cifar10", 1, "train"): (14.94, 0.249, 41.6),
}
CELLS = list(ANCHOR) + [("cifar10", 4, "train")]
EVAL_SEED, CALIBRATION_SEED = 1, 1000
NO_TIMINGS = {"before": float("nan"), "current": float("nan"), "channels_last": float("nan")}
# chosen on calibration images (see --calibrate and the results file)
SETTINGS: dict[str, dict[str, Any]] = {
    "mnist": {"tv_weight": 0.05, "init": "uniform", "lr": 0.03},
    "cifar10": {"tv_weight": 0.05, "init": "uniform", "lr": 0.03},
}


def release_for(
    pool: Pool, batch: int, bn_mode: str, seed: int
) -> tuple[GradientUpdate, torch.Tensor, torch.Tensor]:
    """The untrained ConvNet's FedSGD gradient on ``batch`` private images (float32)."""
    spec = model_spec(
        "convnet_bn", input_shape=pool.input_shape, out_dim=10, width=16, bn_mode=bn_mode
    )
    params = state_of(build_model(spec, seed=0))
    x, y = pool.batch(batch, torch.Generator().manual_seed(seed))
    return fedsgd_update(spec, params, x.float(), y), x.float(), y


def score(x: torch.Tensor, rec: torch.Tensor) -> tuple[float, float]:
    """Mean PSNR and SSIM after a one-to-one NCC matching of candidates to images."""
    rec = rec.clamp(0, 1)[match_hungarian(x, rec)]
    return float(psnr(x, rec).mean()), float(ssim(x, rec).mean())


def before_loop(upd: GradientUpdate, labels: torch.Tensor, n: int, lr: float, tv: float) -> None:
    """The landed attack's loop before this change (its per-iteration cost, as a baseline)."""
    model = release_model(upd)
    target = [upd.update[k] for k, _ in model.named_parameters()]
    shape = tuple(upd.architecture.kwargs["input_shape"])
    x = torch.randn(len(labels), *shape).clamp(0, 1).requires_grad_(True)
    opt = torch.optim.Adam([x], lr=lr)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, [n // 2], gamma=0.1)
    dist = GradientDistance("cosine")
    for _ in range(n):
        opt.zero_grad()
        loss = dist(candidate_gradient(model, x, labels), target) + tv * total_variation(x)
        (g,) = torch.autograd.grad(loss, [x])
        x.grad = g.sign()
        opt.step()
        sched.step()
        with torch.no_grad():
            x.clamp_(0, 1)


def cpu_per_1k(fn: Any, n: int) -> float:
    """CPU seconds of ``fn()`` (``n`` iterations), scaled to 1000 iterations."""
    start = time.process_time()
    fn()
    return (time.process_time() - start) / n * 1000


def timings(upd: GradientUpdate, y: torch.Tensor, kn: Knowledge, n: int) -> dict[str, float]:
    """CPU s / 1k iterations of the three implementations, interleaved twice, best kept."""
    out: dict[str, list[float]] = {"before": [], "current": [], "channels_last": []}
    for _ in range(2):
        out["before"].append(cpu_per_1k(lambda: before_loop(upd, y, n, 0.1, 0.05), n))
        for key, cl in (("current", False), ("channels_last", True)):
            atk = InvertingGradients(iterations=n, channels_last=cl, log_every=n)
            out[key].append(cpu_per_1k(lambda a=atk: a(upd, kn), n))
    return {k: min(v) for k, v in out.items()}


def cell(
    pool: Pool,
    batch: int,
    bn_mode: str,
    trial: int,
    iterations: int,
    cfg: dict[str, Any],
    device: str = "cpu",
) -> dict[str, Any]:
    """One evaluation: the attack at ``iterations``, the public-mean baseline, the timings."""
    upd, x, y = release_for(pool, batch, bn_mode, EVAL_SEED + 100 * trial)
    kn = Knowledge(
        input_shape=pool.input_shape,
        value_range=(0.0, 1.0),
        labels=y,
        prior=pool.public_x.float(),
    )
    atk = InvertingGradients(iterations=iterations, log_every=iterations, device=device, **cfg)  # type: ignore[arg-type]
    start = time.process_time()
    rec = atk(upd, kn)
    cpu = (time.process_time() - start) / iterations * 1000
    p, s = score(x, rec.inputs)
    mean_img = pool.public_x.float().mean(0, keepdim=True).expand(batch, *pool.input_shape)
    bp, bs = score(x, mean_img.clone())
    return {
        "data": pool.name,
        "B": batch,
        "bn_mode": bn_mode,
        "trial": trial,
        "iterations": iterations,
        "psnr": p,
        "ssim": s,
        "cpu_s_per_1k": cpu,
        "wall_s_per_1k": rec.seconds / iterations * 1000,
        "final_loss": rec.diagnostics["final_loss"],
        "baseline_psnr": bp,
        "baseline_ssim": bs,
        **{
            f"timing_{k}": v
            for k, v in (timings(upd, y, kn, 40) if device == "cpu" else NO_TIMINGS).items()
        },
    }


def calibrate(pools: dict[str, Pool], iterations: int) -> list[dict[str, Any]]:
    """TV weight and initialisation on calibration images (seed distinct from evaluation)."""
    rows = []
    for name, pool in pools.items():
        upd, x, y = release_for(pool, 1, "train", CALIBRATION_SEED)
        kn = Knowledge(input_shape=pool.input_shape, value_range=(0.0, 1.0), labels=y)
        for tv, init in ((1e-4, "randn"), (0.05, "randn"), (0.05, "uniform"), (0.3, "uniform")):
            rec = InvertingGradients(
                iterations=iterations, tv_weight=tv, init=init, log_every=iterations
            )(upd, kn)
            p, s = score(x, rec.inputs)
            rows.append({"data": name, "tv_weight": tv, "init": init, "psnr": p, "ssim": s})
            print(rows[-1], flush=True)
    return rows


def mean_of(rows: list[dict[str, Any]], key: str) -> float:
    return sum(r[key] for r in rows) / len(rows)


def to_markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """The table beside the anchor's figures, then the timing comparison."""
    lines = [
        "# Inverting Gradients on breaching's ConvNet (width 16), beside breaching",
        "",
        f"Command: `{meta['command']}`; {meta['machine']}, torch {meta['torch']}, "
        f"device {meta.get('device', 'cpu')}, one thread "
        f"(torch.set_num_threads(1)); load average at start {meta['load']}; "
        f"{meta['seconds']:.0f} s in all. Untrained ConvNet (seed 0), labels given, box [0, 1], "
        f"{meta['trials']} private batch(es) per cell; settings per data set: "
        f"{json.dumps(meta.get('settings', SETTINGS))}.",
        "",
        "| data | B | BatchNorm | iterations | PSNR dB | SSIM | CPU s / 1k its | "
        "breaching PSNR | breaching SSIM | breaching s / 1k | public-mean PSNR | "
        "public-mean SSIM |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key in CELLS:
        sel = [r for r in rows if (r["data"], r["B"], r["bn_mode"]) == key]
        if not sel:
            continue
        a = ANCHOR.get(key)
        anchor = " | ".join(f"{v}" for v in a) if a else "- | - | -"
        lines.append(
            f"| {key[0]} | {key[1]} | {key[2]} | {sel[0]['iterations']} | "
            f"{mean_of(sel, 'psnr'):.2f} | {mean_of(sel, 'ssim'):.3f} | "
            f"{mean_of(sel, 'cpu_s_per_1k'):.1f} | {anchor} | "
            f"{mean_of(sel, 'baseline_psnr'):.2f} | {mean_of(sel, 'baseline_ssim'):.3f} |"
        )
    lines += [
        "",
        "## CPU seconds per 1000 iterations, three implementations on the same release",
        "",
        "40 iterations each, run twice interleaved, the lower kept. `before`: the landed loop "
        "before this change; `current`: this attack; `channels_last`: this attack in NHWC.",
        "",
        "| data | B | BatchNorm | before | current | channels_last | breaching (anchor) | "
        "best / breaching |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key in CELLS:
        sel = [r for r in rows if (r["data"], r["B"], r["bn_mode"]) == key]
        if not sel:
            continue
        t = {k: mean_of(sel, f"timing_{k}") for k in ("before", "current", "channels_last")}
        a = ANCHOR.get(key)
        ratio = f"{min(t['current'], t['channels_last']) / a[2]:.2f}" if a else "-"
        lines.append(
            f"| {key[0]} | {key[1]} | {key[2]} | {t['before']:.1f} | {t['current']:.1f} | "
            f"{t['channels_last']:.1f} | {a[2] if a else '-'} | {ratio} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=2000)
    ap.add_argument("--trials", type=int, default=1)
    ap.add_argument("--calibrate", type=int, default=0, help="sweep at this many iterations")
    ap.add_argument("--cells", default="all", help="'anchor' (the anchor's four) or 'all'")
    ap.add_argument("--init", default=None, help="override the settings' init (e.g. prior-mean)")
    ap.add_argument("--lr", type=float, default=None, help="override the settings' lr")
    ap.add_argument("--bn", default=None, help="only the cells with this BatchNorm mode")
    ap.add_argument("--out", default="inverting_gradients")
    ap.add_argument("--render", action="store_true", help="only rewrite the .md from the .json")
    ap.add_argument("--device", default="cpu", help="where the attack runs (timings: cpu only)")
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()
    if args.render:
        data = json.loads((OUT / f"{args.out}.json").read_text())
        (OUT / f"{args.out}.md").write_text(to_markdown(data["rows"], data["meta"]))
        return
    for cfg in SETTINGS.values():
        cfg.update({k: v for k, v in (("init", args.init), ("lr", args.lr)) if v is not None})
    torch.set_num_threads(1)
    start = time.time()
    pools = {
        n: load_pool(n, n_public=500, data_dir=args.data_dir, limit=4000)
        for n in ("mnist", "cifar10")
    }
    if args.calibrate:
        calibrate(pools, args.calibrate)
        return
    cells = list(ANCHOR) if args.cells == "anchor" else CELLS
    cells = [c for c in cells if args.bn in (None, c[2])]
    rows: list[dict[str, Any]] = []
    for data, b, mode in cells:
        for t in range(args.trials):
            cfg = SETTINGS[data]
            rows.append(cell(pools[data], b, mode, t, args.iterations, cfg, args.device))
            print(json.dumps(rows[-1]), flush=True)
            write(rows, args, time.time() - start)  # after every cell: partial runs are kept


def write(rows: list[dict[str, Any]], args: argparse.Namespace, seconds: float) -> None:
    """The JSON rows and the Markdown table under ``benchmarks/results``."""
    options = (
        ("init", args.init),
        ("lr", args.lr),
        ("bn", args.bn),
        ("out", args.out),
        ("device", None if args.device == "cpu" else args.device),
    )
    meta = {
        "command": "python benchmarks/inverting_gradients.py "
        f"--iterations {args.iterations} --trials {args.trials} --cells {args.cells}"
        + "".join(f" --{k} {v}" for k, v in options if v not in (None, "inverting_gradients")),
        "machine": platform.machine(),
        "torch": torch.__version__,
        "load": Path("/proc/loadavg").read_text().split()[0],
        "seconds": seconds,
        "trials": args.trials,
        "device": args.device,
        "settings": SETTINGS,
    }
    OUT.mkdir(exist_ok=True)
    (OUT / f"{args.out}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    (OUT / f"{args.out}.md").write_text(to_markdown(rows, meta))


if __name__ == "__main__":
    main()
