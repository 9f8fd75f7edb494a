"""Clustered co-training: one consensus per group of clients that label alike.

Clustered Federated Learning (Sattler, thesis ch. 6) splits a federation whose clients
follow different conditional distributions ``p(y|x)`` (concept shift: one group relabels
the classes) into groups that can share one model, by recursively bi-partitioning the
clients on the cosine similarity of their weight updates. Co-training exchanges labels
on the public pool U instead of parameters, so here the same algorithm runs in label
space:

============================================  =============================================
thesis (parameter space)                      here (label space)
============================================  =============================================
cosine similarity ``α_ij`` of updates         similarity ``s_ij`` of the clients' labels on U:
                                              share of equal hard labels ("agreement"),
                                              ``1 - total variation`` ("tv") or the cosine of
                                              the flattened probability matrices ("cosine");
                                              for hard labels all three are the share of
                                              equal labels
optimal bi-partition (6.21), Alg. 9           :func:`bipartition`: cut the weakest edge of the
                                              maximum spanning tree of ``s`` (single linkage:
                                              the cut minimises the largest cross similarity)
``α_cross^max < α_cross^thresh`` (Alg. 12)    ``s_cross < max_cross`` (default 0.5: agreement
                                              ½ is cosine 0 under ``α = 2s - 1``; the
                                              thesis's γ_max rule (6.34) is
                                              ``max_cross = 1 - γ_max²``)
separation gap ``g(α) > 0`` (Cor. 2)          estimated gap ``intra - s_cross > min_gap``,
                                              intra: least similarity of a client to its
                                              closest partner on its side
                                              (:func:`separation_gap`); margin 0.1
                                              against sampling noise
``‖mean update‖ < ε1`` (6.28): FL is          ``drift <= stationary``: the share of U on which
stationary                                    the cluster's plain majority of this round's
                                              labels differs from the consensus it was sent
                                              (so no split in round 1, before any consensus)
``max_i ‖Δθ_i‖ > ε2`` (6.29)                  implied: ``s_cross < max_cross`` means some
                                              client disagrees with its cluster's consensus
gradients at the stationary point             labels on the *probe*: a share ``probe`` of U
                                              (evenly spaced positions) on which every
                                              consensus abstains, so no client trains on it
============================================  =============================================

Why a probe: a client that fits its private data plus the pseudo-labelled pool labels
the pool as the consensus it was sent (trees and nets interpolate their training set),
so after round 1 agreement on the whole of U says nothing about concept shift. On the
probe a client's labels are its own generalisation from ``D_i ∪ P``: a client whose
private labels contradict the consensus keeps disagreeing there (the label-space
``‖∇r_i(θ*)‖ > 0`` of an incongruent client), while congruent clients, even non-iid ones
that disagreed before co-training, come to agree. ``probe=0`` (the default) measures
on all of U. In practice (``benchmarks/clustered_cotraining.py``) a learner trained on a
pool several times its private data follows the pool on the probe too, so the defaults
split on round 1's local models (``stationary=None``), where concept shift is plain;
the price is that clients that are congruent but hold disjoint classes also disagree in
round 1 — for such federations set ``stationary`` and ``probe`` (the thesis's gate).

Clusters only split (as in CFL); each split is recursive within a round (a cluster is
bi-partitioned again while the criterion holds on a side), and later rounds may split
further. :func:`agreement_matrix`, :func:`bipartition` and :func:`cluster_clients` are
pure vectorised functions; :class:`AgreementClustering` holds the parameters and is
what ``FederatedCoTrainer(clustering=...)`` and :class:`cotrain.federation.server.CoTrainingServer`
take.

Examples
--------
>>> import numpy as np
>>> labels = np.array([[0, 1, 2, 0], [0, 1, 2, 1], [2, 0, 1, 2], [2, 0, 1, 2]])
>>> cluster_clients(labels, n_classes=3)
((0, 1), (2, 3))
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Real
from typing import Any

import numpy as np

__all__ = [
    "SIMILARITIES",
    "AgreementClustering",
    "agreement_matrix",
    "bipartition",
    "cluster_clients",
    "get_clustering",
    "separation_gap",
]

#: The similarity measures between two clients' labels on U.
SIMILARITIES = ("agreement", "tv", "cosine")


def agreement_matrix(
    labels: np.ndarray, n_classes: int | None = None, similarity: str = "agreement"
) -> np.ndarray:
    """Pairwise similarity of the clients' labels on the public pool.

    Parameters
    ----------
    labels : ndarray
        Hard codes ``(m, n)`` with -1 where a client gave no label, or probabilities
        ``(m, n, C)`` with all-NaN rows where it gave none.
    n_classes : int, optional
        Number of classes (hard codes; default: the largest code + 1).
    similarity : {"agreement", "tv", "cosine"}, default="agreement"
        "agreement": share of examples on which the two (argmax) labels are equal;
        "tv": ``1 - total variation`` of the two probability rows, averaged over the
        examples (``sum_c min(p_c, q_c)``); "cosine": cosine of the two flattened
        probability matrices. On hard labels (one-hot rows) all three equal "agreement".
        Examples only one client labelled are left out of that pair.

    Returns
    -------
    ndarray of shape (m, m)
        Symmetric, ones on the diagonal; 0 for a pair without a common labelled example.

    Examples
    --------
    >>> agreement_matrix(np.array([[0, 1, 1, 0], [0, 1, 0, 0], [1, 0, 0, 1]])).tolist()
    [[1.0, 0.75, 0.0], [0.75, 1.0, 0.25], [0.0, 0.25, 1.0]]
    >>> p = np.array([[[0.5, 0.5]], [[1.0, 0.0]]])
    >>> float(agreement_matrix(p, similarity="tv")[0, 1])
    0.5
    """
    if similarity not in SIMILARITIES:
        raise ValueError(f"similarity must be one of {SIMILARITIES}, got {similarity!r}")
    labels = np.asarray(labels)
    if labels.ndim == 3:
        valid = ~np.isnan(labels).any(axis=-1)  # (m, n)
        if similarity == "agreement":
            codes = np.where(valid, np.argmax(np.nan_to_num(labels, nan=-1.0), axis=-1), -1)
            return agreement_matrix(codes, labels.shape[-1])
        probs = np.where(valid[..., None], labels, 0.0).astype(np.float64)
    elif labels.ndim == 2:
        codes = labels.astype(np.int64)
        valid = codes >= 0
        c = int(codes.max(initial=-1)) + 1 if n_classes is None else int(n_classes)
        if similarity != "cosine":  # share of equal labels, class by class (no loop over U)
            equal = np.zeros((codes.shape[0],) * 2)
            for k in range(c):
                hit = (codes == k).astype(np.float64)
                equal += hit @ hit.T
            return _normalise(equal, valid)
        probs = (codes[..., None] == np.arange(c)).astype(np.float64)
    else:
        raise ValueError(
            f"labels must be (m, n) codes or (m, n, C) probabilities, got {labels.shape}"
        )
    if similarity == "cosine":
        flat = probs.reshape(len(probs), -1)
        norms = np.linalg.norm(flat, axis=1)
        dot = flat @ flat.T
        out = np.divide(
            dot, np.outer(norms, norms), out=np.zeros_like(dot), where=np.outer(norms, norms) > 0
        )
        np.fill_diagonal(out, 1.0)
        return out
    overlap = np.stack([np.minimum(p[None], probs).sum(axis=(1, 2)) for p in probs])
    return _normalise(overlap, valid)


def _normalise(total: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """``total / (examples both clients labelled)``, 0 where there is none, 1 on the
    diagonal."""
    both = valid.astype(np.float64) @ valid.T.astype(np.float64)
    out = np.divide(total, both, out=np.zeros_like(total), where=both > 0)
    np.fill_diagonal(out, 1.0)
    return out


def bipartition(similarity: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """The bi-partition that minimises the largest similarity across it (thesis 6.21).

    Algorithm 9 of the thesis (merge the most similar pairs until two groups remain) is
    single linkage: the two groups are the halves of the maximum spanning tree of
    ``similarity`` cut at its weakest edge, whose similarity is the largest one across.

    Parameters
    ----------
    similarity : ndarray of shape (m, m)
        Symmetric similarities, ``m >= 2``.

    Returns
    -------
    first, second : ndarray of int
        Positions of the two groups (sorted; ``first`` holds position 0).
    cross : float
        The largest similarity between the two groups.

    Examples
    --------
    >>> s = np.array([[1.0, 0.9, 0.1], [0.9, 1.0, 0.2], [0.1, 0.2, 1.0]])
    >>> first, second, cross = bipartition(s)
    >>> first.tolist(), second.tolist(), cross
    ([0, 1], [2], 0.2)
    """
    from scipy.sparse.csgraph import connected_components, minimum_spanning_tree

    s = np.asarray(similarity, dtype=np.float64)
    m = s.shape[0]
    if s.ndim != 2 or s.shape != (m, m) or m < 2:
        raise ValueError(f"similarity must be a square matrix of at least 2 clients, got {s.shape}")
    # distances > 0 (csgraph reads 0 as "no edge"); the MST of 3 - s is the max tree of s
    tree = minimum_spanning_tree(np.triu(3.0 - s, k=1)).tocoo()
    weakest = int(np.lexsort((tree.col, tree.row, -tree.data))[0])  # ties: first pair
    keep = np.ones(len(tree.data), dtype=bool)
    keep[weakest] = False
    from scipy.sparse import coo_matrix

    forest = coo_matrix((tree.data[keep], (tree.row[keep], tree.col[keep])), shape=(m, m))
    _, side = connected_components(forest, directed=False)
    first = np.flatnonzero(side == side[0])
    second = np.flatnonzero(side != side[0])
    return first, second, float(s[np.ix_(first, second)].max())


def separation_gap(similarity: np.ndarray, first: np.ndarray, second: np.ndarray) -> float:
    """Estimated separation gap (thesis Def. 3): similarity inside the groups minus the
    largest similarity across them.

    The thesis's ``α_intra^min`` is the least similarity of two clients that share a
    distribution, which needs the true groups. It is estimated here the single-linkage
    way: every client's similarity to its closest partner on its own side, least over
    the clients (a side of one client has no partner and is left out; with both sides
    single clients it is 1, a client agreeing with itself). The least pair inside a
    side would be wrong with three or more groups, where one side of the first cut
    still holds two groups.

    Examples
    --------
    >>> s = np.array([[1.0, 0.9, 0.1], [0.9, 1.0, 0.2], [0.1, 0.2, 1.0]])
    >>> round(separation_gap(s, np.array([0, 1]), np.array([2])), 6)
    0.7
    """
    s = np.asarray(similarity, dtype=np.float64)
    closest = []
    for side in (first, second):
        if len(side) > 1:
            inside = s[np.ix_(side, side)] - 3.0 * np.eye(len(side))  # not oneself
            closest.append(inside.max(axis=1))
    intra = float(np.concatenate(closest).min()) if closest else 1.0
    return intra - float(s[np.ix_(first, second)].max())


@dataclass(frozen=True, kw_only=True)
class AgreementClustering:
    """When and how a cluster of clients splits in clustered co-training.

    A cluster is bi-partitioned (:func:`bipartition` on :func:`agreement_matrix` of its
    answering clients' labels) when all of these hold (see the module's table for the
    thesis's criteria they translate):

    - its plain majority of this round's labels differs from the consensus the cluster
      was sent on at most ``stationary`` of U (co-training has settled; never in the first
      round of a cluster's consensus);
    - the largest similarity across the two sides is below ``max_cross``;
    - the estimated separation gap exceeds ``min_gap``;
    - each side holds at least ``min_size`` answering clients.

    Similarities are measured on the probe (``probe`` of U, left out of every
    consensus: see the module's notes). A side is split again while the last three
    hold. Clients of the cluster that did not answer this round go with the side
    holding more answering clients.

    Parameters
    ----------
    similarity : {"agreement", "tv", "cosine"}, default="agreement"
        How two clients' labels on U are compared (:func:`agreement_matrix`).
    max_cross : float, default=0.5
        Largest cross similarity at which a split is allowed (the thesis's
        ``α_cross^thresh``; 0.5 is cosine 0 under ``α = 2s - 1``). Raise it to separate
        groups whose label maps differ on only part of the classes (e.g. two swapped
        classes of ten: cross agreement about 0.8).
    min_gap : float, default=0.1
        Margin the estimated separation gap must exceed (Corollary 2 asks for > 0; the
        margin keeps sampling noise between alike clients from splitting them).
    stationary : float or None, default=None
        Largest drift (share of U) at which the cluster counts as settled (the thesis's
        ε1: split only at a stationary point of co-training; never in the first round).
        None (default): split whenever the other criteria hold, from round 1 on the local
        models' labels, which is where concept shift shows for learners that copy the
        pool's pseudo-labels (see the module's notes).
    min_size : int, default=1
        Fewest answering clients on each side of a split.
    probe : float, default=0.0
        Share of U (evenly spaced positions, :meth:`probe_mask`) on which every consensus
        abstains, so that clients' labels there are not copies of the pseudo-labels they
        trained on; the similarities and the drift are measured there (at most 0.5).
        0: no probe, all of U is labelled and compared, and one cluster gives exactly
        plain FedCT.

    Examples
    --------
    >>> rule = AgreementClustering(max_cross=0.6)
    >>> labels = np.array([[0, 1, 1, 0], [0, 1, 1, 0], [1, 0, 0, 1]])
    >>> rule.split(labels, np.array([4, 5, 9]), n_classes=2)
    ((4, 5), (9,))
    >>> AgreementClustering(min_gap=-2)
    Traceback (most recent call last):
    ...
    ValueError: AgreementClustering: min_gap must be in [-1, 1], got -2
    """

    similarity: str = "agreement"
    max_cross: float = 0.5
    min_gap: float = 0.1
    stationary: float | None = None
    min_size: int = 1
    probe: float = 0.0

    def __post_init__(self) -> None:
        name = type(self).__name__
        if not isinstance(self.similarity, str):
            raise TypeError(
                f"{name}: similarity must be a str, got {type(self.similarity).__name__}"
            )
        if self.similarity not in SIMILARITIES:
            raise ValueError(
                f"{name}: similarity must be one of {SIMILARITIES}, got {self.similarity!r}"
            )
        for field, low, high, none in (
            ("max_cross", -1.0, 1.0, False),
            ("min_gap", -1.0, 1.0, False),
            ("stationary", 0.0, 1.0, True),
            ("probe", 0.0, 0.5, False),
        ):
            value = getattr(self, field)
            if value is None and none:
                continue
            if isinstance(value, bool) or not isinstance(value, Real):
                raise TypeError(
                    f"{name}: {field} must be a number{' or None' if none else ''}, "
                    f"got {type(value).__name__}"
                )
            if not low <= value <= high:
                raise ValueError(f"{name}: {field} must be in [{low:g}, {high:g}], got {value!r}")
        if isinstance(self.min_size, bool) or not isinstance(self.min_size, int | np.integer):
            raise TypeError(f"{name}: min_size must be an int, got {type(self.min_size).__name__}")
        if self.min_size < 1:
            raise ValueError(f"{name}: min_size must be >= 1, got {self.min_size}")

    def probe_mask(self, n_public: int) -> np.ndarray | None:
        """The probe positions of a pool of ``n_public`` examples (None without a probe):
        ``ceil(probe * n_public)`` evenly spaced positions, at least one.

        Examples
        --------
        >>> np.flatnonzero(AgreementClustering(probe=0.25).probe_mask(8)).tolist()
        [0, 4]
        """
        if self.probe == 0:
            return None
        k = max(1, int(np.ceil(self.probe * n_public)))
        mask = np.zeros(n_public, dtype=bool)
        mask[(np.arange(k) * n_public) // k] = True
        return mask

    def split(
        self, labels: np.ndarray, ids: np.ndarray, n_classes: int | None = None
    ) -> tuple[tuple[int, ...], ...]:
        """Recursively bi-partition the clients ``ids`` by their labels (no stationarity
        check: the caller decides when a cluster may split).

        Parameters
        ----------
        labels : ndarray
            The clients' labels, ``(m, n)`` codes or ``(m, n, C)`` probabilities.
        ids : ndarray of int
            The client id of each row.
        n_classes : int, optional
            Number of classes.

        Returns
        -------
        tuple of tuple of int
            The groups of ids, each sorted, ordered by their smallest id.

        Examples
        --------
        >>> labels = np.array([[0, 1, 2, 0], [0, 1, 2, 0], [1, 2, 0, 1], [1, 2, 0, 1]])
        >>> AgreementClustering().split(labels, np.array([7, 3, 5, 1]), n_classes=3)
        ((1, 5), (3, 7))
        """
        return cluster_clients(
            labels,
            ids,
            n_classes=n_classes,
            similarity=self.similarity,
            max_cross=self.max_cross,
            min_gap=self.min_gap,
            min_size=self.min_size,
        )


def cluster_clients(
    labels: np.ndarray,
    ids: Any = None,
    *,
    n_classes: int | None = None,
    similarity: str = "agreement",
    max_cross: float = 0.5,
    min_gap: float = 0.1,
    min_size: int = 1,
) -> tuple[tuple[int, ...], ...]:
    """Bi-partition the clients recursively while the separation criterion holds.

    Parameters
    ----------
    labels : ndarray
        ``(m, n)`` hard codes (-1: no label) or ``(m, n, C)`` probabilities.
    ids : array-like of int, optional
        Client id of each row (default ``0 .. m-1``).
    n_classes : int, optional
        Number of classes.
    similarity, max_cross, min_gap, min_size
        As in :class:`AgreementClustering`.

    Returns
    -------
    tuple of tuple of int
        Groups of ids, each sorted, ordered by their smallest id; one group when no split
        is justified.

    Examples
    --------
    >>> labels = np.array([[0, 0, 1, 1], [0, 0, 1, 1], [1, 1, 0, 0], [1, 1, 0, 0]])
    >>> cluster_clients(labels)
    ((0, 1), (2, 3))
    >>> cluster_clients(labels[:2])  # they agree: no split
    ((0, 1),)
    """
    ids = np.arange(len(labels)) if ids is None else np.asarray(ids, dtype=np.int64)
    s = agreement_matrix(labels, n_classes, similarity)
    groups = _split(s, np.arange(len(ids)), max_cross, min_gap, min_size)
    out = [tuple(sorted(int(ids[k]) for k in g)) for g in groups]
    return tuple(sorted(out))


def _split(
    s: np.ndarray, rows: np.ndarray, max_cross: float, min_gap: float, min_size: int
) -> list[np.ndarray]:
    """Recursive bi-partition of ``rows`` (positions into ``s``)."""
    if len(rows) < 2 * min_size:
        return [rows]
    sub = s[np.ix_(rows, rows)]
    first, second, cross = bipartition(sub)
    if (
        min(len(first), len(second)) < min_size
        or cross >= max_cross
        or separation_gap(sub, first, second) <= min_gap
    ):
        return [rows]
    return [
        *_split(s, rows[first], max_cross, min_gap, min_size),
        *_split(s, rows[second], max_cross, min_gap, min_size),
    ]


def get_clustering(clustering: Any) -> AgreementClustering | None:
    """The clustering rule of a ``clustering=`` parameter: None, "agreement" (the defaults
    of :class:`AgreementClustering`) or an :class:`AgreementClustering`.

    Examples
    --------
    >>> get_clustering("agreement")
    AgreementClustering(similarity='agreement', max_cross=0.5, min_gap=0.1, stationary=None, \
min_size=1, probe=0.0)
    >>> get_clustering(None) is None
    True
    """
    if clustering is None or isinstance(clustering, AgreementClustering):
        return clustering
    if clustering == "agreement":
        return AgreementClustering()
    raise ValueError(
        f"clustering must be None, 'agreement' or an AgreementClustering, got {clustering!r}"
    )
