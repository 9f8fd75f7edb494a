"""Cut a dataset into the three parts federated co-training needs, of exact sizes.

:func:`paper_split` draws the clients' private *labeled* rows, the unlabeled *public pool*
and the *test* set (stratified where it can be); :func:`standardize_on_public` then fits a
:class:`~sklearn.preprocessing.StandardScaler` on the public pool only and applies it to all
three parts: the pool is shared by everybody, so its statistics may inform a shared
preprocessing step, whereas the clients' private data must never leave them, not even as
means and variances.

Examples
--------
>>> import numpy as np
>>> from cotrain.datasets.splits import paper_split, standardize_on_public
>>> X = np.arange(40.0).reshape(20, 2)
>>> s = paper_split(X, np.repeat([0, 1], 10), n_labeled=4, n_public=10, n_test=6,
...                 random_state=0)
>>> scaler = standardize_on_public(s)
>>> np.allclose(s.X_public.mean(axis=0), 0.0)
True
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.utils import Bunch

__all__ = ["paper_split", "standardize_on_public"]


def _can_stratify(y: np.ndarray, n_first: int, n_second: int) -> bool:
    """Whether a stratified split of ``y`` into sizes ``n_first``/``n_second`` is possible."""
    _, counts = np.unique(y, return_counts=True)
    n_classes = len(counts)
    return n_classes > 1 and counts.min() >= 2 and n_first >= n_classes and n_second >= n_classes


def _split(
    idx: np.ndarray,
    y: np.ndarray,
    n_first: int,
    n_second: int,
    rng: np.random.RandomState,
    stratify: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Split ``idx`` into two disjoint index arrays of exact sizes ``n_first``, ``n_second``."""
    seed = rng.randint(np.iinfo(np.int32).max)
    if n_first == 0 or n_second == 0:
        perm = np.random.RandomState(seed).permutation(idx)
        return perm[:n_first], perm[n_first : n_first + n_second]
    strat = None
    if stratify:
        if _can_stratify(y[idx], n_first, n_second):
            strat = y[idx]
        else:
            warnings.warn(
                "paper_split: a stratified split is impossible here (a class has fewer than "
                "2 members, or a part is smaller than the number of classes); "
                "splitting without stratification",
                UserWarning,
                stacklevel=3,
            )
    a, b = train_test_split(
        idx, train_size=n_first, test_size=n_second, random_state=seed, stratify=strat
    )
    return np.asarray(a), np.asarray(b)


def _take(X: Any, idx: np.ndarray) -> Any:
    if isinstance(X, pd.DataFrame | pd.Series):
        return X.iloc[idx]
    return X[idx]


def paper_split(
    X: Any,
    y: Any,
    *,
    n_labeled: int,
    n_public: int,
    n_test: int,
    random_state: int | np.random.RandomState | None = None,
    stratify: bool = True,
) -> Bunch:
    """Cut a dataset into labeled (private), public (unlabeled) and test parts of exact sizes.

    The test set is drawn first, then the labeled set and the public pool from the rest (two
    calls of :func:`sklearn.model_selection.train_test_split`). Rows beyond
    ``n_labeled + n_public + n_test`` are left unused. Each split is stratified by ``y`` when
    ``stratify`` is true and stratification is possible (every class has at least two members
    and every part has at least one row per class); otherwise a :class:`UserWarning` is issued
    and the split is uniform.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Features (numpy array or pandas frame; frames are sliced with ``iloc``).
    y : array-like of shape (n_samples,)
        Labels.
    n_labeled : int
        Size of the labeled training data of all clients together.
    n_public : int
        Size of the unlabeled public pool ``U``.
    n_test : int
        Size of the test set.
    random_state : int, RandomState or None, default=None
        Seed of the split.
    stratify : bool, default=True
        Keep the class proportions in every part.

    Returns
    -------
    sklearn.utils.Bunch
        ``X_labeled, y_labeled, X_public, y_public, X_test, y_test`` and the row indices
        ``idx_labeled, idx_public, idx_test`` into the input. ``y_public`` is the hidden truth
        of the public pool, for evaluation only: a co-training run must not use it to train.

    Raises
    ------
    ValueError
        If a size is negative, if ``X`` and ``y`` have different lengths, or if the sizes add
        up to more rows than there are.

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.datasets.splits import paper_split
    >>> X = np.arange(200).reshape(100, 2)
    >>> y = np.repeat([0, 1], 50)
    >>> s = paper_split(X, y, n_labeled=20, n_public=50, n_test=30, random_state=0)
    >>> s.X_labeled.shape, s.X_public.shape, s.X_test.shape
    ((20, 2), (50, 2), (30, 2))
    >>> int(s.y_test.sum())
    15
    """
    for name, v in (("n_labeled", n_labeled), ("n_public", n_public), ("n_test", n_test)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer):
            raise TypeError(f"paper_split: {name} must be an int, got {type(v).__name__}")
        if v < 0:
            raise ValueError(f"paper_split: {name} must be >= 0, got {v}")
    y_arr = np.asarray(y)
    if y_arr.ndim != 1:
        raise ValueError(f"paper_split: y must be 1-dimensional, got shape {y_arr.shape}")
    n = len(y_arr)
    if len(X) != n:
        raise ValueError(f"paper_split: X has {len(X)} rows but y has {n}")
    total = n_labeled + n_public + n_test
    if total > n:
        raise ValueError(
            f"paper_split: n_labeled={n_labeled} + n_public={n_public} + n_test={n_test} "
            f"= {total} exceeds the {n} rows available"
        )
    rng = (
        random_state
        if isinstance(random_state, np.random.RandomState)
        else np.random.RandomState(random_state)
    )
    idx = np.arange(n)
    # test first; the rest (labeled + public) from what remains
    idx_rest, idx_test = _split(idx, y_arr, n_labeled + n_public, n_test, rng, stratify)
    idx_lab, idx_pub = _split(idx_rest, y_arr, n_labeled, n_public, rng, stratify)
    return Bunch(
        X_labeled=_take(X, idx_lab),
        y_labeled=_take(y, idx_lab) if isinstance(y, pd.Series) else y_arr[idx_lab],
        X_public=_take(X, idx_pub),
        y_public=_take(y, idx_pub) if isinstance(y, pd.Series) else y_arr[idx_pub],
        X_test=_take(X, idx_test),
        y_test=_take(y, idx_test) if isinstance(y, pd.Series) else y_arr[idx_test],
        idx_labeled=idx_lab,
        idx_public=idx_pub,
        idx_test=idx_test,
    )


def standardize_on_public(split: Bunch) -> StandardScaler:
    """Fit a scaler on the public pool only and apply it to all three parts (in place).

    Parameters
    ----------
    split : sklearn.utils.Bunch
        A split with ``X_labeled``, ``X_public`` and ``X_test`` (e.g. from :func:`paper_split`);
        the three parts are replaced by their standardised float arrays.

    Returns
    -------
    sklearn.preprocessing.StandardScaler
        The scaler, fitted on ``split.X_public``.
    """
    scaler = StandardScaler().fit(np.asarray(split.X_public, dtype=float))
    for part in ("X_labeled", "X_public", "X_test"):
        split[part] = scaler.transform(np.asarray(split[part], dtype=float))
    return scaler


# --------------------------------------------------------------------------------------------
# loaders
# --------------------------------------------------------------------------------------------
