"""The conformance table: for every registered attack, a tiny release, knowledge that meets its
requirements, fast hyper-parameters, and hyper-parameters that must be refused.

``tests/test_conformance.py`` asserts that this table covers every registered attack, so a new
attack cannot land without its case.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from language_fixtures import tiny_language, tiny_transformer_update
from release_fixtures import (
    empty_knowledge,
    tiny_binary_checkpoint,
    tiny_broadcast_log,
    tiny_classifier,
    tiny_collaboration,
    tiny_distilled,
    tiny_honest_update,
    tiny_malicious_update,
    tiny_regression,
    tiny_split,
    tiny_trajectory,
    tiny_transcript,
    tiny_two_layer_checkpoint,
)
from trainleak.models.gaussian import GaussianMLP
from trainleak.models.registry import model_spec
from trainleak.releases.base import Release
from trainleak.releases.checkpoint import Checkpoint
from trainleak.releases.knowledge import Knowledge


@dataclass(frozen=True)
class ConformanceCase:
    """A tiny, fast problem for one attack.

    Attributes:
        release: a release of the attack's type.
        knowledge: knowledge that satisfies the attack's requirements.
        fast_params: hyper-parameters that make the run take about a second.
        bad_params: hyper-parameters that must be refused with ``ConfigError``.
    """

    release: Release
    knowledge: Knowledge
    fast_params: dict[str, Any]
    bad_params: list[dict[str, Any]]


def _case(
    build: Callable[[], tuple[Any, ...]], fast: dict[str, Any], bad: list[dict[str, Any]]
) -> Callable[[], ConformanceCase]:
    def make() -> ConformanceCase:
        release, knowledge, *_ = build()
        return ConformanceCase(release, knowledge, dict(fast), bad)

    return make


def _unlearning(build: Callable[[], tuple[Any, Any]]) -> Callable[[], tuple[Any, Knowledge]]:
    return lambda: (build()[0], empty_knowledge())


def _gaussian_prototypes() -> tuple[Checkpoint, Knowledge]:
    model = GaussianMLP(n_hidden=6)
    model.reset_parameters(torch.Generator().manual_seed(0))
    state = model.replica_state(0)
    ckpt = Checkpoint(
        architecture=model_spec("gaussian_mlp", n_hidden=6), final=state, initial=state
    )
    return ckpt, Knowledge(input_shape=(1,), value_range=(0.0, 1.0))


_SEARCH_FAST = {"steps": 20, "restarts": 1, "log_every": 10}
_REVEAL_FAST = {"steps": 4, "inits": 1, "aux_eval": 50, "n_trees": 5}
_SURROGATE_FAST = {**_REVEAL_FAST, "surrogate_steps": 5}

_LM_SAMPLING = {"n_samples": 2, "max_new_tokens": 6, "max_length": 32}
_LM_RL = {**_LM_SAMPLING, "steps": 1, "prompts_per_step": 4, "group": 2, "eval_every": 1}

CASES: dict[str, Callable[[], ConformanceCase]] = {
    "dc-anchor-inversion": _case(tiny_collaboration, {}, [{"rcond": -1.0}, {"rcond": 1.0}]),
    "dc-anchor-procrustes": _case(tiny_collaboration, {}, [{"rcond": -1.0}, {"rcond": 1.0}]),
    "dc-pivot": _case(
        tiny_collaboration, {}, [{"alignment": "svd"}, {"power_iters": -1}, {"fit": "cubic"}]
    ),
    "deletion-retraining": _case(
        _unlearning(tiny_transcript), {}, [{"combine": "median"}, {"max_releases": -1}]
    ),
    "unlearning-broadcast": _case(
        _unlearning(tiny_broadcast_log),
        {},
        [{"prior_lam": -1.0}, {"certify_tol": 0.0}, {"certify_tol": 2.0}],
    ),
    "dlg": _case(
        lambda: tiny_honest_update(batch=1), {"iterations": 3}, [{"iterations": 0}, {"lr": -1.0}]
    ),
    "idlg": _case(
        lambda: tiny_honest_update(batch=1), {"iterations": 3}, [{"iterations": 0}, {"lr": -1.0}]
    ),
    "inverting-gradients": _case(
        lambda: tiny_honest_update(batch=1),
        {"iterations": 5},
        [
            {"iterations": 0},
            {"restarts": 0},
            {"tv_weight": -1.0},
            {"schedule": "linear"},
            {"init": "zeros"},
            {"layer_weights": "first"},
        ],
    ),
    "erasure-decoding-active": _case(
        tiny_malicious_update, {}, [{"rtol": 0.0}, {"max_rounds": 0}, {"max_multiplicity": 0}]
    ),
    "erasure-decoding-passive": _case(tiny_honest_update, {}, [{"rtol": 2.0}, {"max_rounds": -1}]),
    "imprint": _case(
        tiny_malicious_update,
        {},
        [{"min_relative_signal": -1.0}, {"min_relative_signal": 1.5}],
    ),
    "dpsgd-map": _case(
        tiny_trajectory, {"steps": 3, "restarts": 2}, [{"steps": -1}, {"restarts": 0}]
    ),
    "dpsgd-posterior-mean": _case(tiny_trajectory, {}, [{"temperature": 0.0}]),
    "population-mean": _case(tiny_trajectory, {}, [{"statistic": "mode"}]),
    "informed-ridge": _case(tiny_regression, {}, [{"rank": 0}, {"subspace": "bogus"}]),
    "init-final": _case(
        tiny_two_layer_checkpoint,
        _SEARCH_FAST,
        [{"params": "first"}, {"steps": -1}, {"restarts": 0}, {"lr": 0.0}],
    ),
    "init-final-subspace": _case(
        tiny_two_layer_checkpoint,
        _SEARCH_FAST,
        [{"energy": 0.0}, {"max_dim": 0}, {"source": "data"}, {"constraint": "ball"}],
    ),
    "kkt": _case(
        tiny_binary_checkpoint,
        {"n_candidates": 6, "steps": 20, "log_every": 10},
        [{"n_candidates": 0}, {"lr_x": -1.0}, {"momentum": 1.5}],
    ),
    "ira-reveal": _case(
        tiny_distilled, _REVEAL_FAST, [{"steps": 1}, {"inits": 0}, {"lr": 0.0}, {"n_trees": 0}]
    ),
    "ira-membership-nn": _case(tiny_distilled, {}, [{"same_class": "yes"}]),
    "ira-membership-loss": _case(
        tiny_distilled, _SURROGATE_FAST, [{"surrogate_steps": 0}, {"surrogates": 0}]
    ),
    "ira-membership-lira": _case(
        tiny_distilled, {**_SURROGATE_FAST, "shadows": 2}, [{"shadows": 1}, {"surrogate_lr": -1.0}]
    ),
    "ira-recovery": _case(tiny_distilled, {}, [{"aux_eval": 1}]),
    # split learning (seed 15)
    "split-inverse-network": _case(
        tiny_split,
        {"steps": 20},
        [{"steps": 0}, {"lr": 0.0}, {"head": "initial"}, {"width": 0}],
    ),
    "split-fora": _case(
        tiny_split,
        {"steps": 10, "substitute_steps": 5},
        [{"substitute_steps": 0}, {"substitute_lr": -1.0}, {"batch_size": 0}],
    ),
    "split-whitebox": _case(tiny_split, {"steps": 10}, [{"steps": 0}, {"tv": -1.0}, {"chunk": 0}]),
    # model inversion (issue 12)
    "mi-standard": _case(
        tiny_classifier,
        {"candidates": 20, "keep": 2, "steps": 3, "final": 1, "selection_transforms": 1},
        [{"keep": 0}, {"loss": "l2"}, {"final": 9}, {"latent_clip": 0.0}],
    ),
    "mi-adaptive": _case(
        tiny_classifier,
        {
            "candidates": 20,
            "keep": 2,
            "steps": 3,
            "final": 1,
            "selection_transforms": 1,
            "model_augment": 0,
        },
        [{"restarts": 0}, {"select": "entropy"}, {"model_augment": -1}],
    ),
    "mi-prior-only": _case(
        tiny_classifier,
        {"candidates": 20, "final": 1, "selection_transforms": 1},
        [{"candidates": 0}, {"select": "loss"}],
    ),
    "prototypes": _case(
        _gaussian_prototypes,
        {"max_candidates": 4},
        [{"max_candidates": 0}, {"min_abs_slope": -1.0}],
    ),
    # Language-model membership (issue 15).
    "lm-passive": _case(
        tiny_language, {"max_length": 32}, [{"score": "ppl"}, {"k": 0.0}, {"max_length": 1}]
    ),
    "lm-n-sampling": _case(
        tiny_language, _LM_SAMPLING, [{"n_samples": 0}, {"prefix_ratio": 1.0}, {"top_p": 0.0}]
    ),
    "adra": _case(tiny_language, _LM_RL, [{"steps": -1}, {"group": 1}, {"kl": -1.0}]),
    "adra-plus": _case(tiny_language, _LM_RL, [{"prior_k": 0.0}, {"lr": 0.0}]),
    # transformer gradient inversion (issue 14)
    "dager": _case(
        tiny_transformer_update, {}, [{"l1_threshold": 0.0}, {"rank": "all"}, {"beam_width": 0}]
    ),
    "tiger": _case(
        tiny_transformer_update,
        {"steps": 20, "sweeps": 1},
        [{"steps": -1}, {"layer_weights": (1.0,)}, {"parametrization": "logits"}, {"lr": 0.0}],
    ),
    "bag-of-words": _case(tiny_transformer_update, {}, [{"relative_floor": 0.0}]),
    "gradient-matching": _case(
        tiny_transformer_update, {"steps": 2}, [{"steps": 0}, {"temperature": 0.0}]
    ),
}

# Split language models (issue 13, seed 10): the attacks register only with the text extra.
if importlib.util.find_spec("transformers") is not None:
    from split_llm_fixtures import tiny_text_transcript

    _INV_FAST = {"steps": 20, "batch_size": 64, "width": 32}
    CASES.update(
        {
            "split-lm-inverter": _case(
                tiny_text_transcript, _INV_FAST, [{"steps": 0}, {"lr": 0.0}, {"random_share": -1.0}]
            ),
            "split-lm-adaptive-inverter": _case(
                lambda: tiny_text_transcript("mixguard"), _INV_FAST, [{"width": 0}]
            ),
            "split-lm-bisr": _case(
                tiny_text_transcript,
                {"inverter_steps": 20, "width": 32, "top_k": 2},
                [{"top_k": 0}, {"inverter_steps": 0}],
            ),
        }
    )
