"""The one dynamic-programming engine: semirings, dense-chain and lattice kernels.

Users reach the engine through the structures built on it (:mod:`varorder.chain`,
:mod:`varorder.lattice`, :mod:`varorder.hypergraph`); this package exports the semiring
contract and the thread setting that every kernel obeys. Its modules are the kernels.
"""

from varorder._lazy import attach

_EXPORTS = {
    **dict.fromkeys(("Semiring",), "varorder.engine.semiring"),
    **dict.fromkeys(("get_threads", "set_threads"), "varorder.engine.threads"),
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
