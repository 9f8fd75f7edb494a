"""Old public names kept for one release: each use warns and names the new one.

Two shapes of rename, one helper each:

- a renamed module attribute (class, function, constant): :func:`deprecated_names`
  builds the module's ``__getattr__``, which answers the old name with the new object
  itself (so ``isinstance`` checks and old pickles keep working) after a
  :class:`DeprecationWarning`;
- a renamed keyword argument: :func:`renamed_keywords` takes the old keyword out of a
  ``**kwargs`` dict, warns, and hands back the value under its new name.

``cotrain`` uses these too (dependencies point ``cotrain`` → ``learners``).

Examples
--------
>>> import warnings
>>> __getattr__ = deprecated_names("mymodule", {"colour": "mymodule.color"},
...                                resolve={"colour": lambda: "red"})
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     __getattr__("colour")
'red'
>>> str(caught[-1].message)
'mymodule.colour is deprecated: use mymodule.color (the old name goes in the next release)'
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["deprecated_names", "renamed_keywords"]


def _resolve(path: str) -> Any:
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def deprecated_names(
    module: str,
    renamed: Mapping[str, str],
    *,
    resolve: Mapping[str, Callable[[], Any]] | None = None,
) -> Callable[[str], Any]:
    """A module ``__getattr__`` that answers old names with their new objects, warning.

    Parameters
    ----------
    module : str
        The module's own name (``__name__``), for the message and for AttributeError.
    renamed : mapping of str to str
        Old attribute name -> dotted path of the new object (``"package.module.Name"``).
    resolve : mapping of str to callable, optional
        For some old names, a function returning the object (default: import the
        dotted path).

    Returns
    -------
    callable
        ``__getattr__(name)``: the new object after a :class:`DeprecationWarning` naming
        the new path; AttributeError for every other name.

    Examples
    --------
    >>> import warnings
    >>> getattr_ = deprecated_names("pkg", {"summarise": "math.fsum"})
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     getattr_("summarise")([0.5, 0.25])
    0.75
    >>> getattr_("other")
    Traceback (most recent call last):
    ...
    AttributeError: module 'pkg' has no attribute 'other'
    """
    renamed = dict(renamed)
    resolvers = dict(resolve or {})

    def __getattr__(name: str) -> Any:
        if name not in renamed:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(
            f"{module}.{name} is deprecated: use {renamed[name]} (the old name goes in the "
            "next release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return resolvers[name]() if name in resolvers else _resolve(renamed[name])

    return __getattr__


def renamed_keywords(
    owner: str,
    kwargs: dict[str, Any],
    renamed: Mapping[str, str],
    *,
    strict: bool = False,
    stacklevel: int = 3,
) -> dict[str, Any]:
    """Take old keywords out of ``kwargs``; return their values under the new names.

    Parameters
    ----------
    owner : str
        The function or class taking them, for the messages.
    kwargs : dict
        The caller's remaining keyword arguments; emptied of the old names.
    renamed : mapping of str to str
        Old keyword -> new keyword.
    strict : bool, default=False
        Refuse any other keyword left in ``kwargs`` (for a signature whose only
        ``**kwargs`` are the old names).
    stacklevel : int, default=3
        Of the warning (3: the caller of the function that calls this).

    Returns
    -------
    dict
        New keyword -> value, for every old keyword that was given.

    Raises
    ------
    TypeError
        With ``strict=True``, for a keyword in ``kwargs`` that is not an old name.

    Examples
    --------
    >>> import warnings
    >>> kwargs = {"behaviour": "noise"}
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     renamed_keywords("make_hostile", kwargs, {"behaviour": "behavior"})
    {'behavior': 'noise'}
    >>> kwargs, str(caught[-1].message)[:50]
    ({}, "make_hostile's behaviour= is deprecated: use behav")
    """
    if strict:
        unknown = sorted(k for k in kwargs if k not in renamed)
        if unknown:
            raise TypeError(f"{owner} got an unexpected keyword argument {unknown[0]!r}")
    out = {}
    for old in [k for k in kwargs if k in renamed]:
        new = renamed[old]
        warnings.warn(
            f"{owner}'s {old}= is deprecated: use {new}= (the old keyword goes in the next "
            "release)",
            DeprecationWarning,
            stacklevel=stacklevel,
        )
        out[new] = kwargs.pop(old)
    return out
