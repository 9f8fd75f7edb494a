"""Checkpoints of a federated run: everything needed to continue after a crash.

A checkpoint is a folder ``round-<t>`` inside the trainer's ``checkpoint_dir``:

- ``client-<i>.skops`` — each fitted client model, stored with :mod:`skops.io` (no
  pickle); for torch learners the tensors (module, optimizer, random generator) go to
  ``client-<i>.pt``, read back with ``torch.load(weights_only=True)``;
- ``arrays.npz`` — the server's arrays (consensus, every client's last upload as the
  delta reference, evaluation predictions, privacy ledger), loaded without pickle;
- ``broadcast.bin`` — the encoded consensus the next round's clients receive;
- ``state.json`` — the round, the sampler's generator state, the consensus state, the
  history, counted learner warnings and why the run stopped;
- ``manifest.json`` — the format version, a fingerprint of the configuration and the
  data, and the SHA-256 of every file above.

Writes are atomic: the folder is written under a temporary name, flushed, renamed, and
only then does the ``LATEST`` file (itself replaced atomically) point at it, so a crash
at any moment leaves the previous checkpoint usable. Loading checks the fingerprint
(a different configuration or data is refused) and every file's hash (a tampered or
corrupt checkpoint is refused), and lets skops build only the types this trainer's own
estimators use.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np

from cotrain.callbacks import Callback
from cotrain.files import fsync_dir, fsync_file, write_atomic

FORMAT = 2
LATEST = "LATEST"
MANIFEST = "manifest.json"
#: module prefixes whose types a checkpoint may contain besides the configured estimators'
TRUSTED_MODULES = ("sklearn.", "xgboost.", "numpy.", "scipy.", "learners.", "builtins.")


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: tampered, corrupt, or from another run."""


def fingerprint(*parts: Any) -> str:
    """SHA-256 over arrays (dtype, shape, bytes) and ``repr`` of everything else.

    Examples
    --------
    >>> fingerprint(np.arange(3), "a") == fingerprint(np.arange(3), "a")
    True
    >>> fingerprint(np.arange(3)) == fingerprint(np.arange(3.0))
    False
    """
    digest = hashlib.sha256()
    for part in parts:
        _update(digest, part)
    return digest.hexdigest()


def _update(digest: Any, part: Any) -> None:
    if isinstance(part, np.ndarray) and part.dtype != object:
        arr = np.ascontiguousarray(part)
        digest.update(f"array|{arr.dtype.str}|{arr.shape}|".encode())
        digest.update(arr.tobytes())
    elif isinstance(part, list | tuple):
        digest.update(f"seq|{len(part)}|".encode())
        for item in part:
            _update(digest, item)
    else:
        digest.update(f"repr|{part!r}|".encode())


class Checkpointer:
    """Writes and reads the checkpoints in one directory.

    Parameters
    ----------
    directory : str or Path
        Created if missing.
    config : str
        Fingerprint of the configuration and data; a checkpoint with another is refused.
    keep : int, default=2
        Complete checkpoints kept (older ones are deleted after a new one is in place).

    Examples
    --------
    >>> import tempfile
    >>> ckpt = Checkpointer(tempfile.mkdtemp(), config="abc")
    >>> _ = ckpt.save(1, {"round": 1}, {"codes": np.array([0, 1])}, b"\\x01", {})
    >>> state, arrays, broadcast, folder = ckpt.load()
    >>> state["round"], arrays["codes"].tolist(), broadcast
    (1, [0, 1], b'\\x01')
    """

    def __init__(
        self,
        directory: str | Path,
        config: str,
        keep: int = 2,
        trusted_types: set[str] | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.config = config
        self.keep = keep
        #: types (besides TRUSTED_MODULES) that :meth:`restore` lets skops build
        self.trusted_types = set(trusted_types or ())

    # ---------------------------------------------------------------- write
    def save(
        self,
        round_: int,
        state: dict[str, Any],
        arrays: dict[str, np.ndarray],
        broadcast: bytes | None,
        models: dict[int, Any],
    ) -> Path:
        """Write the checkpoint of round ``round_`` atomically and point ``LATEST`` at it."""
        self.directory.mkdir(parents=True, exist_ok=True)
        name = f"round-{round_:06d}"
        final = self.directory / name
        tmp = self.directory / f".{name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        files: list[str] = []
        for i, model in models.items():
            files += save_model(model, tmp, f"client-{i}")
        np.savez(tmp / "arrays.npz", **arrays)
        files.append("arrays.npz")
        if broadcast is not None:
            (tmp / "broadcast.bin").write_bytes(broadcast)
            files.append("broadcast.bin")
        (tmp / "state.json").write_text(json.dumps(state))
        files.append("state.json")
        manifest = {
            "format": FORMAT,
            "round": round_,
            "config": self.config,
            "files": {f: file_sha256(tmp / f) for f in sorted(files)},
        }
        write_atomic(tmp / MANIFEST, json.dumps(manifest, indent=1).encode())
        for f in [*files, MANIFEST]:
            fsync_file(tmp / f)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        fsync_dir(self.directory)
        write_atomic(self.directory / LATEST, name.encode())
        self._prune(keep_name=name)
        return final

    def update_state(self, **fields: Any) -> None:
        """Change fields of the latest checkpoint's ``state.json`` (e.g. ``finished``)."""
        folder = self.latest()
        if folder is None:
            return
        state = json.loads((folder / "state.json").read_text())
        state.update(fields)
        data = json.dumps(state).encode()
        manifest = json.loads((folder / MANIFEST).read_text())
        manifest["files"]["state.json"] = hashlib.sha256(data).hexdigest()
        # the state first: a crash in between leaves a hash mismatch, caught at load
        write_atomic(folder / "state.json", data)
        write_atomic(folder / MANIFEST, json.dumps(manifest, indent=1).encode())

    def clear(self) -> None:
        """Remove this directory's checkpoints (a fresh, non-resumed fit)."""
        if not self.directory.exists():
            return
        for path in self.directory.iterdir():
            if path.name == LATEST or path.name.startswith(("round-", ".round-")):
                shutil.rmtree(path) if path.is_dir() else path.unlink()

    def _prune(self, keep_name: str) -> None:
        rounds = sorted(p for p in self.directory.glob("round-*") if p.is_dir())
        for path in rounds[: max(0, len(rounds) - self.keep)]:
            if path.name != keep_name:
                shutil.rmtree(path, ignore_errors=True)

    # ----------------------------------------------------------------- read
    def restore(
        self, before: int | None = None
    ) -> tuple[dict[str, Any], bytes | None, dict[int, Any]]:
        """Verify and read the latest checkpoint written by :class:`CheckpointCallback`
        (the latest of a round before ``before``, if given):
        ``(state tree with its arrays, broadcast, {client id: model})``."""
        tree, arrays, broadcast, folder = self.load(before)
        state = join_arrays(tree, arrays)
        models = {
            i: load_model(folder, f"client-{i}", self.trusted_types)
            for i, client in enumerate(state.get("clients", []))
            if client["fitted"]
        }
        return state, broadcast, models

    def latest(self, before: int | None = None) -> Path | None:
        """The folder ``LATEST`` points at, or None when there is no checkpoint; with
        ``before``, the complete checkpoint of the largest round below it (or None)."""
        if before is not None:
            rounds = sorted(
                int(p.name.split("-")[1])
                for p in self.directory.glob("round-*")
                if p.is_dir() and p.name.split("-")[1].isdigit() and (p / MANIFEST).is_file()
            )
            earlier = [r for r in rounds if r < before]
            return self.directory / f"round-{earlier[-1]:06d}" if earlier else None
        pointer = self.directory / LATEST
        if not pointer.is_file():
            return None
        folder = self.directory / pointer.read_text().strip()
        if not folder.is_dir() or "/" in pointer.read_text().strip():
            raise CheckpointError(f"{pointer} points at {folder}, which is not a checkpoint")
        return folder

    def load(
        self, before: int | None = None
    ) -> tuple[dict[str, Any], dict[str, np.ndarray], bytes | None, Path]:
        """Verify and read the latest checkpoint (of a round below ``before``, if given;
        models are read by :func:`load_model`).

        Raises
        ------
        CheckpointError
            For a different configuration or data, a missing or altered file, or an
            unknown format.
        """
        folder = self.latest(before)
        if folder is None:
            raise CheckpointError(f"no checkpoint in {self.directory}")
        try:
            manifest = json.loads((folder / MANIFEST).read_text())
        except (OSError, ValueError) as err:
            raise CheckpointError(f"unreadable manifest in {folder}: {err}") from err
        if manifest.get("format") != FORMAT:
            raise CheckpointError(
                f"checkpoint {folder} has format {manifest.get('format')!r}, expected {FORMAT}"
            )
        if manifest.get("config") != self.config:
            raise CheckpointError(
                f"checkpoint {folder} comes from a different configuration or data (its "
                "fingerprint differs): the estimators, the trainer's parameters, the clients' "
                "data and the public pool must be those of the checkpointed run"
            )
        verify_files(folder, manifest, CheckpointError, "checkpoint ")
        state = json.loads((folder / "state.json").read_text())
        with np.load(folder / "arrays.npz", allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
        broadcast_file = folder / "broadcast.bin"
        broadcast = broadcast_file.read_bytes() if broadcast_file.exists() else None
        return state, arrays, broadcast, folder


class CheckpointCallback(Callback):
    """Writes a checkpoint after every round, and marks the run finished at the end.

    Parameters
    ----------
    checkpointer : Checkpointer
        Where the checkpoints go.
    collect : callable
        ``collect() -> (state, broadcast, models)``: the run's state dicts as one tree
        (arrays anywhere in it go to ``arrays.npz``), the encoded broadcast, and
        ``{client id: fitted model}``.

    Examples
    --------
    >>> import tempfile
    >>> from cotrain.history import RoundRecord
    >>> from cotrain.federation.loop import RoundLoop
    >>> ckpt = Checkpointer(tempfile.mkdtemp(), config="abc")
    >>> state = lambda: ({"codes": np.array([1, 0])}, None, {})
    >>> loop = RoundLoop(lambda t, s: RoundRecord(round=t), lambda: np.arange(2), rounds=2,
    ...                  callbacks=[CheckpointCallback(ckpt, state)])
    >>> loop.run()
    >>> state, arrays, _, _ = ckpt.load()
    >>> state["round"], state["finished"], arrays["codes"].tolist()
    (2, True, [1, 0])
    """

    def __init__(self, checkpointer: Checkpointer, collect: Any) -> None:
        self.checkpointer = checkpointer
        self.collect = collect

    def on_round_end(self, loop: Any, record: Any) -> None:
        state, broadcast, models = self.collect()
        tree, arrays = split_arrays(state)
        tree.update(round=record.round, stopped_reason=None, finished=False)
        self.checkpointer.save(record.round, tree, arrays, broadcast, models)

    def on_fit_end(self, loop: Any) -> None:
        self.checkpointer.update_state(finished=True, stopped_reason=loop.stopped_reason)


def split_arrays(state: Any, path: str = "") -> tuple[Any, dict[str, np.ndarray]]:
    """Move the arrays out of a state tree: ``(tree for JSON, {key: array})``.

    An array becomes ``{"__array__": key}``, its key the dotted path to it (top-level
    arrays keep their own name). :func:`join_arrays` puts them back.

    Examples
    --------
    >>> tree, arrays = split_arrays({"codes": np.array([1]), "clients": [{"x": np.zeros(2)}]})
    >>> tree, sorted(arrays)
    ({'codes': {'__array__': 'codes'}, 'clients': [{'x': {'__array__': 'clients.0.x'}}]}, \
['clients.0.x', 'codes'])
    >>> join_arrays(tree, arrays)["clients"][0]["x"].tolist()
    [0.0, 0.0]
    """
    arrays: dict[str, np.ndarray] = {}
    if isinstance(state, np.ndarray):
        arrays[path] = state
        return {"__array__": path}, arrays
    if isinstance(state, dict):
        tree = {}
        for key, value in state.items():
            tree[key], more = split_arrays(value, f"{path}.{key}" if path else str(key))
            arrays.update(more)
        return tree, arrays
    if isinstance(state, list | tuple):
        out = []
        for j, value in enumerate(state):
            item, more = split_arrays(value, f"{path}.{j}" if path else str(j))
            out.append(item)
            arrays.update(more)
        return out, arrays
    if isinstance(state, np.generic):
        return state.item(), arrays
    return state, arrays


def join_arrays(tree: Any, arrays: dict[str, np.ndarray]) -> Any:
    """Put the arrays that :func:`split_arrays` took out back into the tree."""
    if isinstance(tree, dict):
        if set(tree) == {"__array__"}:
            return arrays[tree["__array__"]]
        return {key: join_arrays(value, arrays) for key, value in tree.items()}
    if isinstance(tree, list):
        return [join_arrays(value, arrays) for value in tree]
    return tree


def open_checkpointer(
    directory: Any, resume: bool, estimators: list[Any], params: dict[str, Any], data: Any
) -> Checkpointer | None:
    """The checkpointer of a trainer's ``checkpoint_dir`` (None without one).

    Refuses learners that cannot be checkpointed (``NotImplementedError``) and a
    ``resume`` without a directory (``ValueError``); a fit that does not resume clears
    the directory's old checkpoints.
    """
    if directory is None:
        if resume:
            raise ValueError("resume=True needs checkpoint_dir (where the run was saved)")
        return None
    if not isinstance(directory, str | os.PathLike):
        raise TypeError(
            f"checkpoint_dir must be a path (str or os.PathLike), got {type(directory).__name__}"
        )
    for est in estimators:
        if (reason := checkpoint_blocker(est)) is not None:
            raise NotImplementedError(
                f"checkpoint_dir: {type(est).__name__} models cannot be checkpointed yet ({reason})"
            )
    checkpointer = Checkpointer(
        directory,
        configuration_fingerprint(params, estimators, data),
        trusted_types=estimator_types(estimators),
    )
    if not resume:
        checkpointer.clear()
    return checkpointer


def configuration_fingerprint(params: dict[str, Any], estimators: list[Any], data: Any) -> str:
    """What a run's result depends on: the estimators, the parameters given (callers
    leave out those that do not change the result) and every array of the data."""
    return fingerprint(
        FORMAT,
        [repr(e) for e in estimators],
        sorted((k, repr(v)) for k, v in params.items()),
        data.X_clients,
        data.y_clients,
        data.X_public,
        data.classes,
        data.X_eval,
        data.y_eval_codes,
        data.y_public_codes,
    )


def save_model(model: Any, folder: Path, name: str) -> list[str]:
    """Store a fitted :class:`learners.ClassAlignedClassifier`; returns the files written.

    A learner with ``_checkpoint_tensors()`` keeps the attributes it names in
    ``_checkpoint_tensor_attrs`` out of the skops file: they go to ``<name>.pt`` for the
    fitted model, and to ``<name>.estimator.pt`` for the wrapper's unfitted template when
    it holds any of them (e.g. a ``GPT2Config`` given as a parameter). A wrapper around a
    :class:`learners.BlendedClassifier` (a site's blend of its local and co-trained models)
    stores the tensors of each of those models the same way, under ``<name>.local`` and
    ``<name>.co<k>``.
    """
    import skops.io as sio

    from learners.blend import BlendedClassifier

    model, files = _strip_tensors(model, folder, name)
    blend = getattr(model, "estimator_", None)
    if isinstance(blend, BlendedClassifier):
        blend = copy.copy(blend)
        parts = []
        for stem, part in _blend_parts(blend, name):
            stripped, written = _strip_tensors(part, folder, stem)
            parts.append(stripped)
            files += written
        blend.local, blend.cotrained = parts[0], parts[1:]
        model.estimator_ = model.estimator = blend
    sio.dump(model, folder / f"{name}.skops")
    return [f"{name}.skops", *files]


def _blend_parts(blend: Any, name: str) -> list[tuple[str, Any]]:
    """``(file stem, wrapper)`` of a blend's local model and each co-trained model."""
    return [(f"{name}.local", blend.local)] + [
        (f"{name}.co{k}", model) for k, model in enumerate(blend.cotrained)
    ]


def _strip_tensors(model: Any, folder: Path, stem: str) -> tuple[Any, list[str]]:
    """A copy of the wrapper ``model`` without its learners' tensors, which go to
    ``<stem>.pt`` / ``<stem>.estimator.pt``; returns it and the files written."""
    files: list[str] = []
    model = copy.copy(model)
    for attr, suffix in _TENSOR_FILES:
        estimator = getattr(model, attr, None)
        if not callable(getattr(estimator, "_checkpoint_tensors", None)):
            continue
        held = [a for a in estimator._checkpoint_tensor_attrs if a in vars(estimator)]
        if not held:
            continue
        import torch

        torch.save(estimator._checkpoint_tensors(), folder / f"{stem}{suffix}")
        files.append(f"{stem}{suffix}")
        stripped = copy.copy(estimator)
        for a in held:
            del stripped.__dict__[a]
        setattr(model, attr, stripped)
    return model, files


#: (wrapper attribute, file suffix) of the estimators whose tensors :func:`save_model` stores
_TENSOR_FILES = (("estimator_", ".pt"), ("estimator", ".estimator.pt"))


def load_model(folder: Path, name: str, trusted_types: set[str]) -> Any:
    """Read a model written by :func:`save_model`, building only trusted types.

    Raises
    ------
    CheckpointError
        If the file holds a type outside :data:`TRUSTED_MODULES` and ``trusted_types``.
    """
    import skops.io as sio

    path = folder / f"{name}.skops"
    untrusted, refused = untrusted_types(path, trusted_types)
    if refused:
        raise CheckpointError(
            f"{path} holds types this trainer's estimators do not use: {refused}; refusing "
            "to load it"
        )
    model = sio.load(path, trusted=untrusted)
    from learners.blend import BlendedClassifier

    _restore_tensors(model, folder, name)
    blend = getattr(model, "estimator_", None)
    if isinstance(blend, BlendedClassifier):
        model.estimator = blend  # one object, as saved
        for stem, part in _blend_parts(blend, name):
            _restore_tensors(part, folder, stem)
    return model


def _restore_tensors(model: Any, folder: Path, stem: str) -> None:
    """Put the tensors :func:`_strip_tensors` wrote for ``stem`` back into ``model``."""
    for attr, suffix in _TENSOR_FILES:
        tensors = folder / f"{stem}{suffix}"
        if tensors.exists():
            import torch

            getattr(model, attr)._restore_tensors(torch.load(tensors, weights_only=True))


def untrusted_types(
    path: Path, trusted_types: Collection[str], trusted_modules: tuple[str, ...] = TRUSTED_MODULES
) -> tuple[list[str], list[str]]:
    """The trusted-type rule of every skops file cotrain reads (checkpoints, saved
    federations): ``(needed, refused)``, the types skops must be told to trust to load
    ``path``, and those among them neither under ``trusted_modules`` nor in
    ``trusted_types`` (exact dotted names), which must be refused.

    Examples
    --------
    >>> import tempfile
    >>> import skops.io as sio
    >>> from collections import Counter
    >>> path = Path(tempfile.mkdtemp()) / "counts.skops"
    >>> sio.dump(Counter(a=1), path)
    >>> untrusted_types(path, set())
    (['collections.Counter'], ['collections.Counter'])
    >>> untrusted_types(path, {"collections.Counter"})[1]
    []
    """
    import skops.io as sio

    needed = sio.get_untrusted_types(file=path)
    refused = [t for t in needed if not (t.startswith(trusted_modules) or t in trusted_types)]
    return needed, refused


def checkpoint_blocker(estimator: Any) -> str | None:
    """Why ``estimator``'s fitted models cannot be checkpointed, or None if they can.

    A learner declares it with a class attribute ``checkpoint_unsupported`` (a reason);
    learners without it are stored with skops (torch tensors with ``torch.save``).

    Examples
    --------
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> checkpoint_blocker(DecisionTreeClassifier()) is None
    True
    """
    return getattr(type(estimator), "checkpoint_unsupported", None)


def estimator_types(estimators: list[Any]) -> set[str]:
    """Dotted names of the estimators' classes and of every estimator in their params."""
    names: set[str] = set()

    def visit(obj: Any) -> None:
        cls = type(obj)
        names.add(f"{cls.__module__}.{cls.__qualname__}")
        if hasattr(obj, "get_params"):
            for value in obj.get_params(deep=False).values():
                if hasattr(value, "get_params"):
                    visit(value)
                elif isinstance(value, type):
                    names.add(f"{value.__module__}.{value.__qualname__}")

    for est in estimators:
        visit(est)
    return names


def verify_files(
    folder: Path, manifest: dict[str, Any], error: type[Exception], label: str = ""
) -> None:
    """Refuse ``folder`` unless it holds exactly the files its manifest lists, with the
    manifest's SHA-256 (the check of checkpoints and of saved trainers alike).

    Parameters
    ----------
    folder : Path
    manifest : dict
        Its ``"files"`` maps each file name to its SHA-256 (hex).
    error : type of Exception
        Raised, naming the folder or the altered file.
    label : str, default=""
        Put before the path in the message (e.g. ``"checkpoint "``).

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "a.txt").write_text("a")
    >>> verify_files(folder, {"files": {"a.txt": "0" * 64}}, ValueError)
    Traceback (most recent call last):
    ...
    ValueError: /.../a.txt was altered or is corrupt (SHA-256 differs from the manifest)
    """
    expected = manifest.get("files", {})
    present = {p.name for p in folder.iterdir()} - {MANIFEST}
    if present != set(expected):
        raise error(
            f"{label}{folder} is incomplete or was altered: files {sorted(present)} differ "
            f"from the manifest's {sorted(expected)}"
        )
    for name, digest in expected.items():
        if file_sha256(folder / name) != digest:
            raise error(
                f"{label}{folder / name} was altered or is corrupt (SHA-256 differs from the "
                "manifest)"
            )


def file_sha256(path: Path) -> str:
    """SHA-256 of a file (hex), read in blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
