"""The conformance suite: every registered attack obeys the attack contract."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

from conformance_cases import CASES
from trainleak.attacks import available_attacks
from trainleak.attacks.base import Attack, Reconstruction
from trainleak.errors import ConfigError, MissingKnowledgeError, ReleaseTypeError
from trainleak.releases import Knowledge, Release

ATTACKS = available_attacks()


@dataclasses.dataclass(frozen=True)
class _AlienRelease(Release):
    """A release type no attack accepts."""


def _case(cls: type[Attack[Any]]) -> Any:
    return CASES[cls.name]()


def test_registry_is_not_empty() -> None:
    assert "kkt" in ATTACKS


def test_conformance_table_covers_every_registered_attack() -> None:
    missing = sorted(set(ATTACKS) - set(CASES))
    stale = sorted(set(CASES) - set(ATTACKS))
    assert not missing, f"attacks without a conformance case: {missing}"
    assert not stale, f"conformance cases for attacks that are not registered: {stale}"


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_declares_contract(name: str) -> None:
    cls = ATTACKS[name]
    assert cls.name == name
    assert cls.summary, f"{name} has no summary"
    assert issubclass(cls.release_type, Release)
    assert dataclasses.is_dataclass(cls)


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_wrong_release_type_is_refused(name: str) -> None:
    cls = ATTACKS[name]
    case = _case(cls)
    with pytest.raises(ReleaseTypeError, match=cls.release_type.__name__):
        cls(**case.fast_params)(_AlienRelease(), case.knowledge)


@pytest.mark.parametrize("name", sorted(n for n, c in ATTACKS.items() if c.requires))
def test_missing_knowledge_is_refused(name: str) -> None:
    cls = ATTACKS[name]
    case = _case(cls)
    with pytest.raises(MissingKnowledgeError, match=sorted(cls.requires)[0]):
        cls(**case.fast_params)(case.release, Knowledge())


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_bad_hyperparameters_are_refused(name: str) -> None:
    cls = ATTACKS[name]
    case = _case(cls)
    assert case.bad_params, f"{name} lists no bad hyper-parameters to test"
    for bad in case.bad_params:
        field = next(iter(bad))
        with pytest.raises(ConfigError, match=field):
            cls(**{**case.fast_params, **bad})


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_hyperparameters_are_immutable(name: str) -> None:
    cls = ATTACKS[name]
    attack = cls(**_case(cls).fast_params)
    field = dataclasses.fields(attack)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(attack, field, None)


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_deterministic_under_seed_and_shapes(name: str) -> None:
    cls = ATTACKS[name]
    case = _case(cls)
    attack = cls(**case.fast_params)
    a = attack(case.release, case.knowledge, seed=3)
    b = attack(case.release, case.knowledge, seed=3)
    assert isinstance(a, Reconstruction)
    assert a.attack == name and a.seconds >= 0
    torch.testing.assert_close(a.inputs, b.inputs, rtol=0, atol=0)
    expected = attack.expected_shape(case.release, case.knowledge)
    if expected is not None:
        assert tuple(a.inputs.shape[1:]) == tuple(expected)
    for extra in (a.labels, a.scores, a.certified):
        if extra is not None:
            assert extra.shape[0] == a.inputs.shape[0]


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_negative_seed_is_refused(name: str) -> None:
    cls = ATTACKS[name]
    case = _case(cls)
    with pytest.raises(ConfigError, match="seed"):
        cls(**case.fast_params)(case.release, case.knowledge, seed=-1)
