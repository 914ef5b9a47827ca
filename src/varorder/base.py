"""The estimator convention every varorder class that learns from data follows.

scikit-learn's protocol (Pedregosa et al., JMLR 2011; Buitinck et al., "API design for
machine learning software", 2013), without depending on scikit-learn:

* ``__init__`` takes keyword-only parameters and only stores them, so
  :func:`sklearn.base.clone` rebuilds an estimator from :meth:`ParamsMixin.get_params`;
* parameters are checked when ``fit`` runs (:func:`check_int`, :func:`check_real`,
  :func:`check_choice`), each failure a :class:`~varorder.errors.ParameterError` that
  names the parameter and the value passed;
* ``fit`` returns ``self``; what it learns ends in ``_``;
* knobs that few callers set are grouped into a frozen options object (one constructor
  parameter, e.g. ``solver=``); a keyword moved into one keeps working for one release
  (default :data:`DEPRECATED`; :func:`options_with_deprecated` moves it in, with a
  FutureWarning);
* a method that needs a fitted model calls :func:`check_is_fitted`, which raises
  :class:`NotFittedError` (scikit-learn's class when scikit-learn is installed, else a
  class of the same name deriving from ``ValueError`` and ``AttributeError``, as
  scikit-learn's does); what is raised is also a :class:`~varorder.errors.VarorderError`.

``__sklearn_tags__`` is answered only when scikit-learn is installed (the optional extra
``sklearn``). This module imports nothing beyond the standard library and :mod:`varorder.errors` (scikit-learn only
when a NotFittedError is raised or asked for), so every layer may use it.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import numbers
import warnings

from varorder.errors import ParameterError, VarorderError


__all__ = ["DEPRECATED", "NotFittedError", "ParamsMixin", "check_bool", "check_choice", "check_deprecated",
           "check_int", "check_is_fitted", "check_real", "flat_params", "nested_params", "options_with_deprecated"]


class _NotFittedError(VarorderError, AttributeError):
    """Raised when a method that needs a fitted estimator is called before ``fit``."""


_NotFittedError.__name__ = _NotFittedError.__qualname__ = "NotFittedError"
_NotFittedError.__module__ = __name__


@functools.cache
def _not_fitted_error() -> type:
    """The class callers catch: scikit-learn's when it is installed (so that its own callers,
    cross_val_score and the like, recognise it), else varorder's own."""
    try:
        from sklearn.exceptions import NotFittedError
    except ImportError:
        return _NotFittedError
    return NotFittedError


@functools.cache
def _raised_not_fitted_error() -> type:
    """The class raised: a VarorderError that is also the class callers catch."""
    caught = _not_fitted_error()
    if caught is _NotFittedError:
        return _NotFittedError
    both = type("NotFittedError", (VarorderError, caught), {"__doc__": _NotFittedError.__doc__, "__module__": __name__})
    both.__qualname__ = "NotFittedError"
    return both


def __getattr__(name: str):
    # resolved on access: importing scikit-learn costs about a second, paid only by a
    # caller who names the class or hits the error
    if name == "NotFittedError":
        return _not_fitted_error()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check_is_fitted(estimator, attribute: str) -> None:
    """Raise NotFittedError unless ``estimator`` has the learned ``attribute``."""
    if getattr(estimator, attribute, None) is None:
        name = type(estimator).__name__
        raise _raised_not_fitted_error()(f"this {name} is not fitted yet: call fit() (or {name}.load) first")


def _invalid(owner, name: str, value, expected: str) -> ParameterError:
    return ParameterError(f"{type(owner).__name__}: parameter {name}={value!r} is invalid: expected {expected}",
                          name=name, value=value)


def check_int(owner, name: str, minimum: int | None = None, maximum: int | None = None, allow_none: bool = False):
    """``owner.<name>`` as an int in [minimum, maximum]; bools, floats and strings are refused."""
    value = getattr(owner, name)
    if value is None and allow_none:
        return None
    bounds = _bounds(minimum, maximum)
    expected = ("None or " if allow_none else "") + f"an integer{bounds}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _invalid(owner, name, value, expected)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise _invalid(owner, name, value, expected)
    return int(value)


def check_real(owner, name: str, minimum: float | None = None, maximum: float | None = None,
               exclusive_minimum: bool = False, allow_none: bool = False):
    """``owner.<name>`` as a finite float in the given range (NaN and ±inf are refused)."""
    value = getattr(owner, name)
    if value is None and allow_none:
        return None
    low = "" if minimum is None else (f" > {minimum}" if exclusive_minimum else f" >= {minimum}")
    high = "" if maximum is None else f" <= {maximum}"
    expected = ("None or " if allow_none else "") + "a finite number" + (low + (" and" if low and high else "") + high)
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise _invalid(owner, name, value, expected)
    if minimum is not None and (value <= minimum if exclusive_minimum else value < minimum):
        raise _invalid(owner, name, value, expected)
    if maximum is not None and value > maximum:
        raise _invalid(owner, name, value, expected)
    return float(value)


def check_choice(owner, name: str, choices) -> object:
    """``owner.<name>``, which must be one of ``choices``."""
    value = getattr(owner, name)
    if isinstance(value, str) or value is None:
        if value in choices:
            return value
    raise _invalid(owner, name, value, f"one of {tuple(choices)}")


def check_deprecated(owner, name: str, deprecated: dict) -> None:
    """A FutureWarning when ``owner.<name>`` is a value of ``deprecated`` (value → what to use
    instead): an option kept for one release only to reproduce earlier results."""
    value = getattr(owner, name)
    if isinstance(value, str) and value in deprecated:
        warnings.warn(f"{type(owner).__name__}: {name}={value!r} is deprecated and will be removed in the next "
                      f"release; {deprecated[value]}", FutureWarning, stacklevel=4)


#: the default of a keyword kept for one release beside the options object it moved to:
#: "not passed" (a string, as scikit-learn spells its own deprecated parameters' default)
DEPRECATED = "deprecated"


def _passed(value) -> bool:
    return not (isinstance(value, str) and value == DEPRECATED)


def options_with_deprecated(owner, name: str, options_type, moved=None, stacklevel: int = 3,
                            warn: bool = True) -> object:
    """``owner.<name>`` — an ``options_type`` (a frozen dataclass) or None for its defaults —
    with each keyword of ``moved`` (by default every field of ``options_type``: the keywords
    that moved into it) that was passed to the constructor (not :data:`DEPRECATED`)
    put in, with a FutureWarning (``stacklevel`` as :func:`warnings.warn`'s, counted from the
    caller) unless ``warn`` is False (a later call of a fitted estimator: fit told it once):
    the old spelling, kept for one release."""
    options = getattr(owner, name)
    if options is None:
        options = options_type()
    elif not isinstance(options, options_type):
        raise _invalid(owner, name, options, f"None or a {options_type.__name__}")
    if moved is None:
        moved = [field.name for field in dataclasses.fields(options_type)]
    passed = {key: getattr(owner, key) for key in moved if _passed(getattr(owner, key))}
    if passed and not warn:
        return dataclasses.replace(options, **passed)
    if passed:
        spelled = ", ".join(f"{key}={value!r}" for key, value in passed.items())
        warnings.warn(f"{type(owner).__name__}: the keyword(s) {', '.join(passed)} are deprecated and will be removed "
                      f"in the next release; pass {name}={options_type.__name__}({spelled})", FutureWarning,
                      stacklevel=stacklevel + 1)
        options = dataclasses.replace(options, **passed)
    return options


def flat_params(owner, name: str, options) -> dict:
    """``owner.get_params()`` with the options object ``name`` and the keywords that moved into
    it replaced by ``options``' fields (the resolved options): one flat dict of plain values, as a
    model file records them."""
    moved = {field.name for field in dataclasses.fields(options)}
    params = {key: value for key, value in owner.get_params().items() if key != name and key not in moved}
    return dict(sorted((params | dataclasses.asdict(options)).items()))


def nested_params(params: dict, name: str, options_type) -> dict:
    """The constructor's keywords for a flat dict of :func:`flat_params`: the fields of
    ``options_type`` found in ``params`` gathered into ``name=options_type(...)``."""
    moved = {field.name for field in dataclasses.fields(options_type)}
    options = options_type(**{key: value for key, value in params.items() if key in moved})
    return {key: value for key, value in params.items() if key not in moved} | {name: options}


def check_bool(owner, name: str) -> bool:
    """``owner.<name>`` as a bool (``True``/``False``, NumPy's, or the integers 0 and 1)."""
    value = getattr(owner, name)
    if type(value).__name__ not in ("bool", "bool_") and not (isinstance(value, numbers.Integral) and value in (0, 1)):
        raise _invalid(owner, name, value, "True or False")
    return bool(value)


def _bounds(minimum, maximum) -> str:
    if minimum is not None and maximum is not None:
        return f" in [{minimum}, {maximum}]"
    if minimum is not None:
        return f" >= {minimum}"
    return f" <= {maximum}" if maximum is not None else ""


class ParamsMixin:
    """``get_params`` / ``set_params`` / ``__repr__`` from the ``__init__`` signature."""

    @classmethod
    def _get_param_names(cls) -> list[str]:
        signature = inspect.signature(cls.__init__)
        return sorted(p.name for p in signature.parameters.values()
                      if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL))

    def get_params(self, deep: bool = True) -> dict:
        """Constructor parameters by name (no estimator nests another, so ``deep`` changes nothing)."""
        return {name: getattr(self, name) for name in self._get_param_names()}

    def set_params(self, **params):
        """Set constructor parameters; an unknown name raises ParameterError. Returns self."""
        valid = set(self._get_param_names())
        for name, value in params.items():
            if name not in valid:
                raise ParameterError(f"invalid parameter {name!r} for {type(self).__name__}; "
                                     f"valid parameters are {sorted(valid)}", name=name, value=value)
            setattr(self, name, value)
        return self

    def __repr__(self):
        defaults = {p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()}
        changed = []
        for k, v in self.get_params().items():
            default = defaults.get(k, inspect.Parameter.empty)
            try:
                same = default is v or bool(default == v)
            except (TypeError, ValueError):  # arrays and other values without a truth value
                same = False
            if not same:
                changed.append(f"{k}={v!r}")
        return f"{type(self).__name__}({', '.join(changed)})"

    def __sklearn_tags__(self):
        from sklearn.utils import Tags, TargetTags  # scikit-learn is only needed by its own callers

        tags = Tags(estimator_type=None, target_tags=TargetTags(required=getattr(self, "_requires_y", True)))
        # sequences (of feature dicts, words, sentences, ...): neither a 2-d array nor a plain string
        tags.input_tags.two_d_array = False
        tags.input_tags.dict = True
        tags.non_deterministic = False
        return tags
