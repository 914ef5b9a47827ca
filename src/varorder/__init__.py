"""varorder: structured sequence models with adaptive context and exact inference.

One dynamic-programming engine (:mod:`varorder.engine`) serves dense chains
(:mod:`varorder.chain`), general position-indexed lattices
(:mod:`varorder.lattice`) and every algorithm built on them.
"""

__version__ = "0.1.0"
