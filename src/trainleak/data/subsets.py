"""Class-balanced subsets and the binary tasks of the reconstruction papers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch

from trainleak.data._types import CIFAR10_CLASSES, ImageDataset
from trainleak.errors import ConfigError
from trainleak.validation import check_choice

BinaryKind = Literal["odd_even", "vehicles_animals"]
_VEHICLES = frozenset({"airplane", "automobile", "ship", "truck"})


def _check_per_class(per_class: int) -> None:
    if isinstance(per_class, bool) or not isinstance(per_class, int) or per_class < 1:
        raise ConfigError.invalid("per_class", "a positive integer", per_class)


def _draw(ds: ImageDataset, cls: int, k: int, g: torch.Generator) -> torch.Tensor:
    """``k`` random indices of class ``cls``, sorted."""
    members = (ds.y == cls).nonzero().flatten()
    return members[torch.randperm(len(members), generator=g)[:k]].sort().values


def balanced_subset(
    ds: ImageDataset,
    per_class: int,
    *,
    seed: int = 0,
    classes: Sequence[int] | None = None,
) -> ImageDataset:
    """Draw ``per_class`` samples of each class, at random but reproducibly.

    Args:
        ds: the data set.
        per_class: how many samples of each class to keep.
        seed: seed of the local ``torch.Generator`` (no global state is touched).
        classes: the labels to keep, default all of ``range(len(ds.classes))``.

    Returns:
        The subset, grouped by class in the order of ``classes``, in data set order within
        a class. Labels and class names are unchanged.

    Raises:
        ConfigError: if ``per_class`` is not a positive integer, a class is unknown or
            repeated, or a class has fewer than ``per_class`` samples.

    Example:
        >>> from trainleak.data import load_digits
        >>> sub = balanced_subset(load_digits(), 5, seed=1, classes=[3, 7])
        >>> sub.y.tolist()
        [3, 3, 3, 3, 3, 7, 7, 7, 7, 7]
    """
    _check_per_class(per_class)
    wanted = list(range(ds.num_classes)) if classes is None else [int(c) for c in classes]
    if len(set(wanted)) != len(wanted) or any(not 0 <= c < ds.num_classes for c in wanted):
        raise ConfigError.invalid(
            "classes", f"distinct labels in [0, {ds.num_classes})", list(wanted)
        )
    counts = torch.bincount(ds.y, minlength=ds.num_classes)
    for c in wanted:
        if counts[c] < per_class:
            raise ConfigError.invalid(
                "per_class",
                f"at most {int(counts[c])}, the size of class {c} ({ds.classes[c]!r}) in "
                f"{ds.name!r}",
                per_class,
            )
    g = torch.Generator().manual_seed(seed)
    picks = [_draw(ds, c, per_class, g) for c in wanted]
    return ds.subset(torch.cat(picks) if picks else torch.zeros(0, dtype=torch.int64))


def _binary_map(ds: ImageDataset, kind: str) -> tuple[torch.Tensor, tuple[str, str]]:
    """Per original class, its binary label; and the two binary class names."""
    check_choice("kind", kind, ("odd_even", "vehicles_animals"))
    if kind == "odd_even":
        if not all(name.isdigit() for name in ds.classes):
            raise ConfigError.invalid(
                "kind", "'odd_even' only for digit classes '0'..'9'", f"{kind} on {ds.name!r}"
            )
        return torch.tensor([int(n) % 2 for n in ds.classes]), ("even", "odd")
    if ds.classes != CIFAR10_CLASSES:
        raise ConfigError.invalid(
            "kind", "'vehicles_animals' only for the CIFAR-10 classes", f"{kind} on {ds.name!r}"
        )
    return torch.tensor([int(n in _VEHICLES) for n in ds.classes]), ("animal", "vehicle")


def binary_task(ds: ImageDataset, kind: BinaryKind) -> ImageDataset:
    """Relabel a data set for a binary task.

    ``"odd_even"``: label = digit % 2 (odd = 1), classes ``("even", "odd")``.
    ``"vehicles_animals"`` (CIFAR-10): airplane, automobile, ship, truck -> 1, the six animal
    classes -> 0, classes ``("animal", "vehicle")``.

    Args:
        ds: a digit data set (class names ``"0"`` .. ``"9"``) or CIFAR-10.
        kind: ``"odd_even"`` or ``"vehicles_animals"``.

    Returns:
        A data set named ``"<name>-<kind>"`` sharing ``ds.x`` (not copied), with the binary
        labels.

    Raises:
        ConfigError: for an unknown ``kind`` or one that does not fit ``ds``'s classes.

    References:
        Haim et al., "Reconstructing Training Data from Trained Neural Networks",
        NeurIPS 2022, Sec. 5 (the CIFAR vehicles/animals and MNIST odd/even tasks).
    """
    mapping, names = _binary_map(ds, kind)
    return ImageDataset(f"{ds.name}-{kind}", ds.x, mapping[ds.y], names)


def _spread(total: int, capacity: list[int]) -> list[int]:
    """Split ``total`` as evenly as possible over bins of the given capacities."""
    quota, remaining = [0] * len(capacity), total
    while remaining:
        open_bins = [i for i, cap in enumerate(capacity) if quota[i] < cap]
        share, extra = divmod(remaining, len(open_bins))
        for j, i in enumerate(open_bins):
            add = min(capacity[i] - quota[i], share + (j < extra))
            quota[i] += add
            remaining -= add
    return quota


def balanced_binary(
    ds: ImageDataset, kind: BinaryKind, per_class: int, *, seed: int = 0
) -> ImageDataset:
    """A binary task with ``per_class`` samples of each binary label.

    Within each binary label the samples are spread as evenly as possible over the original
    classes of that group (any remainder goes to the lower class labels; a class too small
    for its share gives all it has and the others make up the difference).

    Args:
        ds: the multi-class data set (see :func:`binary_task`).
        kind: ``"odd_even"`` or ``"vehicles_animals"``.
        per_class: samples per binary label.
        seed: seed of the local ``torch.Generator``.

    Returns:
        The binary data set: label 0 first, then label 1, in data set order within each.

    Raises:
        ConfigError: for a bad ``kind`` or ``per_class``, or a group too small.

    Example:
        >>> from trainleak.data import load_digits
        >>> sub = balanced_binary(load_digits(), "odd_even", 50)
        >>> sub.classes, sub.y.bincount().tolist()
        (('even', 'odd'), [50, 50])
    """
    return binary_task(ds, kind).subset(balanced_binary_indices(ds, kind, per_class, seed=seed))


def balanced_binary_indices(
    ds: ImageDataset, kind: BinaryKind, per_class: int, *, seed: int = 0
) -> torch.Tensor:
    """The indices into ``ds`` that :func:`balanced_binary` selects (same rule, same seed).

    ``ds.subset(idx)`` keeps the original (multi-class) labels, which a scorer may need (for
    example to compare a reconstruction with held-out images of the same original class).

    Example:
        >>> from trainleak.data import load_digits
        >>> ds = load_digits()
        >>> idx = balanced_binary_indices(ds, "odd_even", 5, seed=2)
        >>> (ds.y[idx] % 2).tolist() == balanced_binary(ds, "odd_even", 5, seed=2).y.tolist()
        True
    """
    _check_per_class(per_class)
    mapping, names = _binary_map(ds, kind)
    counts = torch.bincount(ds.y, minlength=ds.num_classes).tolist()
    g = torch.Generator().manual_seed(seed)
    picks = []
    for label in (0, 1):
        group = [c for c in range(ds.num_classes) if mapping[c] == label and counts[c] > 0]
        available = sum(counts[c] for c in group)
        if available < per_class:
            raise ConfigError.invalid(
                "per_class",
                f"at most {available}, the size of binary class {names[label]!r} in {ds.name!r}",
                per_class,
            )
        quotas = _spread(per_class, [counts[c] for c in group])
        chosen = [_draw(ds, c, q, g) for c, q in zip(group, quotas)]
        picks.append(torch.cat(chosen).sort().values)
    return torch.cat(picks)
