"""The scikit-learn estimator protocol for the sequence taggers, without depending on scikit-learn.

Parameters are the keyword arguments of ``__init__``, which only stores them (scikit-learn's
convention, so :func:`sklearn.base.clone` can rebuild an estimator from :meth:`get_params`).
``__sklearn_tags__`` is answered only when scikit-learn is installed (it is the optional extra
``sklearn``): the taggers take lists of sequences, not 2-d arrays, and predict sequences of labels,
so :class:`sklearn.model_selection.GridSearchCV` and ``cross_val_score`` split the list of
sequences and score with the estimator's own ``score`` (token accuracy).
"""

from __future__ import annotations

import inspect

__all__ = ["ParamsMixin"]


class ParamsMixin:
    """``get_params`` / ``set_params`` / ``__repr__`` from the ``__init__`` signature."""

    @classmethod
    def _get_param_names(cls) -> list[str]:
        signature = inspect.signature(cls.__init__)
        return sorted(p.name for p in signature.parameters.values()
                      if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL))

    def get_params(self, deep: bool = True) -> dict:
        """Constructor parameters by name (the estimators hold no nested estimators, so ``deep`` changes nothing)."""
        return {name: getattr(self, name) for name in self._get_param_names()}

    def set_params(self, **params):
        """Set constructor parameters; an unknown name raises ValueError. Returns self."""
        valid = set(self._get_param_names())
        for name, value in params.items():
            if name not in valid:
                raise ValueError(f"invalid parameter {name!r} for {type(self).__name__}; "
                                 f"valid parameters are {sorted(valid)}")
            setattr(self, name, value)
        return self

    def __repr__(self):
        defaults = {p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()}
        changed = [f"{k}={v!r}" for k, v in self.get_params().items() if defaults.get(k, inspect._empty) is not v
                   and defaults.get(k) != v]
        return f"{type(self).__name__}({', '.join(changed)})"

    def __sklearn_tags__(self):
        from sklearn.utils import Tags, TargetTags  # scikit-learn is only needed by its own callers

        tags = Tags(estimator_type=None, target_tags=TargetTags(required=getattr(self, "_requires_y", True)))
        # sequences of feature dicts: neither a 2-d array nor a plain string
        tags.input_tags.two_d_array = False
        tags.input_tags.dict = True
        tags.non_deterministic = False
        return tags
