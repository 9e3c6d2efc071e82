"""Bounds: pure functions from a mechanism (and a data sample) to a :class:`BoundResult`."""

from trainleak.bounds.base import BoundResult

__all__ = ["BoundResult"]
