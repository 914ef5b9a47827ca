"""Damage to files, shared by the hostile-input tests (hypothesis) and the attack script
``benchmarks/attack_inputs.py`` (a seeded ``random.Random``).

Each mutation takes a *chooser* — :class:`HypothesisChooser` (draws from hypothesis's
``data``) or :class:`RandomChooser` (a seeded ``random.Random``) — so that the tests
and the re-runnable attack do the same kinds of damage: bytes overwritten and the file
truncated; a metadata field of a model file replaced by arbitrary JSON; one array of a
model file given another value, shape or dtype, or removed.
"""

from __future__ import annotations

import json
import random

import numpy as np

__all__ = ["HypothesisChooser", "RandomChooser", "model_members", "mutate_bytes", "mutate_metadata",
           "mutate_array", "HOSTILE_VALUES"]

# values that trained models never hold, or that break arithmetic when they do
HOSTILE_VALUES = (np.inf, -np.inf, np.nan, 1e308, -1e308, 1e5, -1.0, 0.0, 2.0, 2 ** 40)
HOSTILE_DTYPES = ("U3", "bool", "int8", "complex128", "float16", "float32", "int32")


class RandomChooser:
    """Choices from a seeded ``random.Random`` (the attack script)."""

    def __init__(self, seed):
        self.rng = random.Random(seed)

    def integer(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)

    def choice(self, options):
        options = list(options)
        return options[self.rng.randrange(len(options))]

    def json(self, depth: int = 0):
        kind = self.rng.randrange(8 if depth < 2 else 5)
        if kind == 0:
            return None
        if kind == 1:
            return self.rng.random() < 0.5
        if kind == 2:
            return self.rng.choice([-5, 0, 1, 3, 10 ** 20, -(10 ** 20)])
        if kind == 3:
            return self.rng.choice([0.0, -1.5, 1e308, 1e-300, 0.5])
        if kind == 4:
            return self.rng.choice(["", "x", "<s>", "ccm", "\u00e9"])
        if kind == 5:
            return [self.json(depth + 1) for _ in range(self.rng.randrange(4))]
        return {self.rng.choice(["", "a", "order"]): self.json(depth + 1) for _ in range(self.rng.randrange(3))}


class HypothesisChooser:
    """Choices drawn from hypothesis's ``st.data()`` (the tests; failures shrink)."""

    def __init__(self, data):
        self.data = data

    def integer(self, low: int, high: int) -> int:
        from hypothesis import strategies as st

        return self.data.draw(st.integers(low, high))

    def choice(self, options):
        from hypothesis import strategies as st

        return self.data.draw(st.sampled_from(list(options)))

    def json(self):
        from hypothesis import strategies as st

        scalars = (st.none() | st.booleans() | st.integers(-5, 10 ** 20) | st.floats(allow_nan=False)
                   | st.text(max_size=5))
        return self.data.draw(st.recursive(
            scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
            max_leaves=8))


def model_members(path) -> dict[str, np.ndarray]:
    """Every member of a model .npz (the metadata too), read without pickle."""
    with np.load(path, allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


def mutate_bytes(choose, raw: bytes, max_edits: int = 3) -> bytes:
    """Up to ``max_edits`` bytes overwritten, then the file cut at a chosen length (≥ 1)."""
    raw = bytearray(raw)
    for _ in range(choose.integer(0, max_edits)):
        raw[choose.integer(0, len(raw) - 1)] = choose.integer(0, 255)
    return bytes(raw[: choose.integer(1, len(raw))])


def mutate_metadata(choose, members: dict) -> dict:
    """One field of the JSON metadata (top level, ``params`` or ``state``) replaced by arbitrary JSON."""
    members = dict(members)
    meta = json.loads(members["__meta__"].tobytes())
    section = choose.choice(["params", "state", None])
    if section is None or not isinstance(meta.get(section), dict):
        meta[choose.choice(sorted(meta))] = choose.json()
    else:
        keys = sorted(meta[section]) or ["x"]
        meta[section][choose.choice(keys + ["unknown"])] = choose.json()
    members["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    return members


def mutate_array(choose, members: dict) -> dict:
    """One array given a hostile value, one element fewer, another dtype, or removed."""
    members = dict(members)
    name = choose.choice(sorted(k for k in members if k != "__meta__"))
    original = members[name]
    how = choose.choice(["value", "shape", "dtype", "drop"])
    if how == "value" and original.dtype.kind in "fiub" and original.size:
        value = choose.choice(HOSTILE_VALUES)
        changed = original.astype(np.float64) if original.dtype.kind == "f" or not np.isfinite(value) else original.copy()
        position = choose.integer(0, changed.size - 1)
        try:
            changed.flat[position] = value
        except (OverflowError, ValueError):  # not representable in an integer array
            changed = changed.astype(np.float64)
            changed.flat[position] = value
    elif how in ("value", "shape"):
        changed = original.reshape(-1)[: max(original.size - 1, 0)]
    elif how == "dtype":
        dtype = choose.choice(HOSTILE_DTYPES)
        try:
            changed = original.astype(dtype)
        except ValueError:  # strings that are no numbers: an array of that dtype and shape instead
            changed = np.zeros(original.shape, dtype=dtype)
    else:
        del members[name]
        return members
    members[name] = changed
    return members
