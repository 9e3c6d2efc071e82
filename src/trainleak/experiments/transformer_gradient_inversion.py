"""Seed 9 (TIGER): inverting a transformer's FedSGD gradient, TIGER's continuous
subspace-distance optimisation against DAGER's span test, on WikiText-2 sentences.

Sweeps (encoder with a classification head, decoder with the language-model loss): noise
relative to each gradient tensor's RMS, sequence length (runtime), batch size, and one DP-SGD
level; every release is attacked by DAGER, TIGER and the bag-of-words baseline and scored by
exact-sequence rate, token accuracy, ROUGE-1/2 and runtime; the TAG/LAMP-style
gradient-matching baseline runs on the noise and DP-SGD cells (it is the slowest).

Kalikman, Petrov, Dimitrov, Vechev, *TIGER*, arXiv 2606.18312 (2026); Petrov et al., *DAGER*,
NeurIPS 2024. Everything beyond the abstract is [inferred] (seed brief section 9).
"""

from __future__ import annotations

from matplotlib.figure import Figure

from trainleak.attacks.base import Attack
from trainleak.attacks.transformer.bag_of_words import BagOfWords
from trainleak.attacks.transformer.dager import Dager
from trainleak.attacks.transformer.gradient_matching import GradientMatching
from trainleak.attacks.transformer.tiger import Tiger
from trainleak.experiments._transformer_risk import risk_of
from trainleak.experiments.base import Result, evaluate_claims, experiment, rows_table
from trainleak.experiments.transformer_inversion_claims import (
    CLAIMS,
    Part,
    Row,
    TransformerInversionConfig,
)
from trainleak.models.language import LanguageModel
from trainleak.progress import Progress
from trainleak.releases.transformer_update import TransformerUpdate
from trainleak.scenarios.transformer_gradients import (
    Cell,
    client_release,
    run_attacks,
    tiny_models,
)
from trainleak.systems.transformer_clients import wikitext_sentences


def _attacks(
    cfg: TransformerInversionConfig, noisy: bool, part: Part
) -> dict[str, Attack[TransformerUpdate]]:
    dager = Dager(rank="batch", exact=False) if noisy else Dager()
    out: dict[str, Attack[TransformerUpdate]] = {
        "dager": dager,
        "tiger": Tiger(steps=cfg.tiger_steps),
        "bag-of-words": BagOfWords(),
    }
    if part in ("noise", "dp") and cfg.matching_steps > 0:
        out["gradient-matching"] = GradientMatching(steps=cfg.matching_steps)
    return out


def _rows(
    cells: list[Cell],
    model: str,
    part: Part,
    batch: int,
    length: int,
    width: int,
    noise: float,
    dp: float,
    combos: float,
) -> list[Row]:
    return [
        Row(
            model,
            part,
            batch,
            length,
            width,
            noise,
            dp,
            c.attack,
            c.scores.exact_rate,
            c.scores.token_accuracy,
            c.scores.rouge1,
            c.scores.rouge2,
            c.seconds,
            c.certified,
            combos,
        )
        for c in cells
    ]


def _combinations(lm: LanguageModel, texts: list[str], length: int) -> float:
    """Product of DAGER's noiseless layer-1 candidate counts (exhaustive search size)."""
    _, rel = client_release(lm, texts, length)
    out = Dager(max_combinations=1, beam_width=1, restarts=1, sweeps=1)(rel)
    prod = 1.0
    for c in out.diagnostics["candidates_per_position"]:
        prod *= max(int(c), 1)
    return prod


def _cell(
    cfg: TransformerInversionConfig,
    lm: LanguageModel,
    texts: list[str],
    part: Part,
    length: int,
    noise: float = 0.0,
    dp: float | None = None,
) -> tuple[list[Row], list[Cell], list[list[int]]]:
    dp_pair = (cfg.dp_clip, dp) if dp is not None else None
    batch, rel = client_release(lm, texts, length, noise=noise, dp=dp_pair, seed=cfg.seed)
    cells = run_attacks(batch, rel, _attacks(cfg, noise > 0 or dp is not None, part))
    combos = _combinations(lm, texts, length) if part == "length" and lm.kind == "encoder" else 0
    rows = _rows(
        cells,
        "encoder" if lm.kind == "encoder" else "decoder",
        part,
        len(texts),
        length,
        cfg.width,
        noise,
        dp or 0.0,
        combos,
    )
    return rows, cells, batch.sequences()


def _sentences_table(
    lm: LanguageModel, model: str, cells: list[Cell], originals: list[list[int]]
) -> list[dict[str, str]]:
    """Originals next to the matched recoveries, token by token (a wrong token in brackets)."""
    tok = lm.tokenizer
    out = []
    for i, ref in enumerate(originals):
        row = {"model": model, "original": " ".join(tok.convert_ids_to_tokens(ref))}
        for c in cells:
            rec = list(c.scores.matched[i])
            words = [
                w if j < len(ref) and rec[j] == ref[j] else f"[{w}]"
                for j, w in enumerate(tok.convert_ids_to_tokens(rec))
            ]
            row[c.attack] = " ".join(words)
        out.append(row)
    return out


def _figure(rows: list[Row], part: Part, x: str, y: str, xlabel: str, ylabel: str) -> Figure:
    models = sorted({r.model for r in rows})
    fig = Figure(figsize=(4 * len(models), 3.2))
    for k, model in enumerate(models):
        ax = fig.add_subplot(1, len(models), k + 1)
        for attack in sorted({r.attack for r in rows}):
            sel = sorted(
                (r for r in rows if r.part == part and r.model == model and r.attack == attack),
                key=lambda r: getattr(r, x),
            )
            xs = [getattr(r, x) or 1e-6 for r in sel] if x == "noise" else [r.length for r in sel]
            ax.plot(xs, [getattr(r, y) for r in sel], "o-", label=attack)
        if x == "noise":
            ax.set_xscale("log")
        ax.set_title(model)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
    fig.axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


@experiment(
    "transformer-gradient-inversion",
    "TIGER vs DAGER: exact text from transformer FedSGD gradients, with noise and DP (seed 9)",
    TransformerInversionConfig,
    requires={"transformers": "text", "rouge_score": "text"},
)
def run(cfg: TransformerInversionConfig, progress: Progress | None = None) -> Result:
    pool = wikitext_sentences(cfg.sentences, seed=cfg.seed, max_words=cfg.length - 2)
    models = tiny_models(pool, vocab=cfg.vocab, width=cfg.width, max_length=32, seed=cfg.seed)
    texts = pool[: max([cfg.batch, *cfg.batches])]
    rows: list[Row] = []
    sentences: list[dict[str, str]] = []
    shown = min((v for v in cfg.noises if v > 0), default=0.0)
    for model in cfg.models:
        lm = models[model]
        for noise in cfg.noises:
            r, cells, refs = _cell(cfg, lm, texts[: cfg.batch], "noise", cfg.length, noise)
            rows += r
            if noise == shown:
                sentences += _sentences_table(lm, model, cells, refs)
        for length in cfg.lengths:
            rows += _cell(cfg, lm, texts[:2], "length", length)[0]
        for b in cfg.batches:
            rows += _cell(cfg, lm, texts[:b], "batch", cfg.length)[0]
        for z in cfg.dp_noise_multipliers:
            rows += _cell(cfg, lm, texts[: cfg.batch], "dp", cfg.length, dp=z)[0]
        if progress is not None:
            progress("models", cfg.models.index(model) + 1, len(cfg.models))
    result = Result("transformer-gradient-inversion", cfg.model_dump())
    result.claims = evaluate_claims(CLAIMS, rows, cfg)
    result.risk = risk_of(rows, cfg)
    result.tables["cells"] = rows_table(rows)
    result.tables["recovered_sentences"] = sentences
    result.figures["rouge1_vs_noise"] = _figure(
        rows, "noise", "noise", "rouge1", "noise (x RMS)", "ROUGE-1"
    )
    result.figures["runtime_vs_length"] = _figure(
        rows, "length", "length", "seconds", "max length n", "seconds"
    )
    result.metrics.update(
        {
            f"{r.model}_{r.attack}_noise{r.noise:g}_rouge1": r.rouge1
            for r in rows
            if r.part == "noise"
        }
    )
    result.notes = (
        "Tiny random models (substrate tiny_encoder / tiny_causal_lm) with trained-like "
        "LayerNorms, in float64; noise is relative to each gradient tensor's RMS; "
        "bracketed tokens in recovered_sentences differ from the original."
    )
    return result
