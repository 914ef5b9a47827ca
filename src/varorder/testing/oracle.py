"""The one brute-force oracle: enumerate every path of a small instance.

Every inference routine in varorder (dense chains, general lattices, and every
structure later built as a lattice) is tested against these functions. They
share nothing with the engine but the definition of a path score, computed
here directly in NumPy:

* dense chain: s(y) = start[y₁] + Σₜ E[t, yₜ] + Σₜ T[yₜ₋₁, yₜ] + end[yₙ]
  (forbidden labels, ``allowed`` False, make s(y) = −inf);
* lattice: s(path) = Σ arc weights + final[last node].

An enumeration is a list of ``(path, score)`` with ``path`` a tuple of labels
(chains) or of arc ids (lattices). Paths of score −inf are kept in the
enumeration but carry zero probability.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

__all__ = ["chain_paths", "lattice_paths", "product_paths", "log_partition", "max_score", "argmax_paths",
           "probabilities", "kbest_scores", "entropy", "chain_node_marginals", "chain_edge_marginals",
           "lattice_marginals", "chi_square_pvalue", "alignment_posteriors", "tree_posteriors",
           "hypergraph_derivations", "projective_trees", "binary_bracketings", "ngram_hmm_posteriors",
           "loglinear_lm_distribution", "wfsa_paths", "wfsa_string_weights", "all_strings", "substring_counts",
           "string_graph_marginals", "edit_likelihood", "monotone_alignments", "edit_paths",
           "ngram_beam_posteriors", "segmentations", "segmentation_paths", "segment_marginals",
           "segment_edge_counts"]

NEG_INF = -math.inf


# ---------------------------------------------------------------------------
# enumeration
# ---------------------------------------------------------------------------


def chain_paths(emissions, transitions, start=None, end=None, length=None, allowed=None):
    """All K**n label paths of one chain (emissions (L, K)) with their scores."""
    E = np.asarray(emissions, dtype=np.float64)
    L, K = E.shape
    n = L if length is None else int(length)
    T = np.asarray(transitions, dtype=np.float64)
    S = np.zeros(K) if start is None else np.asarray(start, dtype=np.float64)
    F = np.zeros(K) if end is None else np.asarray(end, dtype=np.float64)
    out = []
    for y in itertools.product(range(K), repeat=n):
        if allowed is not None and not all(allowed[t][y[t]] for t in range(n)):
            out.append((y, NEG_INF))
            continue
        terms = [S[y[0]], F[y[-1]]] + [E[t, y[t]] for t in range(n)] + [T[y[t - 1], y[t]] for t in range(1, n)]
        out.append((y, _sum(terms)))
    return out


def lattice_paths(lattice):
    """All root-to-final arc paths of a :class:`varorder.lattice.Lattice` with scores.

    Written as an independent depth-first search over the raw arc list (it
    does not use the lattice's CSR indexes).
    """
    by_source = {}
    for a in range(len(lattice.arc_source)):
        by_source.setdefault(int(lattice.arc_source[a]), []).append(a)
    out = []

    def visit(node, arcs, terms):
        fin = float(lattice.final[node])
        if fin != NEG_INF:
            out.append((tuple(arcs), _sum(terms + [fin])))
        for a in by_source.get(node, []):
            visit(int(lattice.arc_target[a]), arcs + [a], terms + [float(lattice.arc_weight[a])])

    visit(0, [], [])
    return out


def product_paths(candidates, log_score):
    """Every sequence of one candidate per position, with its score.

    ``candidates`` lists the allowed symbols per position; ``log_score(seq)`` scores a
    tuple of symbols (e.g. a high-order HMM's log p, which no lattice of bounded size
    represents). Returns an enumeration like :func:`chain_paths`.
    """
    return [(seq, float(log_score(seq))) for seq in itertools.product(*[list(c) for c in candidates])]


def segmentations(n: int, max_length: int, num_labels: int):
    """Every labelled segmentation of positions 0..n−1 into segments of 1..max_length
    positions: tuples of (start, end, label), end exclusive, in order."""
    if n == 0:
        yield ()
        return
    for size in range(1, min(max_length, n) + 1):
        for rest in segmentations(n - size, max_length, num_labels):
            for k in range(num_labels):
                yield rest + ((n - size, n, k),)


def segmentation_paths(segment_scores, transitions, start=None, end=None, length=None):
    """All segmentations of one semi-Markov sequence with their scores: segment_scores
    (L, D, K), entry [t, d, k] for a segment of label k covering t − d … t; the score is
    start[first label] + Σ segment scores + Σ transitions between consecutive segments +
    end[last label] (see :mod:`varorder.semimarkov`)."""
    P = np.asarray(segment_scores, dtype=np.float64)
    L, D, K = P.shape
    n = L if length is None else int(length)
    T = np.asarray(transitions, dtype=np.float64)
    S = np.zeros(K) if start is None else np.asarray(start, dtype=np.float64)
    F = np.zeros(K) if end is None else np.asarray(end, dtype=np.float64)
    out = []
    for seg in segmentations(n, D, K):
        terms = [S[seg[0][2]], F[seg[-1][2]]]
        terms += [P[e - 1, e - s - 1, k] for s, e, k in seg]
        terms += [T[seg[i - 1][2], seg[i][2]] for i in range(1, len(seg))]
        out.append((seg, _sum(terms)))
    return out


def segment_marginals(paths, length: int, max_length: int, num_labels: int) -> np.ndarray:
    """(L, D, K) posterior probability of each segment, indexed by (end − 1, size − 1, label)."""
    out = np.zeros((length, max_length, num_labels))
    for seg, p in probabilities(paths).items():
        for s, e, k in seg:
            out[e - 1, e - s - 1, k] += p
    return out


def segment_edge_counts(paths, num_labels: int) -> np.ndarray:
    """(K, K) expected number of label i's segment followed by label j's."""
    out = np.zeros((num_labels, num_labels))
    for seg, p in probabilities(paths).items():
        for i in range(1, len(seg)):
            out[seg[i - 1][2], seg[i][2]] += p
    return out


def _sum(terms):
    if any(t == NEG_INF for t in terms):
        return NEG_INF
    return float(math.fsum(terms))


# ---------------------------------------------------------------------------
# quantities computed from an enumeration
# ---------------------------------------------------------------------------


def log_partition(paths) -> float:
    scores = np.array([s for _, s in paths], dtype=np.float64)
    if scores.size == 0 or np.all(scores == NEG_INF):
        return NEG_INF
    top = scores.max()
    return float(top + np.log(np.exp(scores - top).sum()))


def max_score(paths) -> float:
    return max((s for _, s in paths), default=NEG_INF)


def argmax_paths(paths, tol=0.0):
    """Every path whose score is within ``tol`` of the best (ties are real)."""
    best = max_score(paths)
    if best == NEG_INF:
        return []
    return [p for p, s in paths if s >= best - tol]


def probabilities(paths) -> dict:
    """path → probability (zero-score paths omitted)."""
    logz = log_partition(paths)
    if logz == NEG_INF:
        return {}
    return {p: math.exp(s - logz) for p, s in paths if s != NEG_INF}


def kbest_scores(paths, k: int) -> list[float]:
    """The k best finite scores, best first, padded with −inf."""
    finite = sorted((s for _, s in paths if s != NEG_INF), reverse=True)[:k]
    return finite + [NEG_INF] * (k - len(finite))


def entropy(paths) -> float:
    probs = probabilities(paths)
    if not probs:
        return math.nan
    return float(-sum(p * math.log(p) for p in probs.values() if p > 0))


def chain_node_marginals(paths, length: int, num_labels: int) -> np.ndarray:
    node = np.zeros((length, num_labels))
    for y, p in probabilities(paths).items():
        node[np.arange(len(y)), y] += p
    return node


def chain_edge_marginals(paths, length: int, num_labels: int) -> np.ndarray:
    edge = np.zeros((max(length - 1, 0), num_labels, num_labels))
    for y, p in probabilities(paths).items():
        for t in range(1, len(y)):
            edge[t - 1, y[t - 1], y[t]] += p
    return edge


def lattice_marginals(lattice, paths):
    """(node (N,), arc (A,), final (N,)) marginals of a lattice enumeration."""
    node = np.zeros(len(lattice.node_position))
    arc = np.zeros(len(lattice.arc_source))
    fin = np.zeros(len(lattice.node_position))
    for arcs, p in probabilities(paths).items():
        node[0] += p
        for a in arcs:
            arc[a] += p
            node[lattice.arc_target[a]] += p
        last = lattice.arc_target[arcs[-1]] if arcs else 0
        fin[last] += p
    return node, arc, fin


def chi_square_pvalue(counts: dict, probs: dict) -> float:
    """Pearson goodness-of-fit p-value of observed path counts against exact probabilities.

    Cells with expected count < 5 are pooled into one, as the χ² approximation needs.
    Counts for paths of probability zero make the p-value 0.
    """
    from scipy.stats import chi2

    n = sum(counts.values())
    if any(c > 0 and probs.get(path, 0.0) == 0.0 for path, c in counts.items()):
        return 0.0
    obs, exp = [], []
    pooled_obs = pooled_exp = 0.0
    for path, p in probs.items():
        e = p * n
        o = counts.get(path, 0)
        if e < 5:
            pooled_obs += o
            pooled_exp += e
        else:
            obs.append(o)
            exp.append(e)
    if pooled_exp > 0:
        obs.append(pooled_obs)
        exp.append(pooled_exp)
    obs = np.array(obs, dtype=float)
    exp = np.array(exp, dtype=float)
    dof = len(obs) - 1
    if dof < 1:
        return 1.0
    stat = float(((obs - exp) ** 2 / exp).sum())
    return float(chi2.sf(stat, dof))


# ---------------------------------------------------------------------------
# asymmetric word alignments and trees (agreement-based learning)
# ---------------------------------------------------------------------------


def alignment_posteriors(n_source: int, n_target: int, log_score):
    """Enumerate every alignment a ∈ {−1 (NULL), 0..n_source−1}^n_target.

    ``log_score(a)`` gives the unnormalized log-probability of the tuple ``a``.
    Returns (log Z, edge posteriors (n_source, n_target), NULL posteriors (n_target,)).
    """
    paths = [(a, float(log_score(a))) for a in itertools.product(range(-1, n_source), repeat=n_target)]
    edge = np.zeros((n_source, n_target))
    null = np.zeros(n_target)
    for a, p in probabilities(paths).items():
        for t, u in enumerate(a):
            if u < 0:
                null[t] += p
            else:
                edge[u, t] += p
    return log_partition(paths), edge, null



def tree_posteriors(parent, node_log, edge_log):
    """Enumerate every assignment of a tree model p(x) ∝ exp(Σ_v φ_v(x_v) + Σ_{v≠root} ψ_v(x_parent(v), x_v)).

    parent (N,) with −1 at the root; node_log (N, V); edge_log (N, V, V).
    Returns (log Z, node marginals (N, V), edge marginals (N, V, V) with
    edge[v, a, b] = p(x_parent(v) = a, x_v = b), zero at the root).
    """
    node_log = np.asarray(node_log, dtype=np.float64)
    N, V = node_log.shape
    paths = []
    for x in itertools.product(range(V), repeat=N):
        terms = [node_log[v, x[v]] for v in range(N)]
        terms += [edge_log[v, x[parent[v]], x[v]] for v in range(N) if parent[v] >= 0]
        paths.append((x, _sum([float(t) for t in terms])))
    node = np.zeros((N, V))
    edge = np.zeros((N, V, V))
    for x, p in probabilities(paths).items():
        for v in range(N):
            node[v, x[v]] += p
            if parent[v] >= 0:
                edge[v, x[parent[v]], x[v]] += p
    return log_partition(paths), node, edge


# ---------------------------------------------------------------------------
# hypergraphs, projective dependency trees, binary bracketings (grammar induction)
# ---------------------------------------------------------------------------


def hypergraph_derivations(hypergraph, graph: int = 0):
    """Every derivation of graph ``graph``'s goal as (edge ids in preorder, score).

    Independent recursion over the raw edge list (no CSR index, no inside values):
    a derivation of v is an edge e into v followed by one derivation of each tail.
    """
    heads = np.asarray(hypergraph.edge_head)
    lo, hi = int(hypergraph.edge_offsets[graph]), int(hypergraph.edge_offsets[graph + 1])
    memo = {}

    def derivations(v):
        if v not in memo:
            found = []
            for e in range(lo, hi):
                if heads[e] != v:
                    continue
                tail_ids = [int(t) for t in hypergraph.tails[hypergraph.tail_offsets[e]:hypergraph.tail_offsets[e + 1]]]
                for parts in itertools.product(*[derivations(t) for t in tail_ids]):
                    edges = (e,) + tuple(x for p, _ in parts for x in p)
                    found.append((edges, _sum([float(hypergraph.edge_weight[e])] + [s for _, s in parts])))
            memo[v] = found
        return memo[v]

    return derivations(int(hypergraph.node_offsets[graph + 1]) - 1)


def projective_trees(n: int):
    """Every projective dependency tree of n words with one root word, as head tuples (−1 = root).

    Brute force: every head assignment, kept when it is a tree and no two arcs cross (the
    root arc comes from an artificial node before the first word).
    """
    out = []
    for heads in itertools.product(range(-1, n), repeat=n):
        if sum(h == -1 for h in heads) != 1 or any(heads[i] == i for i in range(n)):
            continue
        ok = True
        for i in range(n):  # acyclic: every word reaches the root
            seen, v = set(), i
            while v != -1 and ok:
                if v in seen:
                    ok = False
                seen.add(v)
                v = heads[v]
        if not ok:
            continue
        # the root word hangs from an artificial root left of the sentence, so no arc may cover it
        arcs = [(min(i, h), max(i, h)) if h >= 0 else (-1, i) for i, h in enumerate(heads)]
        crossing = any(a < c < b < d for a, b in arcs for c, d in arcs)
        if not crossing:
            out.append(tuple(heads))
    return out


def binary_bracketings(i: int, j: int):
    """Every binary bracketing of span [i, j) as a frozenset of spans (i, j), length-1 spans included."""
    if j - i == 1:
        return [frozenset({(i, j)})]
    out = []
    for k in range(i + 1, j):
        for left in binary_bracketings(i, k):
            for right in binary_bracketings(k, j):
                out.append(left | right | {(i, j)})
    return out
def ngram_hmm_posteriors(log_transition, log_emission, num_labels: int):
    """Enumerate an n-gram HMM over every label sequence of length L (decipherment, S&L 2015 §6).

    ``log_transition(history, word)`` is log p(word | history) with ``history`` the tuple
    of previous labels (empty at the start) and ``word`` a label or ``num_labels`` for
    the end of the sentence; ``log_emission`` (L, K) holds log p(x_t | y_t = k).
    Returns (log Z, node marginals (L, K)).
    """
    log_emission = np.asarray(log_emission, dtype=np.float64)
    L = log_emission.shape[0]
    K = int(num_labels)
    paths = []
    for y in itertools.product(range(K), repeat=L):
        terms = [float(log_transition(y[:t], y[t])) + float(log_emission[t, y[t]]) for t in range(L)]
        terms.append(float(log_transition(y, K)))
        paths.append((y, _sum(terms)))
    node = np.zeros((L, K))
    for y, p in probabilities(paths).items():
        node[np.arange(L), list(y)] += p
    return log_partition(paths), node
def loglinear_lm_distribution(sentences, order, weight_of, history, vocab_size, bos_id, eos_id):
    """p(· | history) of a log-linear LM (Nelakanti et al. 2013, eq. 1) from its definition.

    ``sentences``: training token-id lists (no markers); the features of ``history`` (which
    starts with ``bos_id``) are its suffixes of length 0 .. order−1 that occur as a context
    of some predicted token in the training text; ``weight_of(suffix, v)`` gives w[suffix, v]
    (0 when absent). ``<s>`` is never predicted. Returns a (vocab_size,) probability vector.
    """
    contexts = set()
    for sentence in sentences:
        padded = [bos_id] + list(sentence) + [eos_id]
        for i in range(1, len(padded)):
            for k in range(0, min(order - 1, i) + 1):
                contexts.add(tuple(padded[i - k:i]))
    active = [tuple(history[len(history) - k:]) if k else () for k in range(0, min(order - 1, len(history)) + 1)]
    active = [c for c in active if c in contexts]
    scores = np.array([sum(weight_of(c, v) for c in active) for v in range(vocab_size)], dtype=np.float64)
    scores[bos_id] = -np.inf
    scores -= scores.max()
    p = np.exp(scores)
    return p / p.sum()


# ---------------------------------------------------------------------------
# weighted automata and graphical models over strings (varorder.wfsa, varorder.strings)
# ---------------------------------------------------------------------------


def wfsa_paths(fsa, max_arcs: int):
    """Every path of a :class:`varorder.wfsa.Wfsa` from the start to a final state with at
    most ``max_arcs`` arcs, as ``(input labels, output labels, score)`` with ε (label 0)
    dropped; an independent depth-first search over the raw arc arrays."""
    by_source = {}
    for e in range(len(fsa.src)):
        by_source.setdefault(int(fsa.src[e]), []).append(e)
    out = []
    stack = [(int(fsa.start), (), (), 0.0, 0)]
    while stack:
        q, ins, outs, score, depth = stack.pop()
        if fsa.final[q] > NEG_INF:
            out.append((ins, outs, score + float(fsa.final[q])))
        if depth == max_arcs:
            continue
        for e in by_source.get(q, ()):
            i, o = int(fsa.ilabel[e]), int(fsa.olabel[e])
            stack.append((int(fsa.dst[e]), ins + ((i,) if i else ()), outs + ((o,) if o else ()),
                          score + float(fsa.weight[e]), depth + 1))
    return out


def wfsa_string_weights(paths, semiring: str = "log", tape: str = "both") -> dict:
    """⊕ of path scores per string (``tape`` "input", "output") or string pair ("both"):
    log-sum-exp for ``"log"``, max for ``"max"``."""
    table = {}
    for ins, outs, score in paths:
        key = ins if tape == "input" else outs if tape == "output" else (ins, outs)
        table.setdefault(key, []).append(score)
    if semiring == "log":
        return {key: _logsumexp(scores) for key, scores in table.items()}
    return {key: max(scores) for key, scores in table.items()}


def _logsumexp(scores):
    m = max(scores)
    if m == NEG_INF:
        return NEG_INF
    return m + math.log(sum(math.exp(s - m) for s in scores))


def all_strings(alphabet, max_length: int):
    """Every string (tuple) over ``alphabet`` of length 0..max_length."""
    for n in range(max_length + 1):
        yield from itertools.product(tuple(alphabet), repeat=n)


def substring_counts(string, max_order: int, boundaries: bool = True) -> dict:
    """Occurrence counts of every substring of length 1..max_order of ``^ string $``
    (or of ``string`` when ``boundaries`` is False), keyed by tuple."""
    padded = (("^",) + tuple(string) + ("$",)) if boundaries else tuple(string)
    counts = {}
    for n in range(1, max_order + 1):
        for i in range(len(padded) - n + 1):
            gram = padded[i:i + n]
            counts[gram] = counts.get(gram, 0) + 1
    return counts


def string_graph_marginals(domains, factors):
    """Exact marginals of a factor graph over string variables with finite domains.

    ``domains``: {variable: list of strings}; ``factors``: list of (variables tuple,
    log_potential(values tuple) -> float). Enumerates every joint assignment; returns
    {variable: {string: probability}}.
    """
    names = list(domains)
    scores = []
    assignments = list(itertools.product(*(domains[v] for v in names)))
    for values in assignments:
        value_of = dict(zip(names, values))
        scores.append(_sum([f(tuple(value_of[v] for v in vars_)) for vars_, f in factors]))
    log_z = _logsumexp(scores)
    out = {v: {} for v in names}
    for values, s in zip(assignments, scores):
        p = math.exp(s - log_z) if s > NEG_INF else 0.0
        for v, x in zip(names, values):
            out[v][x] = out[v].get(x, 0.0) + p
    return out


def edit_likelihood(alphabet, substitute, insert, underlying, surface) -> float:
    """log T(surface | underlying) for the one-state stochastic edit transducer of
    :class:`varorder.strings.model.EditTransducer` by its own DP (no automata):
    f[i][j] = P(read underlying[:i], written surface[:j], about to act)."""
    index = {s: i for i, s in enumerate(alphabet)}
    A = len(alphabet)
    stay = 1.0 - float(sum(insert))
    n, m = len(underlying), len(surface)
    f = [[0.0] * (m + 1) for _ in range(n + 1)]
    f[0][0] = 1.0
    for i in range(n + 1):
        for j in range(m + 1):
            here = f[i][j]
            if here == 0.0:
                continue
            if j < m:
                f[i][j + 1] += here * insert[index[surface[j]]]
            if i < n:
                a = index[underlying[i]]
                if j < m:
                    f[i + 1][j + 1] += here * stay * substitute[a][index[surface[j]]]
                f[i + 1][j] += here * stay * substitute[a][A]
    total = f[n][m] * stay
    return math.log(total) if total > 0 else NEG_INF

def monotone_alignments(num_outputs: int, num_inputs: int, max_per_output: int | None = None):
    """Every alignment of §4.2 (Steinhardt & Liang 2015) between outputs 1..L and inputs 1..L′,
    by filtering all edge subsets: no crossing edges, every node of degree ≥ 1, and no edge
    whose two ends both have degree > 1 (one input to several outputs or one output to several
    inputs, never both); optionally at most ``max_per_output`` inputs per output. Returns
    sorted tuples of 1-based (output, input) edges.
    """
    pairs = [(i, j) for i in range(1, num_outputs + 1) for j in range(1, num_inputs + 1)]
    found = []
    for mask in range(1, 1 << len(pairs)):
        edges = [pairs[k] for k in range(len(pairs)) if mask >> k & 1]
        out_deg = [0] * (num_outputs + 1)
        in_deg = [0] * (num_inputs + 1)
        for i, j in edges:
            out_deg[i] += 1
            in_deg[j] += 1
        if min(out_deg[1:]) < 1 or min(in_deg[1:]) < 1:
            continue
        if max_per_output is not None and max(out_deg[1:]) > max_per_output:
            continue
        if any(a < c and b > d for a, b in edges for c, d in edges):
            continue
        if any(out_deg[i] > 1 and in_deg[j] > 1 for i, j in edges):
            continue
        found.append(tuple(sorted(edges)))
    return found


def edit_paths(alphabet, substitute, insert, underlying, surface) -> list:
    """Every path of the one-state stochastic edit transducer that reads ``underlying`` and
    writes ``surface``, by recursion over (read, written) prefixes (finite: each step reads
    or writes a symbol). Returns ``[(probability, operations)]`` with operations numbered
    as ``EditTransducer.n_ops``: insert b → b, read a and write b → A + a·(A+1) + b,
    read a and write nothing → A + a·(A+1) + A."""
    index = {s: i for i, s in enumerate(alphabet)}
    A = len(alphabet)
    stay = 1.0 - float(sum(insert))
    found = []

    def walk(i, j, p, ops):
        if p == 0.0:
            return
        if i == len(underlying) and j == len(surface):
            found.append((p * stay, tuple(ops)))
        if j < len(surface):
            b = index[surface[j]]
            walk(i, j + 1, p * insert[b], ops + [b])
        if i < len(underlying):
            a = index[underlying[i]]
            if j < len(surface):
                b = index[surface[j]]
                walk(i + 1, j + 1, p * stay * substitute[a][b], ops + [A + a * (A + 1) + b])
            walk(i + 1, j, p * stay * substitute[a][A], ops + [A + a * (A + 1) + A])

    walk(0, 0, 1.0, [])
    return found

def ngram_beam_posteriors(log_transition, log_emission, num_labels: int, beam_size: int):
    """Select-by-model beam search over an n-gram HMM, by explicit prefixes (Steinhardt &
    Liang 2015, §4.1 and §6): B_0 = {()}; B_i = the ``beam_size`` prefixes of B_{i−1} × Y of
    largest partial-model mass q^i (transitions and emissions through position i; ties: the
    earlier candidate, parents in beam order, then label), kept in candidate order; no
    recombination. The posterior re-weights the complete prefixes of B_L by their full score
    (the end transition included) and gives nothing outside the beam.

    Arguments as :func:`ngram_hmm_posteriors`; returns (log Z over B_L, node marginals (L, K)).
    """
    log_emission = np.asarray(log_emission, dtype=np.float64)
    L = log_emission.shape[0]
    K = int(num_labels)
    beam = [((), 0.0)]
    for t in range(L):
        candidates = [(prefix + (y,), score + float(log_transition(prefix, y)) + float(log_emission[t, y]))
                      for prefix, score in beam for y in range(K)]
        finite = [j for j, (_, s) in enumerate(candidates) if s != NEG_INF]
        kept = sorted(sorted(finite, key=lambda j: (-candidates[j][1], j))[:beam_size])
        beam = [candidates[j] for j in kept]
    paths = [(y, _sum([s, float(log_transition(y, K))])) for y, s in beam]
    node = np.zeros((L, K))
    for y, p in probabilities(paths).items():
        node[np.arange(L), list(y)] += p
    return log_partition(paths), node
