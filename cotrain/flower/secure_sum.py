"""The exact integer sum of the sites' vectors under Flower's secure aggregation (SecAgg+).

Private sites each hold an integer vector — e.g. a teacher-vote histogram of shape
``(n_queries, n_classes)`` that already includes the site's share of integer (Skellam)
noise — and the ServerApp must learn only the sum over sites. :func:`secagg_sum` (in the
ServerApp) and :func:`secure_sum_handler` (in each site's ClientApp) get that sum *exactly*
through Flower's SecAgg+ protocol; no cryptography is written here.

Which Flower component does what
--------------------------------
- :class:`flwr.server.workflow.SecAggPlusWorkflow` (server side, run inside the ServerApp
  by :func:`secagg_sum`) drives the four stages over the Grid, each a ``train`` message
  per site: *setup* (the parameters below; each site answers with two public keys),
  *share keys* (relays the public keys; each site answers with Shamir shares of its mask
  seed and of its first secret key, encrypted for each neighbour), *collect masked
  vectors* (forwards those ciphertexts; each site answers with its masked, quantised
  vector) and *unmask* (asks the survivors for the shares that remove the masks). It sums
  the masked vectors modulo ``modulus_range``, removes the masks, dequantises and hands a
  legacy ``Strategy`` only the aggregate.
- :func:`flwr.client.mod.secaggplus_mod` (client side, run at the site by
  :func:`secure_sum_handler`) generates the keys (``flwr.supercore.primitives``), the
  Shamir shares and the authenticated encryption
  (``flwr.common.secure_aggregation.crypto``) and the masks
  (``flwr.common.secure_aggregation.secaggplus_utils.pseudo_rand_gen``); it calls the
  site's own code once, in the *collect masked vectors* stage, and strips the plain
  vector from the reply before it leaves the site.
- This module only chooses parameters, adapts the site's vector to the legacy ``FitRes``
  the mod expects, checks what the site receives, and decodes the aggregate.

Exact integers
--------------
SecAgg+ was written for float model weights: a site's array ``x`` (times its weight
``w / max_weight``) is clipped to ``[-c, c]`` (``clipping_range``), mapped by
``q = (x + c) * Q / (2c)`` (``quantization_range`` ``Q``) and stochastically rounded;
the server dequantises the modular sum and divides by the summed weights, i.e. it gets a
weighted *mean*. :func:`exact_ranges` picks ``c = bound``, ``Q = 2 * bound`` and
``max_weight = 1`` with every site reporting weight 1, so for integers ``|v| <= bound``:

1. the weight factor is ``1.0`` and the quantiser ``Q / (2c)`` is ``1.0`` exactly, so
   ``q = v + bound`` is an integer in ``[0, 2 * bound]``: stochastic rounding adds
   nothing (it only rounds down where ``ceil(q) - q > 0``) and nothing is clipped;
2. ``modulus_range`` ``M`` is a power of two above ``n * 2 * bound``, so neither the
   sum of the ``q`` nor the summed weights (``n * Q``) wrap modulo ``M``;
3. the server's dequantisation is ``sum(q) - n * bound = S`` (integers below 2**53, exact
   in float64), then multiplied by ``Q / (n * Q)``: the float mean ``S (1 + e) / n`` with
   ``|e| <= 2**-52``. :func:`secagg_sum` returns ``rint(n * mean)``, which is ``S``
   whenever ``|S| * 2**-50 < 1/2`` — always, since ``|S| <= n * bound < M <= 2**32``.

Each site checks the parameters the server sent it (1 and 2 above) before it contributes,
so a server cannot silently make the sum inexact.

What SecAgg+ (flwr 1.41) assumes and gives
------------------------------------------
- **Threat model: an honest-but-curious server.** A server that follows the protocol
  learns only the sum of the contributing sites' vectors (and which sites contributed),
  even together with fewer than ``reconstruction_threshold`` (``t``) colluding sites of a
  site's neighbourhood. The guarantee **holds only against a server that follows the
  protocol**: Flower relays the sites' public keys through the server without
  authenticating them, so a server that substitutes keys can unmask any site.
  :func:`secure_sum_handler` refuses two cheap deviations: being asked to contribute
  twice to the same ``query`` within a run (the difference of two sums over different
  sites would reveal a vector; across runs the site's own ledger must refuse), and an
  unmask request that names a site both alive and dropped, or names this site dropped
  (that would hand the server both secrets of one site). With ``t > num_shares / 2``
  (the default) no split of the neighbours gives it both secrets either.
- **Masks:** Flower expands each mask secret with ``pseudo_rand_gen``: it XOR-folds the
  secret into a 32-bit seed for numpy's Mersenne Twister. A site's masked vector stays
  hidden after the unmask stage only by its pairwise masks with its honest neighbours,
  each from such a 32-bit seed; with one or two honest neighbours that is within reach of
  a server willing to search 2**32 to 2**64 seeds. Prefer ``num_shares = n`` (the
  default) and more than a handful of sites.
- **Sharing:** each site's secrets are split into ``num_shares`` Shamir shares (one kept,
  one per neighbour: the sites are shuffled into a ring and each is joined to the
  ``num_shares // 2`` on either side; ``num_shares = n``, the default, joins everyone).
  Flower requires ``num_shares >= 3`` and, below ``n``, odd; and ``2 <= t <=
  num_shares``. A site answers the unmask stage only if at least ``t`` of its
  neighbours sent a masked vector, so the sum covers at least ``t`` sites; a site that
  needs more (the noise plan's minimum) sets ``min_sites`` in
  :func:`secure_sum_handler` and refuses a server whose ``t`` is lower.
- **Dropouts:** a site that does not send its masked vector is left out of the sum (its
  masks are removed with ``t`` shares of its key); the protocol completes while every site
  keeps at least ``t`` live neighbours (itself included) through the last stage: with
  ``num_shares = n`` that is up to ``n - t`` dropouts. Beyond that the workflow halts
  and :func:`secagg_sum` raises :class:`SecureSumError`. A site that fails *after*
  sending its masked vector is still in the sum. Dropouts are detected from error
  replies, or, with ``timeout``, from silence.
- **What the ServerApp sees:** public keys, ciphertexts it cannot read, masked vectors
  (each entry uniform modulo ``M`` — Flower draws masks in ``[0, M - 2]``), the shares
  that remove the masks, each site's constant weight (1) and empty metrics, the error
  replies of sites that dropped (fixed words from this module) and the aggregate.
  :func:`secagg_sum`'s caller gets only :class:`SecureSum`.
- **Noise:** a site's noise share is summed with the others'; colluding sites know and
  can subtract theirs, so the noise a privacy claim may count is that of the honest
  contributors only.

Examples
--------
The parameters that make SecAgg+ exact for ``|v| <= 2**20`` and 5 sites:

>>> exact_ranges(2**20, 5)
{'clipping_range': 1048576.0, 'quantization_range': 2097152, 'modulus_range': 4294967296, \
'max_weight': 1.0}

In a ServerApp, and in the ClientApp of every site (a sketch: ``votes`` stands for the
site's own code):

>>> def main(grid, context):  # doctest: +SKIP
...     nodes = list(grid.get_node_ids())
...     result = secagg_sum(grid, nodes, shape=(1000, 10), query="run-7/round-3")
...     result.total  # int64, shape (1000, 10): the sum over result.node_ids
>>> app = make_secure_sum_client_app(lambda config, context: votes(config))  # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_BOUND",
    "SecureSum",
    "SecureSumError",
    "SecureSumRefused",
    "exact_ranges",
    "is_secure_sum_message",
    "make_secure_sum_client_app",
    "secagg_sum",
    "secure_sum_handler",
]

_LOG = logging.getLogger("cotrain.secure_sum")

#: the default bound on every entry of a site's vector: ``|v| <= 2**20``
DEFAULT_BOUND = 2**20
#: the largest modulus Flower documents for SecAgg+ (its default)
_MAX_MODULUS = 2**32
#: quantised entries are cast to int32 by Flower: ``2 * bound`` must fit
_MAX_BOUND = 2**30 - 1
#: the fit-config keys this module sends to the sites
QUERY, SHAPE, BOUND = "secure-sum-query", "secure-sum-shape", "secure-sum-bound"
#: the site's own record (in its Flower Context) of the queries it contributed to
_SEEN = "cotrain.secure-sum"
#: the only words a site sends when it cannot contribute (its log has the reason)
REFUSED = "this site did not contribute to the secure sum; its own log has the reason"

VectorFn = Callable[[dict[str, Any], Any], Any]


class SecureSumError(RuntimeError):
    """The secure aggregation did not complete (too many sites dropped or refused)."""


class SecureSumRefused(RuntimeError):
    """Raised at a site that will not contribute; the server gets only fixed words."""


@dataclass(frozen=True)
class SecureSum:
    """What :func:`secagg_sum` returns.

    Attributes
    ----------
    total : ndarray of int64
        The exact sum of the vectors of the sites in ``node_ids``, in the requested shape.
    node_ids : tuple of int
        The sites whose vectors are in ``total`` (those that sent a masked vector).
    dropped : tuple of int
        The sites asked but not in ``total`` (they failed, refused or did not answer).
    failures : tuple of str
        The error replies the workflow collected (a site of this module sends fixed
        words; Flower lists a failure in the masked-vector stage twice).
    """

    total: np.ndarray
    node_ids: tuple[int, ...]
    dropped: tuple[int, ...]
    failures: tuple[str, ...] = ()


def exact_ranges(bound: int, n_sites: int, modulus_range: int = _MAX_MODULUS) -> dict[str, Any]:
    """SecAgg+ parameters under which integers ``|v| <= bound`` are summed exactly.

    Parameters
    ----------
    bound : int
        The largest absolute value of any entry of any site's vector (at least 1, below
        2**30: Flower casts quantised entries to int32).
    n_sites : int
        How many sites may contribute (the sum must not wrap modulo ``modulus_range``).
    modulus_range : int, default=2**32
        A power of two above ``n_sites * 2 * bound``, at most 2**32 (Flower's default and
        documented limit).

    Returns
    -------
    dict
        ``clipping_range`` (``float(bound)``), ``quantization_range`` (``2 * bound``),
        ``modulus_range`` and ``max_weight`` (1.0), the keyword arguments of
        :class:`flwr.server.workflow.SecAggPlusWorkflow` that the module docs prove exact.

    Raises
    ------
    ValueError
        If ``bound``, ``n_sites`` or ``modulus_range`` is out of range.

    Examples
    --------
    >>> exact_ranges(100, 3, modulus_range=1024)["quantization_range"]
    200
    >>> exact_ranges(2**20, 3000)
    Traceback (most recent call last):
    ...
    ValueError: 3000 sites with bound 1048576 can sum to 6291456000 >= modulus_range 4294967296
    """
    if not isinstance(bound, int | np.integer) or not 1 <= bound <= _MAX_BOUND:
        raise ValueError(f"bound must be an integer in [1, {_MAX_BOUND}], got {bound!r}")
    if not isinstance(n_sites, int | np.integer) or n_sites < 1:
        raise ValueError(f"n_sites must be a positive integer, got {n_sites!r}")
    modulus = int(modulus_range)
    if modulus <= 0 or modulus & (modulus - 1) or modulus > _MAX_MODULUS:
        raise ValueError(f"modulus_range must be a power of two <= 2**32, got {modulus_range!r}")
    span = 2 * int(bound)
    if int(n_sites) * span >= modulus:
        raise ValueError(
            f"{n_sites} sites with bound {bound} can sum to {int(n_sites) * span} "
            f">= modulus_range {modulus}"
        )
    return {
        "clipping_range": float(bound),
        "quantization_range": span,
        "modulus_range": modulus,
        "max_weight": 1.0,
    }


def _sharing(n: int, num_shares: int | None, threshold: int | None) -> tuple[int, int]:
    """``(num_shares, threshold)`` for ``n`` sites, checked as Flower needs them."""
    shares = n if num_shares is None else int(num_shares)
    if n < 3:
        raise ValueError(f"SecAgg+ in flwr needs at least 3 sites, got {n}")
    if not 3 <= shares <= n or (shares < n and shares % 2 == 0):
        raise ValueError(
            f"num_shares must be in [3, {n}] and odd below {n} (Flower's ring of "
            f"neighbours), got {num_shares!r}"
        )
    t = shares // 2 + 1 if threshold is None else int(threshold)
    if not 2 <= t <= shares:
        raise ValueError(f"reconstruction_threshold must be in [2, {shares}], got {threshold!r}")
    return shares, t


# ------------------------------------------------------------------- server side
def secagg_sum(
    grid: Any,
    node_ids: Sequence[int],
    *,
    shape: Sequence[int],
    query: str,
    bound: int = DEFAULT_BOUND,
    num_shares: int | None = None,
    reconstruction_threshold: int | None = None,
    modulus_range: int = _MAX_MODULUS,
    timeout: float | None = None,
    server_round: int = 1,
    config: Mapping[str, Any] | None = None,
) -> SecureSum:
    """The exact sum of the sites' integer vectors, through Flower's SecAgg+ workflow.

    Call it from a ServerApp's ``main`` (or from any code holding its Grid): it runs
    :class:`flwr.server.workflow.SecAggPlusWorkflow` over ``grid`` for the sites
    ``node_ids`` (four ``train`` messages each) with the parameters of
    :func:`exact_ranges`, and decodes the workflow's aggregate. The sites answer with
    :func:`secure_sum_handler`.

    Parameters
    ----------
    grid : flwr.serverapp.Grid
        The ServerApp's Grid.
    node_ids : sequence of int
        The SuperNodes to sum over (at least 3, distinct).
    shape : sequence of int
        The shape of every site's vector (public configuration, checked at the sites).
    query : str
        Names this sum (e.g. ``"<run token>/round-3"``): a site contributes to a query at
        most once per run.
    bound : int, default=2**20
        Every entry of every vector is in ``[-bound, bound]``; a site whose vector is not
        refuses (it never clips).
    num_shares : int, optional
        Shares per site secret (its neighbourhood size, itself included); default
        ``len(node_ids)``: every site is every site's neighbour.
    reconstruction_threshold : int, optional
        Shares that rebuild a secret (``t``); default ``num_shares // 2 + 1``.
    modulus_range : int, default=2**32
        The masks' modulus (see :func:`exact_ranges`).
    timeout : float, optional
        Seconds each stage waits for replies; a site silent that long has dropped.
        ``None`` waits for every reply (a failed site still answers with an error).
    server_round : int, default=1
        The messages' ``group_id``.
    config : mapping, optional
        More fit-config values sent to every site (e.g. the round), passed to the site's
        vector function with the query, shape and bound.

    Returns
    -------
    SecureSum
        The total (int64, ``shape``) and which sites it covers.

    Raises
    ------
    ValueError
        If the parameters cannot give an exact sum (see :func:`exact_ranges`) or break
        Flower's rules for ``num_shares`` and ``reconstruction_threshold``.
    SecureSumError
        If the workflow halted (some site kept fewer than ``t`` live neighbours).
    """
    from flwr.app import ArrayRecord, ConfigRecord, Context, RecordDict
    from flwr.server.client_manager import SimpleClientManager
    from flwr.server.compat.legacy_context import LegacyContext
    from flwr.server.workflow import SecAggPlusWorkflow
    from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, MAIN_PARAMS_RECORD, Key

    nodes = [int(n) for n in node_ids]
    if len(set(nodes)) != len(nodes):
        raise ValueError(f"node_ids must be distinct, got {nodes}")
    shares, threshold = _sharing(len(nodes), num_shares, reconstruction_threshold)
    ranges = exact_ranges(bound, len(nodes), modulus_range)
    dims = [int(d) for d in shape]
    shape_text = ",".join(map(str, dims))  # a legacy fit config holds scalars only
    fit_config = {**dict(config or {}), QUERY: str(query), SHAPE: shape_text, BOUND: int(bound)}
    strategy = _strategy_class()(nodes, fit_config)
    base = Context(run_id=0, node_id=0, node_config={}, state=RecordDict(), run_config={})
    context = LegacyContext(base, strategy=strategy, client_manager=SimpleClientManager())
    context.state.config_records[MAIN_CONFIGS_RECORD] = ConfigRecord(
        {Key.CURRENT_ROUND: int(server_round)}
    )
    context.state.array_records[MAIN_PARAMS_RECORD] = ArrayRecord()
    workflow = SecAggPlusWorkflow(
        # Flower turns a share count equal to the sample into the proportion 1.0 and
        # wants an int threshold below an int share count
        num_shares=1.0 if shares == len(nodes) else shares,
        reconstruction_threshold=1.0 if threshold == shares else threshold,
        timeout=timeout,
        **ranges,
    )
    workflow(grid, context)
    if strategy.result is None:
        raise SecureSumError(
            f"secure aggregation over {len(nodes)} sites halted: a site kept fewer than "
            f"reconstruction_threshold={threshold} live neighbours (num_shares={shares}); "
            "see Flower's log"
        )
    contributors, arrays, failures = strategy.result
    total = _decode(arrays, len(contributors), int(bound), dims)
    return SecureSum(
        total=total,
        node_ids=tuple(sorted(contributors)),
        dropped=tuple(sorted(set(nodes) - set(contributors))),
        failures=tuple(failures),
    )


def _decode(arrays: list[np.ndarray], n: int, bound: int, shape: list[int]) -> np.ndarray:
    """The integer sum from the workflow's aggregate (the mean of ``n`` vectors)."""
    if len(arrays) != 1:
        raise SecureSumError(f"the aggregate holds {len(arrays)} arrays, expected 1")
    scaled = np.asarray(arrays[0], dtype=np.float64) * n
    total = np.rint(scaled)
    if total.size and (
        float(np.max(np.abs(scaled - total))) > 0.25 or float(np.max(np.abs(total))) > n * bound
    ):  # cannot happen with the checked parameters: a wrapped or inexact sum
        raise SecureSumError("the aggregate is not an integer sum within n * bound")
    if list(total.shape) != shape:
        raise SecureSumError(f"the aggregate has shape {total.shape}, expected {tuple(shape)}")
    return total.astype(np.int64)


@cache
def _strategy_class() -> type:
    """The legacy Strategy the SecAgg+ workflow talks to: it asks exactly the given sites
    and keeps the aggregate (built on first use: Flower is imported only when a sum runs)."""
    from flwr.common import FitIns, parameters_to_ndarrays
    from flwr.server.client_proxy import ClientProxy
    from flwr.server.strategy import Strategy

    class NodeProxy(ClientProxy):
        """A site as the workflow knows it: only ``node_id`` is used."""

        def __init__(self, node_id: int) -> None:
            super().__init__(str(node_id))
            self.node_id = node_id

        def get_properties(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("secagg_sum talks to sites through the Grid only")

        get_parameters = fit = evaluate = reconnect = get_properties

    class SumStrategy(Strategy):
        def __init__(self, nodes: list[int], fit_config: dict[str, Any]) -> None:
            self.nodes, self.fit_config = nodes, fit_config
            self.result: tuple[list[int], list[np.ndarray], list[str]] | None = None

        def initialize_parameters(self, client_manager: Any) -> None:
            return None

        def configure_fit(self, server_round: int, parameters: Any, client_manager: Any) -> Any:
            return [(NodeProxy(n), FitIns(parameters, dict(self.fit_config))) for n in self.nodes]

        def aggregate_fit(self, server_round: int, results: Any, failures: Any) -> Any:
            # every FitRes carries the same aggregate: the workflow replaced each site's
            # (emptied) parameters with it
            arrays = parameters_to_ndarrays(results[0][1].parameters)
            contributors = [int(proxy.node_id) for proxy, _ in results]
            self.result = (contributors, arrays, [str(f) for f in failures])
            return None, {}

        def configure_evaluate(
            self, server_round: int, parameters: Any, client_manager: Any
        ) -> Any:
            return []

        def aggregate_evaluate(self, server_round: int, results: Any, failures: Any) -> Any:
            return None, {}

        def evaluate(self, server_round: int, parameters: Any) -> None:
            return None

    return SumStrategy


# --------------------------------------------------------------------- site side
def is_secure_sum_message(message: Any) -> bool:
    """Whether ``message`` is a stage of Flower's SecAgg+ protocol (route it to
    :func:`secure_sum_handler`); cotrain's own ``train`` messages are not."""
    from flwr.common.secure_aggregation.secaggplus_constants import RECORD_KEY_CONFIGS

    return bool(message.has_content() and RECORD_KEY_CONFIGS in message.content.config_records)


def secure_sum_handler(
    vector_fn: VectorFn, *, min_sites: int = 2, bound: int | None = None
) -> Callable[[Any, Any], Any]:
    """A ``train`` handler that answers :func:`secagg_sum` with this site's vector.

    It runs Flower's :func:`flwr.client.mod.secaggplus_mod` around ``vector_fn``, which is
    called once per sum, in the stage that collects the masked vectors. Before the site
    contributes, it checks that the server's SecAgg+ parameters sum integers exactly,
    that its reconstruction threshold is at least ``min_sites``, and that the site has
    not contributed to the same query in this run (the Flower Context keeps the queries);
    it checks the vector (integer dtype, the announced shape, every entry
    within the bound) and never clips. In the unmask stage it refuses a request that
    names a site both alive and dropped, or names this site dropped. A site that will not
    contribute raises :class:`SecureSumRefused` with fixed words (:data:`REFUSED`; its
    log has the reason), so the server counts it as a dropout and learns nothing from
    the text.

    Parameters
    ----------
    vector_fn : callable
        ``vector_fn(config, context) -> array of ints``: ``config`` is the dict the
        server sent (the ``secure-sum-query``, ``-shape`` and ``-bound`` keys and the
        ``config`` of :func:`secagg_sum`), ``context`` the site's Flower Context.
    min_sites : int, default=2
        The fewest sites this site's vector may be summed with (itself included): it
        refuses a server whose ``reconstruction_threshold`` is lower (Flower's client then
        unmasks only sums over at least that many sites).
    bound : int, optional
        This site's own bound (public configuration): it refuses a server that announces
        another. Without it, the server's bound is used, and a server that announces a
        small one would learn from the site's refusal that its vector exceeds it. Even
        with it, a refusal for a vector outside the bound depends on the data: choose a
        bound that the votes plus the noise share exceed with negligible probability.

    Returns
    -------
    callable
        ``handler(message, context) -> Message``, for ``ClientApp.train()``.

    Examples
    --------
    >>> handler = secure_sum_handler(lambda config, context: [1, 2, 3])
    >>> callable(handler)
    True
    """

    def handle(message: Any, context: Any) -> Any:
        from flwr.client.mod import secaggplus_mod

        _check_unmask_request(message)
        return secaggplus_mod(
            message, context, lambda m, c: _contribute(m, c, vector_fn, min_sites, bound)
        )

    return handle


def make_secure_sum_client_app(
    vector_fn: VectorFn, *, min_sites: int = 2, bound: int | None = None
) -> Any:
    """A ClientApp whose ``train`` messages are :func:`secagg_sum` stages.

    A site that also runs cotrain's rounds routes by content instead, in its one
    ``train`` handler: ``secure(msg, ctx) if is_secure_sum_message(msg) else
    handle_train(msg, ctx)`` with ``secure = secure_sum_handler(vector_fn)``.

    Parameters
    ----------
    vector_fn : callable
        As in :func:`secure_sum_handler`.
    min_sites : int, default=2
        As in :func:`secure_sum_handler`.
    bound : int, optional
        As in :func:`secure_sum_handler`.

    Returns
    -------
    flwr.clientapp.ClientApp

    Examples
    --------
    >>> type(make_secure_sum_client_app(lambda config, context: [0])).__name__
    'ClientApp'
    """
    from flwr.clientapp import ClientApp

    app = ClientApp()
    app.train()(secure_sum_handler(vector_fn, min_sites=min_sites, bound=bound))
    return app


def _check_unmask_request(message: Any) -> None:
    """Refuse an unmask request that would reveal both secrets of one site."""
    from flwr.common.secure_aggregation.secaggplus_constants import (
        RECORD_KEY_CONFIGS,
        Key,
        Stage,
    )

    configs = message.content.config_records.get(RECORD_KEY_CONFIGS, {})
    if configs.get(Key.STAGE) != Stage.UNMASK:
        return
    alive = set(configs.get(Key.ACTIVE_NODE_ID_LIST, []))
    dead = set(configs.get(Key.DEAD_NODE_ID_LIST, []))
    if alive & dead or message.metadata.dst_node_id in dead:
        _LOG.warning(
            "unmask request refused: sites %s named both alive and dropped, or this site "
            "(%s) named dropped",
            sorted(alive & dead),
            message.metadata.dst_node_id,
        )
        raise SecureSumRefused(REFUSED)


def _contribute(
    message: Any, context: Any, vector_fn: VectorFn, min_sites: int, own_bound: int | None
) -> Any:
    """The reply SecAgg+ masks: this site's vector as a legacy FitRes of weight 1."""
    import flwr.compat.common.recorddict_compat as compat
    from flwr.app import ConfigRecord, Message
    from flwr.common import Code, FitRes, Status, ndarrays_to_parameters
    from flwr.common.secure_aggregation.secaggplus_constants import RECORD_KEY_STATE

    config = dict(compat.recorddict_to_fitins(message.content, keep_input=True).config)
    setup = context.state.config_records[RECORD_KEY_STATE]
    bound, query = int(config[BOUND]), str(config[QUERY])
    if own_bound is not None and bound != own_bound:
        raise ValueError(f"the server announces bound {bound}, this site's bound is {own_bound}")
    shape = [int(d) for d in str(config[SHAPE]).split(",") if d]
    _check_setup(setup, bound, min_sites)  # public parameters: a clear error
    seen = context.state.config_records.get(_SEEN, {}).get("queries", [])
    if query in seen:
        _LOG.warning("secure sum %r refused: this site contributed to it already", query)
        raise SecureSumRefused(REFUSED)
    try:
        vector = _checked_vector(vector_fn(config, context), shape, bound)
    except Exception:
        _LOG.warning("secure sum %r: this site cannot contribute", query, exc_info=True)
        raise SecureSumRefused(REFUSED) from None
    # counted before it leaves the site: a sum the server later abandons still counts
    context.state.config_records[_SEEN] = ConfigRecord({"queries": [*seen, query]})
    fitres = FitRes(Status(Code.OK, ""), ndarrays_to_parameters([vector]), 1, {})
    return Message(compat.fitres_to_recorddict(fitres, keep_input=True), reply_to=message)


def _check_setup(setup: Mapping[str, Any], bound: int, min_sites: int) -> None:
    """The server's SecAgg+ parameters must give the exact sum (module docs, 1 and 2) over
    at least ``min_sites`` sites."""
    clip, span = float(setup["clipping_range"]), int(setup["target_range"])
    modulus, n = int(setup["mod_range"]), int(setup["sample_num"])
    if clip != bound or span != 2 * bound or float(setup["max_weight"]) != 1.0:
        raise ValueError(
            f"the server's SecAgg+ parameters (clipping_range={clip}, quantization_range="
            f"{span}, max_weight={setup['max_weight']}) do not sum integers within "
            f"±{bound} exactly: expected {bound}, {2 * bound} and 1.0"
        )
    if n * span >= modulus:
        raise ValueError(f"{n} sites with bound {bound} would wrap modulo {modulus}")
    if int(setup["threshold"]) < min_sites:
        raise ValueError(
            f"the server's reconstruction_threshold {setup['threshold']} would unmask sums "
            f"over fewer than this site's min_sites={min_sites} sites"
        )


def _checked_vector(values: Any, shape: list[int], bound: int) -> np.ndarray:
    """``values`` as int64 if it is an integer array of ``shape`` within ``±bound``."""
    vector = np.asarray(values)
    if not np.issubdtype(vector.dtype, np.integer):
        raise TypeError(f"the vector must hold integers, got dtype {vector.dtype}")
    if list(vector.shape) != shape:
        raise ValueError(f"the vector has shape {vector.shape}, expected {tuple(shape)}")
    if vector.size and (vector.max() > bound or vector.min() < -bound):  # before any cast
        raise ValueError(f"an entry is outside ±{bound} (this site does not clip)")
    return vector.astype(np.int64)
