"""The scikit-learn estimator checks a learner adapter is known to fail, each with its reason.

scikit-learn's :func:`~sklearn.utils.estimator_checks.parametrize_with_checks` and
:func:`~sklearn.utils.estimator_checks.check_estimator` take the checks an estimator is
expected to fail as a mapping ``{check name: reason}``. Each adapter of this package keeps its
own, next to its tags, in a ``_expected_failed_checks()`` method (it may depend on the
configuration: ``warm_start=True`` makes a second fit continue the first); this module reads
it, so a test suite runs every check and states why the remaining ones fail::

    @parametrize_with_checks(estimators, expected_failed_checks=expected_failed_checks)
    def test_sklearn_compatible(estimator, check):
        check(estimator)

This module imports nothing heavy.

Examples
--------
>>> from learners import XGBoostClassifier
>>> from learners.sklearn_checks import expected_failed_checks
>>> for check, reason in sorted(expected_failed_checks(XGBoostClassifier()).items()):
...     print(f"{check}: {reason}")
check_sample_weight_equivalence_on_dense_data: row and feature subsampling, and xgboost's \
weighted quantile sketch: a row of weight 2 is not the row repeated twice
check_sample_weight_equivalence_on_sparse_data: row and feature subsampling, and xgboost's \
weighted quantile sketch: a row of weight 2 is not the row repeated twice
check_supervised_y_2d: warm_start=True: the check's second fit continues training from the first
>>> sorted(expected_failed_checks(XGBoostClassifier(warm_start=False)))
['check_sample_weight_equivalence_on_dense_data', 'check_sample_weight_equivalence_on_sparse_data']
>>> expected_failed_checks(object())
{}
"""

from __future__ import annotations

from typing import Any

__all__ = ["WARM_START_REFIT", "expected_failed_checks", "input_tags_of"]

#: the reason of ``check_supervised_y_2d`` for a learner that continues training across fits:
#: the check fits one instance twice (1-D, then column-vector ``y``) and compares predictions
WARM_START_REFIT = {
    "check_supervised_y_2d": (
        "warm_start=True: the check's second fit continues training from the first"
    ),
}


def expected_failed_checks(estimator: Any) -> dict[str, str]:
    """The scikit-learn checks `estimator` is known to fail: ``{check name: one-line reason}``.

    Parameters
    ----------
    estimator : object
        An estimator instance; one without a ``_expected_failed_checks()`` method is expected
        to pass every check (an empty mapping).

    Returns
    -------
    dict of str to str
        A new dict, to pass (per estimator) as ``expected_failed_checks`` of
        :func:`~sklearn.utils.estimator_checks.check_estimator`.
    """
    declare = getattr(estimator, "_expected_failed_checks", None)
    return dict(declare()) if callable(declare) else {}


def input_tags_of(tags: Any, inner: Any) -> Any:
    """``tags`` (a wrapper's own) with the input tags and determinism of the estimator it
    wraps: what ``X`` may be (sparse, NaN, text, ...) is the inner model's to say. An inner
    object that is not a scikit-learn estimator leaves the defaults.

    Examples
    --------
    >>> from sklearn.ensemble import HistGradientBoostingClassifier
    >>> from sklearn.utils import get_tags
    >>> from learners import ClassAlignedClassifier
    >>> tags = get_tags(ClassAlignedClassifier(HistGradientBoostingClassifier()))
    >>> tags.input_tags.allow_nan
    True
    """
    import copy

    from sklearn.utils import get_tags

    try:
        own = get_tags(inner)
    except (AttributeError, TypeError):  # not a scikit-learn estimator: the defaults
        return tags
    tags.input_tags = copy.deepcopy(own.input_tags)
    tags.non_deterministic = own.non_deterministic
    return tags
