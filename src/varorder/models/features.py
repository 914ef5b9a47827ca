"""Token features → sparse design matrix (scipy CSR, one row per token, sequences concatenated).

Items (tokens) may be given as

* feature dicts ``{name: value}`` like sklearn-crfsuite: a float/int/bool value is the
  feature's value; a string value ``v`` makes the binary feature ``"name:v"`` (CRFsuite's
  convention);
* iterables of feature names (each of value 1);
* or a whole sequence as a dense (n, F) array or scipy sparse matrix (no vocabulary).

:class:`FeatureIndexer` assigns column ids to feature names seen in training (optionally
only those seen ``min_count`` times); unseen names at prediction time are dropped, as
in CRFsuite. Emission log-potentials are then ``X @ W`` for a weight matrix W (F, K),
computed by :func:`csr_times_dense` (Numba, parallel over rows for big inputs, serial for small ones:
the engine's thread policy, :func:`varorder.engine.threads.parallel_kernel`).
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from itertools import chain, repeat
from typing import TYPE_CHECKING, NamedTuple

import numba as nb
import numpy as np

from varorder.engine.threads import parallel_kernel
from varorder.errors import ParameterError

if TYPE_CHECKING:
    import scipy.sparse as sp

__all__ = ["FeatureIndexer", "Rows", "design_matrix", "csr_times_dense", "transpose_rows", "label_counts",
           "rows_to_csr", "is_array_input", "n_items", "pos_features",
           "parse_templates", "template_features", "format_templates", "check_features", "apply_templates"]


# a chunk of 16 rows (tokens) counts as one sequence for the thread policy
@parallel_kernel(lambda indptr, *_: (indptr.size - 1) // 16, cache=True)
def _csr_dense_kernel(indptr, indices, data, dense, out):
    n_rows = indptr.size - 1
    K = dense.shape[1]
    for r in nb.prange(n_rows):
        for k in range(K):
            out[r, k] = 0.0
        for p in range(indptr[r], indptr[r + 1]):
            c = indices[p]
            if c < 0:  # an unknown feature in Rows (never in a scipy matrix)
                continue
            v = data[p]
            for k in range(K):
                out[r, k] += v * dense[c, k]


class Rows(NamedTuple):
    """A CSR matrix's arrays without the scipy object (whose checked construction costs more than a
    one-sentence product): what :meth:`FeatureIndexer.transform` gives with ``csr=False``. A column
    index of −1 is an unknown feature, which :func:`csr_times_dense` skips (so that no masked copies
    are made per call)."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    shape: tuple[int, int]


@nb.njit(cache=True)
def _transpose_kernel(indptr, indices, data, n_cols):
    """CSR arrays of the transpose (a counting sort by column, rows ascending within a column, entries of a
    row in their order: what scipy's ``X.T.tocsr()`` gives); columns −1 (unknown features) are dropped."""
    n_rows = indptr.size - 1
    t_indptr = np.zeros(n_cols + 1, dtype=np.int64)
    for p in range(indptr[0], indptr[n_rows]):
        if indices[p] >= 0:
            t_indptr[indices[p] + 1] += 1
    for c in range(n_cols):
        t_indptr[c + 1] += t_indptr[c]
    t_indices = np.empty(t_indptr[n_cols], dtype=np.int64)
    t_data = np.empty(t_indptr[n_cols])
    fill = t_indptr[:-1].copy()
    for r in range(n_rows):
        for p in range(indptr[r], indptr[r + 1]):
            c = indices[p]
            if c >= 0:
                q = fill[c]
                t_indices[q] = r
                t_data[q] = data[p]
                fill[c] = q + 1
    return t_indptr, t_indices, t_data


def transpose_rows(matrix: Rows) -> Rows:
    """The transpose of a :class:`Rows` matrix as :class:`Rows` (unknown features dropped): the CRF gradient's
    Xᵀ without scipy, entry for entry the matrix ``X.T.tocsr()`` of the same data."""
    indptr, indices, data = _transpose_kernel(matrix.indptr, matrix.indices, matrix.data, matrix.shape[1])
    return Rows(indptr, indices, data, (matrix.shape[1], matrix.shape[0]))


@nb.njit(cache=True)
def _label_counts_kernel(indptr, indices, data, labels, n_cols, K):
    out = np.zeros((n_cols, K))
    for r in range(indptr.size - 1):
        k = labels[r]
        for p in range(indptr[r], indptr[r + 1]):
            if indices[p] >= 0:
                out[indices[p], k] += data[p]
    return out


def label_counts(matrix: Rows, labels: np.ndarray, n_labels: int) -> np.ndarray:
    """Xᵀ · onehot(labels) (F, K): each feature's summed values over the rows of each label (the CRF's empirical
    counts), added row by row in order, as scipy's ``(X.T.tocsr() @ onehot).todense()`` adds them."""
    return _label_counts_kernel(matrix.indptr, matrix.indices, matrix.data, np.asarray(labels, dtype=np.int64),
                                matrix.shape[1], n_labels)


def rows_to_csr(matrix) -> sp.csr_matrix:
    """A scipy CSR matrix of :class:`Rows` (unknown features dropped); a scipy matrix is returned as it is."""
    if not isinstance(matrix, Rows):
        return matrix
    import scipy.sparse as sp

    known = matrix.indices >= 0
    if known.all():
        return sp.csr_matrix((matrix.data, matrix.indices, matrix.indptr), shape=matrix.shape)
    rows = np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))[known]
    indptr = np.zeros(matrix.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=matrix.shape[0]), out=indptr[1:])
    return sp.csr_matrix((matrix.data[known], matrix.indices[known], indptr), shape=matrix.shape)


def csr_times_dense(matrix: sp.csr_matrix | Rows, dense: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """matrix @ dense as a C-contiguous float64 array (written into ``out`` when given), parallel over rows
    (big inputs). ``matrix``: a scipy CSR matrix or :class:`Rows`."""
    if out is None:
        out = np.empty((matrix.shape[0], dense.shape[1]))
    _csr_dense_kernel(matrix.indptr, matrix.indices, matrix.data, np.ascontiguousarray(dense, dtype=np.float64), out)
    return out


def _issparse(value) -> bool:
    """``scipy.sparse.issparse`` without importing SciPy's sparse package (~0.3 CPU s, with the parts of
    NumPy its array-API layer loads, that a process tagging feature dicts never needs): no sparse matrix
    exists before that package is imported."""
    sparse = sys.modules.get("scipy.sparse")
    return sparse is not None and sparse.issparse(value)


def n_items(sequence) -> int:
    """Number of items (rows) in one input sequence, whether a list, an array or a sparse matrix."""
    return sequence.shape[0] if _issparse(sequence) or isinstance(sequence, np.ndarray) else len(sequence)


def is_array_input(sequences) -> bool:
    """True when sequences are given as per-sequence arrays rather than lists of feature items."""
    return len(sequences) > 0 and (isinstance(sequences[0], np.ndarray) or _issparse(sequences[0]))


def _item_pairs(item, where: str):
    """(names, values) of one item; values None when all are 1."""
    if isinstance(item, dict):
        names, values = [], []
        for key, value in item.items():
            if isinstance(value, str):
                names.append(f"{key}:{value}")
                values.append(1.0)
            elif isinstance(value, (bool, int, float, np.number)):
                names.append(key)
                values.append(float(value))
            else:
                raise ParameterError(f"{where}: feature {key!r} has value {value!r}; expected a number or a string", name=where, value=item)
        return names, values
    if isinstance(item, str):
        raise ParameterError(f"{where}: an item must be a feature dict or an iterable of feature names, got a string", name=where, value=item)
    try:
        names = list(item)
    except TypeError:
        raise ParameterError(f"{where}: an item must be a feature dict or an iterable of feature names, "
                             f"got {type(item).__name__}", name=where, value=item) from None
    return names, None


def _flatten(sequences, name: str):
    """All items' feature names and values, items' feature counts and sequence lengths."""
    lengths = np.fromiter(map(len, sequences), dtype=np.int64, count=len(sequences))
    if (lengths == 0).any():
        i = int(np.flatnonzero(lengths == 0)[0])
        raise ParameterError(f"{name}[{i}] is an empty sequence", name=name)
    items = list(chain.from_iterable(sequences))
    # Fast path: dicts with numeric values (the common CRFsuite-style input).
    if items and set(map(type, items)) == {dict}:
        counts = np.fromiter(map(len, items), dtype=np.int64, count=len(items))
        names = list(chain.from_iterable(map(dict.keys, items)))
        # numbers only give a numeric array (one pass, no per-value type test); a string or other
        # object anywhere gives a str / object one
        try:
            raw_values = np.array(list(chain.from_iterable(map(dict.values, items))))
        except (ValueError, TypeError):  # ragged sequence values: the general path names the bad item
            raw_values = None
        if raw_values is not None and raw_values.ndim == 1 and raw_values.dtype.kind in "fiub":
            return names, raw_values.astype(np.float64, copy=False), counts, lengths
        # string (or odd) values somewhere: the general path below names the bad item
    names, values, counts = [], [], np.empty(len(items), dtype=np.int64)
    seq_of_item = np.repeat(np.arange(len(sequences)), lengths)
    pos_of_item = np.arange(len(items)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    for i, item in enumerate(items):
        item_names, item_values = _item_pairs(item, f"{name}[{seq_of_item[i]}][{pos_of_item[i]}]")
        names.extend(item_names)
        values.extend([1.0] * len(item_names) if item_values is None else item_values)
        counts[i] = len(item_names)
    return names, np.asarray(values, dtype=np.float64), counts, lengths


class FeatureIndexer:
    """Vocabulary of feature names → column ids, learned from training items."""

    def __init__(self, min_count: int = 1):
        self.min_count = min_count

    def fit(self, sequences, name: str = "X") -> "FeatureIndexer":
        names, _, _, _ = _flatten(sequences, name)
        if self.min_count <= 1:
            vocabulary = dict.fromkeys(names)
        else:
            vocabulary = {k: None for k, c in Counter(names).items() if c >= self.min_count}
        self.names_ = list(vocabulary)
        self.vocabulary_ = {k: i for i, k in enumerate(self.names_)}
        return self

    @classmethod
    def from_names(cls, names, min_count: int = 1) -> "FeatureIndexer":
        indexer = cls(min_count)
        indexer.names_ = list(names)
        indexer.vocabulary_ = {k: i for i, k in enumerate(indexer.names_)}
        return indexer

    @property
    def n_features(self) -> int:
        return len(self.names_)

    def transform(self, sequences, name: str = "X", csr: bool = True) -> tuple[sp.csr_matrix | Rows, np.ndarray]:
        """(design matrix (N_tokens, F) CSR, lengths (S,)); unknown feature names are dropped. ``csr=False``:
        the matrix as :class:`Rows` (for :func:`csr_times_dense`; no scipy object is built)."""
        names, values, counts, lengths = _flatten(sequences, name)
        # map() with the bound dict.get runs the lookups without a Python frame per feature
        columns = np.fromiter(map(self.vocabulary_.get, names, repeat(-1)), dtype=np.int64, count=len(names))
        indptr = np.zeros(counts.size + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        rows = Rows(indptr, columns, values, (counts.size, self.n_features))
        # Entries are already grouped by row; a repeated name within one item stays as two
        # entries, which every product sums correctly.
        return (rows_to_csr(rows) if csr else rows), lengths


def design_matrix(sequences, indexer: FeatureIndexer | None, n_features: int | None = None,
                  name: str = "X") -> tuple[sp.csr_matrix, np.ndarray]:
    """Stack sequences into a CSR design matrix: via ``indexer`` for feature items, or
    directly for per-sequence arrays (which must have ``n_features`` columns when given)."""
    if len(sequences) == 0:
        raise ParameterError(f"{name} holds no sequences", name=name)
    if indexer is not None:
        return indexer.transform(sequences, name)
    import scipy.sparse as sp

    blocks = []
    for i, seq in enumerate(sequences):
        try:
            block = sp.csr_matrix(seq, dtype=np.float64) if sp.issparse(seq) else np.asarray(seq, dtype=np.float64)
        except (TypeError, ValueError):
            raise ParameterError(f"{name}[{i}] must be a 2-d numeric array (this model was trained on dense "
                                 f"feature arrays, not feature dicts)", name=name) from None
        if block.ndim != 2 or block.shape[0] == 0:
            raise ParameterError(f"{name}[{i}] must be a non-empty 2-d (n_items, n_features) array, got shape {block.shape}", name=name)
        if n_features is not None and block.shape[1] != n_features:
            raise ParameterError(f"{name}[{i}] has {block.shape[1]} features, expected {n_features}", name=name)
        if not sp.issparse(block) and not np.isfinite(block).all():
            raise ParameterError(f"{name}[{i}] contains NaN or inf", name=name)
        blocks.append(sp.csr_matrix(block))
    widths = {b.shape[1] for b in blocks}
    if len(widths) != 1:
        raise ParameterError(f"{name}: sequences have differing feature counts {sorted(widths)}", name=name)
    matrix = sp.vstack(blocks, format="csr")
    lengths = np.array([b.shape[0] for b in blocks], dtype=np.int64)
    return matrix, lengths


def _word_features(word: str) -> dict[str, float]:
    lower = word.lower()
    return {
        "bias": 1.0,
        "w=" + lower: 1.0,
        "suf1=" + lower[-1:]: 1.0,
        "suf2=" + lower[-2:]: 1.0,
        "suf3=" + lower[-3:]: 1.0,
        "pre2=" + lower[:2]: 1.0,
        "upper": float(word.isupper()),
        "title": float(word.istitle()),
        "digit": float(word.isdigit()),
    }


def pos_features(words: list[str]) -> list[dict[str, float]]:
    """The POS-tagging templates of the CRFsuite tutorial, one feature dict per word.

    Current word: bias, lower-cased form, suffixes of length 1–3, 2-letter prefix,
    is-upper, is-title, is-digit; previous and next word: lower-cased form, is-title,
    3-letter suffix; BOS / EOS markers at the sentence edges. Booleans are feature values
    (0.0 or 1.0), as sklearn-crfsuite passes them.
    """
    items = []
    n = len(words)
    for i, word in enumerate(words):
        feats = _word_features(word)
        if i > 0:
            prev = words[i - 1]
            low = prev.lower()
            feats["-1:w=" + low] = 1.0
            feats["-1:title"] = float(prev.istitle())
            feats["-1:suf3=" + low[-3:]] = 1.0
        else:
            feats["BOS"] = 1.0
        if i < n - 1:
            nxt = words[i + 1]
            low = nxt.lower()
            feats["+1:w=" + low] = 1.0
            feats["+1:title"] = float(nxt.istitle())
            feats["+1:suf3=" + low[-3:]] = 1.0
        else:
            feats["EOS"] = 1.0
        items.append(feats)
    return items


# -- feature templates chosen by name (``varorder tag train --features``) --------------------------------

_TEMPLATE_ATOM = re.compile(r"^(w|word|shape|upper|title|digit|suf[1-9]|pre[1-9])(?:\[(-?\d+)\])?$")
_PRESETS = {"pos": None}  # None: the CRFsuite-tutorial templates of pos_features, kept bit-for-bit


def _shape(word: str) -> str:
    shape = re.sub("[A-Z]+", "A", word)
    shape = re.sub("[a-z]+", "a", shape)
    return re.sub("[0-9]+", "0", shape)


def _atom_value(name: str, word: str) -> str:
    if name == "w":
        return word.lower()
    if name == "word":
        return word
    if name == "shape":
        return _shape(word)
    if name == "upper":
        return str(int(word.isupper()))
    if name == "title":
        return str(int(word.istitle()))
    if name == "digit":
        return str(int(word.isdigit()))
    n = int(name[3:])
    return word.lower()[-n:] if name.startswith("suf") else word.lower()[:n]


def parse_templates(spec: str, where: str = "--features"):
    """Parse a template list: a preset name (``pos``) or items separated by commas or newlines.

    An item is ``bias`` or atoms joined by ``|`` (a conjunction); an atom is ``NAME[OFFSET]``
    (offset 0 when omitted) with NAME one of ``w`` (lower-cased word), ``word`` (as written),
    ``shape`` (Xx/0 classes), ``upper``, ``title``, ``digit``, ``sufN`` / ``preN`` (N = 1…9 letters
    of the lower-cased word). ``#`` starts a comment. Example: ``bias,w[0],w[-1]|w[0],suf3[0],shape[0]``.
    Returns the preset's name, or a tuple of items, each a tuple of (name, offset).
    """
    spec = spec.strip()
    if spec in _PRESETS:
        return spec
    items = []
    for number, line in enumerate(spec.splitlines(), 1):
        for raw in line.split("#", 1)[0].split(","):
            raw = raw.strip()
            if not raw:
                continue
            if raw == "bias":
                items.append((("bias", 0),))
                continue
            atoms = []
            for part in raw.split("|"):
                match = _TEMPLATE_ATOM.match(part.strip())
                if match is None:
                    raise ParameterError(f"{where}, line {number}: bad template {part.strip()!r} in {raw!r}; expected "
                                         "NAME[OFFSET] with NAME in w, word, shape, upper, title, digit, suf1-9, pre1-9 "
                                         f"(or bias, or a preset: {', '.join(_PRESETS)})", name=where, value=spec)
                atoms.append((match.group(1), int(match.group(2) or 0)))
            items.append(tuple(atoms))
    if not items:
        raise ParameterError(f"{where}: no feature templates given", name=where, value=spec)
    return tuple(items)


def template_features(words: list[str], templates) -> list[dict[str, float]]:
    """One feature dict per word from parsed templates (see :func:`parse_templates`).

    An atom whose offset falls outside the sentence takes the value ``__BOS__`` / ``__EOS__``,
    as in CRFsuite's example feature extractors; every feature is binary, named
    ``template=value``.
    """
    if isinstance(templates, str):
        templates = parse_templates(templates)
    if templates == "pos":
        return pos_features(words)
    n = len(words)
    items = []
    for i in range(n):
        feats = {}
        for template in templates:
            if template[0][0] == "bias":
                feats["bias"] = 1.0
                continue
            values = []
            for name, offset in template:
                j = i + offset
                values.append("__BOS__" if j < 0 else "__EOS__" if j >= n else _atom_value(name, words[j]))
            key = "|".join(f"{name}[{offset}]" for name, offset in template) + "=" + "|".join(values)
            feats[key] = 1.0
        items.append(feats)
    return items


def format_templates(templates) -> str:
    """The text form of parsed templates (what :func:`parse_templates` reads back)."""
    if isinstance(templates, str):
        return templates
    return ",".join("bias" if t[0][0] == "bias" else "|".join(f"{name}[{offset}]" for name, offset in t)
                    for t in templates)


def check_features(owner) -> None:
    """Validate an estimator's ``features`` parameter: None (the caller gives feature dicts or arrays) or a
    template list :func:`parse_templates` reads; a ParameterError names the parameter and the value passed."""
    features = owner.features
    if features is None:
        return
    where = f"{type(owner).__name__}: parameter features={features!r}"
    if not isinstance(features, str):
        raise ParameterError(f"{where} is invalid: expected None, a preset name ('pos') or a template list", name='features', value=features)
    parse_templates(features, where)


def apply_templates(X, features, name: str = "X"):
    """What a tagger's design matrix is built from: ``X`` itself when ``features`` is None (feature dicts or
    arrays), else one feature dict per word of each sequence of words in ``X``, by the templates."""
    if features is None:
        return X
    parsed = parse_templates(features)
    out = []
    for i, words in enumerate(X):
        if isinstance(words, str) or not all(isinstance(word, str) for word in words):
            raise ParameterError(f"{name}[{i}] is not a sequence of words (str): an estimator built with "
                                 f"features={features!r} extracts its own features from words", name=name)
        out.append(template_features(list(words), parsed))
    return out


# cached serial kernels (the product's serial twin included) load without refreshing Numba's registries
import varorder._numba_start  # noqa: E402

varorder._numba_start.load_without_refresh(sys.modules[__name__])
