"""Damage to files, shared by the hostile-input tests (hypothesis) and the attack script
``benchmarks/attack_inputs.py`` (a seeded ``random.Random``).

Each mutation takes a *chooser* — :class:`HypothesisChooser` (draws from hypothesis's
``data``) or :class:`RandomChooser` (a seeded ``random.Random``) — so that the tests
and the re-runnable attack do the same kinds of damage: bytes overwritten and the file
truncated; a metadata field of a model file replaced by arbitrary JSON; one array of a
model file given another value, shape or dtype, or removed. :func:`saved_model` fits and
saves a tiny model of every estimator kind, with a ``use`` check of a loaded copy.

Further attacks, each applied by the tests to every command it fits: :func:`not_a_dask_scheduler` (listeners that are not a
Dask scheduler), :func:`over_long_line` (``--stream``), :func:`lying_gzip` (a size that lies),
:func:`break_array_header` (an array header NumPy's tokenizer chokes on), :data:`NON_UTF8_LINE` and
:data:`SHORT_ENTITY_HEADER`; the field edits replace every scalar by ``[]``, ``{}`` and ``"x"`` too.
"""

from __future__ import annotations

import json
import random

import numpy as np

__all__ = ["HypothesisChooser", "RandomChooser", "model_members", "write_members", "mutate_bytes", "mutate_metadata",
           "mutate_array", "HOSTILE_VALUES", "MODEL_KINDS", "saved_model", "cipher_task", "NOT_A_SCHEDULER",
           "not_a_dask_scheduler", "NON_UTF8_LINE", "SHORT_ENTITY_HEADER", "over_long_line", "lying_gzip",
           "break_array_header", "commands_with"]

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


def write_members(path, members: dict, redigest: bool = True) -> None:
    """Write model-file members (``__meta__`` included) as an .npz. ``redigest`` recomputes the
    metadata's content digest, as a forger would: the file then passes the digest and only the
    kind's own field checks stand between it and a wrong answer — what the hostile tests test.
    ``redigest=False`` keeps the saved digest (a hand edit or damage: refused by the digest)."""
    from varorder.models.persist import content_digest

    members = dict(members)
    if redigest and "__meta__" in members:
        try:
            meta = json.loads(members["__meta__"].tobytes())
        except (ValueError, UnicodeDecodeError):
            meta = None
        if isinstance(meta, dict) and "sha256" in meta:
            arrays = {name: value for name, value in members.items() if name != "__meta__"}
            meta["sha256"] = content_digest(meta, arrays)
            members["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(path, **members)


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


# ---- tiny fitted models of every estimator that saves to a file ------------------------------

_PAIRS = [(["the", "house"], ["das", "haus"]), (["the", "book"], ["das", "buch"]),
         (["a", "book"], ["ein", "buch"]), (["a", "small", "house"], ["ein", "kleines", "haus"])]
_TAGS = [["D", "N", "V"], ["D", "J", "N", "V", "D", "N"], ["N", "V", "P", "D", "N"], ["N", "V"]]
_FEATURES = [[{"w=the": 1.0}, {"w=dog": 1.0}], [{"w=a": 1.0}, {"w=cat": 1.0}, {"w=runs": 1.0}]]
_LABELS = [["D", "N"], ["D", "N", "V"]]


def _rcm_task():
    rng = np.random.default_rng(0)
    xs = [rng.normal(size=(int(rng.integers(2, 5)), 3)) for _ in range(12)]
    ys = [rng.integers(0, 3, size=len(x)) for x in xs]
    return xs, ys


def _aligner(tmp):
    from varorder.agree.aligner import WordAligner

    model = WordAligner(model="hmm", iterations=2, ibm1_iterations=2).fit(_PAIRS)

    def use(m):
        links = m.align(_PAIRS)
        assert all(0 <= i < len(e) and 0 <= j < len(f) for (e, f), s in zip(_PAIRS, links) for i, j in s)
        forward, reverse = m.sentence_scores(_PAIRS)
        assert not np.isnan(forward).any() and not np.isnan(reverse).any()
        for method in ("grow-diag-final", "intersection"):
            m.align(_PAIRS, method=method)
    return model, use


def _samplerank(tmp):
    from varorder.factorgraph import SampleRankTagger

    model = SampleRankTagger(n_epochs=2, random_state=0).fit(_FEATURES, _LABELS)

    def use(m):
        predicted = m.predict(_FEATURES)
        assert [len(p) for p in predicted] == [len(x) for x in _FEATURES]
        assert all(label in m.classes_ for p in predicted for label in p)
    return model, use


def _loglinear(tmp):
    from varorder.loglinear.model import StructuredLogLinear

    rng = np.random.default_rng(5)
    text = tmp / "train.txt"
    text.write_text("\n".join(" ".join(rng.choice(["the", "cat", "sat", "on", "a"], size=rng.integers(2, 6)))
                              for _ in range(40)) + "\n")
    model = StructuredLogLinear(order=3, epochs=1, batch_size=20).fit(text).model_

    def use(m):
        perplexity = m.perplexity(["the cat sat", "a cat on the mat"])
        assert np.isfinite(perplexity) and perplexity >= 1.0 - 1e-9
    return model, use


def cipher_task(folder, sentences: int = 80, num_cipher: int = 20):
    """A tiny prepared ``varorder decipher`` task folder (four words, seeded) written to ``folder``."""
    from varorder.decipher import prepare, save

    rng = np.random.default_rng(0)
    corpus = [[["a", "b", "c", "d"][i] for i in rng.choice(4, size=int(rng.integers(1, 6)))] for _ in range(sentences)]
    save(prepare(corpus, num_words=4, num_cipher=num_cipher, seed=1), folder)
    return folder


def _decipherer(tmp):
    from varorder.decipher import Decipherer, prepare

    rng = np.random.default_rng(0)
    sentences = [[["a", "b", "c", "d"][i] for i in rng.choice(4, size=int(rng.integers(1, 6)))] for _ in range(80)]
    data = prepare(sentences, num_words=4, num_cipher=20, seed=1)
    model = Decipherer(order=1, inference="exact", n_iter=2).fit(data)
    model.words_ = data.words

    def use(m):
        mapping = m.decode_symbols()
        assert mapping.dtype.kind in "iu" and ((mapping >= 0) & (mapping < len(m.words_))).all()
        assert np.isfinite(m.emission_).all()
    return model, use


def _grammar(tmp):
    from varorder.grammar.induce import GrammarInducer

    model = GrammarInducer(model="product", n_iter=1).fit(_TAGS)

    def use(m):
        # the sentences this model's tags can spell (a forged file may rename a tag: another valid model)
        known = [s for s in _TAGS if set(s) <= set(m.tags_)] or [[m.tags_[0]] * 3]
        heads, spans = m.parse(known)
        assert len(heads) == len(spans) == len(known)
        assert np.isfinite(m.log_likelihood(known))
    return model, use


def _rcm(tmp):
    from varorder.contexts.model import ReifiedContextModel

    xs, ys = _rcm_task()
    model = ReifiedContextModel(num_labels=3, order=2, num_contexts=3, epochs=1).fit(xs, ys)

    def use(m):
        predicted = m.predict(xs)
        assert all(len(p) == len(x) and ((np.asarray(p) >= 0) & (np.asarray(p) < 3)).all()
                   for p, x in zip(predicted, xs))
    return model, use


def _neg(tmp):
    from varorder.neg.model import NegGenerator
    from varorder.neg.task import Candidate, NegDocument, Slot

    candidates = {"1": [Candidate("Ada Lovelace", "name-plain"), Candidate("she", "pron3-nom")]}
    slots = [Slot(j, j, "1", "she" if j % 2 else "Ada Lovelace", "pronoun" if j % 2 else "name", "nom", j, 0,
                  ["dep=nsubj"]) for j in range(4)]
    documents = [NegDocument("d", "bio", ["w"] * 4, [True] * 4, [0, 1, 2, 3], [0] * 4, slots, candidates)]
    model = NegGenerator(n_epochs=2).fit(documents)

    def use(m):
        chosen = m.predict_indices(documents)
        assert [len(c) for c in chosen] == [4] and all(0 <= k < 2 for k in chosen[0])

    return model, use


def _transducer(tmp):
    from varorder.transduce.model import AlignmentTransducer

    inputs = [["K", "AE", "T"], ["B", "AE", "T"], ["K", "AA", "R"], ["T", "AE", "B"]]
    outputs = ["cat", "bat", "car", "tab"]
    model = AlignmentTransducer(num_contexts=2, order=2, max_advance=2, hash_bits=10, epochs=1).fit(inputs, outputs)

    def use(m):
        assert all(isinstance(y, str) and set(y) <= set(m.codec_.letters) for y in m.predict(inputs))
    return model, use


_WORDS = [["the", "dog"], ["a", "cat", "runs"]]


def _tagger(kind):
    def build(tmp):
        from varorder.models.crf import CRF
        from varorder.models.hmm import HMM
        from varorder.models.memm import MEMM

        if kind == "HMM":
            model, inputs = HMM().fit(_WORDS, _LABELS), _WORDS
        else:
            model, inputs = {"CRF": CRF, "MEMM": MEMM}[kind](max_iterations=5).fit(_FEATURES, _LABELS), _FEATURES

        def use(m):
            given = inputs
            if kind != "HMM" and m.feature_names_ is None:  # a model of dense feature arrays (forged or not)
                given = [np.ones((len(x), m.n_features_in_)) for x in inputs]
            predicted = m.predict(given)
            assert [len(p) for p in predicted] == [len(x) for x in given]
            assert all(label in list(m.classes_) for p in predicted for label in p)
        return model, use
    return build


MODEL_KINDS = {"CRF": _tagger("CRF"), "MEMM": _tagger("MEMM"), "HMM": _tagger("HMM"), "WordAligner": _aligner,
               "SampleRankTagger": _samplerank, "LogLinearLM": _loglinear, "Decipherer": _decipherer,
               "GrammarInducer": _grammar, "ReifiedContextModel": _rcm, "NegGenerator": _neg,
               "AlignmentTransducer": _transducer}


def saved_model(kind: str, folder) -> tuple[type, object, object]:
    """(estimator class, ``use`` check, path) of a tiny fitted model of ``kind`` saved in ``folder``.

    ``use(model)`` exercises a loaded model on its training inputs and fails (AssertionError,
    or whatever the model raises) unless the outputs are valid and finite."""
    from pathlib import Path

    model, use = MODEL_KINDS[kind](Path(folder))
    path = Path(folder) / "model.npz"
    if kind == "Decipherer":
        model.save(path, model.words_)
    else:
        model.save(path)
    return type(model), use, path


# ---- targeted edits of every field of a model file (the contract of docs/model-files.md) --------

def _value_edits(value):
    """Replacements for one metadata value that keep it JSON but break its type, range or
    consistency: off by one, sign, NaN, other types (a scalar replaced by ``[]``, ``{}`` or ``"x"``:
    a forged ``random_state``), lists shortened, repeated or reordered."""
    if isinstance(value, bool):
        return [not value, 0, "true", None, [], {}]
    if isinstance(value, int):
        return [value + 1, value - 1, -1, 0, 2 ** 63, value + 0.5, str(value), "x", None, [], {}]
    if isinstance(value, float):
        return [value * 2 + 1, -value - 1, float("nan"), float("inf"), -1.0, "x", None, [], {}]
    if isinstance(value, str):
        return ["", value + "x", 3, None, [], {}]
    if isinstance(value, list):
        edits = [[], None, "x"]
        if value:
            edits += [value[:-1], value + value[-1:], value[::-1], [value[0]] * len(value),
                      [None] + value[1:], [""] + value[1:]]
        return edits
    if isinstance(value, dict):
        return [{}, None, [value]] + [{k: v for k, v in value.items() if k != key} for key in sorted(value)[:3]]
    return [0, "x", [], {}]


def _array_edits(array: np.ndarray):
    flat = array.reshape(-1)
    edits = [flat[:-1], np.concatenate([flat, flat[-1:]]) if flat.size else np.zeros(1, array.dtype), flat[::-1].copy()]
    if array.ndim == 2:
        edits.append(array.T.copy())
    for dtype in ("float16", "int32", "float32", "bool"):
        try:
            edits.append(array.astype(dtype))
        except (ValueError, TypeError):
            pass
    if array.dtype.kind in "fiu" and array.size:
        for value in (np.nan, -1, array.size, 1e6):
            changed = array.astype(np.float64) if (array.dtype.kind == "f" or value is np.nan) else array.copy()
            changed.flat[0] = value
            edits.append(changed)
    return [e.reshape(array.shape) if e.size == array.size and e.ndim == 1 and array.ndim > 1 and e.dtype != array.dtype
            else e for e in edits]


def field_edits(members: dict):
    """(label, members) for every targeted edit of every field of a model file: each key of
    ``params`` and ``state`` (values from :func:`_value_edits`, the key removed, an unknown key
    added) and each array (:func:`_array_edits`, the array removed)."""
    meta = json.loads(members["__meta__"].tobytes())
    for section in ("params", "state"):
        for key in sorted(meta.get(section) or {}) + [None]:
            options = [("unknown key", "__colour__", 1)] if key is None else \
                [(f"{key}={v!r:.30}", key, v) for v in _value_edits(meta[section][key])] + [(f"{key} removed", key, _DROP)]
            for label, name, value in options:
                edited = json.loads(json.dumps(meta))
                if value is _DROP:
                    del edited[section][name]
                else:
                    edited[section][name] = value
                out = dict(members)
                out["__meta__"] = np.frombuffer(json.dumps(edited).encode(), dtype=np.uint8)
                yield f"{section}.{label}", out
    for name in sorted(k for k in members if k != "__meta__"):
        for k, array in enumerate(_array_edits(members[name])):
            yield f"array {name} edit {k} ({array.dtype} {array.shape})", {**members, name: array}
        yield f"array {name} removed", {k: v for k, v in members.items() if k != name}


_DROP = object()


# ---- network inputs: addresses where something other than a Dask scheduler answers ---------------

NOT_A_SCHEDULER = ("http", "silent", "garbage", "closes")


def not_a_dask_scheduler(kind: str, lifetime: float = 120.0):
    """A context manager giving a ``tcp://127.0.0.1:PORT`` address (a port the OS chose) where something
    other than a Dask scheduler listens: ``"http"`` (an HTTP server: a dashboard port, ``python -m
    http.server``), ``"silent"`` (accepts and never sends), ``"garbage"`` (sends 8 bytes that read as a
    frame of exabytes) or ``"closes"`` (accepts and hangs up). The listener stops when the block ends,
    or by itself after ``lifetime`` seconds, so a test cannot leave it behind."""
    import contextlib
    import socket
    import threading
    import time

    from varorder.errors import ParameterError

    if kind not in NOT_A_SCHEDULER:
        raise ParameterError(f"kind must be one of {NOT_A_SCHEDULER}, got {kind!r}", name="kind", value=kind)

    @contextlib.contextmanager
    def listening():
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        server.settimeout(0.2)
        stop = threading.Event()
        deadline = time.monotonic() + lifetime
        held = []

        def answer(conn):
            conn.settimeout(0.2)
            if kind == "garbage":
                conn.sendall(b"\xff" * 8 + b"not dask")
            elif kind == "closes":
                conn.close()
                return
            request = b""
            while not stop.is_set() and time.monotonic() < deadline:
                try:
                    chunk = conn.recv(4096)
                except (socket.timeout, TimeoutError):
                    continue
                except OSError:
                    break
                if not chunk:
                    break
                request += chunk
                if kind == "http" and (b"\r\n\r\n" in request or len(request) > 8):
                    # answers whatever arrives, as a web server answers a bad request
                    body = b"<html>not here</html>"
                    conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: "
                                 + str(len(body)).encode() + b"\r\n\r\n" + body)
                    break
            conn.close()

        def serve():
            while not stop.is_set() and time.monotonic() < deadline:
                try:
                    conn, _ = server.accept()
                except (socket.timeout, TimeoutError):
                    continue
                except OSError:
                    break
                worker = threading.Thread(target=answer, args=(conn,), daemon=True)
                worker.start()
                held.append(worker)
            server.close()

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        try:
            yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
        finally:
            stop.set()
            thread.join(5)
            for worker in held:
                worker.join(5)

    return listening()


# ---- inputs of the other attacks, so the next command gets them by default ---------------------------

# bytes that are not UTF-8 inside an otherwise valid line (stdin under the C locale let them through)
NON_UTF8_LINE = b"the cat ||| le \xff\xfechat\n"
# a CorefUD header naming two fields: the entity type swallows the rest of every mention's fields
SHORT_ENTITY_HEADER = "# global.Entity = GRP-etype"


def over_long_line(valid: str, max_chars: int) -> str:
    """``valid`` repeated (space-separated) past ``max_chars`` characters: a line a ``--stream``
    command must answer with an empty line, the stream going on."""
    repeats = max_chars // (len(valid) + 1) + 2
    return " ".join([valid] * repeats)


def lying_gzip(text: str, tail: str = "\n") -> bytes:
    """Gzip bytes of ``text`` then ``tail`` as two members: the size recorded at the end of the file
    (what a reader may check before reading) is the small tail's, not the text's."""
    import gzip

    return gzip.compress(text.encode()) + gzip.compress(tail.encode())


def break_array_header(path, out, member: str | None = None) -> str:
    """Copy the model file ``path`` to ``out`` with one array's ``.npy`` header (``member``, default the
    first array) rewritten so that its brackets never close: NumPy's fallback header filter then raises
    ``tokenize.TokenError`` (a ReifiedContextModel file with flipped bytes did). Returns the member."""
    import struct
    import zipfile

    with zipfile.ZipFile(path) as source, zipfile.ZipFile(out, "w") as target:
        names = source.namelist()
        member = member or next(name for name in names if name != "__meta__.npy")
        for name in names:
            data = source.read(name)
            if name == member:
                header = b"{'descr': '<f8', 'fortran_order': False, 'shape': (3, ".ljust(118) + b"\n"
                length = struct.unpack("<H", data[8:10])[0]
                data = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + data[10 + length:]
            target.writestr(name, data)
    return member


def commands_with(group, has) -> list[str]:
    """The command lines ("tag train") of every command under the click ``group`` whose parameters
    satisfy ``has(params)``: how the hostile tests find each command an attack applies to, so that a
    command added later is attacked without being listed."""
    import click

    found = []

    def walk(command, words):
        if isinstance(command, click.Group):
            for name in sorted(command.list_commands(None)):
                walk(command.get_command(None, name), words + [name])
        elif has(command.params):
            found.append(" ".join(words))

    walk(group, [])
    return found
