"""The lattice sampler's cached running sums draw exactly what a fresh inverse-CDF draw at
each node (engine.lattice._draw_log) draws from the same uniforms: the same arcs, bit for bit,
on random lattices with −inf weights and ties."""

import numpy as np
import pytest

from varorder import lattice
from varorder.engine import lattice as kernels


def _random_lattice(rng):
    sizes = [1] + list(rng.integers(1, 5, size=int(rng.integers(1, 6))))
    position = np.repeat(np.arange(len(sizes)), sizes)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    src, dst = [], []
    for t in range(len(sizes) - 1):
        for u in range(starts[t], starts[t + 1]):
            for v in range(starts[t + 1], starts[t + 2]):
                if rng.random() < 0.8:
                    src.append(u)
                    dst.append(v)
    weight = rng.normal(size=len(src))
    weight[rng.random(len(src)) < 0.15] = -np.inf
    weight[rng.random(len(src)) < 0.15] = 0.5  # ties
    final = np.where(rng.random(len(position)) < 0.5, rng.normal(size=len(position)), -np.inf)
    final[-1] = 0.0
    return lattice.Lattice(position, src, dst, np.arange(len(src)), weight, final)


def _reference(lat, uniforms):
    """The sampler as one fresh _draw_log per step."""
    alpha, logz = lattice.alphas(lat)
    out = np.full((uniforms.shape[0], lat.max_length), -1, dtype=np.int64)
    if logz == -np.inf:
        return out
    end_w = alpha + lat.final
    for s in range(uniforms.shape[0]):
        v = kernels._draw_log(end_w, uniforms[s, lat.max_length])
        while v != 0:
            arcs = lat.in_arcs[lat.in_offsets[v]:lat.in_offsets[v + 1]]
            w = alpha[lat.arc_source[arcs]] + lat.arc_weight[arcs]
            a = arcs[kernels._draw_log(w, uniforms[s, lat.node_position[v] - 1])]
            out[s, lat.node_position[v] - 1] = a
            v = lat.arc_source[a]
    return out


@pytest.mark.parametrize("seed", range(40))
def test_cached_running_sums_draw_the_same_arcs(seed):
    rng = np.random.default_rng(seed)
    lat = _random_lattice(rng)
    uniforms = rng.random((50, lat.max_length + 1))
    uniforms[:5] = 0.0
    uniforms[5:10] = np.nextafter(1.0, 0.0)
    got, _ = kernels.sample_kernel(*lat._args(), lat.node_position, lat.max_length, uniforms)
    assert np.array_equal(got, _reference(lat, uniforms))
