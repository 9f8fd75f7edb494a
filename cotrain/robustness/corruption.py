"""Label corruption: noisy and Byzantine clients' private labels, for robustness experiments.

:func:`label_noise` flips an exact share of a client's labels to other classes (a careless
annotator); :func:`make_byzantine` gives a hostile client labels that are random, constant or
consistently wrong (the noisy and hostile clients of FedDS). Both poison a client's *training
data*; to make a client lie in its *messages* instead, wrap its model in
:class:`~cotrain.robustness.hostile.HostileClassifier`. Both are also importable from
:mod:`cotrain.partition`, next to the splitters whose parts they corrupt.

Labels may be any hashable values and come back in the caller's own values; randomness comes
from ``random_state`` (``None``, an int seed or a :class:`numpy.random.Generator`).

Examples
--------
>>> import numpy as np
>>> from cotrain.partition import iid
>>> from cotrain.robustness.corruption import label_noise
>>> y = np.repeat([0, 1], 50)
>>> first = iid(y, 2, random_state=0)[0]
>>> int((label_noise(y[first], 0.1, random_state=0) != y[first]).sum())
5
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from cotrain.datasets.labels import (
    RandomState,
    as_generator,
    check_label_array,
    label_codes,
    output_dtype,
)

__all__ = ["BYZANTINE_KINDS", "label_noise", "make_byzantine"]

#: The kinds of :func:`make_byzantine`.
BYZANTINE_KINDS = ("random", "constant", "permuted")


def label_noise(
    y: Any,
    rate: float,
    classes: Any = None,
    random_state: RandomState = None,
) -> np.ndarray:
    """Flip exactly ``round(rate * n)`` labels, each to a different class chosen uniformly.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Labels (any hashable values).
    rate : float
        Fraction of labels to flip, in ``[0, 1]``.
    classes : array-like, optional
        The label space; defaults to ``np.unique(y)``. Must contain every label of ``y`` and,
        when any label is flipped, at least two classes.
    random_state : None, int or numpy.random.Generator, default=None
        Seed or generator.

    Returns
    -------
    ndarray of shape (n_samples,)
        A copy of ``y`` (same values and dtype, widened only if a class given in ``classes``
        does not fit it) in which the chosen positions hold a class different from the
        original one, drawn uniformly from the other ``len(classes) - 1`` classes.

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.robustness.corruption import label_noise
    >>> y = np.array(["cat", "dog", "cat", "bird"] * 25)
    >>> noisy = label_noise(y, 0.2, random_state=0)
    >>> int((noisy != y).sum())
    20
    >>> noisy.dtype == y.dtype
    True
    """
    y = check_label_array(y)
    if isinstance(rate, bool) or not isinstance(rate, numbers.Real):
        raise TypeError(f"rate must be a float in [0, 1], got {type(rate).__name__}")
    rate = float(rate)
    if not 0.0 <= rate <= 1.0:  # also rejects NaN
        raise ValueError(f"rate must be in [0, 1], got {rate!r}")
    classes, codes = label_codes(y, classes)
    rng = as_generator(random_state)
    n_flip = round(rate * y.size)
    out = y.astype(output_dtype(y, classes), copy=True)
    if n_flip == 0:
        return out
    n_classes = classes.size
    if n_classes < 2:
        raise ValueError("label_noise needs at least two classes to flip labels to")
    where = rng.choice(y.size, size=n_flip, replace=False)
    shift = rng.integers(1, n_classes, size=n_flip)
    out[where] = classes[(codes[where] + shift) % n_classes]
    return out


def _derangement(n: int, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random permutation of ``range(n)`` with no fixed point (``n >= 2``)."""
    while True:  # rejection: succeeds with probability ~ 1/e per draw
        perm = rng.permutation(n)
        if not np.any(perm == np.arange(n)):
            return perm


def make_byzantine(
    y: Any,
    kind: str = "random",
    classes: Any = None,
    random_state: RandomState = None,
    *,
    constant: Any = None,
) -> np.ndarray:
    """Labels for a hostile (Byzantine) client.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        The client's true labels.
    kind : {"random", "constant", "permuted"}, default="random"
        - ``"random"``: every label drawn uniformly from ``classes``, independently of ``y``;
        - ``"constant"``: every label is the same class, ``constant`` or one drawn at random;
        - ``"permuted"``: a fixed random derangement of the classes applied to ``y``, so every
          label is wrong but consistently so (a confident liar).
    classes : array-like, optional
        The label space; defaults to ``np.unique(y)``.
    random_state : None, int or numpy.random.Generator, default=None
        Seed or generator.
    constant : label, optional
        The class used by ``kind="constant"``; must be in ``classes``.

    Returns
    -------
    ndarray of shape (n_samples,)
        Labels in the caller's values (dtype of ``y`` where it can hold every class).

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.robustness.corruption import make_byzantine
    >>> y = np.array([0, 1, 2, 0, 1, 2])
    >>> bad = make_byzantine(y, "permuted", random_state=0)
    >>> bool((bad != y).all())
    True
    >>> make_byzantine(y, "constant", constant=2).tolist()
    [2, 2, 2, 2, 2, 2]
    """
    y = check_label_array(y)
    if kind not in BYZANTINE_KINDS:
        raise ValueError(f"kind must be one of {BYZANTINE_KINDS}, got {kind!r}")
    classes, codes = label_codes(y, classes)
    rng = as_generator(random_state)
    if constant is not None and kind != "constant":
        raise ValueError(f"constant is only used with kind='constant', got kind={kind!r}")
    out_dtype = output_dtype(y, classes)
    if kind == "random":
        new = rng.integers(0, classes.size, size=y.size)
    elif kind == "constant":
        if constant is None:
            code = int(rng.integers(0, classes.size))
        else:
            matches = [i for i, c in enumerate(classes.tolist()) if _same(c, constant)]
            if not matches:
                raise ValueError(f"constant must be one of the classes, got {constant!r}")
            code = matches[0]
        new = np.full(y.size, code, dtype=np.int64)
    else:  # permuted
        if classes.size < 2:
            raise ValueError("kind='permuted' needs at least two classes")
        new = _derangement(classes.size, rng)[codes]
    return np.asarray(classes[new]).astype(out_dtype, copy=False)


def _same(a: Any, b: Any) -> bool:
    """``a == b`` for two scalar labels, False where they cannot be compared."""
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False
