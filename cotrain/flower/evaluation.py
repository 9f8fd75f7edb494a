"""Consensus accuracy of a Flower federation on an evaluation set the sites share.

An in-process run scores the federation's prediction rule
(:func:`cotrain.federation.bookkeeping.aggregate`
of every client's latest predictions) on its evaluation data. A Flower server holds no
evaluation data, so the sites that hold the *same* one (a public test set, e.g.
``write_sites(..., eval_set=...)``) share it with the server:

- at the handshake, a sharing site reports ``eval-hash`` (:func:`eval_fingerprint` of its
  ``X_eval`` and ``y_eval``) and the evaluation labels (``eval-labels``);
- every round, it sends its predicted class codes on ``X_eval`` (the ``eval`` array record,
  :func:`codes_to_bytes`) and, with a soft consensus, its probabilities (``eval-proba``,
  float32).

The server reads them (:class:`SharedEvaluation`) and keeps, as in-process, the latest
predictions of every sharing site that answered, with the quality each released, in the one
:class:`~cotrain.federation.bookkeeping.RoundBookkeeping` that scores the run's prediction
rule in process too. The sites whose evaluation data agree are those with the most common
``(eval-hash, labels)``.

A site shares only public test data: ``share-eval`` in its ``site.toml`` (default: true
unless the site has a ``[privacy]`` mechanism). A private site never shares (its
predictions and labels are outside its ε): the consensus accuracy then covers only the
sharing sites, where the in-process one covers every client.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any

import numpy as np

from cotrain.federation.bookkeeping import Predictions
from cotrain.flower import protocol


def eval_fingerprint(X_eval: np.ndarray, y_eval: np.ndarray) -> str:
    """SHA-256 of an evaluation set's features and labels (dtypes, shapes and bytes).

    Examples
    --------
    >>> X, y = np.zeros((2, 3)), np.array([0, 1])
    >>> eval_fingerprint(X, y) == eval_fingerprint(X.copy(), y.copy())
    True
    >>> eval_fingerprint(X, y) == eval_fingerprint(X, y[::-1])
    False
    """
    digest = hashlib.sha256()
    for values in (np.ascontiguousarray(X_eval), np.ascontiguousarray(y_eval)):
        digest.update(f"{values.dtype.str}|{values.shape}|".encode())
        digest.update(values.tobytes())
    return digest.hexdigest()


def codes_dtype(n_classes: int) -> np.dtype:
    """The smallest unsigned integer type that holds class codes ``0 … n_classes-1``.

    Examples
    --------
    >>> codes_dtype(10), codes_dtype(300)
    (dtype('uint8'), dtype('uint16'))
    """
    return np.dtype(np.uint8 if n_classes <= 256 else np.uint16 if n_classes <= 65536 else "<u4")


def codes_to_bytes(codes: np.ndarray, n_classes: int) -> bytes:
    """Predicted class codes as the bytes of an ``eval`` array record.

    Examples
    --------
    >>> data = codes_to_bytes(np.array([2, 0, 1]), 3)
    >>> data, codes_from_bytes(data, 3, 3).tolist()
    (b'\\x02\\x00\\x01', [2, 0, 1])
    """
    return np.asarray(codes).astype(codes_dtype(n_classes).newbyteorder("<")).tobytes()


def codes_from_bytes(data: bytes, n_classes: int, n_eval: int) -> np.ndarray:
    """The inverse of :func:`codes_to_bytes`; checks the length and the code range."""
    codes = np.frombuffer(data, dtype=codes_dtype(n_classes).newbyteorder("<")).astype(np.int64)
    if codes.shape != (n_eval,) or (codes >= n_classes).any():
        raise ValueError(f"eval codes must be {n_eval} codes below {n_classes}")
    return codes


def proba_from_bytes(data: bytes, n_classes: int, n_eval: int) -> np.ndarray:
    """Evaluation probabilities sent as little-endian float32 bytes, shape checked."""
    proba = np.frombuffer(data, dtype="<f4")
    if proba.size != n_eval * n_classes or not np.isfinite(proba).all():
        raise ValueError(f"eval probabilities must be {n_eval} x {n_classes} finite values")
    return proba.reshape(n_eval, n_classes).astype(np.float64)


class SharedEvaluation:
    """The server's view of the evaluation set its sites share.

    Parameters
    ----------
    sites : list of dict
        The handshake reports, by client index (sharing sites hold ``eval-hash`` and
        ``eval-labels``).
    classes : ndarray
        The run's global classes.

    Attributes
    ----------
    sites : list of int
        The client indices whose evaluation data agree (empty: nothing to score).
    y_codes : ndarray or None
        The evaluation labels as codes in ``classes`` (-2 for a label outside them).

    Examples
    --------
    >>> sites = [{"eval-hash": "a", "eval-labels": [0, 1]}, {}, {"eval-hash": "a",
    ...          "eval-labels": [0, 1]}]
    >>> shared = SharedEvaluation(sites, np.array([0, 1]))
    >>> shared.sites, shared.y_codes.tolist()
    ([0, 2], [0, 1])
    """

    def __init__(self, sites: list[dict[str, Any]], classes: np.ndarray) -> None:
        keys = {
            i: (str(s["eval-hash"]), tuple(s["eval-labels"]))
            for i, s in enumerate(sites)
            if "eval-hash" in s and "eval-labels" in s
        }
        self.n_classes = len(classes)
        self.sites: list[int] = []
        self.y_codes: np.ndarray | None = None
        if keys:
            common = Counter(keys.values()).most_common(1)[0][0]
            self.sites = [i for i, key in keys.items() if key == common]
            labels = np.asarray(common[1])
            codes = np.searchsorted(classes, labels).clip(0, len(classes) - 1)
            known = np.asarray(classes)[codes] == labels
            self.y_codes = np.where(known, codes, -2).astype(np.int64)

    def read(self, i: int, reply: Any) -> Predictions | None:
        """Site ``i``'s predictions from its round reply: a sharing site's only (None for
        another site, a reply without them, or a malformed one, whose previous
        predictions then stay in :class:`~cotrain.federation.bookkeeping.RoundBookkeeping`).

        Examples
        --------
        >>> shared = SharedEvaluation([{"eval-hash": "a", "eval-labels": [0, 1]}], np.array([0, 1]))
        >>> shared.read(0, object()) is None
        True
        """
        if i not in self.sites or self.y_codes is None:
            return None
        n_eval = len(self.y_codes)
        try:
            arrays = reply.content.array_records
            codes = codes_from_bytes(
                protocol.from_array(arrays[protocol.EVAL][protocol.PAYLOAD]), self.n_classes, n_eval
            )
            proba = None
            if protocol.EVAL_PROBA in arrays:
                data = protocol.from_array(arrays[protocol.EVAL_PROBA][protocol.PAYLOAD])
                proba = proba_from_bytes(data, self.n_classes, n_eval)
        except Exception:  # no predictions this round, or a broken reply
            return None
        return codes, proba
