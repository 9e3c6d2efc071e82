"""Model inversion scenario: the private/public split, targets and evaluators cached by content
hash, the adversary's knowledge, and scoring of reconstructions.

Splits (deterministic, documented in ``docs/decisions.md``):

* ``mnist``: private classes are digits 0-4, public classes 5-9. From the first
  ``pool`` training images, the first ``n_private`` of digits 0-4 train the target and the
  evaluators and the first ``n_public`` of digits 5-9 train the prior; the first ``n_test``
  test images of digits 0-4 measure clean and robust accuracy.
* ``orl``: identities ``s1 .. s20`` are private, ``s21 .. s40`` public; faces are resized from
  112 x 92 to ``size x size`` (bilinear, antialiased). Images 1-8 of each private identity
  train the target and evaluators, images 9-10 are its test set; all ten of each public
  identity train the prior.

No private image reaches the prior or the attack: the knowledge holds the public split and
the prior only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F

from trainleak.data.faces import load_orl_faces
from trainleak.data.mnist import load_mnist
from trainleak.errors import ConfigError
from trainleak.releases.classifier import ClassifierRelease, GenerativePrior
from trainleak.releases.knowledge import Knowledge
from trainleak.scenarios._cache import cache_root

Dataset = Literal["mnist", "orl"]
BOX = (0.0, 1.0)


@dataclass(frozen=True, eq=False)
class InversionTask:
    """The split of a model-inversion scenario.

    Attributes:
        name: ``"mnist"`` or ``"orl"``.
        private: the private training set ``(x, y)`` (labels ``0 .. C-1``).
        test: held-out private-class images ``(x, y)``.
        public: the public split ``(x, y)`` (other classes, labels ``0 ..``).
        classes: private class names; public_classes: public class names.
    """

    name: str
    private: tuple[torch.Tensor, torch.Tensor]
    test: tuple[torch.Tensor, torch.Tensor]
    public: tuple[torch.Tensor, torch.Tensor]
    classes: tuple[str, ...]
    public_classes: tuple[str, ...]

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """``(C, H, W)``."""
        return tuple(int(s) for s in self.private[0].shape[1:])  # type: ignore[return-value]

    @property
    def num_classes(self) -> int:
        """Number of private classes."""
        return len(self.classes)

    def to(self, device: str | torch.device) -> InversionTask:
        """The same split with every tensor on ``device``."""

        def move(pair: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
            return pair[0].to(device), pair[1].to(device)

        return InversionTask(
            self.name,
            move(self.private),
            move(self.test),
            move(self.public),
            self.classes,
            self.public_classes,
        )

    def content_hash(self) -> str:
        """SHA-256 of the private and public tensors (a cache-key component)."""
        h = hashlib.sha256()
        for t in (*self.private, *self.public):
            h.update(t.contiguous().cpu().numpy().tobytes())
        return h.hexdigest()


def _first(
    x: torch.Tensor, y: torch.Tensor, keep: torch.Tensor, n: int, shift: int
) -> tuple[torch.Tensor, torch.Tensor]:
    return x[keep][:n].contiguous(), (y[keep][:n] - shift).contiguous()


def mnist_task(n_private: int = 3000, n_public: int = 3000, n_test: int = 1000) -> InversionTask:
    """The MNIST split: digits 0-4 private, 5-9 public (first images in file order)."""
    train = load_mnist("train", limit=4 * max(n_private, n_public))
    test = load_mnist("test", limit=4 * n_test)
    priv = train.y < 5
    return InversionTask(
        "mnist",
        _first(train.x, train.y, priv, n_private, 0),
        _first(test.x, test.y, test.y < 5, n_test, 0),
        _first(train.x, train.y, ~priv, n_public, 5),
        tuple("01234"),
        tuple("56789"),
    )


def orl_task(size: int = 32) -> InversionTask:
    """The ORL split: s1-s20 private (images 1-8 train, 9-10 test), s21-s40 public."""
    if size < 8 or size % 4:
        raise ConfigError.invalid("size", "a multiple of 4, at least 8", size)
    ds = load_orl_faces()
    x = F.interpolate(
        ds.x, size=(size, size), mode="bilinear", antialias=True, align_corners=False
    ).clamp(0, 1)
    idx = torch.arange(len(x), device=ds.y.device) % 10
    priv, pub = ds.y < 20, ds.y >= 20
    tr, te = priv & (idx < 8), priv & (idx >= 8)
    return InversionTask(
        "orl",
        (x[tr].contiguous(), ds.y[tr].clone()),
        (x[te].contiguous(), ds.y[te].clone()),
        (x[pub].contiguous(), ds.y[pub] - 20),
        ds.classes[:20],
        ds.classes[20:],
    )


def load_task(name: Dataset, **kwargs: int) -> InversionTask:
    """:func:`mnist_task` or :func:`orl_task` by name."""
    if name == "mnist":
        return mnist_task(**kwargs)
    if name == "orl":
        return orl_task(**kwargs)
    raise ConfigError.invalid("dataset", "'mnist' or 'orl'", name)


def adversary_knowledge(task: InversionTask, prior: GenerativePrior) -> Knowledge:
    """The adversary's knowledge: input shape and range, the private class labels (names),
    the public split and the prior trained on it. Nothing private."""
    return Knowledge(
        input_shape=task.input_shape,
        value_range=BOX,
        label_set=tuple(range(task.num_classes)),
        auxiliary=task.public,
        generative_prior=prior,
    )


def check_evaluator(evaluator: ClassifierRelease, task: InversionTask) -> None:
    """Refuse an evaluator that is not over exactly the private classes.

    Raises:
        ConfigError: it shares classes with the public split (a leak: the prior's classes
            would be judged), or its classes are not the private ones.
    """
    shared = sorted(set(evaluator.classes) & set(task.public_classes))
    if shared:
        raise ConfigError(
            f"the evaluator shares classes {shared} with the public split: the evaluator must "
            "be trained on the private classes only"
        )
    if tuple(evaluator.classes) != tuple(task.classes):
        raise ConfigError.invalid(
            "evaluator.classes", f"the private classes {task.classes}", evaluator.classes
        )


def default_cache_dir() -> Path:
    """``$TRAINLEAK_CACHE/inversion``, else ``~/.cache/trainleak/inversion``."""
    return cache_root("inversion")


def cache_key(*parts: object) -> str:
    """SHA-256 of the ``repr`` of every part (task hashes, specs, defenses, settings, seeds)."""
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def cached_classifier(
    key: str, build: Callable[[], ClassifierRelease], cache_dir: Path | None
) -> ClassifierRelease:
    """``build()`` once per key; later calls load ``<cache_dir>/<key>`` (safetensors)."""
    if cache_dir is None:
        return build()
    where = cache_dir / key
    if (where / "release.json").is_file():
        return ClassifierRelease.load(where)
    release = build()
    release.save(where)
    return release


def cached_prior(
    key: str, build: Callable[[], GenerativePrior], cache_dir: Path | None
) -> GenerativePrior:
    """``build()`` once per key; later calls load ``<cache_dir>/<key>``."""
    if cache_dir is None:
        return build()
    where = cache_dir / key
    if (where / "release.json").is_file():
        return GenerativePrior.load(where)
    prior = build()
    prior.save(where)
    return prior
