"""What a site's SecAgg+ vector function asks its site for, and how the answer is read.

A light module (numpy and Flower only), shared by the relay ClientApp
(:mod:`cotrain.flower.relay`, which forwards the request to the site's warm worker) and
the in-process ClientApp (:mod:`cotrain.flower.client_app`): the request is the sum's
public config plus the reconstruction threshold the server set up in the SecAgg+ setup
stage (the site refuses one below its plan's ``min_sites``); the answer is
:func:`cotrain.flower.secure_site.secagg_share_reply`'s ``{"share": base64 int32, "shape": ...}``.
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np

__all__ = ["share_request", "share_vector"]


def share_request(config: dict[str, Any], context: Any) -> dict[str, Any]:
    """The request for this site's share: the sum's config and its SecAgg+ threshold."""
    from flwr.common.secure_aggregation.secaggplus_constants import RECORD_KEY_STATE

    setup = context.state.config_records[RECORD_KEY_STATE]
    return {**config, "threshold": int(setup["threshold"])}


def share_vector(reply: dict[str, Any]) -> np.ndarray:
    """The int64 vector of a share reply.

    Examples
    --------
    >>> data = base64.b64encode(np.array([1, -2], dtype="<i4").tobytes()).decode()
    >>> share_vector({"share": data, "shape": [1, 2]})
    array([[ 1, -2]])
    """
    rows, classes = (int(d) for d in reply["shape"])
    data = base64.b64decode(str(reply["share"]), validate=True)
    return np.frombuffer(data, dtype="<i4").astype(np.int64).reshape(rows, classes)
