"""The pseudo-labelled pool P: its rows, their targets, and the training set D ∪ P.

A consensus labels the public pool U: hard codes ``(n_public,)`` with ``-1`` for abstain, or
soft targets ``(n_public, C)`` with NaN rows for abstain. P is the rows it labelled. Under a
soft consensus the training targets are 2-D, so a client's own labelled rows become one-hot.
Every trust (and the trainer, and the sensitivity search of :mod:`cotrain.audit`) builds its
training rows with these functions.
"""

from __future__ import annotations

import numpy as np

__all__ = ["pool_targets", "pseudo_labeled_rows", "with_pseudo_labels"]


def with_pseudo_labels(
    X: np.ndarray,
    y: np.ndarray,
    X_public: np.ndarray,
    pseudo: np.ndarray | None,
    classes: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Append the pseudo-labelled public rows P to a labelled set (D ∪ P).

    ``pseudo`` is ``None`` (no consensus yet), hard codes ``(n_public,)`` with ``-1``
    for abstain, or soft targets ``(n_public, C)`` with NaN rows for abstain. Soft
    targets give 2-D training targets, with the labelled rows one-hot.

    Examples
    --------
    >>> import numpy as np
    >>> X, y = np.zeros((1, 2)), np.array(["b"])
    >>> U = np.ones((3, 2))
    >>> Xp, yp = with_pseudo_labels(X, y, U, np.array([0, -1, 1]), np.array(["a", "b"]))
    >>> yp.tolist()
    ['b', 'a', 'b']
    """
    if pseudo is None:
        return X, y
    X_pool, y_pool = pseudo_labeled_rows(X_public, pseudo, classes)
    if y_pool.ndim == 2:  # soft targets: the labelled rows one-hot
        y = (y[:, None] == classes[None, :]).astype(np.float64)
    return np.concatenate([X, X_pool]), np.concatenate([y, y_pool])


def pseudo_labeled_rows(
    X_public: np.ndarray, pseudo: np.ndarray, classes: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The public rows that carry a pseudo-label (P), with their labels in ``classes``'
    values, or their soft targets as float64.

    Examples
    --------
    >>> import numpy as np
    >>> U = np.arange(3.0).reshape(3, 1)
    >>> rows, labels = pseudo_labeled_rows(U, np.array([1, -1, 0]), np.array(["a", "b"]))
    >>> rows.ravel().tolist(), labels.tolist()
    ([0.0, 2.0], ['b', 'a'])
    """
    if pseudo.ndim == 1:
        keep = pseudo >= 0
        return X_public[keep], classes[pseudo[keep]]
    keep = ~np.isnan(pseudo).any(axis=1)
    return X_public[keep], pseudo[keep].astype(np.float64)


def pool_targets(
    y: np.ndarray, pseudo: np.ndarray, classes: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The training targets of a site's rows and of the labelled pool rows.

    Parameters
    ----------
    y : ndarray of shape (n,)
        The site's labels (values from ``classes``).
    pseudo : ndarray
        The consensus: codes ``(n_public,)`` with -1 for abstain, or soft targets
        ``(n_public, C)`` with NaN rows for abstain.
    classes : ndarray
        The global classes.

    Returns
    -------
    labelled : ndarray of bool, shape (n_public,)
        The pool rows the consensus labelled.
    y_private : ndarray
        ``y``, or one-hot rows ``(n, C)`` under a soft consensus.
    y_pool : ndarray
        The labelled pool rows' targets: class values, or soft rows ``(m, C)``.

    Examples
    --------
    >>> import numpy as np
    >>> labelled, mine, pool = pool_targets(
    ...     np.array(["a", "b"]), np.array([1, -1, 0]), np.array(["a", "b"]))
    >>> labelled.tolist(), mine.tolist(), pool.tolist()
    ([True, False, True], ['a', 'b'], ['b', 'a'])
    >>> pool_targets(np.array(["b"]), np.array([[0.2, 0.8]]), np.array(["a", "b"]))[1]
    array([[0., 1.]])
    """
    if pseudo.ndim == 2:  # soft consensus: private rows one-hot
        labelled = ~np.isnan(pseudo).any(axis=1)
        one_hot = (y[:, None] == classes[None, :]).astype(np.float64)
        return labelled, one_hot, pseudo[labelled]
    labelled = pseudo >= 0
    return labelled, y, classes[pseudo[labelled]]
