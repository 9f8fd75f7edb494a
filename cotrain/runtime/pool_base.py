"""What every client pool shares: the :class:`ClientPool` protocol, its error, its checks.

The pools themselves are :class:`cotrain.runtime.pools.InProcessPool`,
:class:`cotrain.runtime.process_pool.ProcessPool` and :class:`cotrain.runtime.ray_pool.RayActorPool`
(all importable from :mod:`cotrain.runtime.pools`, which describes them). They validate a
``call``'s arguments with :func:`check_call` and object ids with :func:`check_index`, so
that every pool rejects bad arguments with the same message.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["ClientPool", "WorkerDiedError", "check_call", "check_index"]


class WorkerDiedError(RuntimeError):
    """A worker process (or Ray actor) of a pool died; the objects it held are lost.

    Examples
    --------
    >>> raise WorkerDiedError("worker 1 died while holding objects [1, 3]")
    Traceback (most recent call last):
    ...
    cotrain.runtime.pool_base.WorkerDiedError: worker 1 died while holding objects [1, 3]
    """


@runtime_checkable
class ClientPool(Protocol):
    """Objects that live where they run, called by method name.

    Implemented by :class:`~cotrain.runtime.pools.InProcessPool`,
    :class:`~cotrain.runtime.process_pool.ProcessPool` and
    :class:`~cotrain.runtime.ray_pool.RayActorPool`;
    obtained from a runtime's ``host(objects)`` or from
    :func:`cotrain.runtime.pools.host_objects`.

    Examples
    --------
    >>> from cotrain.runtime.runtimes import SequentialRuntime
    >>> with SequentialRuntime() as runtime, runtime.host([[1], [2]]) as pool:
    ...     isinstance(pool, ClientPool)
    True
    """

    def __enter__(self) -> ClientPool: ...

    def __exit__(self, *exc_info: object) -> None: ...

    def call(
        self,
        method: str,
        args: Mapping[int, tuple],
        shared: tuple = (),
        timeout: float | None = None,
    ) -> dict[int, Any]:
        """``{i: getattr(objects[i], method)(*shared, *args[i])}``, or ``Straggler``."""
        ...

    def get(self, ids: Sequence[int] | None = None) -> list[Any]:
        """The current objects ``ids`` (all when ``None``), in that order."""
        ...

    def put(self, objects: Mapping[int, Any]) -> None:
        """Replace objects ``i`` by ``objects[i]``."""
        ...

    def close(self) -> None:
        """Release the workers; the pool cannot be used afterwards."""
        ...


def check_index(i: Any, n: int, what: str) -> int:
    """Object id ``i`` of a pool of ``n`` objects, as an int; ``what`` names the caller.

    Parameters
    ----------
    i : int-like
        The id to check.
    n : int
        Number of objects in the pool.
    what : str
        The method or argument that got it, for the error message.

    Returns
    -------
    int

    Raises
    ------
    TypeError
        When ``i`` is not an integer.
    KeyError
        When ``i`` is not in ``0..n-1``.

    Examples
    --------
    >>> check_index(2, 4, "get")
    2
    >>> check_index(4, 4, "get")
    Traceback (most recent call last):
    ...
    KeyError: 'get: no object 4 in a pool of 4 (ids 0..3)'
    """
    try:
        index = operator.index(i)
    except TypeError:
        raise TypeError(f"{what}: object ids must be integers, got {i!r}") from None
    if not 0 <= index < n:
        raise KeyError(f"{what}: no object {index} in a pool of {n} (ids 0..{n - 1})")
    return index


def check_call(method: Any, args: Any, shared: Any, n: int) -> tuple[list[int], tuple]:
    """Validate a ``call``'s arguments for a pool of ``n`` objects.

    Parameters
    ----------
    method, args, shared
        As given to ``ClientPool.call``.
    n : int
        Number of objects in the pool.

    Returns
    -------
    keys : list of int
        The object ids of ``args``, sorted.
    shared : tuple

    Raises
    ------
    TypeError, KeyError, ValueError
        Naming the argument that is wrong.

    Examples
    --------
    >>> check_call("step", {2: (1,), 0: ()}, [5], n=3)
    ([0, 2], (5,))
    >>> check_call("step", {0: 1}, (), n=3)
    Traceback (most recent call last):
    ...
    TypeError: args[0] must be a tuple of arguments, got int
    """
    if not isinstance(method, str):
        raise TypeError(f"method must be a method name (str), got {type(method).__name__}")
    if not isinstance(args, Mapping):
        raise TypeError(
            f"args must be a mapping {{object id: tuple of arguments}}, got {type(args).__name__}"
        )
    if not isinstance(shared, tuple | list):
        raise TypeError(f"shared must be a tuple of arguments, got {type(shared).__name__}")
    for key, value in args.items():
        if not isinstance(value, tuple | list):
            raise TypeError(
                f"args[{key!r}] must be a tuple of arguments, got {type(value).__name__}"
            )
    keys = sorted({check_index(i, n, "args") for i in args})
    if len(keys) != len(args):
        raise ValueError("args has the same object id more than once")
    return keys, tuple(shared)
