"""Saving a fitted trainer to a folder and loading it back, without pickle.

:func:`save_federation` writes the fitted attributes of a
:class:`~cotrain.FederatedCoTrainer` — the fitted client models, the classes, the
consensus rule, the last consensus on the public pool, the history, the learner warnings
and the privacy report — and :func:`load_federation` sets them on a new trainer, which
then predicts, distills (with its public pool) and reports as the saved one did. A
fitted trainer keeps no client's private rows; by default (``drop_data=True``) the public
pool is left out too. Client models that keep training rows by construction (k-nearest
neighbours, support vectors of an SVC) still hold those.

The folder:

- ``manifest.json`` — format, library version, ``drop_data`` and the SHA-256 of every file;
- ``trainer.skops`` — the trainer's parameters, ``classes_``, the fitted consensus rule and
  the feature names (:mod:`skops.io`, no pickle);
- ``client-<i>.skops`` — each fitted client model, written like a checkpoint's (torch
  tensors in ``client-<i>.pt``, see :func:`cotrain.persistence.checkpoint.save_model`);
- ``arrays.npz`` — the last consensus (as broadcast, and as hard codes), read without pickle;
- ``state.json`` — the history, the learner warnings, the privacy report, why the run stopped;
- ``data.skops`` — only with ``drop_data=False``: the public pool (format 1 held every
  input of ``fit`` there; its public pool is read, the rest ignored).

Loading verifies every file's hash and lets skops build only trusted types: those of
checkpoints (:data:`cotrain.persistence.checkpoint.TRUSTED_MODULES`, by
:func:`cotrain.persistence.checkpoint.untrusted_types`), the library's own consensus rules,
privacy mechanisms and trust settings, and the exact type names the caller passes as
``trusted`` (for example a learner class of their own).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from cotrain._validation import masked_labels
from cotrain.history import History, RoundRecord
from cotrain.persistence.checkpoint import (
    TRUSTED_MODULES,
    checkpoint_blocker,
    file_sha256,
    load_model,
    save_model,
    untrusted_types,
    verify_files,
)

__all__ = [
    "DroppedDataError",
    "SavedFederationError",
    "load_federation",
    "save_federation",
]

#: the format written; format 1 (before fitted attributes) is still read
FORMAT = 2
READABLE_FORMATS = (1, 2)
MANIFEST = "manifest.json"
#: besides the checkpoints' modules: the library's own configuration objects
SAVED_TRUSTED_MODULES = (
    *TRUSTED_MODULES,
    "consensus.",
    "cotrain.privacy.",
    "cotrain.trust.",
    "cotrain.clustering.",
)
#: parameters that name where and how a run executes; not stored (None when loaded)
NOT_SAVED = ("callbacks", "runtime")
#: fitted attributes stored in ``trainer.skops`` (those the trainer has)
SKOPS_FITTED = ("classes_", "consensus_", "n_features_in_", "feature_names_in_")
DROPPED_POOL = (
    "this trainer was saved with drop_data=True, so it holds no public pool "
    "(X_public_ is None); predict, predict_proba, pseudo_labels_ and history_ work, "
    "distill() needs the pool: save with drop_data=False, or fit your model on your own "
    "copy of X_public with trainer.pseudo_labels_"
)


class SavedFederationError(ValueError):
    """A saved federation that cannot be loaded: altered, of another format, or holding
    types that were not trusted."""


class DroppedDataError(ValueError):
    """A loaded trainer was asked for data it was saved without (``drop_data=True``)."""


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
        Leave out the public pool (``X_public_``, the only rows of data a fitted trainer
        keeps). False writes it (in ``data.skops``), so that
        :meth:`~cotrain.FederatedCoTrainer.distill` works after loading.

    Returns
    -------
    Path
        The folder written.

    Raises
    ------
    NotImplementedError
        A learner whose models skops cannot store (the same learners that cannot be
        checkpointed, e.g. ``RuleFitClassifier``), before anything is written.
    DroppedDataError
        ``drop_data=False`` for a trainer that was itself loaded without its public pool.

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

    check_is_fitted(trainer, "client_models_")
    for est in trainer.estimators:
        if (reason := checkpoint_blocker(est)) is not None:
            raise NotImplementedError(
                f"save: {type(est).__name__} models cannot be saved yet ({reason})"
            )
    final = Path(path)
    if not drop_data and trainer.X_public_ is None:
        raise DroppedDataError(DROPPED_POOL)
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
        fitted = {k: getattr(trainer, k) for k in SKOPS_FITTED if hasattr(trainer, k)}
        sio.dump({"params": params, "fitted": fitted}, tmp / "trainer.skops")
        files = ["trainer.skops", "arrays.npz", "state.json"]
        for i, model in enumerate(trainer.client_models_):
            if model is not None:
                files += save_model(model, tmp, f"client-{i}")
        labels, codes = trainer.pseudo_labels_, trainer.pseudo_label_codes_
        # as format 1 wrote them: the consensus as broadcast (codes or soft) and hard codes
        np.savez(
            tmp / "arrays.npz", consensus_labels=codes if labels.ndim == 1 else labels, hard=codes
        )
        report = trainer.privacy_report_
        state = {
            "feature_shape": list(trainer.feature_shape_),
            "n_rounds": trainer.n_rounds_,
            "stopped_reason": trainer.stopped_reason_,
            "clients": [[i, m is not None] for i, m in enumerate(trainer.client_models_)],
            "history": [r.to_json() for r in trainer.history_],
            "learner_warnings": [[*key, n] for key, n in trainer.learner_warnings_.items()],
            "privacy_report": None if report is None else _jsonable(report),
        }
        (tmp / "state.json").write_text(json.dumps(state))
        if not drop_data:
            sio.dump({"X_public": trainer.X_public_}, tmp / "data.skops")
            files.append("data.skops")
        manifest = {
            "format": FORMAT,
            "kind": "cotrain.FederatedCoTrainer",
            "version": _version(),
            "drop_data": drop_data,
            "files": {f: file_sha256(tmp / f) for f in sorted(files)},
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
        labels, codes = arrays["consensus_labels"], arrays["hard"]
    models = []
    for i, fitted in state["clients"]:
        model = None
        if fitted:
            _load_skops(folder / f"client-{i}.skops", names, check_only=True)
            model = load_model(folder, f"client-{i}", names)
        models.append(model)
    X_public = None
    if not manifest["drop_data"]:  # format 1 held every input of fit: the pool is read
        X_public = _load_skops(folder / "data.skops", names)["X_public"]
    trainer = trainer_class(**saved["params"])
    for key, value in saved["fitted"].items():
        setattr(trainer, key, value)
    trainer.feature_shape_ = tuple(state["feature_shape"])
    trainer.client_models_ = models
    trainer.clients_ = [None if m is None else m.estimator_ for m in models]
    trainer.pseudo_label_codes_ = codes
    trainer.pseudo_labels_ = labels if labels.ndim == 2 else masked_labels(labels, trainer.classes_)
    trainer.history_ = History()
    for record in state["history"]:
        trainer.history_.append(RoundRecord.from_json(record))
    trainer.n_rounds_ = state["n_rounds"]
    trainer.stopped_reason_ = state["stopped_reason"]
    trainer.learner_warnings_ = {(c, cat, msg): n for c, cat, msg, n in state["learner_warnings"]}
    trainer.privacy_report_ = state["privacy_report"]
    trainer.X_public_ = X_public
    return trainer


def _verified_manifest(folder: Path) -> dict[str, Any]:
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError) as err:
        raise SavedFederationError(
            f"{folder} is not a saved federation (no readable {MANIFEST}: {err})"
        ) from None
    kind, version = manifest.get("kind"), manifest.get("format")
    if kind != "cotrain.FederatedCoTrainer" or version not in READABLE_FORMATS:
        raise SavedFederationError(
            f"{folder} holds format {version!r} of {kind!r}; this version reads formats "
            f"{', '.join(map(str, READABLE_FORMATS))} of 'cotrain.FederatedCoTrainer'"
        )
    verify_files(folder, manifest, SavedFederationError)
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


def _version() -> str:
    import cotrain

    return cotrain.__version__
