"""Compact label messages: soft labels quantised to a few bits per class (kind 3).

``QuantizedSoftLabels`` extends :mod:`cotrain.wire.messages` (same 10-byte header, same bit
packer from :mod:`cotrain.wire.packing`, where the kind registers, so that
:func:`cotrain.wire.messages.decode` understands it through the kind byte). Soft labels are
quantised to ``b`` bits per class with the sum-to-one constraint. Header, then the payload::

    offset  size  field       struct
    0       1     kind        B    3
    1       1     flags       B    bits b, 1..16 (no other flag bits)
    2       4     n           I    rows
    6       4     n_classes   I    columns C
    10      ...   payload     ceil(n * C * b / 8) bytes

Each row is ``C`` integers ``q_k`` with ``sum(q) = L = 2**b - 1``, packed row-major at ``b``
bits each with the packer of :mod:`cotrain.wire.packing`; decoded probabilities are ``q / L``.
An abstaining (NaN) row is the reserved all-zero row (impossible for a real row since
``L >= 1``), so abstentions cost no extra byte.

The other compact kind, delta-coded hard labels (kind 4), lives in :mod:`cotrain.wire.delta`;
:class:`~cotrain.wire.delta.DeltaHardLabels` and
:data:`~cotrain.wire.delta.DELTA_HEADER_SIZE` can be imported from here too.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from cotrain.wire.messages import Message
from cotrain.wire.packing import HEADER, HEADER_SIZE, MAX_U32, check_probs, pack, unpack
from learners.checks import check_int

__all__ = [
    "QuantizedSoftLabels",
    "quantize_probs",
]

_KIND_QSOFT = 3


def quantize_probs(probs: Any, bits: int) -> NDArray[np.int64]:
    """Largest-remainder rounding of each row of ``probs`` to integers summing to ``2**bits-1``.

    Each non-NaN row is normalised to sum to one, scaled by ``L = 2**bits - 1`` and rounded
    down; the ``L - sum(floor)`` missing units go to the entries with the largest remainders,
    ties broken towards the lower class index. With ``bits = 1`` (``L = 1``) this is the
    one-hot argmax, ties to the lowest class index (as :func:`numpy.argmax`). An all-NaN row
    (abstain) becomes an all-zero row. Every entry satisfies ``|q/L - p| < 1/L``.

    Parameters
    ----------
    probs : array-like of float, shape (n, C)
        Non-negative probabilities (each non-NaN row with a positive sum); all-NaN rows abstain.
    bits : int
        Bits per class, 1..16.

    Returns
    -------
    ndarray of int64, shape (n, C)

    Examples
    --------
    >>> import numpy as np
    >>> quantize_probs(np.array([[0.7, 0.2, 0.1], [1/3, 1/3, 1/3]]), 2).tolist()
    [[2, 1, 0], [1, 1, 1]]
    >>> quantize_probs(np.array([[0.4, 0.4, 0.2], [np.nan] * 3]), 1).tolist()
    [[1, 0, 0], [0, 0, 0]]
    """
    bits = check_int(bits, "bits", 1, 16)
    p = np.asarray(probs)
    if p.ndim != 2:
        raise ValueError(f"probs must be 2-D (n, n_classes), got shape {p.shape}")
    if p.dtype.kind not in "biuf":
        raise TypeError(f"probs must be real numbers, got dtype {p.dtype}")
    p = p.astype(np.float64)
    problem = check_probs(p)
    if problem:
        raise ValueError(f"probs {problem}")
    n, c = p.shape
    q = np.zeros((n, c), dtype=np.int64)
    if p.size == 0:
        return q
    valid = ~np.isnan(p[:, 0])
    pv = p[valid]
    # rows scaled by a power of two (exact) to a maximum in [1, 2) first, so that the sum
    # cannot overflow (finite rows of huge values) and subnormal rows keep their precision
    top = pv.max(axis=1, keepdims=True) if pv.size else np.ones((0, 1))
    pv = pv / np.ldexp(1.0, np.frexp(np.where(top > 0, top, 1.0))[1] - 1)
    total = pv.sum(axis=1, keepdims=True)
    if (total <= 0).any():
        raise ValueError("probs has a row summing to zero (use an all-NaN row to abstain)")
    L = (1 << bits) - 1
    x = pv / total * L
    base = np.floor(x)
    rem = x - base
    base = base.astype(np.int64)
    missing = np.clip(L - base.sum(axis=1), 0, c)
    order = np.argsort(-rem, axis=1, kind="stable")  # largest remainder first, low index on ties
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(c)[None, :].repeat(order.shape[0], axis=0), axis=1)
    base += rank < missing[:, None]
    q[valid] = base
    return q


class QuantizedSoftLabels(Message):
    """Soft labels quantised to ``bits`` bits per class, rows summing exactly to one.

    Parameters
    ----------
    probs : array-like of float, shape (n, n_classes)
        Non-negative probabilities; each row is normalised to sum to one before rounding.
        An all-NaN row marks an abstention.
    bits : int
        Bits per class, 1..16; ``L = 2**bits - 1`` quantisation levels per row.

    Attributes
    ----------
    q : ndarray of int64, shape (n, n_classes)
        The transmitted integers: rows sum to ``L``, abstaining rows are all zero.
    bits : int
    levels : int
        ``L = 2**bits - 1``.
    probs : ndarray of float64, shape (n, n_classes)
        ``q / L``, NaN rows for abstentions: exactly what the receiver decodes.
    nbytes : int
        ``10 + ceil(n * n_classes * bits / 8)``.

    See Also
    --------
    quantize_probs : the rounding rule (largest remainder, ties to the lower class index).

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.wire.messages import decode
    >>> message = QuantizedSoftLabels(np.array([[0.5, 0.3, 0.2], [np.nan] * 3]), bits=4)
    >>> message.q.tolist(), message.nbytes
    ([[8, 4, 3], [0, 0, 0]], 13)
    >>> decode(message.to_bytes()).probs[0].tolist() == [8 / 15, 4 / 15, 3 / 15]
    True
    """

    kind: ClassVar[int] = _KIND_QSOFT

    def __init__(self, probs: Any, bits: int) -> None:
        self._bits = check_int(bits, "bits", 1, 16)
        p = np.asarray(probs)
        if p.ndim == 2 and (p.shape[1] < 1 or max(p.shape) > MAX_U32):
            raise ValueError(f"probs shape {p.shape} must have 1..2**32-1 columns and rows")
        self.q: NDArray[np.int64] = quantize_probs(p, self._bits)

    @property
    def n(self) -> int:
        """Number of rows."""
        return int(self.q.shape[0])

    @property
    def n_classes(self) -> int:
        """Number of classes."""
        return int(self.q.shape[1])

    @property
    def bits(self) -> int:
        """Bits per class."""
        return self._bits

    @property
    def levels(self) -> int:
        """``L = 2**bits - 1``: the sum of every non-abstaining row of :attr:`q`."""
        return (1 << self._bits) - 1

    @property
    def abstain(self) -> NDArray[np.bool_]:
        """Boolean mask of the abstaining rows."""
        return np.asarray(~self.q.any(axis=1), dtype=np.bool_)

    @property
    def probs(self) -> NDArray[np.float64]:
        """Decoded probabilities ``q / L`` (float64), all-NaN rows where abstaining."""
        out = self.q / self.levels
        out[self.abstain] = np.nan
        return out

    @property
    def nbytes(self) -> int:
        """``10 + ceil(n * n_classes * bits / 8)``: the exact length of :meth:`to_bytes`."""
        return HEADER_SIZE + (self.q.size * self._bits + 7) // 8

    def to_bytes(self) -> bytes:
        """Encode as header + row-major bit-packed integers (see the module docstring)."""
        header = HEADER.pack(self.kind, self._bits, self.n, self.n_classes)
        return header + pack(self.q.reshape(-1), self._bits)

    @classmethod
    def _decode_payload(
        cls, flags: int, n: int, n_classes: int, payload: memoryview
    ) -> QuantizedSoftLabels:
        if not 1 <= flags <= 16:
            raise ValueError(f"corrupt QuantizedSoftLabels message: bits = {flags}")
        if n_classes < 1:
            raise ValueError(f"corrupt QuantizedSoftLabels message: n_classes = {n_classes}")
        expected = (n * n_classes * flags + 7) // 8
        if len(payload) != expected:
            raise ValueError(
                f"corrupt QuantizedSoftLabels message: payload of {len(payload)} bytes, "
                f"expected {expected} for a {n} x {n_classes} matrix at {flags} bits"
            )
        q = unpack(payload, n * n_classes, flags).reshape(n, n_classes)
        sums = q.sum(axis=1)
        L = (1 << flags) - 1
        if ((sums != L) & (sums != 0)).any():
            raise ValueError(f"corrupt QuantizedSoftLabels message: a row does not sum to {L}")
        message = cls.__new__(cls)
        message._bits = flags
        message.q = q
        return message

    def __repr__(self) -> str:
        return (
            f"QuantizedSoftLabels(n={self.n}, n_classes={self.n_classes}, bits={self._bits}, "
            f"nbytes={self.nbytes})"
        )
