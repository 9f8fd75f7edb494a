"""Sparse ternary compression (STC) and top-k of weight updates (Sattler's thesis, ch. 3–4).

A client sends its weight update ``Δθ_i = θ_i − θ`` (its weights after local training
minus the global weights it started from) instead of its weights. With error
accumulation the client first adds its residual ``R_i`` (what earlier compressions left
out), compresses ``A_i = Δθ_i + R_i`` and keeps ``R_i ← A_i − decompress(message)``
(eqs. 3.8, 4.5). Per tensor (Algorithm 6), STC keeps the ``k = max(⌊n·p⌋, 1)`` entries
of largest magnitude, replaces each by ``±μ`` with ``μ`` the mean magnitude of the
kept entries, and codes the kept positions as Golomb-coded gaps with the thesis's
``b*`` (:mod:`cotrain.compression.golomb`), one sign bit each. The server averages the
decoded updates and, with ``downstream=True``, compresses the average plus its own
residual the same way before broadcasting it (eq. 4.6–4.8, Algorithm 7).

Message layouts (bytes, exact; ``len(message)`` is what the history records):

- :class:`SparseTernaryCompression`: one float32 ``μ`` per tensor (little-endian), then
  per tensor its codewords, each followed by a sign bit (1 = negative), zero-padded
  to a whole byte. The decoder knows the tensor shapes and ``p``, hence every ``k``.
- :class:`TopK`: the kept values as float32, then the Golomb-coded positions.

:class:`~cotrain.compression.CompressedExchange` holds one FedAvg run's state (client
residuals, server residual, which global model each client holds);
:class:`~cotrain.baselines.FedAvg` creates it when given ``compression=``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator

from cotrain.compression.golomb import (
    golomb_decode,
    golomb_encode,
    golomb_parameter,
    pack_bits,
    unpack_bits,
)

__all__ = ["SparseTernaryCompression", "TopK", "make_compression"]


def _check_fraction(value: Any, name: str, *, allow_none: bool = False) -> None:
    if allow_none and value is None:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float | np.floating)
        or not 0 < value <= 1
    ):
        raise ValueError(f"{name} must be a number in (0, 1], got {value!r}")


def _check_bool(value: Any, name: str) -> None:
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be True or False, got {value!r}")


def _as_arrays(update: Any, name: str) -> dict[str, np.ndarray]:
    if not isinstance(update, Mapping):
        raise TypeError(f"{name} must be a dict of parameter name to array, got {type(update)}")
    return {k: np.asarray(v, dtype=np.float64) for k, v in update.items()}


def _accumulate(update: Any, residual: Any) -> dict[str, np.ndarray]:
    acc = _as_arrays(update, "update")
    if residual is None:
        return acc
    res = _as_arrays(residual, "residual")
    if res.keys() != acc.keys():
        raise ValueError(f"residual has parameters {sorted(res)}, expected {sorted(acc)}")
    for k, v in acc.items():
        if res[k].shape != v.shape:
            raise ValueError(f"residual[{k!r}] has shape {res[k].shape}, expected {v.shape}")
        acc[k] = v + res[k]
    return acc


def _n_kept(n: int, sparsity: float) -> int:
    """k = max(⌊n·p⌋, 1), at most n (Algorithm 6)."""
    return min(n, max(math.floor(n * sparsity), 1)) if n else 0


def _top_k(flat: np.ndarray, k: int) -> np.ndarray:
    """Sorted indices of the k entries of largest magnitude."""
    if k >= flat.size:
        return np.arange(flat.size)
    idx = np.argpartition(-np.abs(flat), k - 1)[:k]
    return np.sort(idx)


class _Sparsifier(BaseEstimator):
    """What STC and top-k share: parameters, checks, selection, residual bookkeeping."""

    def __init__(
        self,
        sparsity: float = 0.01,
        residuals: bool = True,
        downstream: bool = True,
        sparsity_down: float | None = None,
    ) -> None:
        self.sparsity = sparsity
        self.residuals = residuals
        self.downstream = downstream
        self.sparsity_down = sparsity_down

    def check(self) -> None:
        """Raise ValueError/TypeError naming the parameter that is out of range."""
        _check_fraction(self.sparsity, "sparsity")
        _check_fraction(self.sparsity_down, "sparsity_down", allow_none=True)
        _check_bool(self.residuals, "residuals")
        _check_bool(self.downstream, "downstream")

    def _p(self, sparsity: float | None) -> float:
        self.check()
        if sparsity is not None:
            _check_fraction(sparsity, "sparsity")
            return float(sparsity)
        return float(self.sparsity)

    def compress(
        self,
        update: Mapping[str, Any],
        residual: Mapping[str, Any] | None = None,
        *,
        sparsity: float | None = None,
    ) -> tuple[bytes, dict[str, np.ndarray]]:
        """Compress ``update + residual``; return the message and the new residual.

        Parameters
        ----------
        update : dict of str to ndarray
            The weight update, one array per parameter tensor (in a fixed order that the
            receiver's ``shapes`` repeats).
        residual : dict of str to ndarray, optional
            Error accumulated by earlier compressions (None: zeros).
        sparsity : float, optional
            Overrides ``sparsity`` (the server uses ``sparsity_down``).

        Returns
        -------
        message : bytes
            The encoded message; ``len(message)`` is its exact size.
        residual : dict of str to ndarray of float64
            ``update + residual − decompress(message)``, or zeros when
            ``residuals=False``.
        """
        p = self._p(sparsity)
        acc = _accumulate(update, residual)
        message = self._encode(acc, p)
        decoded = self.decompress(message, {k: v.shape for k, v in acc.items()}, sparsity=p)
        if not self.residuals:
            return message, {k: np.zeros_like(v) for k, v in acc.items()}
        return message, {k: v - decoded[k] for k, v in acc.items()}

    def decompress(
        self, message: bytes, shapes: Mapping[str, Any], *, sparsity: float | None = None
    ) -> dict[str, np.ndarray]:
        """Decode a message into one float32 array per tensor of ``shapes``.

        Parameters
        ----------
        message : bytes
            As returned by :meth:`compress`.
        shapes : dict of str to tuple of int
            The tensors' shapes (or arrays of those shapes), in the sender's order.
        sparsity : float, optional
            The sparsity the message was compressed with (default ``sparsity``).

        Returns
        -------
        dict of str to ndarray of float32
        """
        p = self._p(sparsity)
        shapes = {
            k: tuple(np.shape(v)) if hasattr(v, "shape") else tuple(v) for k, v in shapes.items()
        }
        return self._decode(bytes(message), shapes, p)

    def _encode(self, acc: dict[str, np.ndarray], p: float) -> bytes:
        raise NotImplementedError

    def _decode(self, message: bytes, shapes: dict[str, tuple], p: float) -> dict[str, np.ndarray]:
        raise NotImplementedError


class SparseTernaryCompression(_Sparsifier):
    """Sparse ternary compression (STC, Sattler et al. 2019; thesis Algorithms 6 and 7).

    Per tensor of ``n`` entries the ``k = max(⌊n·p⌋, 1)`` entries of largest magnitude
    are kept and set to ``μ·sign(x)``, ``μ`` the mean magnitude of the kept entries (a
    kept exact zero is sent as ``+μ``; the residual carries the difference). The
    message is one float32 ``μ`` per tensor, then per tensor the Golomb-coded gaps
    between kept positions (``b* = golomb_parameter(p)``), each followed by a sign bit.

    Parameters
    ----------
    sparsity : float, default=0.01
        Fraction ``p`` of each tensor's entries sent upstream, in (0, 1].
    residuals : bool, default=True
        Error accumulation: clients (and the server) keep what compression left out
        and add it to their next update.
    downstream : bool, default=True
        The server compresses the averaged update (plus its residual) with STC before
        broadcasting; False broadcasts the dense new weights, as FedAvg.
    sparsity_down : float, optional
        Sparsity of the downstream compression (default: ``sparsity``).

    Examples
    --------
    >>> import numpy as np
    >>> stc = SparseTernaryCompression(sparsity=0.4)
    >>> update = {"w": np.array([0.5, -2.0, 0.1, 1.0, 0.0])}
    >>> message, residual = stc.compress(update)
    >>> stc.decompress(message, {"w": (5,)})["w"].tolist()   # k = 2, μ = 1.5
    [0.0, -1.5, 0.0, 1.5, 0.0]
    >>> residual["w"].tolist()
    [0.5, -0.5, 0.1, -0.5, 0.0]
    >>> len(message)   # 4 bytes μ + 2 × (2 + 1) bits (b* = 0: gaps coded in unary)
    5
    """

    def _encode(self, acc: dict[str, np.ndarray], p: float) -> bytes:
        b = golomb_parameter(p)
        mus, streams = [], []
        for v in acc.values():
            flat = v.ravel()
            idx = _top_k(flat, _n_kept(flat.size, p))
            mus.append(float(np.mean(np.abs(flat[idx]))) if idx.size else 0.0)
            streams.append(golomb_encode(idx, b, signs=flat[idx] < 0))
        header = np.asarray(mus, dtype="<f4").tobytes()
        bits = np.concatenate(streams) if streams else np.zeros(0, dtype=np.uint8)
        return header + pack_bits(bits)

    def _decode(self, message: bytes, shapes: dict[str, tuple], p: float) -> dict[str, np.ndarray]:
        b = golomb_parameter(p)
        n_head = 4 * len(shapes)
        if len(message) < n_head:
            raise ValueError(f"message of {len(message)} bytes is shorter than its header")
        mus = np.frombuffer(message[:n_head], dtype="<f4")
        bits = unpack_bits(message[n_head:])
        out, offset = {}, 0
        for mu, (name, shape) in zip(mus, shapes.items(), strict=True):
            n = math.prod(shape)
            pos, neg, offset = golomb_decode(bits, b, _n_kept(n, p), signs=True, offset=offset)
            if pos.size and pos[-1] >= n:
                raise ValueError(f"message codes position {pos[-1]} in {name!r} of size {n}")
            flat = np.zeros(n, dtype=np.float32)
            flat[pos] = np.where(np.asarray(neg, dtype=bool), -mu, mu)
            out[name] = flat.reshape(shape)
        if len(bits) - offset >= 8:
            raise ValueError(f"message has {len(bits) - offset} bits beyond its last position")
        return out


class TopK(_Sparsifier):
    """Top-k sparsification: the ``k`` largest-magnitude entries sent as float32 values.

    The sparse baseline of the thesis (Lin et al. 2018; Aji and Heafield 2017): per
    tensor the ``k = max(⌊n·p⌋, 1)`` largest entries keep their values. The message is
    the kept values (float32, little-endian, tensor by tensor) followed by the
    Golomb-coded positions. With ``residuals=False`` it is FedAvg with sparsified
    updates and no error accumulation.

    Parameters
    ----------
    sparsity : float, default=0.01
        Fraction ``p`` of each tensor's entries sent, in (0, 1].
    residuals : bool, default=True
        Error accumulation on the clients (and on the server, downstream).
    downstream : bool, default=False
        Also top-k sparsify the averaged update before broadcasting it; False (the
        usual top-k method) broadcasts the dense new weights.
    sparsity_down : float, optional
        Sparsity of the downstream compression (default: ``sparsity``).

    Examples
    --------
    >>> import numpy as np
    >>> topk = TopK(sparsity=0.4, residuals=False)
    >>> message, residual = topk.compress({"w": np.array([0.5, -2.0, 0.1, 1.0, 0.0])})
    >>> topk.decompress(message, {"w": (5,)})["w"].tolist()
    [0.0, -2.0, 0.0, 1.0, 0.0]
    >>> len(message), residual["w"].tolist()   # 2 float32 values + 6 position bits
    (9, [0.0, 0.0, 0.0, 0.0, 0.0])
    """

    def __init__(
        self,
        sparsity: float = 0.01,
        residuals: bool = True,
        downstream: bool = False,
        sparsity_down: float | None = None,
    ) -> None:
        super().__init__(sparsity, residuals, downstream, sparsity_down)

    def _encode(self, acc: dict[str, np.ndarray], p: float) -> bytes:
        b = golomb_parameter(p)
        values, streams = [], []
        for v in acc.values():
            flat = v.ravel()
            idx = _top_k(flat, _n_kept(flat.size, p))
            values.append(flat[idx])
            streams.append(golomb_encode(idx, b))
        vals = np.concatenate(values) if values else np.zeros(0)
        bits = np.concatenate(streams) if streams else np.zeros(0, dtype=np.uint8)
        return vals.astype("<f4").tobytes() + pack_bits(bits)

    def _decode(self, message: bytes, shapes: dict[str, tuple], p: float) -> dict[str, np.ndarray]:
        b = golomb_parameter(p)
        ks = [_n_kept(math.prod(s), p) for s in shapes.values()]
        n_head = 4 * sum(ks)
        if len(message) < n_head:
            raise ValueError(f"message of {len(message)} bytes is shorter than its values")
        vals = np.frombuffer(message[:n_head], dtype="<f4")
        bits = unpack_bits(message[n_head:])
        out, offset, start = {}, 0, 0
        for k, (name, shape) in zip(ks, shapes.items(), strict=True):
            n = math.prod(shape)
            pos, _, offset = golomb_decode(bits, b, k, offset=offset)
            if pos.size and pos[-1] >= n:
                raise ValueError(f"message codes position {pos[-1]} in {name!r} of size {n}")
            flat = np.zeros(n, dtype=np.float32)
            flat[pos] = vals[start : start + k]
            start += k
            out[name] = flat.reshape(shape)
        if len(bits) - offset >= 8:
            raise ValueError(f"message has {len(bits) - offset} bits beyond its last position")
        return out


_NAMED = {"stc": SparseTernaryCompression, "topk": TopK}


def make_compression(compression: Any) -> Any:
    """The compressor FedAvg's ``compression=`` names, checked; None for none.

    Parameters
    ----------
    compression : None, "stc", "topk" or object
        A name (default parameters), or an object with ``compress(update, residual)``
        and ``decompress(message, shapes)`` (and optionally ``residuals``,
        ``downstream``, ``sparsity_down`` attributes), such as
        :class:`SparseTernaryCompression` or :class:`TopK`.

    Returns
    -------
    object or None

    Examples
    --------
    >>> make_compression("stc")
    SparseTernaryCompression()
    >>> make_compression(None) is None
    True
    """
    if compression is None:
        return None
    if isinstance(compression, str):
        if compression not in _NAMED:
            raise ValueError(
                f"compression must be None, one of {sorted(_NAMED)} or a compressor object, "
                f"got {compression!r}"
            )
        return _NAMED[compression]()
    if not (
        callable(getattr(compression, "compress", None))
        and callable(getattr(compression, "decompress", None))
    ):
        raise TypeError(
            "compression must be None, 'stc', 'topk' or an object with compress(update, "
            f"residual) and decompress(message, shapes), got {type(compression).__name__}"
        )
    check = getattr(compression, "check", None)
    if callable(check):
        check()
    return compression
