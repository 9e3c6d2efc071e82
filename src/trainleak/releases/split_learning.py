"""The :class:`SplitTranscript` release: everything the server of split learning observes.

In U-shaped split learning (client head and tail, server body) the server receives, for each
training step, the smashed batch ``s = f_h(x)`` (after any client-side defense), computes
``f_b(s)``, receives the gradient at the body output from the client's tail and returns the
gradient at ``s``. Through FedAvg it also learns the aggregated client heads and tails. The
transcript records exactly that, and nothing the server does not see: no inputs, no labels,
no record identities. The same type records a three-way split of a language model (client
bottom, server trunk, client top): the smashed rows are then hidden states ``(L, d)``.

The public description of the client-side defense (:class:`SmashedDefenseSpec`) travels with
the transcript: the protocol is public, only its randomness is not (an adaptive adversary
applies the same algorithm to its own data).

Transcripts are saved as ``transcript.safetensors`` and ``transcript.json``; loading never
unpickles and re-runs every check.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from safetensors.torch import save_file

from trainleak.errors import ConfigError, ShapeError
from trainleak.models.spec import ModelSpec, StateDict, read_release_dir, spec_from_json
from trainleak.models.split import SplitSpec, part_shapes, split_modules
from trainleak.releases.base import Release
from trainleak.validation import check_fields, param

DefenseWhere = Literal["smashed", "input"]
FORMAT = "trainleak.split_transcript/1"


@dataclass(frozen=True, kw_only=True)
class SmashedDefenseSpec:
    """The public description of KD-UFSL's client-side defense (seed 15).

    Attributes:
        k: microaggregation group size (MDAV); 1 means none.
        sigma: Gaussian noise multiplier (noise std ``sigma * clip``); 0 means no noise.
        clip: per-record L2 clipping norm, or ``None`` for no clipping (then ``sigma`` must
            be 0: unclipped noise has no sensitivity to calibrate to).
        where: ``"smashed"`` (clip and noise the head's output) or ``"input"`` (the raw
            input, before the head). Microaggregation always follows the noise (the seed's
            order), so every transmitted vector stays shared by ``k`` records.
        sketch: ``None`` for exact MDAV; an integer ``m`` to form the MDAV groups on an
            ``m``-dimensional principal subspace of the smashed data that the client tracks
            (:class:`trainleak.defenses.split_learning.SubspaceSketch`), while every member
            is still replaced by its group's centroid in the full space: group sizes, hence
            k-anonymity, are exact; only the choice of partners is approximate.
        sketch_refresh: with ``sketch``, one tracking step every this many batches (and
            after batches 1, 2, 4, 8, ... to leave the random start quickly).
    """

    k: int = param(1, ge=1, integer=True)
    sigma: float = param(0.0, ge=0)
    clip: float | None = param(None, gt=0, optional=True)
    where: DefenseWhere = param("smashed", choices=("smashed", "input"))
    sketch: int | None = param(None, ge=1, integer=True)
    sketch_refresh: int = param(16, ge=1, integer=True)

    def __post_init__(self) -> None:
        check_fields(self)
        if self.sigma > 0 and self.clip is None:
            raise ConfigError.invalid("clip", "a clipping norm when sigma > 0", None)

    @property
    def dp(self) -> bool:
        """Whether records are clipped (and noised)."""
        return self.clip is not None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "k": self.k,
            "sigma": self.sigma,
            "clip": self.clip,
            "where": self.where,
        }
        if self.sketch is not None:  # absent = exact MDAV, as transcripts before the knob
            out["sketch"] = self.sketch
            out["sketch_refresh"] = self.sketch_refresh
        return out


@dataclass(frozen=True)
class Aggregate:
    """The aggregated (FedAvg) client weights broadcast at the start of ``round``
    (``round == rounds`` of training: the final aggregate)."""

    round: int
    head: StateDict
    tail: StateDict


@dataclass(frozen=True)
class SplitTranscript(Release):
    """What the split-learning server observed over the recorded rounds.

    Attributes:
        split: the model and its cut points (public: the server builds the body from it).
        smashed: ``(N, *s)`` every smashed row received, steps concatenated in order.
        smashed_grads: ``(N, *s)`` the gradient the server returned for each row.
        body_grads: ``(N, *o)`` the gradient at the body output the client's tail sent.
        step: ``(N,)`` int64, the step of each row (non-decreasing, ``0 .. S-1``).
        step_client: ``(S,)`` the client of each step.
        step_round: ``(S,)`` the round of each step.
        aggregates: the aggregated heads and tails of every recorded round, and the final one.
        n_clients: the number of clients.
        defense: the public description of the client-side defense, or ``None``.

    Raises:
        ShapeError: arrays whose shapes do not match each other or the declared split.
        ConfigError: non-finite values, bad step indices, aggregates that do not fit the
            split, or a split point beyond the model's depth.
    """

    split: SplitSpec
    smashed: torch.Tensor
    smashed_grads: torch.Tensor
    body_grads: torch.Tensor
    step: torch.Tensor
    step_client: torch.Tensor
    step_round: torch.Tensor
    aggregates: tuple[Aggregate, ...]
    n_clients: int
    defense: SmashedDefenseSpec | None = None

    def __post_init__(self) -> None:
        s_shape, o_shape = part_shapes(self.split)
        n = int(self.smashed.shape[0])
        for name, t, want in (
            ("smashed", self.smashed, s_shape),
            ("smashed_grads", self.smashed_grads, s_shape),
            ("body_grads", self.body_grads, o_shape),
        ):
            if tuple(t.shape) != (n, *want):
                raise ShapeError(
                    f"SplitTranscript.{name} has shape {tuple(t.shape)}, but the declared "
                    f"split ({self.split.model.kind}, head_end={self.split.head_end}, "
                    f"tail_start={self.split.tail_start}) gives ({n}, {', '.join(map(str, want))})"
                )
            if not bool(torch.isfinite(t).all()):
                raise ConfigError.invalid(f"SplitTranscript.{name}", "finite values", "NaN or inf")
        self._check_steps(n)
        self._check_aggregates()
        if isinstance(self.n_clients, bool) or int(self.n_clients) < 1:
            raise ConfigError.invalid("n_clients", "an integer >= 1", self.n_clients)

    def _check_steps(self, n: int) -> None:
        s = int(self.step_client.shape[0])
        if tuple(self.step.shape) != (n,) or tuple(self.step_round.shape) != (s,):
            raise ShapeError(
                f"SplitTranscript expects step ({n},) and step_client, step_round (S,); "
                f"received {tuple(self.step.shape)}, {tuple(self.step_client.shape)}, "
                f"{tuple(self.step_round.shape)}"
            )
        if n and (int(self.step.min()) < 0 or int(self.step.max()) >= s):
            raise ConfigError.invalid("step", f"step indices in [0, {s})", self.step)
        if n > 1 and bool((self.step[1:] < self.step[:-1]).any()):
            raise ConfigError.invalid("step", "non-decreasing step indices", self.step)

    def _check_aggregates(self) -> None:
        if not self.aggregates:
            raise ConfigError.invalid("aggregates", "at least the final aggregate", 0)
        for agg in self.aggregates:
            try:
                split_modules(self.split, head=agg.head, tail=agg.tail)
            except (RuntimeError, KeyError) as exc:
                raise ConfigError.invalid(
                    "aggregates",
                    "head and tail states of the declared split",
                    f"round {agg.round}: {str(exc).splitlines()[0]}",
                ) from None
        rounds = {int(r) for r in self.step_round.tolist()}
        missing = sorted(rounds - {a.round for a in self.aggregates})
        if missing:
            raise ConfigError.invalid("aggregates", "one per recorded round", f"missing {missing}")

    def __len__(self) -> int:
        return int(self.smashed.shape[0])

    @property
    def n_steps(self) -> int:
        return int(self.step_client.shape[0])

    @property
    def final(self) -> Aggregate:
        """The last aggregate (the released global client model)."""
        return max(self.aggregates, key=lambda a: a.round)

    def aggregate(self, round_: int) -> Aggregate:
        """The aggregate broadcast at the start of ``round_``."""
        for agg in self.aggregates:
            if agg.round == round_:
                return agg
        raise ConfigError.invalid("round", f"one of {[a.round for a in self.aggregates]}", round_)

    def row_rounds(self) -> torch.Tensor:
        """``(N,)`` the round each row was sent in."""
        return self.step_round[self.step]

    def batches(self) -> Iterator[tuple[int, torch.Tensor]]:
        """``(step, row indices)`` for every step with rows."""
        for t in range(self.n_steps):
            rows = torch.nonzero(self.step == t).flatten()
            if len(rows):
                yield t, rows

    def first_rows(self, max_rows: int) -> tuple[SplitTranscript, torch.Tensor]:
        """The transcript cut to its first whole steps holding at most ``max_rows`` rows
        (at least one step), and the indices of the kept rows in this transcript."""
        ends = torch.bincount(self.step, minlength=self.n_steps).cumsum(0)
        n_steps = max(1, int((ends <= max_rows).sum()))
        keep = torch.nonzero(self.step < n_steps).flatten()
        rounds = {int(r) for r in self.step_round[:n_steps].tolist()}
        sub = dataclasses.replace(
            self,
            smashed=self.smashed[keep],
            smashed_grads=self.smashed_grads[keep],
            body_grads=self.body_grads[keep],
            step=self.step[keep],
            step_client=self.step_client[:n_steps],
            step_round=self.step_round[:n_steps],
            aggregates=tuple(a for a in self.aggregates if a.round in rounds or a is self.final),
        )
        return sub, keep

    def describe(self) -> str:
        d = "" if self.defense is None else f", defense {self.defense.to_json()}"
        return (
            f"SplitTranscript({len(self)} smashed rows {tuple(self.smashed.shape[1:])}, "
            f"{self.n_steps} steps, {self.n_clients} clients{d})"
        )

    def save(self, directory: str | Path) -> Path:
        """Write ``transcript.safetensors`` and ``transcript.json`` into ``directory``."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        tensors = {
            name: getattr(self, name).detach().contiguous().cpu()
            for name in ("smashed", "smashed_grads", "body_grads", "step", "step_client")
        }
        tensors["step_round"] = self.step_round.detach().contiguous().cpu()
        for i, agg in enumerate(self.aggregates):
            for part, state in (("head", agg.head), ("tail", agg.tail)):
                for key, v in state.items():
                    tensors[f"agg{i}.{part}.{key}"] = v.detach().contiguous().cpu()
        save_file(tensors, str(out / "transcript.safetensors"))
        meta = {
            "format": FORMAT,
            "split": {
                "model": {"kind": self.split.model.kind, "kwargs": self.split.model.kwargs},
                "head_end": self.split.head_end,
                "tail_start": self.split.tail_start,
                "input_shape": list(self.split.input_shape),
                "input_dtype": self.split.input_dtype,
            },
            "aggregate_rounds": [a.round for a in self.aggregates],
            "n_clients": int(self.n_clients),
            "defense": None if self.defense is None else self.defense.to_json(),
        }
        (out / "transcript.json").write_text(json.dumps(meta, indent=2))
        return out

    @classmethod
    def load(cls, directory: str | Path) -> SplitTranscript:
        """Load a directory written by :meth:`save`, checked like any new transcript.

        Raises:
            FileNotFoundError: a missing file; ConfigError: an unknown format or bad fields.
        """
        t, meta = read_transcript_files(directory, FORMAT, "split transcript")
        sp = meta["split"]
        split = SplitSpec(
            model=_spec(sp["model"]),
            head_end=int(sp["head_end"]),
            tail_start=int(sp["tail_start"]),
            input_shape=tuple(int(v) for v in sp["input_shape"]),
            input_dtype=str(sp["input_dtype"]),
        )
        aggs = tuple(
            Aggregate(int(r), _prefixed(t, f"agg{i}.head."), _prefixed(t, f"agg{i}.tail."))
            for i, r in enumerate(meta["aggregate_rounds"])
        )
        d = meta.get("defense")
        return cls(
            split=split,
            smashed=t["smashed"],
            smashed_grads=t["smashed_grads"],
            body_grads=t["body_grads"],
            step=t["step"],
            step_client=t["step_client"],
            step_round=t["step_round"],
            aggregates=aggs,
            n_clients=int(meta["n_clients"]),
            defense=None if d is None else SmashedDefenseSpec(**d),
        )


def _spec(value: Any) -> ModelSpec:
    return spec_from_json(value, "split.model")


def _prefixed(tensors: dict[str, torch.Tensor], prefix: str) -> StateDict:
    return {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}


def read_transcript_files(
    directory: str | Path, fmt: str, what: str
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The tensors and the metadata of a transcript folder (``transcript.safetensors`` and
    ``transcript.json``), with the metadata's ``format`` checked against ``fmt``.

    Raises:
        FileNotFoundError: a missing file (named); ConfigError: another format.
    """
    tensors, meta = read_release_dir(
        Path(directory), "transcript.safetensors", "transcript.json", what
    )
    if meta.get("format") != fmt:
        raise ConfigError.invalid("format", fmt, meta.get("format"))
    return tensors, meta
