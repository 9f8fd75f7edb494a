"""Saving a trained federation to a folder and loading it back, without pickle.

A fitted :class:`~cotrain.FederatedCoTrainer` keeps, in a simulation, every client's
training data (each client's ``X`` and ``y``), the public pool, the evaluation set and
the hidden ``y_public``: pickling it (or ``joblib.dump``) writes all of them.
:func:`save_federation` writes what a trained federation *is* instead — the fitted client
models, the classes, the consensus rule, the last consensus on the public pool, the
history, the learner warnings and the privacy report — and by default
(``drop_data=True``) none of the data. Client models that keep training rows by
construction (k-nearest neighbours, support vectors of an SVC) still hold those.

The folder:

- ``manifest.json`` — format, library version, ``drop_data`` and the SHA-256 of every file;
- ``trainer.skops`` — the trainer's parameters, ``classes_``, the fitted consensus rule and
  the feature names (:mod:`skops.io`, no pickle);
- ``client-<i>.skops`` — each fitted client model, written like a checkpoint's (torch
  tensors in ``client-<i>.pt``, see :func:`cotrain.persistence.checkpoint.save_model`);
- ``arrays.npz`` — the last consensus (as broadcast, and as hard codes), read without pickle;
- ``state.json`` — the history, the learner warnings, the privacy report, why the run stopped;
- ``data.skops`` — only with ``drop_data=False``: the validated inputs of ``fit``.

Loading verifies every file's hash and lets skops build only trusted types: those of
checkpoints (:data:`cotrain.persistence.checkpoint.TRUSTED_MODULES`, by
:func:`cotrain.persistence.checkpoint.untrusted_types`), the library's own consensus rules, privacy
mechanisms and trust settings, and the exact type names the caller passes as
``trusted`` (for example a learner class of their own).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from cotrain.history import History, RoundRecord
from cotrain.persistence.checkpoint import (
    TRUSTED_MODULES,
    checkpoint_blocker,
    load_model,
    save_model,
    untrusted_types,
)

__all__ = [
    "DroppedDataError",
    "SavedFederation",
    "SavedFederationError",
    "load_federation",
    "save_federation",
]

FORMAT = 1
MANIFEST = "manifest.json"
#: besides the checkpoints' modules: the library's own configuration objects
SAVED_TRUSTED_MODULES = (
    *TRUSTED_MODULES, "consensus.", "cotrain.privacy.", "cotrain.trust.", "cotrain.clustering.",
)  # fmt: skip
#: parameters that name where and how a run executes; not stored (None when loaded)
NOT_SAVED = ("callbacks", "runtime")


class SavedFederationError(ValueError):
    """A saved federation that cannot be loaded: altered, of another format, or holding
    types that were not trusted."""


class DroppedDataError(ValueError):
    """A loaded federation was asked for data it was saved without (``drop_data=True``)."""


class _Client:
    """A client of a loaded federation: its fitted model only."""

    def __init__(self, client_id: int, model: Any, fitted: bool) -> None:
        self.client_id, self.model, self.fitted = client_id, model, fitted


class _Server:
    """The server of a loaded federation: the consensus rule and its last consensus."""

    def __init__(self, consensus: Any, labels: np.ndarray, hard: np.ndarray) -> None:
        self.consensus, self.consensus_labels, self.hard_consensus = consensus, labels, hard


class _Ledger:
    """The privacy accounting of a loaded federation: its final report."""

    def __init__(self, report: dict[str, Any]) -> None:
        self._report = report

    def report(self) -> dict[str, Any]:
        return copy.deepcopy(self._report)


class SavedFederation:
    """What a loaded trainer holds in place of the simulated federation it was fitted with.

    It answers what prediction and inspection need (the clients' fitted models, the
    server's last consensus, the history, the privacy report); ``data`` raises a
    :class:`DroppedDataError` when the federation was saved with ``drop_data=True``.

    Examples
    --------
    >>> fed = SavedFederation([], None, History(), Counter(), data=None)
    >>> fed.data
    Traceback (most recent call last):
    ...
    cotrain.persistence.saving.DroppedDataError: this trainer was saved with drop_data=True ...
    """

    def __init__(
        self,
        clients: list[Any],
        server: Any,
        history: History,
        learner_warnings: Counter,
        data: Any,
        ledger: Any = None,
    ) -> None:
        self.clients = clients
        self.server = server
        self.history = history
        self.learner_warnings = learner_warnings
        self.ledger = ledger
        self._data = data

    @property
    def data(self) -> Any:
        """The validated inputs of ``fit``, or a :class:`DroppedDataError`."""
        if self._data is None:
            raise DroppedDataError(
                "this trainer was saved with drop_data=True ... so it holds no data of its "
                "run (clients' rows, public pool, evaluation set); predict, predict_proba, "
                "pseudo_labels_ and history_ work, distill() needs the public pool: save "
                "with drop_data=False, or fit your model on your own copy of X_public with "
                "trainer.pseudo_labels_"
            )
        return self._data


def save_federation(trainer: Any, path: str | os.PathLike, *, drop_data: bool = True) -> Path:
    """Write a fitted :class:`~cotrain.FederatedCoTrainer` to the folder ``path``.

    Parameters
    ----------
    trainer : FederatedCoTrainer
        Fitted (or itself loaded).
    path : str or path
        A folder, created; a folder from an earlier save is replaced, any other
        non-empty folder is refused. Written under a temporary name and renamed.
    drop_data : bool, default=True
        Leave out every row of data the trainer holds (each client's training data, the
        public pool, the evaluation set, ``y_public``). False keeps them (in
        ``data.skops``), so that :meth:`~cotrain.FederatedCoTrainer.distill` works after
        loading.

    Returns
    -------
    Path
        The folder written.

    Raises
    ------
    NotImplementedError
        A learner whose models skops cannot store (the same learners that cannot be
        checkpointed, e.g. ``RuleFitClassifier``), before anything is written.

    Examples
    --------
    >>> import tempfile
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from cotrain import FederatedCoTrainer
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> trainer = FederatedCoTrainer([DecisionTreeClassifier()] * 2, rounds=2, random_state=0)
    >>> trainer = trainer.fit([X[:50], X[50:100]], [y[:50], y[50:100]], X_public=X[100:300])
    >>> folder = save_federation(trainer, tempfile.mkdtemp() + "/fed")
    >>> loaded = load_federation(folder, FederatedCoTrainer)
    >>> bool((loaded.predict(X[300:]) == trainer.predict(X[300:])).all())
    True
    """
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(trainer, "history_")
    for est in trainer.estimators:
        if (reason := checkpoint_blocker(est)) is not None:
            raise NotImplementedError(
                f"save: {type(est).__name__} models cannot be saved yet ({reason})"
            )
    fed, final = trainer._federation, Path(path)
    data = None if drop_data else fed.data  # a loaded trainer without data raises here
    if final.exists() and (not final.is_dir() or _foreign(final)):
        raise ValueError(
            f"path {final} exists and is not a saved federation; refusing to replace it"
        )
    import skops.io as sio

    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        params = {
            k: (None if k in NOT_SAVED else v) for k, v in trainer.get_params(deep=False).items()
        }
        if params["checkpoint_dir"] is not None:
            params["checkpoint_dir"] = os.fspath(params["checkpoint_dir"])
        fitted = {
            k: getattr(trainer, k)
            for k in ("classes_", "consensus_", "n_features_in_", "feature_names_in_")
            if hasattr(trainer, k)
        }
        sio.dump({"params": params, "fitted": fitted}, tmp / "trainer.skops")
        files = ["trainer.skops", "arrays.npz", "state.json"]
        for c in fed.clients:
            if c.fitted:
                files += save_model(c.model, tmp, f"client-{c.client_id}")
        server = fed.server
        arrays = {"consensus_labels": server.consensus_labels, "hard": server.hard_consensus}
        np.savez(tmp / "arrays.npz", **{k: v for k, v in arrays.items() if v is not None})
        state = {
            "feature_shape": list(trainer._feature_shape),
            "n_rounds": trainer.n_rounds_,
            "stopped_reason": trainer.stopped_reason_,
            "clients": [[c.client_id, bool(c.fitted)] for c in fed.clients],
            "history": [r.to_json() for r in fed.history],
            "learner_warnings": [[*key, n] for key, n in fed.learner_warnings.items()],
            "privacy_report": None if fed.ledger is None else _jsonable(fed.ledger.report()),
        }
        (tmp / "state.json").write_text(json.dumps(state))
        if data is not None:
            sio.dump(vars(data), tmp / "data.skops")
            files.append("data.skops")
        manifest = {
            "format": FORMAT,
            "kind": "cotrain.FederatedCoTrainer",
            "version": _version(),
            "drop_data": data is None,
            "files": {f: _sha256(tmp / f) for f in sorted(files)},
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1))
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def load_federation(
    path: str | os.PathLike, trainer_class: type, *, trusted: Iterable[Any] | None = None
) -> Any:
    """Read a federation written by :func:`save_federation`; returns a fitted trainer.

    :meth:`cotrain.FederatedCoTrainer.load` calls it with its own class.

    Parameters
    ----------
    path : str or path
        The folder.
    trainer_class : type
        The trainer class to build (:class:`~cotrain.FederatedCoTrainer` or a subclass).
    trusted : list of str or type, optional
        Types (dotted names such as ``"mypackage.MyClassifier"``, or classes) that skops
        may build besides those of scikit-learn, XGBoost, numpy, scipy, the ``learners``
        adapters and the library's own consensus rules, privacy mechanisms and trust
        settings; e.g. a client learner of your own. Never trust a type because a file
        asks for it.

    Returns
    -------
    FederatedCoTrainer
        Predicts, and exposes ``history_``, ``pseudo_labels_``, ``clients_`` and
        :meth:`~cotrain.FederatedCoTrainer.privacy_report` as the saved trainer did; its
        ``callbacks`` and ``runtime`` parameters are None. Without data (the default of
        :func:`save_federation`), ``distill`` raises :class:`DroppedDataError`.

    Raises
    ------
    SavedFederationError
        For a folder that is not a saved federation, an altered or corrupt file, another
        format, or a type outside the trusted ones.

    Examples
    --------
    >>> from cotrain import FederatedCoTrainer
    >>> load_federation("no/such/folder", FederatedCoTrainer)
    Traceback (most recent call last):
    ...
    cotrain.persistence.saving.SavedFederationError: no/such/folder is not a saved federation ...
    """
    folder = Path(path)
    manifest = _verified_manifest(folder)
    names = _trusted_names(trusted)
    saved = _load_skops(folder / "trainer.skops", names)
    state = json.loads((folder / "state.json").read_text())
    with np.load(folder / "arrays.npz", allow_pickle=False) as arrays:
        labels, hard = arrays.get("consensus_labels"), arrays.get("hard")
    clients = []
    for i, fitted in state["clients"]:
        model = None
        if fitted:
            _load_skops(folder / f"client-{i}.skops", names, check_only=True)
            model = load_model(folder, f"client-{i}", names)
        clients.append(_Client(i, model, fitted))
    data = None
    if not manifest["drop_data"]:
        from cotrain._validation import FitData

        data = FitData(**_load_skops(folder / "data.skops", names))
    trainer = trainer_class(**saved["params"])
    for key, value in saved["fitted"].items():
        setattr(trainer, key, value)
    history = History()
    for record in state["history"]:
        history.append(RoundRecord.from_json(record))
    report = state["privacy_report"]
    trainer._federation = SavedFederation(
        clients,
        _Server(trainer.consensus_, labels, hard),
        history,
        Counter({(c, cat, msg): n for c, cat, msg, n in state["learner_warnings"]}),
        data,
        None if report is None else _Ledger(report),
    )
    trainer._feature_shape = tuple(state["feature_shape"])
    trainer.history_ = history
    trainer.n_rounds_ = state["n_rounds"]
    trainer.stopped_reason_ = state["stopped_reason"]
    trainer.learner_warnings_ = dict(trainer._federation.learner_warnings)
    return trainer


def _verified_manifest(folder: Path) -> dict[str, Any]:
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError) as err:
        raise SavedFederationError(
            f"{folder} is not a saved federation (no readable {MANIFEST}: {err})"
        ) from None
    if manifest.get("kind") != "cotrain.FederatedCoTrainer" or manifest.get("format") != FORMAT:
        raise SavedFederationError(
            f"{folder} holds format {manifest.get('format')!r} of {manifest.get('kind')!r}; "
            f"this version reads format {FORMAT} of 'cotrain.FederatedCoTrainer'"
        )
    expected = manifest.get("files", {})
    present = {p.name for p in folder.iterdir()} - {MANIFEST}
    if present != set(expected):
        raise SavedFederationError(
            f"{folder} is incomplete or was altered: files {sorted(present)} differ from "
            f"the manifest's {sorted(expected)}"
        )
    for name, digest in expected.items():
        if _sha256(folder / name) != digest:
            raise SavedFederationError(
                f"{folder / name} was altered or is corrupt (SHA-256 differs from the manifest)"
            )
    return manifest


def _trusted_names(trusted: Iterable[Any] | None) -> set[str]:
    names = set()
    for t in trusted or ():
        if isinstance(t, str):
            names.add(t)
        elif isinstance(t, type):
            names.add(f"{t.__module__}.{t.__qualname__}")
        else:
            raise TypeError(
                f"trusted must list type names (str) or classes, got {type(t).__name__}"
            )
    return names


def _load_skops(path: Path, trusted: set[str], check_only: bool = False) -> Any:
    """Load a skops file after refusing any type outside the trusted ones."""
    import skops.io as sio

    needed, refused = untrusted_types(path, trusted, SAVED_TRUSTED_MODULES)
    if refused:
        raise SavedFederationError(
            f"{path} holds types that are not trusted: {refused}; if you trust this file's "
            f"source, pass them to load(..., trusted={refused!r})"
        )
    return None if check_only else sio.load(path, trusted=needed)


def _foreign(folder: Path) -> bool:
    """Whether ``folder`` is non-empty and not a saved federation (then never replaced)."""
    return any(folder.iterdir()) and not (folder / MANIFEST).is_file()


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _version() -> str:
    import cotrain

    return cotrain.__version__
