"""The one dynamic-programming engine: semirings, dense-chain and lattice kernels."""
