"""Public datasets and the FedCT paper's data splits.

Federated co-training needs three disjoint parts of a dataset: the clients' private *labeled*
data (all clients together; split further among clients with :mod:`cotrain.partition`), an
*unlabeled public pool* ``U`` that every client and the server hold, and a held-out *test* set.
This module loads the public tabular datasets of the FedCT paper (Abourayya et al.) and cuts
them the way the paper did:

===============  ===========  =====================  ======
dataset          public |U|   labeled (all clients)  test
===============  ===========  =====================  ======
breast_cancer    370          85                     114
wine_quality     4,100        136                    1,059
adult            10,000       31,073                 7,769
===============  ===========  =====================  ======

Breast cancer ships with scikit-learn. Wine quality and adult income are read from the shared
data folder (see :func:`~cotrain.datasets.paths.data_home`), because the machines that run this
project cannot download
anything.

Features are standardised with a :class:`~sklearn.preprocessing.StandardScaler` fitted on the
**public pool only** (:func:`~cotrain.datasets.splits.standardize_on_public`).

The pieces live in their own modules: the data folder (:mod:`~cotrain.datasets.paths`), the
exact-size split (:mod:`~cotrain.datasets.splits`) and the UCI readers
(:mod:`~cotrain.datasets.tabular`).

Examples
--------
>>> from cotrain.datasets.loaders import PAPER_SPLITS
>>> PAPER_SPLITS["breast_cancer"]
{'n_public': 370, 'n_labeled': 85, 'n_test': 114}
"""

from __future__ import annotations

import os
import warnings
from typing import Literal

import numpy as np
from sklearn.model_selection import train_test_split
from sklearn.utils import Bunch

from cotrain.datasets.splits import paper_split, standardize_on_public
from cotrain.datasets.tabular import load_adult, load_wine_quality

__all__ = [
    "PAPER_SPLITS",
    "load_breast_cancer_split",
    "load_digits_split",
    "load_paper_split",
]

#: The FedCT paper's tabular protocol (Table 3 and App. E: 5 clients, iid).
PAPER_SPLITS: dict[str, dict[str, int]] = {
    "breast_cancer": {"n_public": 370, "n_labeled": 85, "n_test": 114},
    "wine_quality": {"n_public": 4100, "n_labeled": 136, "n_test": 1059},
    "adult": {"n_public": 10000, "n_labeled": 31073, "n_test": 7769},
}


def load_digits_split(random_state: int = 0, n_test: int = 360, n_public: int = 700) -> Bunch:
    """scikit-learn's digits scaled to [0, 1], cut into test, public pool and labelled rows.

    Two stratified cuts: ``n_test`` test rows first, then ``n_public`` rows of the rest
    become the public pool U; the remaining rows (737 by default) are the labelled data
    to partition over clients. Used by ``examples/compare_methods.py`` and
    ``examples/privacy_utility.py``.

    Returns
    -------
    Bunch
        ``X_labeled``, ``y_labeled``, ``X_public``, ``y_public`` (hidden truth, for
        evaluation only), ``X_test``, ``y_test``.

    Examples
    --------
    >>> split = load_digits_split(random_state=0)
    >>> split.X_labeled.shape, split.X_public.shape, split.X_test.shape
    ((737, 64), (700, 64), (360, 64))
    """
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    X_rest, X_test, y_rest, y_test = train_test_split(
        X, y, test_size=n_test, stratify=y, random_state=random_state
    )
    X_lab, X_pub, y_lab, y_pub = train_test_split(
        X_rest, y_rest, test_size=n_public, stratify=y_rest, random_state=random_state
    )
    return Bunch(
        X_labeled=X_lab,
        y_labeled=y_lab,
        X_public=X_pub,
        y_public=y_pub,
        X_test=X_test,
        y_test=y_test,
    )


def load_breast_cancer_split(random_state: int | None = 0, standardize: bool = True) -> Bunch:
    """The FedCT paper's split of scikit-learn's Breast Cancer Wisconsin data.

    569 rows, 30 features, 2 classes (0 = malignant, 1 = benign): 370 rows form the public
    pool ``U``, 85 the labeled data of all clients together, 114 the test set (stratified).
    The data has no duplicate rows, so the paper's de-duplication changes nothing.

    Parameters
    ----------
    random_state : int or None, default=0
        Seed of the split.
    standardize : bool, default=True
        Standardise all parts with a scaler fitted on the public pool only.

    Returns
    -------
    sklearn.utils.Bunch
        The parts of :func:`~cotrain.datasets.splits.paper_split`, plus ``feature_names``,
        ``target_names``,
        ``description`` (a short summary), ``DESCR`` (scikit-learn's dataset card) and
        ``scaler`` (the fitted scaler, or ``None``).

    Examples
    --------
    >>> from cotrain.datasets.loaders import load_breast_cancer_split
    >>> d = load_breast_cancer_split(random_state=0)
    >>> d.X_public.shape, d.X_labeled.shape, d.X_test.shape
    ((370, 30), (85, 30), (114, 30))
    >>> d.target_names.tolist()
    ['malignant', 'benign']
    """
    from sklearn.datasets import load_breast_cancer

    raw = load_breast_cancer()
    sizes = PAPER_SPLITS["breast_cancer"]
    split = paper_split(raw.data, raw.target, random_state=random_state, **sizes)
    split.scaler = standardize_on_public(split) if standardize else None
    split.feature_names = np.asarray(raw.feature_names)
    split.target_names = np.asarray(raw.target_names)
    split.DESCR = raw.DESCR
    split.description = (
        "Breast Cancer Wisconsin (diagnostic), scikit-learn bundle: 569 rows, 30 features, "
        "labels 0=malignant / 1=benign. FedCT paper split: |U|=370 public (unlabeled), "
        "85 labeled (all clients together), 114 test; "
        + (
            "standardised with a scaler fitted on the public pool only."
            if standardize
            else "not standardised."
        )
    )
    return split


# --------------------------------------------------------------------------------------------
# the paper's protocol in one call
# --------------------------------------------------------------------------------------------


def _fit_sizes(sizes: dict[str, int], n: int, name: str) -> dict[str, int]:
    """Adapt the paper's sizes to ``n`` rows: shrink the labeled set first (documented rule)."""
    total = sum(sizes.values())
    if total <= n:
        return dict(sizes)
    shortfall = total - n
    fitted = dict(sizes)
    fitted["n_labeled"] = sizes["n_labeled"] - shortfall
    if fitted["n_labeled"] < 1:
        raise ValueError(
            f"load_paper_split({name!r}): the paper's sizes {sizes} need {total} rows but only "
            f"{n} are available"
        )
    warnings.warn(
        f"load_paper_split({name!r}): the paper's sizes need {total} rows but {n} remain after "
        f"preprocessing; keeping n_public={sizes['n_public']} and n_test={sizes['n_test']} and "
        f"shrinking n_labeled from {sizes['n_labeled']} to {fitted['n_labeled']}",
        UserWarning,
        stacklevel=3,
    )
    return fitted


def load_paper_split(
    name: str,
    data_home: str | os.PathLike[str] | None = None,
    random_state: int | None = 0,
    *,
    standardize: bool = True,
    adult_missing: Literal["drop", "category"] = "drop",
    sizes: dict[str, int] | None = None,
) -> Bunch:
    """Load one of the FedCT tabular datasets and split it as the paper did.

    Applies :func:`~cotrain.datasets.splits.paper_split` with the sizes in :data:`PAPER_SPLITS` and
    standardises all
    parts with a scaler fitted on the public pool only.

    Adult: dropping the rows with missing values (the default) leaves 45,222 rows, fewer than
    the paper's 10,000 + 31,073 + 7,769 = 48,842. The rule then is to keep the public pool and
    the test set at the paper's sizes and shrink the labeled set to the rest (27,453 rows; a
    :class:`UserWarning` says so). With ``adult_missing="category"`` the missing values become a
    category of their own and the paper's sizes are used exactly. The same rule applies to any
    dataset whose sizes do not fit.

    Parameters
    ----------
    name : {"breast_cancer", "wine_quality", "adult"}
        The dataset.
    data_home : str or path-like, optional
        The data folder (not needed for ``"breast_cancer"``); see
        :func:`~cotrain.datasets.paths.data_home`.
    random_state : int or None, default=0
        Seed of the split.
    standardize : bool, default=True
        Standardise with a scaler fitted on the public pool only.
    adult_missing : {"drop", "category"}, default="drop"
        How :func:`~cotrain.datasets.tabular.load_adult` treats missing values.
    sizes : dict, optional
        Override the paper's sizes (keys ``n_public``, ``n_labeled``, ``n_test``), e.g. a
        smaller public pool for a quick run.

    Returns
    -------
    sklearn.utils.Bunch
        The parts of :func:`~cotrain.datasets.splits.paper_split` plus ``feature_names``,
        ``classes`` (sorted label
        values), ``name``, ``sizes`` (the sizes used) and ``scaler``.

    Examples
    --------
    >>> from cotrain.datasets.loaders import load_paper_split
    >>> d = load_paper_split("breast_cancer", random_state=1)
    >>> len(d.y_public), len(d.y_labeled), len(d.y_test)
    (370, 85, 114)
    >>> w = load_paper_split("wine_quality")  # doctest: +SKIP
    >>> w.X_public.shape  # doctest: +SKIP
    (4100, 11)
    """
    if name not in PAPER_SPLITS:
        raise ValueError(
            f"load_paper_split: unknown dataset name={name!r}; expected one of "
            f"{sorted(PAPER_SPLITS)}"
        )
    if name == "breast_cancer":
        from sklearn.datasets import load_breast_cancer

        raw = load_breast_cancer()
        X, y, names = raw.data, raw.target, [str(f) for f in raw.feature_names]
    elif name == "wine_quality":
        X, y, names = load_wine_quality(data_home, target="color")
    else:
        X, y, names = load_adult(data_home, missing=adult_missing)
    wanted = dict(PAPER_SPLITS[name] if sizes is None else sizes)
    missing_keys = {"n_public", "n_labeled", "n_test"} - set(wanted)
    if missing_keys:
        raise ValueError(f"load_paper_split: sizes lacks {sorted(missing_keys)}")
    used = _fit_sizes(wanted, len(y), name)
    split = paper_split(X, y, random_state=random_state, **used)
    split.scaler = standardize_on_public(split) if standardize else None
    split.feature_names = list(names)
    split.classes = np.unique(y)
    split.name = name
    split.sizes = used
    return split
