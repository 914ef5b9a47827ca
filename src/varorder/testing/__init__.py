"""Testing support: brute-force oracles and input strategies shared by every test.

Use the modules: :mod:`varorder.testing.oracle` (brute-force enumeration),
:mod:`varorder.testing.strategies` (hypothesis strategies; needs the ``test`` extra),
:mod:`varorder.testing.hostile` (corrupted-input generators) and
:mod:`varorder.testing.precision` (extended-precision chain references).
"""

__all__: list[str] = []
