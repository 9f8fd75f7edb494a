"""Server-side aggregation of parameter dictionaries: FedAvg's weighted mean and
DP-FedAvg's clip-and-noise sum.

Pure numpy on ``{name: array}`` dictionaries (the trainable parameters a torch learner's
``get_weights`` returns); :class:`~cotrain.baselines.FedAvg` and
:class:`~cotrain.baselines.DPFedAvg` call these once per round.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["average_weights", "dp_aggregate"]


def _check_same_keys(weights: Sequence[Mapping[str, Any]], reference: Mapping[str, Any]) -> None:
    for i, w in enumerate(weights):
        if w.keys() != reference.keys():
            raise ValueError(
                f"weights[{i}] has parameters {sorted(w)}, expected {sorted(reference)}"
            )
        for k, v in w.items():
            if np.shape(v) != np.shape(reference[k]):
                raise ValueError(
                    f"weights[{i}][{k!r}] has shape {np.shape(v)}, "
                    f"expected {np.shape(reference[k])}"
                )


def average_weights(
    weights: Sequence[Mapping[str, Any]], counts: Sequence[float] | np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Average parameter dictionaries, weighted by sample counts (FedAvg's server step).

    Parameters
    ----------
    weights : sequence of dict of str to ndarray
        One ``{name: array}`` per client, all with the same names and shapes.
    counts : sequence of float, optional
        Client weights (their numbers of training examples); None averages uniformly.

    Returns
    -------
    dict of str to ndarray of float32
        ``Σ_i n_i w_i / Σ_i n_i`` per parameter, computed in float64.

    Examples
    --------
    >>> import numpy as np
    >>> a, b = {"w": np.array([0.0, 4.0])}, {"w": np.array([4.0, 0.0])}
    >>> average_weights([a, b], counts=[1, 3])["w"].tolist()
    [3.0, 1.0]
    """
    if len(weights) == 0:
        raise ValueError("average_weights needs at least one set of weights")
    _check_same_keys(weights, weights[0])
    if counts is None:
        coef = np.full(len(weights), 1.0 / len(weights))
    else:
        coef = np.asarray(counts, dtype=np.float64)
        if coef.shape != (len(weights),) or (coef < 0).any() or coef.sum() <= 0:
            raise ValueError(
                f"counts must be {len(weights)} non-negative numbers with a positive sum"
            )
        coef = coef / coef.sum()
    return {
        k: sum(
            c * np.asarray(w[k], dtype=np.float64) for c, w in zip(coef, weights, strict=True)
        ).astype(np.float32)
        for k in weights[0]
    }


def _norm(update: Mapping[str, np.ndarray]) -> float:
    return math.sqrt(sum(float(np.sum(np.square(u, dtype=np.float64))) for u in update.values()))


def dp_aggregate(
    global_weights: Mapping[str, Any],
    local_weights: Sequence[Mapping[str, Any]],
    clip_norm: float,
    noise_multiplier: float,
    rng: np.random.Generator,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """DP-FedAvg server step: clip every client's update, sum, add noise, average.

    Each update ``Δ_i = w_i − w`` is scaled to L2 norm at most ``clip_norm`` (over all
    parameters together); Gaussian noise ``N(0, (noise_multiplier · clip_norm)²)`` is
    added to every coordinate of ``Σ_i Δ_i``, and the sum is divided by the number of
    clients ``k``: ``w ← w + (Σ_i clip(Δ_i) + z) / k``.

    Parameters
    ----------
    global_weights : dict of str to ndarray
        The weights the clients started from.
    local_weights : sequence of dict of str to ndarray
        The clients' weights after local training.
    clip_norm : float
        L2 bound C of one client's update.
    noise_multiplier : float
        σ: the noise's standard deviation is σ·C.
    rng : numpy.random.Generator
        Source of the noise.

    Returns
    -------
    weights : dict of str to ndarray of float32
        The new global weights.
    norms : ndarray of shape (k,)
        The clients' update norms before clipping.

    Examples
    --------
    >>> import numpy as np
    >>> w0 = {"w": np.zeros(2)}
    >>> new, norms = dp_aggregate(w0, [{"w": np.array([3.0, 4.0])}], 1.0, 0.0,
    ...                           np.random.default_rng(0))
    >>> new["w"].tolist(), norms.tolist()
    ([0.6000000238418579, 0.800000011920929], [5.0])
    """
    if len(local_weights) == 0:
        raise ValueError("dp_aggregate needs at least one client's weights")
    _check_same_keys(local_weights, global_weights)
    base = {k: np.asarray(v, dtype=np.float64) for k, v in global_weights.items()}
    total = {k: np.zeros_like(v) for k, v in base.items()}
    norms = []
    for local in local_weights:
        update = {k: np.asarray(local[k], dtype=np.float64) - base[k] for k in base}
        norm = _norm(update)
        norms.append(norm)
        scale = min(1.0, clip_norm / norm) if norm > 0 else 1.0
        for k in total:
            total[k] += scale * update[k]
    std = noise_multiplier * clip_norm
    k_clients = len(local_weights)
    new = {}
    for k, v in base.items():
        noise = rng.normal(0.0, std, size=v.shape) if std > 0 else 0.0
        new[k] = (v + (total[k] + noise) / k_clients).astype(np.float32)
    return new, np.asarray(norms)
