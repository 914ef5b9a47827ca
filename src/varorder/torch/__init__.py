"""PyTorch layers over the engine: log-partition Functions with exact gradients, a CRF module
with pytorch-crf's interface, a semi-Markov CRF, projective dependency trees, structured distributions in torch-struct's style, and a
torch-native chain recursion for GPU tensors.

An optional extra (``pip install "varorder[torch]"``): ``import varorder`` never imports
torch; ``import varorder.torch`` does. See :mod:`varorder.torch.functions` for the
factorizations and the gradient identity (∂ log Z / ∂θ = marginals), :mod:`varorder.torch.crf`
for the modules and :mod:`varorder.torch.native` for the device path.
"""

from varorder._lazy import attach

_EXPORTS = {
    **dict.fromkeys(("chain_log_partition", "lattice_log_partition", "hypergraph_log_partition",
                     "semimarkov_log_partition"),
                    "varorder.torch.functions"),
    **dict.fromkeys(("CRF", "allowed_transitions"), "varorder.torch.crf"),
    **dict.fromkeys(("ChainCRF", "DependencyCRF"), "varorder.torch.distributions"),
    **dict.fromkeys(("tree_log_partition",), "varorder.torch.dependency"),
    **dict.fromkeys(("SemiMarkovCRF",), "varorder.torch.semimarkov"),
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS, submodules=("functions", "native", "crf", "distributions", "dependency", "semimarkov"))
