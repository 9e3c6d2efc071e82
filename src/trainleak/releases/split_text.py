"""The :class:`TextSplitTranscript` release: what the trunk server of a split language model sees.

The text counterpart of :class:`~trainleak.releases.split_learning.SplitTranscript` (same field
names for the same things: ``smashed``, ``smashed_grads``, ``body_grads``, ``step``; same file
layout: ``transcript.safetensors`` + ``transcript.json``, loading never unpickles and re-checks
everything). The image type's :class:`~trainleak.models.split.SplitSpec` describes convnets and
its aggregates are FedAvg heads and tails; a split language model is instead described by the
public pre-trained model and its cut points (:class:`~trainleak.models.split_lm.LMSplit`), and
the server additionally sees each row's attention mask. The public description of the client's
defense (:class:`TextDefenseSpec`) travels with it: the algorithm is public, its secrets are not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from trainleak.errors import ConfigError, ShapeError
from trainleak.models.language import LanguageModel, blocks, load_language_model
from trainleak.models.language import save_language_model as _save_lm
from trainleak.models.split_lm import LMSplit
from trainleak.releases.base import Release
from trainleak.releases.split_learning import read_transcript_files
from trainleak.validation import check_fields, param

FORMAT = "trainleak.text_split_transcript/1"
DEFENSES: tuple[str, ...] = ("none", "noise", "mixup", "mixguard")
CALIBRATORS: tuple[str, ...] = ("anchored", "unmix")


@dataclass(frozen=True, kw_only=True)
class TextDefenseSpec:
    """The public description of the client-side defense on hidden states.

    Attributes:
        kind: ``"none"``, ``"noise"`` (Gaussian noise of std ``sigma`` times each row's RMS: the
            DP-forward baseline), ``"mixup"`` (mixing with auxiliary public sequences, no
            secrets beyond the coefficients, no calibration) or ``"mixguard"`` (seed 10).
        sigma: relative noise std for ``"noise"``.
        n_insert: decoy tokens inserted at secret positions (MIXGUARD).
        n_aux: auxiliary public sequences mixed into each row (mixup, MIXGUARD).
        lam0_low, lam0_high: the range of the private row's mixing weight.
        mix: ``"vector"`` (per-channel secret weights) or ``"matrix"`` (secret ``d x d`` maps).
        signs: whether MIXGUARD flips channel signs with a secret per-batch mask.
        grad_noise: kappa, the gradient-noise factor scaled by the calibration residual.
        calibrator: MIXGUARD's calibration model: ``"anchored"`` (default) starts from the
            client's own clean bottom output and learns the trunk's update from the linear
            un-mixing; ``"unmix"`` starts from the linear un-mixing itself (the earlier
            reading). See :class:`~trainleak.defenses.split_text.Calibrator`.
    """

    kind: str = param("none", choices=DEFENSES)
    sigma: float = param(0.0, ge=0)
    n_insert: int = param(0, ge=0, integer=True)
    n_aux: int = param(0, ge=0, integer=True)
    lam0_low: float = param(0.6, gt=0, le=1)
    lam0_high: float = param(0.8, gt=0, le=1)
    mix: str = param("vector", choices=("vector", "matrix"))
    signs: bool = False
    grad_noise: float = param(0.0, ge=0)
    calibrator: str = param("anchored", choices=CALIBRATORS)

    def __post_init__(self) -> None:
        check_fields(self)
        if self.lam0_low > self.lam0_high:
            raise ConfigError.invalid("lam0_low", f"<= lam0_high={self.lam0_high}", self.lam0_low)
        if self.kind in ("mixup", "mixguard") and self.n_aux < 1:
            raise ConfigError.invalid("n_aux", f"at least 1 for {self.kind}", self.n_aux)
        if self.kind == "noise" and self.sigma <= 0:
            raise ConfigError.invalid("sigma", "a positive noise level for 'noise'", self.sigma)

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class TextSplitTranscript(Release):
    """What the trunk server observed while a split causal LM was fine-tuned.

    Attributes:
        public_lm: the public pre-trained model (architecture and weights the server knows; the
            client's bottom keeps these weights).
        split: the cut points.
        smashed: ``(N, L, d)`` the hidden states received at the bottom/trunk cut.
        mask: ``(N, L)`` their attention masks (1 on sent positions).
        smashed_grads: ``(N, L, d)`` the gradients the server returned at the cut.
        body_grads: ``(N, L, d)`` the gradients the client's top sent back at the trunk output.
        step: ``(N,)`` the training step of each row (non-decreasing).
        defense: the public description of the client's defense.

    Raises:
        ShapeError: shapes that do not match each other or the split's width;
        ConfigError: non-finite values, a split beyond the model's depth, bad step indices.
    """

    public_lm: LanguageModel
    split: LMSplit
    smashed: torch.Tensor
    mask: torch.Tensor
    smashed_grads: torch.Tensor
    body_grads: torch.Tensor
    step: torch.Tensor
    defense: TextDefenseSpec = TextDefenseSpec()

    def __post_init__(self) -> None:
        self.split.check(len(blocks(self.public_lm)))
        width = int(self.public_lm.module.config.hidden_size)
        if self.mask.ndim != 2:
            raise ShapeError(
                f"TextSplitTranscript.mask must be (N, L); got {tuple(self.mask.shape)}"
            )
        n, length = (int(v) for v in self.mask.shape)
        want = (n, length, width)
        for name in ("smashed", "smashed_grads", "body_grads"):
            t = getattr(self, name)
            if tuple(t.shape) != want:
                raise ShapeError(
                    f"TextSplitTranscript.{name} has shape {tuple(t.shape)}, but the mask and "
                    f"the split (width {width}) give {want}"
                )
            if not bool(torch.isfinite(t).all()):
                raise ConfigError.invalid(f"TextSplitTranscript.{name}", "finite values", "NaN/inf")
        if tuple(self.step.shape) != (n,):
            raise ShapeError(
                f"TextSplitTranscript.step must be ({n},); got {tuple(self.step.shape)}"
            )
        if n > 1 and bool((self.step[1:] < self.step[:-1]).any()):
            raise ConfigError.invalid("step", "non-decreasing step indices", "decreasing")

    def __len__(self) -> int:
        return int(self.smashed.shape[0])

    def describe(self) -> str:
        return (
            f"TextSplitTranscript({len(self)} rows {tuple(self.smashed.shape[1:])}, "
            f"split {self.split.to_json()}, defense {self.defense.kind})"
        )

    def save(self, directory: str | Path) -> Path:
        """Write the tensors, ``transcript.json`` and the public model (``public_model/``)."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        names = ("smashed", "mask", "smashed_grads", "body_grads", "step")
        save_file(
            {k: getattr(self, k).detach().contiguous().cpu() for k in names},
            str(out / "transcript.safetensors"),
        )
        meta = {"format": FORMAT, "split": self.split.to_json(), "defense": self.defense.to_json()}
        (out / "transcript.json").write_text(json.dumps(meta, indent=2))
        _save_lm(self.public_lm, out / "public_model")
        return out

    @classmethod
    def load(cls, directory: str | Path) -> TextSplitTranscript:
        """Load a directory written by :meth:`save`, checked like a new transcript.

        Raises:
            FileNotFoundError: a missing file; ConfigError: an unknown format or bad fields.
        """
        p = Path(directory)
        t, meta = read_transcript_files(p, FORMAT, "text split transcript")
        return cls(
            public_lm=load_language_model(p / "public_model"),
            split=LMSplit(**{k: int(v) for k, v in meta["split"].items()}),
            smashed=t["smashed"],
            mask=t["mask"],
            smashed_grads=t["smashed_grads"],
            body_grads=t["body_grads"],
            step=t["step"],
            defense=TextDefenseSpec(**meta["defense"]),
        )
