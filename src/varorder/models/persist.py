"""Model files: one ``.npz`` holding the weight arrays plus a JSON metadata member (no pickle).

Layout: arrays under their own names and ``__meta__`` — UTF-8 JSON bytes stored as a
uint8 array — with ``format`` ("varorder-model"), ``format_version``, ``kind`` (estimator
class), ``params`` (constructor arguments) and ``state`` (small learned state such as
label names and feature names). Files are written atomically (temporary file in the
same directory, then ``os.replace``) and read with ``allow_pickle=False``; every
problem on load — truncation (zip CRC), wrong kind, newer format, missing or misshapen
array — is a FormatError naming the file.

Integrity: ``sha256`` in the metadata is a digest of every other metadata field and of every
array (name, dtype, shape, bytes). A consistent hand edit — ``params.order`` raised by one,
a list of tags reordered — passes every range and shape check yet changes the model's
output; the digest refuses it. It detects damage and edits, it is not a signature: a file
forged with its digest recomputed is left to the field checks of each kind (the contract
in docs/model-files.md). Files written before the digest existed (no ``sha256``) load
under the field checks alone.
"""

from __future__ import annotations

import functools
import json
import os
import struct
import tempfile
import tokenize
import zipfile
import zlib

import numpy as np

from varorder.errors import FormatError, ParameterError

__all__ = ["FORMAT_VERSION", "save_model", "load_model", "model_kind", "check_shapes", "check_labels", "check_keys",
           "model_loader", "content_digest", "templates_as_parameter"]

FORMAT_NAME = "varorder-model"
FORMAT_VERSION = 1
_META = "__meta__"
_DIGEST = "sha256"


def content_digest(meta: dict, arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 of a model's metadata (less its digest) and arrays, independent of zip layout
    and JSON spacing: canonical JSON, then each array's name, dtype, shape and C-order bytes."""
    import hashlib

    digest = hashlib.sha256()
    body = {key: value for key, value in meta.items() if key != _DIGEST}
    digest.update(json.dumps(body, sort_keys=True, separators=(",", ":"), default=_json_default).encode("utf-8"))
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        digest.update(f"\x00{name}\x00{array.dtype.str}\x00{array.shape}\x00".encode("utf-8"))
        digest.update(memoryview(array.reshape(-1).view(np.uint8)) if array.size else b"")
    return digest.hexdigest()


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot store {type(value).__name__} in model metadata")


def save_model(path, kind: str, params: dict, state: dict, arrays: dict[str, np.ndarray],
               compress: bool = True) -> None:
    """Write a model file atomically; ``compress=False`` stores the arrays uncompressed (faster to load)."""
    path = os.fspath(path)
    meta = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "kind": kind, "params": params, "state": state}
    payload = {name: np.asarray(value) for name, value in arrays.items()}
    if _META in payload:
        raise ParameterError(f"array name {_META!r} is reserved", name='arrays', value=arrays)
    # the JSON round trip first, so that the digest covers what load will read back (tuples as lists)
    meta = json.loads(json.dumps(meta, default=_json_default))
    meta[_DIGEST] = content_digest(meta, payload)
    payload[_META] = np.frombuffer(json.dumps(meta, default=_json_default).encode("utf-8"), dtype=np.uint8)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise ParameterError(f"{path}: cannot write: folder {directory!r} does not exist", name='path', value=path)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".npz", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            (np.savez_compressed if compress else np.savez)(handle, **payload)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; a saved model is an ordinary file
        os.replace(tmp, path)
    except BaseException as error:
        from varorder.io import naming_path

        if os.path.exists(tmp):
            os.unlink(tmp)
        raise naming_path(error, path, "the model file")


def model_kind(path) -> str:
    """The estimator kind recorded in a model file ("CRF", "MEMM", "HMM", …)."""
    _, meta = _read(path)
    return meta["kind"]


def load_model(path, kind: str, array_names) -> tuple[dict, dict, dict[str, np.ndarray]]:
    """(params, state, arrays) of a model file of the given kind."""
    members, meta = _read(path)
    if meta.get("kind") != kind:
        raise FormatError(f"{path}: holds a {meta.get('kind')!r} model, not a {kind!r}", path=path)
    missing = [name for name in array_names if name not in members]
    if missing:
        raise FormatError(f"{path}: model file lacks arrays {missing}", path=path)
    params, state = meta.get("params", {}), meta.get("state", {})
    for field, value in (("params", params), ("state", state)):
        if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
            raise FormatError(f"{os.fspath(path)}: model metadata field {field!r} must be a JSON object, got {value!r:.80}", path=os.fspath(path))
    return params, state, {name: members[name] for name in array_names}


def templates_as_parameter(path, params: dict, state: dict) -> dict:
    """A tagger's constructor parameters with its feature templates as the ``features`` parameter.

    Files written before varorder 0.3.0 recorded the templates the command line had applied
    as learned state (``feature_template``); they become the parameter, so such a model
    reads words, as it did from the command line.
    """
    legacy = state.get("feature_template")
    if legacy is None or params.get("features") is not None:
        return params
    if not isinstance(legacy, str):
        raise FormatError(f"{os.fspath(path)}: metadata 'feature_template' must be a string, got {legacy!r:.80}", path=os.fspath(path))
    return dict(params, features=legacy)


def model_loader(load):
    """Decorate an estimator's ``load(cls, path)`` so that metadata of the wrong type or
    shape (a string where a list belongs, a missing key, an unknown constructor argument)
    ends in a FormatError naming the file, like every other defect of a model file."""

    @functools.wraps(load)
    def checked(cls, path, *args, **kwargs):
        where = os.fspath(path)
        try:
            model = load(cls, path, *args, **kwargs)
            check = getattr(model, "_check_params", None)
            if check is not None:
                check()
        except (TypeError, KeyError, AttributeError, IndexError, OverflowError) as err:
            raise FormatError(f"{where}: malformed model metadata ({type(err).__name__}: {err})", path=where) from None
        except ValueError as err:
            if where in str(err):
                raise
            raise FormatError(f"{where}: invalid model ({err})", path=where) from None
        return model

    return checked


# what damaged bytes make zipfile and NumPy's header parser raise besides the above: a flipped
# compression method or encryption flag (NotImplementedError, RuntimeError), an array header whose
# brackets no longer close (tokenize.TokenError from NumPy's fallback header filter), a header that
# is no literal (SyntaxError)
_DAMAGED_ARCHIVE = (NotImplementedError, RuntimeError, SyntaxError, tokenize.TokenError, struct.error)


def _read(path) -> tuple[dict[str, np.ndarray], dict]:
    path = os.fspath(path)
    try:
        loaded = np.load(path, allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):  # a bare .npy array, not an archive
            raise FormatError(f"{path}: not a varorder model file (a single .npy array, not an .npz archive)", path=path)
        with loaded as archive:
            members = {name: archive[name] for name in archive.files}
    except FileNotFoundError:
        raise
    except (zipfile.BadZipFile, zlib.error, OSError, ValueError, EOFError, KeyError, *_DAMAGED_ARCHIVE) as err:
        raise FormatError(f"{path}: not a readable varorder model file ({type(err).__name__}: {err})", path=path) from None
    if _META not in members:
        raise FormatError(f"{path}: not a varorder model file (no {_META} member)", path=path)
    try:
        meta = json.loads(members.pop(_META).tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise FormatError(f"{path}: corrupted model metadata ({err})", path=path) from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise FormatError(f"{path}: not a varorder model file (format {meta.get('format') if isinstance(meta, dict) else meta!r})", path=path)
    version = meta.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION or version < 1:
        raise FormatError(f"{path}: model format version {version!r} is not supported (this varorder reads 1..{FORMAT_VERSION})", path=path)
    if _DIGEST in meta:
        try:
            matches = meta[_DIGEST] == content_digest(meta, members)
        except (TypeError, ValueError):
            matches = False
        if not matches:
            raise FormatError(f"{path}: field {_DIGEST!r}: the content does not match its digest — the file was "
                              f"damaged or edited after it was saved", path=path)
    return members, meta


# No learned weight or log-probability comes near this; a file that holds one was
# damaged or forged, and would overflow to NaN at prediction time.
MAX_WEIGHT_MAGNITUDE = 1e100


def check_shapes(path, arrays: dict[str, np.ndarray], shapes: dict[str, tuple], allow_neg_inf: bool = True) -> None:
    """Each array has its expected shape, a real numeric dtype, and finite plausible values.

    −inf (a log-probability of zero) is allowed unless ``allow_neg_inf`` is False; NaN,
    +inf and finite magnitudes above ``MAX_WEIGHT_MAGNITUDE`` are refused.
    """
    where = os.fspath(path)
    for name, shape in shapes.items():
        array = arrays[name]
        if array.dtype.kind not in "fiu" or array.dtype == np.float16:
            raise FormatError(f"{where}: array {name!r} has dtype {array.dtype}, expected real numbers", path=where)
        if array.shape != tuple(shape):
            raise FormatError(f"{where}: array {name!r} has shape {array.shape}, expected {tuple(shape)}", path=where)
        if array.dtype.kind != "f":
            continue
        if np.isnan(array).any():
            raise FormatError(f"{where}: array {name!r} contains NaN", path=where)
        if np.isposinf(array).any() or (not allow_neg_inf and np.isneginf(array).any()):
            raise FormatError(f"{where}: array {name!r} contains {'inf' if allow_neg_inf else 'an infinite value'}", path=where)
        finite = array[np.isfinite(array)]
        if finite.size and float(np.abs(finite).max()) > MAX_WEIGHT_MAGNITUDE:
            raise FormatError(f"{where}: array {name!r} holds a value of magnitude {float(np.abs(finite).max()):.3g}, "
                              f"beyond any trained model's (> {MAX_WEIGHT_MAGNITUDE:g}): the file is damaged", path=where)


def check_keys(path, section: str, mapping: dict, allowed) -> None:
    """Refuse keys of ``mapping`` (the metadata's ``params`` or ``state``) that the kind does not define:
    an unknown key is a file from another program or a typo, never something to ignore."""
    unknown = sorted(set(mapping) - set(allowed))
    if unknown:
        raise FormatError(f"{os.fspath(path)}: {section} field {unknown[0]!r} is not a field of this model kind "
                          f"(known: {', '.join(sorted(allowed))})", path=os.fspath(path))


def check_labels(path, name: str, labels, allow_none: bool = False) -> list:
    """A model's label or symbol list: a JSON list of distinct strings or of distinct
    integers (None if allowed)."""
    where = os.fspath(path)
    if labels is None and allow_none:
        return None
    if not isinstance(labels, list) or not all(
            isinstance(label, str) or (isinstance(label, int) and not isinstance(label, bool)) for label in labels):
        raise FormatError(f"{where}: metadata {name!r} must be a list of strings or integers, got {labels!r:.80}", path=where)
    if len({type(label) for label in labels}) > 1:
        raise FormatError(f"{where}: metadata {name!r} mixes strings and integers", path=where)
    if len(set(labels)) != len(labels):
        seen = set()
        duplicate = next(label for label in labels if label in seen or seen.add(label))
        raise FormatError(f"{where}: metadata {name!r} lists {duplicate!r} twice", path=where)
    return labels
