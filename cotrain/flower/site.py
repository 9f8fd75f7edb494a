"""A deployment site: its private data, its copy of the public pool and its learner.

A site is a folder with a ``site.toml`` that a Flower SuperNode is pointed at through
its node config (``--node-config 'site="/data/cotrain/site.toml"'``). The private data
never leaves the folder; the ClientApp reads it on the site's own machine. This module
imports no Flower code, so sites can be prepared anywhere.

``site.toml``::

    client-id = 0                      # optional: the site's position in the federation
    classes = [0, 1, 2]                # the label space, public configuration: required
                                       # with [privacy] (every private label must be in it)
    data = "private.npz"               # arrays X and y (paths relative to this file)
    public-pool = "public.npy"         # the public pool U, identical at every site
    eval-data = "eval.npz"             # optional: arrays X and y the site evaluates on
    share-eval = true                  # optional: send predictions and labels on eval-data
                                       # for the consensus accuracy (default: true unless
                                       # [privacy]; only for a public, shared test set)
    trust = "auto"                     # optional: the pool's weight in the site's fits:
                                       # "auto" (chosen by CV on the private rows, see
                                       # cotrain.trust), "none" (full weight) or a number
                                       # in [0, 1]; default: the trainer's default

    [estimator]
    class = "sklearn.tree.DecisionTreeClassifier"
    params = { max_depth = 5 }

    [privacy]                          # optional: the site's privacy mechanism
    class = "cotrain.privacy.SubsampleAndAggregate"
    params = { n_teachers = 20, sigma = 40.0 }
    budget = 8.0                       # optional: the site's own total ε (its ledger,
                                       # state/privacy/, refuses past it, across runs);
                                       # the same as params = { budget = 8.0 }
"""

from __future__ import annotations

import hashlib
import importlib
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import is_classifier

from cotrain.flower.protocol import labels_to_config
from cotrain.trust import DEFAULT_TRUST, client_trust, get_trust

SITE_FILE = "site.toml"


@dataclass
class SiteFolder:
    """What a ClientApp knows about the site it runs at: what its folder holds (the round
    it answers is a :class:`cotrain.federation.site.Site`'s).

    Attributes
    ----------
    client_id : int or None
        The site's position in the federation, if it has one.
    X, y : ndarray
        The private training data.
    X_public : ndarray
        The site's copy of the public pool.
    estimator : classifier
        An unfitted scikit-learn-style classifier.
    path : Path
        The ``site.toml`` it was read from.
    X_eval, y_eval : ndarray or None
        The site's own evaluation data (``eval-data``), never trained on; each round the
        site reports its model's accuracy on it.
    share_eval : bool
        Whether the site shares its evaluation data's labels and its predictions there
        with the server, for the consensus accuracy (:mod:`cotrain.flower.evaluation`):
        only for a public test set, never at a private site.
    trust : "auto", None or float
        How much the site's fits weigh the pseudo-labelled pool (``trust``, see
        :mod:`cotrain.trust`); a non-private site reports its choice and its out-of-fold
        accuracy each round.
    privacy : cotrain.privacy mechanism or None
        Applied at the site before anything leaves it (``[privacy]``), with the site's own
        entropy; the ServerApp refuses a site whose mechanism differs from the run's.
    classes : list or None
        The label space the site declares (``classes``), public configuration: required
        with ``privacy``, and the handshake sends it instead of the site's own labels.
    """

    client_id: int | None
    X: np.ndarray
    y: np.ndarray
    X_public: np.ndarray
    estimator: Any
    path: Path
    X_eval: np.ndarray | None = None
    y_eval: np.ndarray | None = None
    privacy: Any = None
    share_eval: bool = False
    trust: Any = DEFAULT_TRUST
    classes: list[Any] | None = None

    @property
    def declared_privacy(self) -> str:
        """The site's mechanism as the handshake declares it (``repr``; "" for none)."""
        return "" if self.privacy is None else repr(self.privacy)

    @property
    def pool_hash(self) -> str:
        """Fingerprint of the site's public pool (see :func:`pool_fingerprint`)."""
        return pool_fingerprint(self.X_public)

    def label_space(self, asked: Any) -> np.ndarray:
        """The classes a request names, if they are the site's declared ``classes`` (sorted,
        as the run's are). A site without declared classes takes the request's.

        The check reads only public configuration, so a request naming any other label
        space gets the same refusal whatever labels the site's rows hold — a server cannot
        learn from it which classes a private site holds — and is refused before the site's
        ledger (which counts under the declared label space) is touched.

        Raises
        ------
        ValueError
            If ``asked`` is not the declared classes (another label, a label of another
            type, one missing, one repeated, another order).

        Examples
        --------
        >>> site = SiteFolder(0, np.zeros((1, 1)), np.array([0]), np.zeros((1, 1)), None,
        ...                   Path("site.toml"), classes=[0, 1, 2])
        >>> site.label_space([0, 1, 2]).tolist()
        [0, 1, 2]
        >>> site.label_space([0, 1, 2.0])
        Traceback (most recent call last):
        ...
        ValueError: the request's classes are not this site's declared label space
        """
        if self.classes is None:
            return np.asarray(asked)
        values = list(asked) if isinstance(asked, list | tuple | np.ndarray) else None

        def text(v: Any) -> str:
            return repr(v.item() if isinstance(v, np.generic) else v)

        if values is None or list(map(text, values)) != list(map(text, self.classes)):
            raise ValueError(OTHER_LABEL_SPACE)
        return np.asarray(values)


#: a site's refusal of a request that names another label space than its declared one
OTHER_LABEL_SPACE = "the request's classes are not this site's declared label space"


def pool_fingerprint(X_public: np.ndarray) -> str:
    """SHA-256 of a public pool's dtype, shape and bytes: equal pools, equal hashes.

    Examples
    --------
    >>> a = np.arange(6.0).reshape(3, 2)
    >>> pool_fingerprint(a) == pool_fingerprint(a.copy())
    True
    >>> pool_fingerprint(a) == pool_fingerprint(a.astype(np.float32))
    False
    """
    X = np.ascontiguousarray(X_public)
    digest = hashlib.sha256(f"{X.dtype.str}|{X.shape}|".encode())
    digest.update(X.tobytes())
    return digest.hexdigest()


def write_site(
    directory: str | Path,
    X: Any,
    y: Any,
    X_public: Any,
    estimator: Any,
    client_id: int | None = None,
    eval_set: tuple[Any, Any] | None = None,
    privacy: Any = None,
    share_eval: bool | None = None,
    trust: Any = DEFAULT_TRUST,
    classes: Any = None,
) -> Path:
    """Write a site folder (private data, public pool, ``site.toml``) for a SuperNode.

    ``eval_set=(X, y)`` adds the site's own evaluation data (``eval.npz``); ``privacy``
    the site's privacy mechanism (stored like the estimator); ``share_eval`` sets
    ``share-eval`` (default: the site shares its evaluation data unless it is private);
    ``trust`` the site's ``trust`` ("auto", None or a weight in [0, 1]); ``classes`` the
    label space it declares (public configuration, required with ``privacy``).

    The estimator is stored as its class path and its ``get_params(deep=False)``; every
    parameter must be a TOML value (numbers, strings, booleans, lists of those).

    Returns
    -------
    Path
        The ``site.toml`` to give the SuperNode as ``--node-config 'site="..."'``.

    Examples
    --------
    >>> import tempfile
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> folder = tempfile.mkdtemp()
    >>> path = write_site(folder, np.zeros((2, 3)), np.array([0, 1]), np.ones((4, 3)),
    ...                   DecisionTreeClassifier(max_depth=2), client_id=0)
    >>> site = load_site(path)
    >>> site.estimator, site.X_public.shape, site.client_id
    (DecisionTreeClassifier(max_depth=2), (4, 3), 0)
    """
    import tomli_w

    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(folder / "private.npz", X=np.asarray(X), y=np.asarray(y))
    np.save(folder / "public.npy", np.asarray(X_public))
    config: dict[str, Any] = {"data": "private.npz", "public-pool": "public.npy"}
    if eval_set is not None:
        np.savez(folder / "eval.npz", X=np.asarray(eval_set[0]), y=np.asarray(eval_set[1]))
        config["eval-data"] = "eval.npz"
    if share_eval is not None:
        config["share-eval"] = bool(share_eval)
    if trust != DEFAULT_TRUST:
        config["trust"] = "none" if trust is None else trust
    if classes is not None:
        config["classes"] = labels_to_config(np.unique(np.asarray(classes)))
    elif privacy is not None:
        raise ValueError(
            "classes is required with privacy: a private site declares its label space as "
            "public configuration (the labels of its rows are private)"
        )
    if client_id is not None:
        config = {"client-id": int(client_id), **config}
    config["estimator"] = _spec(estimator)
    if privacy is not None:
        config["privacy"] = _spec(privacy)
    path = folder / SITE_FILE
    path.write_text(tomli_w.dumps(config))
    return path


def _spec(obj: Any) -> dict[str, Any]:
    """``{"class": path, "params": {...}}`` of an estimator or mechanism: its non-default
    parameters (every one must be a TOML value)."""
    import inspect

    signature = inspect.signature(type(obj).__init__).parameters
    defaults = {k: p.default for k, p in signature.items() if p.default is not p.empty}
    params = {
        k: v
        for k, v in obj.get_params(deep=False).items()
        if v is not None and (k not in defaults or defaults[k] != v)
    }
    spec: dict[str, Any] = {"class": _public_path(type(obj))}
    if params:
        spec["params"] = params
    return spec


def _public_path(cls: type) -> str:
    """``sklearn.tree.DecisionTreeClassifier`` rather than ``sklearn.tree._classes.…``."""
    parts = cls.__module__.split(".")
    for n in range(1, len(parts) + 1):
        module = ".".join(parts[:n])
        try:
            if getattr(importlib.import_module(module), cls.__name__, None) is cls:
                return f"{module}.{cls.__name__}"
        except ImportError:
            continue
    return f"{cls.__module__}.{cls.__name__}"


def load_site(path: str | Path) -> SiteFolder:
    """Read a site from its ``site.toml`` (or the folder holding it).

    Raises
    ------
    ValueError
        With the file and the reason, for a missing file or key, a learner that is not a
        classifier, a private site without ``classes``, or private rows whose labels are
        not all in ``classes`` (a local error: a private site's ClientApp sends the server
        a masked one).
    """
    path = Path(path)
    if path.is_dir():
        path = path / SITE_FILE
    if not path.is_file():
        raise ValueError(f"site config {path} does not exist")
    with path.open("rb") as f:
        config = tomllib.load(f)
    for key in ("data", "public-pool", "estimator"):
        if key not in config:
            raise ValueError(f"site config {path} lacks the key {key!r}")
    data = np.load(path.parent / config["data"], allow_pickle=False)
    if "X" not in data or "y" not in data:
        raise ValueError(f"{config['data']} (site {path}) must hold arrays 'X' and 'y'")
    X_public = load_array(path.parent / config["public-pool"])
    client_id = config.get("client-id")
    if client_id is not None and not isinstance(client_id, int):
        raise ValueError(f"site config {path}: client-id must be an integer, got {client_id!r}")
    X_eval = y_eval = None
    if "eval-data" in config:
        evaluation = np.load(path.parent / config["eval-data"], allow_pickle=False)
        if "X" not in evaluation or "y" not in evaluation:
            raise ValueError(f"{config['eval-data']} (site {path}) must hold arrays 'X' and 'y'")
        X_eval, y_eval = evaluation["X"], evaluation["y"]
        if X_eval.shape[0] != y_eval.shape[0] or X_eval.shape[1:] != data["X"].shape[1:]:
            raise ValueError(
                f"{config['eval-data']} (site {path}): X {X_eval.shape} and y {y_eval.shape} "
                f"must have one label per row and rows shaped like the training data"
            )
    privacy = (
        None
        if "privacy" not in config
        else mechanism_from_spec(config["privacy"], f"site config {path} [privacy]")
    )
    classes = _declared_classes(config, data["y"], privacy is not None, path)
    share_eval = config.get("share-eval", privacy is None)
    if not isinstance(share_eval, bool) or (share_eval and privacy is not None):
        raise ValueError(
            f"site config {path}: share-eval must be true or false, and false at a site "
            f"with [privacy] (its evaluation predictions are outside its ε), got {share_eval!r}"
        )
    trust = config.get("trust", DEFAULT_TRUST)
    trust = None if trust == "none" else trust
    try:
        get_trust(trust)
    except (TypeError, ValueError) as err:
        raise ValueError(
            f'site config {path}: trust must be "auto", "none" or a number in [0, 1], '
            f"got {config.get('trust')!r}"
        ) from err
    if privacy is not None:  # e.g. DP-SGD trains every row at weight 1: refused at start
        try:
            client_trust(trust, privacy, None)
        except ValueError as err:
            raise ValueError(f"site config {path}: {err}") from err
    return SiteFolder(
        client_id=client_id,
        X=data["X"],
        y=data["y"],
        X_public=X_public,
        estimator=_build_estimator(config["estimator"], path),
        path=path,
        X_eval=X_eval,
        y_eval=y_eval,
        privacy=privacy,
        share_eval=share_eval and X_eval is not None,
        trust=trust,
        classes=classes,
    )


def _declared_classes(config: dict, y: np.ndarray, private: bool, path: Path) -> list | None:
    """The site's ``classes``, checked: required with [privacy], labels of one kind, no
    duplicates, and holding every label of the private rows ``y``."""
    if "classes" not in config:
        if private:
            raise ValueError(
                f"site config {path}: a site with [privacy] must declare its label space, "
                "top-level classes = [...] (public configuration: the server must not learn "
                "it from the private rows)"
            )
        return None
    declared = config["classes"]
    kinds = {type(v) for v in declared} if isinstance(declared, list) else set()
    if kinds not in ({int}, {str}) or len(set(declared)) != len(declared):
        raise ValueError(
            f"site config {path}: classes must be a list of distinct integers or of distinct "
            f"strings, got {declared!r}"
        )
    labels = np.unique(y)
    if labels.size and (labels.dtype.kind in "iub") != (kinds == {int}):
        raise ValueError(
            f"site config {path}: the private labels in {config['data']} are "
            f"{labels.dtype.name}, the declared classes are {kinds.pop().__name__}s"
        )
    outside = np.setdiff1d(labels, np.asarray(declared))
    if outside.size:  # raised at the site, logged there; never sent (see client_app)
        raise ValueError(
            f"site config {path}: the private data {config['data']} holds labels outside the "
            f"declared classes: {outside[:5].tolist()}; this site refuses to start"
        )
    return labels_to_config(np.unique(np.asarray(declared)))


def declares_privacy(path: str | Path) -> bool:
    """Whether the ``site.toml`` at ``path`` (or in that folder) has a ``[privacy]`` table,
    read without loading the site: a site that fails to load masks its error if so.

    Examples
    --------
    >>> declares_privacy("/no/such/site.toml")
    False
    """
    path = Path(path)
    path = path / SITE_FILE if path.is_dir() else path
    try:
        with path.open("rb") as f:
            return "privacy" in tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError):
        return False


def load_array(path: str | Path) -> np.ndarray:
    """A public pool from ``.npy``, or ``.npz`` (array ``X``, else the first array)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"public pool {path} does not exist")
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as data:
            return data["X"] if "X" in data else data[data.files[0]]
    return np.load(path, allow_pickle=False)


def _build_estimator(spec: dict[str, Any], path: Path) -> Any:
    """Instantiate ``[estimator] class`` with ``params``; only a classifier is accepted."""
    if not isinstance(spec, dict) or "class" not in spec:
        raise ValueError(f"site config {path}: [estimator] needs a 'class' (a dotted path)")
    module_name, _, name = str(spec["class"]).rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError, ValueError) as err:
        raise ValueError(f"site config {path}: cannot import {spec['class']!r}: {err}") from err
    estimator = cls(**spec.get("params", {}))
    if not is_classifier(estimator):
        raise ValueError(f"site config {path}: {spec['class']} is not a classifier")
    return estimator


def mechanism_from_spec(spec: Any, where: str) -> Any:
    """A privacy mechanism from ``{"class": dotted path, "params": {...}}`` (a site's
    ``[privacy]`` table, or the ServerApp's ``privacy`` run config as JSON); only a
    :class:`cotrain.privacy.LabelMechanism` is accepted. A ``budget`` beside ``class`` is
    the mechanism's ``budget`` parameter (the site's own total ε).

    Examples
    --------
    >>> mechanism_from_spec({"class": "cotrain.privacy.SubsampleAndAggregate",
    ...                      "params": {"n_teachers": 4, "sigma": 2.0}}, "here")
    SubsampleAndAggregate(aggregate='gnmax', budget=None, check_noise=2.0, delta=1e-05, \
epsilon=None, max_answered=1.0, n_teachers=4, sigma=2.0, threshold=None)
    >>> mechanism_from_spec({"class": "cotrain.privacy.SubsampleAndAggregate",
    ...                      "params": {"sigma": 2.0}, "budget": 8.0}, "here").budget
    8.0
    """
    from cotrain.privacy import LabelMechanism

    if not isinstance(spec, dict) or "class" not in spec:
        raise ValueError(f"{where}: the privacy mechanism needs a 'class' (a dotted path)")
    module_name, _, name = str(spec["class"]).rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError, ValueError) as err:
        raise ValueError(f"{where}: cannot import {spec['class']!r}: {err}") from err
    if not (isinstance(cls, type) and issubclass(cls, LabelMechanism)):
        raise ValueError(f"{where}: {spec['class']} is not a cotrain.privacy mechanism")
    unknown = sorted(set(spec) - {"class", "params", "budget"})
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown} (expected class, params, budget)")
    params = dict(spec.get("params", {}))
    if "budget" in spec:
        if "budget" in params and params["budget"] != spec["budget"]:
            raise ValueError(
                f"{where}: budget is given twice, {spec['budget']!r} and params.budget "
                f"{params['budget']!r}"
            )
        params["budget"] = spec["budget"]
    return cls(**params).validate()


def write_sites(
    directory: str | Path,
    X_clients: list[Any],
    y_clients: list[Any],
    X_public: Any,
    estimators: list[Any],
    eval_set: tuple[Any, Any] | None = None,
    trust: Any = DEFAULT_TRUST,
) -> list[Path]:
    """Write ``site-0 … site-(n-1)`` folders, one per client, with ``client-id`` set
    (and, with ``eval_set``, the same evaluation data at every site; ``trust`` the same
    ``trust`` at every site).

    The layout is what a SuperNode's ``site`` node config, or the simulation engine's
    ``partition-id`` with the run config's ``sites-dir``, expects.

    Examples
    --------
    >>> import tempfile
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> paths = write_sites(tempfile.mkdtemp(), [np.zeros((2, 1))] * 2, [np.array([0, 1])] * 2,
    ...                     np.ones((3, 1)), [DecisionTreeClassifier()] * 2)
    >>> [p.parent.name for p in paths]
    ['site-0', 'site-1']
    """
    if not len(X_clients) == len(y_clients) == len(estimators):
        raise ValueError(
            f"X_clients, y_clients and estimators must have one entry per client, got "
            f"{len(X_clients)}, {len(y_clients)} and {len(estimators)}"
        )
    return [
        write_site(
            Path(directory) / f"site-{i}",
            Xi,
            yi,
            X_public,
            est,
            client_id=i,
            eval_set=eval_set,
            trust=trust,
        )
        for i, (Xi, yi, est) in enumerate(zip(X_clients, y_clients, estimators, strict=True))
    ]
