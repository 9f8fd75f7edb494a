"""Objects resident in Ray actors: :class:`RayActorPool` (import it from
:mod:`cotrain.runtime.pools`).

Ray is imported only when a pool is made, so this module imports without it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from cotrain.runtime.pool_base import WorkerDiedError, check_call, check_index
from cotrain.runtime.straggler import Straggler, check_timeout

__all__ = ["RayActorPool"]


class _CallFailed(Exception):
    """Raised by :meth:`_Holder.call_batch`: object ``index``'s call raised ``error``.

    Carries the object's id back with the exception, which the pool then re-raises as
    itself, its note naming the object.
    """

    def __init__(self, index: int, error: Exception) -> None:
        super().__init__(index, error)
        self.index = index
        self.error = error

    def __str__(self) -> str:
        return f"object {self.index}: {type(self.error).__name__}: {self.error}"


class _Holder:
    """Body of a Ray actor holding some of a pool's objects."""

    def __init__(self) -> None:
        self.objects: dict[int, Any] = {}

    def load(self, objects: dict[int, Any]) -> None:
        self.objects.update(objects)

    def call(self, method: str, i: int, shared: tuple, args: tuple) -> Any:
        return getattr(self.objects[i], method)(*shared, *args)

    def call_batch(self, method: str, shared: tuple, calls: list[tuple[int, tuple]]) -> list[Any]:
        """Run ``calls`` (``(object id, args)``) in order; stop at the first exception."""
        out = []
        for i, args in calls:
            try:
                out.append(getattr(self.objects[i], method)(*shared, *args))
            except Exception as err:
                raise _CallFailed(i, err) from err
        return out

    def get(self, ids: list[int]) -> list[Any]:
        return [self.objects[i] for i in ids]

    def pid(self) -> int:
        return os.getpid()


class RayActorPool:
    """Objects resident in Ray actors.

    Object ``i`` lives in actor ``i % n_actors``. Each worker's objects are sent in one
    argument (one serialisation) and ``shared`` is put in the object store once per
    :meth:`call`. An actor runs its objects' calls in key order.

    Without a timeout, :meth:`call` is batched: one actor task per actor, carrying all
    of that actor's ``(id, args)``, which returns their results as a list (a Ray call
    costs about 0.2 ms; one per object made 100 light clients' rounds twice as slow).
    An actor stops at its first exception: its later objects are not called in that
    :meth:`call`; the other actors finish theirs, and the exception of the lowest
    object id is raised.

    With a ``timeout`` each object's call is its own actor task, so that stragglers are
    given up one by one: the unfinished calls are cancelled (``ray.cancel``: a call that
    has not started is not run; a running one finishes and keeps its changes to the
    object) and returned as :class:`~cotrain.runtime.straggler.Straggler`. Both ways give the
    same results and leave the objects in the same state when no call straggles or
    raises.

    A method's exception propagates as itself (the Ray error as its ``__cause__``), with
    a note naming the actor and the object; a dead actor raises :class:`WorkerDiedError`.

    Needs a running Ray: use it through :meth:`cotrain.runtime.RayRuntime.host`.

    Parameters
    ----------
    objects : sequence
        The objects; object ``i`` is ``objects[i]``.
    n_actors : int or None, default=None
        Number of actors (``None``: the cluster's CPUs); at most one per object.
    timeout : float or None, default=None
        Default timeout in seconds for :meth:`call`.

    Examples
    --------
    >>> from cotrain.runtime.runtimes import RayRuntime
    >>> with RayRuntime(num_cpus=2) as rt, rt.host([[1], [2, 3]]) as pool:  # doctest: +SKIP
    ...     pool.call("append", {0: (10,), 1: (20,)})
    ...     pool.get()
    {0: None, 1: None}
    [[1, 10], [2, 3, 20]]
    """

    def __init__(
        self, objects: Sequence[Any], n_actors: int | None = None, timeout: float | None = None
    ) -> None:
        try:
            import ray
        except ImportError as err:  # pragma: no cover - depends on the environment
            raise ImportError('RayActorPool needs Ray: pip install "cotrain[ray]"') from err
        if not ray.is_initialized():
            raise RuntimeError(
                "RayActorPool needs a running Ray: use RayRuntime().host() inside its `with`"
            )
        objects = list(objects)
        if n_actors is None:
            n_actors = max(1, int(ray.cluster_resources().get("CPU", 1)))
        if not isinstance(n_actors, int) or n_actors < 1:
            raise ValueError(f"n_actors must be an int >= 1 or None, got {n_actors!r}")
        self._ray = ray
        self._n = len(objects)
        self.n_actors = min(n_actors, max(1, self._n))
        self.timeout = timeout
        self._closed = False
        self._broken: str | None = None
        holder = ray.remote(_Holder)
        self._actors = [holder.remote() for _ in range(self.n_actors)]
        try:
            self._load(dict(enumerate(objects)))
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> RayActorPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __len__(self) -> int:
        return self._n

    def __repr__(self) -> str:
        return f"RayActorPool(n_objects={self._n}, n_actors={self.n_actors})"

    def _check_open(self) -> None:
        if self._broken is not None:
            raise WorkerDiedError(self._broken)
        if self._closed:
            raise RuntimeError("this RayActorPool is closed")

    def _get(self, ref: Any, actor: int, what: str) -> Any:
        """``ray.get`` with the pool's errors: the method's own, or the actor's death."""
        from ray.exceptions import RayTaskError

        try:
            return self._get_raw(ref, actor)
        except RayTaskError as err:
            self._reraise(err, actor, what)

    def _get_raw(self, ref: Any, actor: int) -> Any:
        """``ray.get``; the actor's death raises :class:`WorkerDiedError` and closes the pool."""
        from ray.exceptions import RayActorError

        try:
            return self._ray.get(ref)
        except RayActorError as err:
            self._broken = (
                f"RayActorPool actor {actor} died while holding objects "
                f"{list(range(actor, self._n, self.n_actors))}; their state is lost and the "
                f"pool is closed ({type(err).__name__})"
            )
            self.close()
            raise WorkerDiedError(self._broken) from err

    @staticmethod
    def _reraise(err: Exception, actor: int, what: str, method: str = "") -> NoReturn:
        """Raise the method's own exception from Ray's ``err``, with a note naming ``what``.

        A batch's :class:`_CallFailed` is unwrapped: ``what`` becomes the object it names
        (``method`` is the method's name).
        """
        cause = getattr(err, "cause", None)
        if isinstance(cause, _CallFailed):
            cause, what = cause.error, f"object {cause.index}'s {method}()"
        if not isinstance(cause, BaseException):
            raise err
        cause.add_note(f"(raised in RayActorPool actor {actor} by {what})")
        raise cause from err

    def _load(self, objects: Mapping[int, Any]) -> None:
        groups: dict[int, dict[int, Any]] = {}
        for i, obj in objects.items():
            groups.setdefault(i % self.n_actors, {})[i] = obj
        refs = {a: self._actors[a].load.remote(group) for a, group in groups.items()}
        for a, ref in refs.items():
            self._get(ref, a, "load")

    def call(
        self,
        method: str,
        args: Mapping[int, tuple],
        shared: tuple = (),
        timeout: float | None = None,
    ) -> dict[int, Any]:
        """Call ``getattr(objects[i], method)(*shared, *args[i])`` in object ``i``'s actor.

        Parameters
        ----------
        method : str
            Name of the method to call.
        args : mapping of int to tuple
            The objects to call and each one's own arguments.
        shared : tuple, default=()
            Arguments passed first to every call (put in the object store once).
        timeout : float or None, default=None
            Seconds for the whole call (``None``: the pool's ``timeout``). With no
            timeout in force, one actor task per actor runs all its objects' calls;
            with one, one task per object (see the class docstring).

        Returns
        -------
        dict
            ``{i: result}`` in key order; :class:`Straggler` for calls not finished.
        """
        self._check_open()
        ray = self._ray
        keys, shared = check_call(method, args, shared, self._n)
        timeout = check_timeout(timeout, self.timeout)
        start = time.perf_counter()
        if not keys:
            return {}
        shared_ref = ray.put(shared)
        if timeout is None:
            return self._call_batched(method, args, keys, shared_ref)
        refs = {
            i: self._actors[i % self.n_actors].call.remote(method, i, shared_ref, tuple(args[i]))
            for i in keys
        }
        remaining = max(0.0, timeout - (time.perf_counter() - start))
        ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=remaining)
        done = set(ready)
        elapsed = time.perf_counter() - start
        out: dict[int, Any] = {}
        try:
            for pos, i in enumerate(keys):
                if refs[i] in done:
                    out[i] = self._get(refs[i], i % self.n_actors, f"object {i}'s {method}()")
                else:
                    out[i] = Straggler(pos, elapsed)
        except BaseException:
            self._cancel(ref for i, ref in refs.items() if i not in out)
            raise
        self._cancel(refs[i] for i in keys if isinstance(out[i], Straggler))
        return out

    def _call_batched(
        self, method: str, args: Mapping[int, tuple], keys: list[int], shared_ref: Any
    ) -> dict[int, Any]:
        """One actor task per actor for all its objects in ``keys`` (no timeout)."""
        from ray.exceptions import RayTaskError

        groups: dict[int, list[int]] = {}
        for i in keys:
            groups.setdefault(i % self.n_actors, []).append(i)
        refs = {
            a: self._actors[a].call_batch.remote(
                method, shared_ref, [(i, tuple(args[i])) for i in ids]
            )
            for a, ids in groups.items()
        }
        found: dict[int, Any] = {}
        failed: tuple[int, int, RayTaskError, str] | None = None  # (id, actor, error, what)
        read: set[int] = set()
        try:
            for a, ids in groups.items():
                try:
                    found.update(zip(ids, self._get_raw(refs[a], a), strict=True))
                except RayTaskError as err:  # the other actors still finish their batches
                    cause = getattr(err, "cause", None)
                    if isinstance(cause, _CallFailed):
                        i, what = cause.index, f"object {cause.index}'s {method}()"
                    else:  # not an Exception, or lost on the way: the object is unknown
                        i, what = ids[0], f"the batch of objects {ids} calling {method}()"
                    if failed is None or i < failed[0]:
                        failed = (i, a, err, what)
                read.add(a)
        except BaseException:  # interrupted here, or an actor died: drop what is queued
            self._cancel(ref for a, ref in refs.items() if a not in read)
            raise
        if failed is not None:
            _, a, err, what = failed
            self._reraise(err, a, what, method)
        return {i: found[i] for i in keys}

    def _cancel(self, refs: Any) -> None:
        for ref in refs:
            try:
                self._ray.cancel(ref, force=False)
            except Exception:  # best effort: a late result is never read anyway
                pass

    def get(self, ids: Sequence[int] | None = None) -> list[Any]:
        """Copies of the current objects, pulled back from the actors.

        Parameters
        ----------
        ids : sequence of int or None, default=None
            Which objects, in this order (``None``: all).

        Returns
        -------
        list
        """
        self._check_open()
        ids = list(range(self._n)) if ids is None else [check_index(i, self._n, "get") for i in ids]
        groups: dict[int, list[int]] = {}
        for i in dict.fromkeys(ids):
            groups.setdefault(i % self.n_actors, []).append(i)
        refs = {a: self._actors[a].get.remote(group) for a, group in groups.items()}
        found: dict[int, Any] = {}
        for a, group in groups.items():
            found.update(zip(group, self._get(refs[a], a, "get"), strict=True))
        return [found[i] for i in ids]

    def put(self, objects: Mapping[int, Any]) -> None:
        """Replace object ``i`` by ``objects[i]`` in its actor.

        Parameters
        ----------
        objects : mapping of int to object
        """
        self._check_open()
        self._load({check_index(i, self._n, "put"): obj for i, obj in objects.items()})

    def close(self) -> None:
        """Kill the actors (their objects are dropped)."""
        self._closed = True
        actors, self._actors = self._actors, []
        if actors and self._ray.is_initialized():
            for actor in actors:
                try:
                    self._ray.kill(actor)
                except Exception:  # already dead
                    pass
