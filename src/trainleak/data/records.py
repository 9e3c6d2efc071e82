"""A synthetic records corpus with private slots, built from Faker's offline locale data.

Each record fills one of eight sentence templates (the template index is the class label) with
four single-word private slots: a first name and a city (Faker's en_US first names and de_DE
city list), a year and a three-digit number. Slot values are drawn uniformly from fixed pools of
``pool_size`` values, so guessing a slot by chance succeeds with probability ``1 / pool_size``.
The pools are public (the generator's data); the private part of a record is which values it
holds. MIXGUARD's seed experiment (seed-briefs-2 §10) uses such "patient NAME from CITY"
records. Needs the ``text`` extra (Faker).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from trainleak.errors import ConfigError, MissingExtraError

SLOTS: tuple[str, ...] = ("name", "city", "year", "number")
# Eight templates in four pairs that differ by one word, so the label rests on single tokens.
TEMPLATES: tuple[str, ...] = (
    "patient {name} from {city} was born in {year} and was prescribed {number} mg .",
    "patient {name} from {city} was born in {year} and was refused {number} mg .",
    "customer {name} of {city} opened account {number} in {year} .",
    "customer {name} of {city} closed account {number} in {year} .",
    "the court in {city} fined {name} {number} dollars in {year} .",
    "the court in {city} paid {name} {number} dollars in {year} .",
    "in {year} {name} moved to {city} and paid {number} in rent .",
    "in {year} {name} moved from {city} and paid {number} in rent .",
)


@dataclass(frozen=True)
class Record:
    """One record: its text, template label and slot values (word -> slot name)."""

    text: str
    label: int
    slots: dict[str, str]


@dataclass(frozen=True)
class SlotPools:
    """The public value pools of each slot (lower-case single words)."""

    values: dict[str, tuple[str, ...]]

    @property
    def pool_size(self) -> int:
        return min(len(v) for v in self.values.values())

    def words(self) -> list[str]:
        return [w for slot in SLOTS for w in self.values[slot]]


def slot_pools(pool_size: int = 100, seed: int = 0) -> SlotPools:
    """Draw ``pool_size`` distinct values per slot from Faker's locale data (seeded).

    Raises:
        ConfigError: ``pool_size`` outside ``[2, 300]``; MissingExtraError: no Faker.
    """
    if not isinstance(pool_size, int) or not 2 <= pool_size <= 300:
        raise ConfigError.invalid("pool_size", "an integer in [2, 300]", pool_size)
    try:
        from faker.providers.address.de_DE import Provider as Address
        from faker.providers.person.en_US import Provider as Person
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingExtraError(
            "the records corpus needs Faker: pip install 'trainleak[text]'"
        ) from exc
    rng = random.Random(seed)
    names = sorted({n.lower() for n in Person.first_names if n.isascii() and n.isalpha()})
    cities = sorted({c.lower() for c in Address.cities if c.isascii() and c.isalpha()})
    years = [str(y) for y in range(1900, 2020)]
    numbers = [str(n) for n in range(100, 1000)]
    values = {}
    for slot, pool in zip(SLOTS, (names, cities, years, numbers), strict=True):
        if len(pool) < pool_size:
            raise ConfigError.invalid("pool_size", f"at most {len(pool)} for {slot}", pool_size)
        values[slot] = tuple(rng.sample(pool, pool_size))
    return SlotPools(values)


def make_records(n: int, pools: SlotPools, seed: int = 0) -> list[Record]:
    """``n`` records with templates and slot values drawn uniformly (seeded).

    Raises:
        ConfigError: ``n`` not a positive integer.
    """
    if not isinstance(n, int) or n < 1:
        raise ConfigError.invalid("n", "a positive integer", n)
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        label = rng.randrange(len(TEMPLATES))
        fill = {slot: rng.choice(pools.values[slot]) for slot in SLOTS}
        out.append(Record(TEMPLATES[label].format(**fill), label, {v: k for k, v in fill.items()}))
    return out
