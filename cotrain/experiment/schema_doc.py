"""Every key of an experiment file, described: its type, default, allowed values and meaning.

:data:`KEYS` has one :class:`KeyDoc` per key, by dotted path, of
:data:`~cotrain.experiment.config.SCHEMA` (recursively), of ``[[clients]]``
(:data:`~cotrain.experiment.config.CLIENT_KEYS`), ``[method.privacy]``
(:data:`~cotrain.experiment.config.PRIVACY_KEYS`), ``[method.certainty]``
(:data:`~cotrain.experiment.config.CERTAINTY_KEYS`) and ``[[variant]]``
(:data:`VARIANT_KEYS`). The types come from the schema (:func:`schema_keys`), the allowed
values from the runner's own tables (datasets, partitions, methods, consensus names,
privacy mechanisms, learners' short names, :data:`cotrain.params.PARAMS`). The
documentation's reference of the experiment format is generated from this module, and
``tests/test_schema_doc.py`` checks that every key has an entry and no entry is stale.

Examples
--------
>>> from cotrain.experiment.schema_doc import KEYS, schema_keys, type_name
>>> set(KEYS) == set(schema_keys())
True
>>> type_name(schema_keys()["split.alpha"])
'integer, float or array'
>>> KEYS["split.partition"].default, KEYS["split.partition"].choices
('iid', ('iid', 'dirichlet', 'two_alpha'))
>>> KEYS["method.rounds"].default
10
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from typing import Any

from consensus import available_consensus
from cotrain.datasets.loaders import PAPER_SPLITS
from cotrain.experiment.config import CERTAINTY_KEYS, CLIENT_KEYS, PRIVACY_KEYS, SCHEMA
from cotrain.experiment.data import BUNDLED, DATA_SUFFIXES, DIGITS_DEFAULTS, PARTITIONS, SHARED
from cotrain.experiment.learners import LEARNERS
from cotrain.experiment.methods import (
    CERTAINTY_CONSENSUS,
    CONSENSUS_METHODS,
    METHODS,
    PRIVACY_MECHANISMS,
    QUALITY_CONSENSUS,
    QUORUM_CONSENSUS,
)
from cotrain.params import PARAMS
from cotrain.privacy.mechanisms.param_checks import UNITS

__all__ = [
    "KEYS",
    "METHOD_SUMMARIES",
    "REQUIRED",
    "SECTIONS",
    "UNSET",
    "VARIANT_KEYS",
    "KeyDoc",
    "privacy_defaults",
    "schema_keys",
    "type_name",
]


class _Marker:
    """A default that is not a value: :data:`REQUIRED` or :data:`UNSET`."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


#: The default of a key that must be given.
REQUIRED = _Marker("REQUIRED")
#: The default of an optional key that has no value when left out (its entry says what
#: happens then).
UNSET = _Marker("UNSET")

#: The keys of one ``[[variant]]`` entry besides the overrides: ``load_experiment`` reads
#: them itself (every other key of a variant overrides the key of that name in
#: :data:`~cotrain.experiment.config.SCHEMA`)
VARIANT_KEYS: dict[str, Any] = {"label": str, "paper": (int, float), "seeds": list}

#: The tables of an experiment file, in the order of the reference, with what each holds:
#: ``""`` is the top level, ``clients`` and ``variant`` are arrays of tables
SECTIONS: dict[str, str] = {
    "": "The top level: the experiment's name, its seeds and the tables below.",
    "data": "Where the rows come from: one bundled or shared dataset, or a file.",
    "split": "How the rows are cut into the public pool, the labelled rows and the test "
    "set, and how the labelled rows are shared out among the clients.",
    "method": "What runs on the data: the method, its consensus and its parameters.",
    "method.privacy": "The label-privacy mechanism of ``dp-fedct`` (required there); the "
    "keys other than ``mechanism`` are the mechanism's own parameters.",
    "method.certainty": "FedAUX certainty scorers fitted on each client's rows "
    "(:func:`cotrain.privacy.fedaux_weights`), for a certainty or quality consensus.",
    "clients": "One ``[[clients]]`` entry per group of clients that use the same learner.",
    "variant": "One ``[[variant]]`` entry per results row: a label, optionally the paper's "
    "number and fewer seeds, and any of ``data``, ``split``, ``method``, ``clients`` "
    "overriding the base configuration (tables are merged key by key, ``clients`` is "
    "replaced). ``name``, ``description``, ``paper_dataset`` and ``variant`` cannot be set "
    "inside a variant.",
}

#: One line per ``method.name`` (a key of :data:`~cotrain.experiment.methods.METHODS`)
METHOD_SUMMARIES: dict[str, str] = {
    "fedct": "federated co-training (:class:`cotrain.FederatedCoTrainer`): the clients share "
    "labels on the public pool, the server's consensus becomes their pseudo-labels",
    "dp-fedct": "FedCT with a label-privacy mechanism on every client (``[method.privacy]``)",
    "dd": "distributed distillation (:class:`cotrain.baselines.DistributedDistillation`): "
    "soft labels averaged on the public pool",
    "fedavg": "federated averaging of the first client's learner "
    "(:class:`cotrain.baselines.FedAvg`)",
    "dp-fedavg": "FedAvg with clipped updates and Gaussian noise added by the server "
    "(:class:`cotrain.baselines.DPFedAvg`)",
    "pate": "PATE (:class:`cotrain.baselines.PATE`): the clients are teachers, a noisy vote "
    "labels the pool for one student",
    "local": "every client alone on its own rows (:class:`cotrain.baselines.LocalOnly`)",
    "centralized": "one model on the pooled labelled rows "
    "(:class:`cotrain.baselines.Centralized`), one results row per distinct learner",
}


@dataclass(frozen=True)
class KeyDoc:
    """What one key of an experiment file means, its default and the values it takes.

    Attributes
    ----------
    description : str
        What the key does (reStructuredText).
    default : object, default=UNSET
        The value used when the key is left out: a value, :data:`REQUIRED` (the key must be
        given) or :data:`UNSET` (no value; ``default_note`` says what happens).
    default_note : str, default=""
        The default in words where it depends on other keys.
    choices : tuple of str, default=()
        The allowed values where they are a list of names, from the runner's tables.
    accepts : str, default=""
        The allowed values in words (ranges, shapes), where they are not a list of names.
    applies_to : tuple of str, default=()
        The ``method.name`` values (or consensus names) that read the key; empty: all.

    Examples
    --------
    >>> doc = KeyDoc("The number of rounds.", default=10, accepts="an integer >= 1")
    >>> doc.default, doc.choices
    (10, ())
    """

    description: str
    default: Any = UNSET
    default_note: str = ""
    choices: tuple[str, ...] = ()
    accepts: str = ""
    applies_to: tuple[str, ...] = ()


def schema_keys() -> dict[str, Any]:
    """Every key an experiment file may hold, as dotted paths, with its type from the schema.

    The keys of :data:`~cotrain.experiment.config.SCHEMA`, recursively, with
    :data:`~cotrain.experiment.config.CLIENT_KEYS` below ``clients``,
    :data:`~cotrain.experiment.config.PRIVACY_KEYS` below ``method.privacy``,
    :data:`~cotrain.experiment.config.CERTAINTY_KEYS` below ``method.certainty`` and
    :data:`VARIANT_KEYS` below ``variant``. A table's own path maps to ``dict``, an array
    of tables to ``list``.

    Returns
    -------
    dict
        Dotted path -> a type or a tuple of types, in the schema's order.

    Examples
    --------
    >>> keys = schema_keys()
    >>> keys["data"], keys["clients.learner"], keys["method.privacy.epsilon"]
    (<class 'dict'>, <class 'str'>, (<class 'int'>, <class 'float'>))
    """
    below = {
        "clients": CLIENT_KEYS,
        "variant": VARIANT_KEYS,
        "method.privacy": PRIVACY_KEYS,
        "method.certainty": CERTAINTY_KEYS,
    }
    out: dict[str, Any] = {}

    def walk(table: dict[str, Any], prefix: str) -> None:
        for key, expected in table.items():
            path = f"{prefix}{key}"
            if isinstance(expected, dict):
                out[path] = dict
                walk(expected, f"{path}.")
            else:
                out[path] = expected
            if path in below:
                walk(below[path], f"{path}.")

    walk(SCHEMA, "")
    return out


def type_name(expected: Any) -> str:
    """A schema type as TOML names it.

    Examples
    --------
    >>> type_name(str), type_name((int, float)), type_name(dict)
    ('string', 'integer or float', 'table')
    """
    names = {
        str: "string",
        int: "integer",
        float: "float",
        bool: "boolean",
        list: "array",
        dict: "table",
    }
    types = expected if isinstance(expected, tuple) else (expected,)
    words = [names.get(t, t.__name__) for t in types]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def privacy_defaults(key: str) -> dict[str, Any]:
    """The default of a ``[method.privacy]`` key for each mechanism that takes it.

    Read from the signatures of the mechanisms' classes in :mod:`cotrain.privacy`;
    :data:`REQUIRED` where the mechanism has no default.

    Parameters
    ----------
    key : str
        A key of :data:`~cotrain.experiment.config.PRIVACY_KEYS` other than ``mechanism``.

    Returns
    -------
    dict
        ``mechanism`` name -> default, for the mechanisms whose class takes ``key``.

    Examples
    --------
    >>> privacy_defaults("n_teachers")
    {'subsample_aggregate': 50, 'secure_votes': 50}
    >>> privacy_defaults("epsilon")["randomized_response"]
    REQUIRED
    """
    privacy = importlib.import_module("cotrain.privacy")
    out: dict[str, Any] = {}
    for mechanism, cls_name in PRIVACY_MECHANISMS.items():
        parameters = inspect.signature(getattr(privacy, cls_name)).parameters
        if key in parameters:
            default = parameters[key].default
            out[mechanism] = REQUIRED if default is inspect.Parameter.empty else default
    return out


def _default_of(cls_name: str, parameter: str) -> Any:
    """The default of a parameter of a class of :mod:`consensus`."""
    cls = getattr(importlib.import_module("consensus"), cls_name)
    return inspect.signature(cls).parameters[parameter].default


def _privacy_key(description: str, choices: tuple[str, ...] = ()) -> KeyDoc:
    return KeyDoc(
        description,
        default_note="the mechanism's default (:func:`privacy_defaults`)",
        choices=choices,
        applies_to=("dp-fedct",),
    )


_BUNDLED = ", ".join(f"``{name}``" for name in BUNDLED)
_SHARED = ", ".join(f"``{name}``" for name in SHARED)
_PAPER = "; ".join(
    f"{name}: " + ", ".join(f"{k} = {v}" for k, v in sizes.items())
    for name, sizes in PAPER_SPLITS.items()
)
_TRUST = PARAMS["trust"]

#: One entry per key of an experiment file, by dotted path (see :func:`schema_keys`)
KEYS: dict[str, KeyDoc] = {
    # --- top level ------------------------------------------------------------------------
    "name": KeyDoc(
        "The experiment's name: the title of ``summary.md``, and the label of its one "
        "results row when there is no ``[[variant]]``.",
        default=REQUIRED,
    ),
    "description": KeyDoc(
        "One line under the title of ``summary.md``.",
        default="",
    ),
    "paper_dataset": KeyDoc(
        "The dataset of the paper's numbers when it is not the one this experiment runs "
        "on: the summary's columns then read ``paper (<dataset>)`` and ``gap (shape "
        "only)``.",
        default_note="the paper's numbers are on the same data",
    ),
    "seeds": KeyDoc(
        "The seeds: every variant runs once per seed (a seed draws the split, the "
        "partition and the learners' seeds).",
        default=REQUIRED,
        accepts="a non-empty array of integers",
    ),
    "data": KeyDoc("The ``[data]`` table.", default=REQUIRED),
    "split": KeyDoc("The ``[split]`` table.", default=REQUIRED),
    "method": KeyDoc("The ``[method]`` table.", default=REQUIRED),
    "clients": KeyDoc(
        "The ``[[clients]]`` entries: the clients' learners. Required unless every "
        "``[[variant]]`` sets its own ``clients``.",
        default=REQUIRED,
        accepts="a non-empty array of tables",
    ),
    "variant": KeyDoc(
        "The ``[[variant]]`` entries, one results row each.",
        default_note="one variant: the base configuration, labelled with ``name``",
        accepts="an array of tables",
    ),
    # --- [data] ---------------------------------------------------------------------------
    "data.dataset": KeyDoc(
        f"A named dataset: bundled with scikit-learn ({_BUNDLED}) or read from the shared "
        f"data folder ({_SHARED}; see ``data_home``). Exactly one of ``dataset`` and "
        "``path``.",
        default_note="none: exactly one of ``dataset`` and ``path`` is required",
        choices=BUNDLED + SHARED,
    ),
    "data.path": KeyDoc(
        "A data file, read by its extension: CSV or Parquet (with ``target``), ``.npz`` "
        "(arrays ``X`` and ``y``) or ``.npy`` (the last column is the label). A relative path "
        "is read from the experiment file's folder. Text feature columns are one-hot encoded "
        "(:func:`~cotrain.experiment.data.read_table`; a warning names them).",
        default_note="none: exactly one of ``dataset`` and ``path`` is required",
        accepts="a path to a file ending in " + ", ".join(f"``{s}``" for s in DATA_SUFFIXES),
    ),
    "data.target": KeyDoc(
        "The label column of a CSV or Parquet file: its name, or its index (0 is the first "
        "column, -1 the last; the only form with ``header = false``).",
        default_note="required for a CSV or Parquet file",
        accepts="a column name, or a column index",
    ),
    "data.header": KeyDoc(
        "Whether the CSV file's first row names the columns (CSV files only). A stated "
        "value is used as stated, with a warning when the first row contradicts it (text "
        "above a numeric column, or numbers where a header should be).",
        default_note="detected from the file (:func:`~cotrain.experiment.data.detect_header`), "
        "with a warning that says which was assumed",
    ),
    "data.na_values": KeyDoc(
        'The strings that mark a missing value in the CSV file, e.g. ``["?"]``: read as '
        "NaN (pandas' ``na_values``, besides its own such as an empty cell or ``NA``). "
        "Spaces after a separator are skipped first (UCI files write ``39, State-gov, ?``), "
        'so ``["?"]`` matches `` ?`` too. Without it, a column of numbers with at most 3 '
        "distinct other strings in at most "
        "20 % of its cells is still read as numbers, those cells as NaN, with a warning "
        "naming them; it is never one-hot encoded. NaN reaches the learners: one that "
        "cannot take it needs an imputer (``make_pipeline(SimpleImputer(), ...)``) or is "
        "refused before training, by name.",
        default_note="pandas' own markers only",
    ),
    "data.standardize": KeyDoc(
        "Standardise the features with the mean and standard deviation of the public pool "
        "(never of the private rows). Not applied to ``digits``.",
        default=True,
    ),
    "data.data_home": KeyDoc(
        "The folder of the shared datasets.",
        default_note="as :func:`cotrain.datasets.data_home` finds it: ``COTRAIN_DATA``, "
        "else ``../shared/data``",
        accepts="a path to a folder",
    ),
    # --- [split] --------------------------------------------------------------------------
    "split.n_public": KeyDoc(
        "The size of the public unlabelled pool U.",
        default_note=f"digits: {DIGITS_DEFAULTS['n_public']}; the paper's split for the other "
        "named datasets; required for a data file",
        accepts="an integer >= 1",
    ),
    "split.n_labeled": KeyDoc(
        "The labelled rows over all clients.",
        default_note="digits: the rows left after the pool and the test set; the paper's "
        "split for the other named datasets; required for a data file",
        accepts="an integer >= 1",
    ),
    "split.n_test": KeyDoc(
        "The held-out test rows.",
        default_note=f"digits: {DIGITS_DEFAULTS['n_test']}; the paper's split for the other "
        f"named datasets ({_PAPER}); required for a data file",
        accepts="an integer >= 1",
    ),
    "split.n_clients": KeyDoc(
        "The number of clients (at most the number of labelled rows).",
        default=REQUIRED,
        accepts="an integer >= 1",
    ),
    "split.partition": KeyDoc(
        "How the labelled rows are shared out among the clients (:mod:`cotrain.partition`): "
        "``iid``, label-skewed ``dirichlet`` (with ``alpha``), or ``two_alpha`` (half the "
        "clients with each of two concentrations, ``alpha = [a1, a2]``).",
        default="iid",
        choices=PARTITIONS,
    ),
    "split.alpha": KeyDoc(
        "The Dirichlet concentration: a number for ``dirichlet``, two numbers for "
        "``two_alpha``. Smaller is more skewed.",
        default_note="required by ``dirichlet`` and ``two_alpha``",
        accepts="a number, or an array of two numbers",
    ),
    # --- [method] -------------------------------------------------------------------------
    "method.name": KeyDoc(
        "The method. "
        + "; ".join(f"``{name}``: {text}" for name, text in METHOD_SUMMARIES.items())
        + ".",
        default=REQUIRED,
        choices=tuple(METHODS),
    ),
    "method.consensus": KeyDoc(
        "How the clients' labels become one pseudo-label per public example: a name of "
        ":func:`consensus.available_consensus` (the table below gives the class of each), "
        "or ``auto``, the Python default (:class:`cotrain.FederatedCoTrainer`'s "
        '``consensus="auto"``: Dawid–Skene without a privacy mechanism, majority with '
        "one). The runner's default is the paper's majority vote.",
        default="majority",
        choices=("auto", *available_consensus()),
        applies_to=CONSENSUS_METHODS,
    ),
    "method.quorum": KeyDoc(
        "The share of the votes a label needs under a qualified majority "
        "(:class:`consensus.QualifiedMajority`); below it the consensus abstains.",
        default=_default_of("QualifiedMajority", "quorum"),
        accepts="a number in (0, 1]",
        applies_to=QUORUM_CONSENSUS,
    ),
    "method.rounds": KeyDoc(
        "Communication rounds (of the round-based methods).",
        default=10,
        accepts=PARAMS["rounds"].describe(),
    ),
    "method.share": KeyDoc(
        "What the clients send: ``hard`` labels or ``soft`` probabilities.",
        default=PARAMS["share"].default,
        choices=PARAMS["share"].options,
        applies_to=CONSENSUS_METHODS,
    ),
    "method.participation": KeyDoc(
        "The fraction of the clients asked each round.",
        default=PARAMS["participation"].default,
        accepts=PARAMS["participation"].describe(),
        applies_to=CONSENSUS_METHODS,
    ),
    "method.early_stopping": KeyDoc(
        "Stop once the consensus has not changed for this many rounds.",
        default_note="no early stopping",
        accepts=PARAMS["early_stopping"].describe().removeprefix("None or "),
        applies_to=CONSENSUS_METHODS,
    ),
    "method.local_epochs": KeyDoc(
        "Local epochs per round of FedAvg.",
        default=1,
        accepts="an integer >= 1",
        applies_to=("fedavg", "dp-fedavg"),
    ),
    "method.noise_sigma": KeyDoc(
        "The standard deviation of PATE's Gaussian noise on the teachers' vote counts.",
        default=1.0,
        accepts="a number >= 0",
        applies_to=("pate",),
    ),
    "method.clip_norm": KeyDoc(
        "DP-FedAvg's clipping norm of each client's update.",
        default=1.0,
        accepts="a number > 0",
        applies_to=("dp-fedavg",),
    ),
    "method.noise_multiplier": KeyDoc(
        "DP-FedAvg's noise multiplier (the noise's standard deviation over the clipping norm).",
        default=1.0,
        accepts="a number >= 0",
        applies_to=("dp-fedavg",),
    ),
    "method.privacy": KeyDoc(
        "The ``[method.privacy]`` table: the label-privacy mechanism.",
        default_note=", ".join(f"required by ``{n}``" for n, m in METHODS.items() if m.requires),
        applies_to=tuple(n for n, m in METHODS.items() if "privacy" in m.requires),
    ),
    "method.audit": KeyDoc(
        "Run a membership-inference audit on what the server saw "
        "(:func:`cotrain.audit.audit_clients`); ``result.json`` gets its ``vul``.",
        default=False,
    ),
    "method.power": KeyDoc(
        "The exponent of the certainty scores in a quality vote (:class:`consensus.QualityVote`).",
        default=_default_of("QualityVote", "power"),
        accepts="a number",
        applies_to=QUALITY_CONSENSUS,
    ),
    "method.quality_power": KeyDoc(
        "The exponent of the clients' quality in a quality vote (:class:`consensus.QualityVote`).",
        default=_default_of("QualityVote", "quality_power"),
        accepts="a number",
        applies_to=QUALITY_CONSENSUS,
    ),
    "method.top_k": KeyDoc(
        "Only the ``top_k`` most certain clients vote on each example in a quality vote.",
        default_note="every client votes",
        accepts="an integer >= 1",
        applies_to=QUALITY_CONSENSUS,
    ),
    "method.certainty": KeyDoc(
        "The ``[method.certainty]`` table: the clients' FedAUX certainty scorers.",
        default_note="required by "
        + ", ".join(f"``{n}``" for n in CERTAINTY_CONSENSUS if n not in QUALITY_CONSENSUS)
        + "; optional for "
        + ", ".join(f"``{n}``" for n in QUALITY_CONSENSUS),
        applies_to=CERTAINTY_CONSENSUS,
    ),
    "method.trust": KeyDoc(
        "How far each client trusts the pseudo-labels against its own labels "
        "(:mod:`cotrain.trust`): ``none`` (the paper's FedCT: full trust), ``auto``, or a "
        "fixed weight.",
        default="none",
        choices=("none", *_TRUST.options),
        accepts="a weight in [0, 1]",
        applies_to=CONSENSUS_METHODS,
    ),
    "method.reproducible_noise": KeyDoc(
        "Seed the privacy noise from the run's seed so that a run repeats exactly "
        "(simulations only: whoever knows the seed, the server included, can then replay the "
        "noise, so the printed ε does not hold against them; ``result.json`` records "
        "``noise_replayable``).",
        default=False,
    ),
    # --- [method.privacy] -----------------------------------------------------------------
    "method.privacy.mechanism": KeyDoc(
        "The mechanism, by name: "
        + ", ".join(
            f"``{n}`` (:class:`cotrain.privacy.{c}`)" for n, c in PRIVACY_MECHANISMS.items()
        )
        + ".",
        default="randomized_response",
        choices=tuple(PRIVACY_MECHANISMS),
        applies_to=("dp-fedct",),
    ),
    "method.privacy.epsilon": _privacy_key(
        'The privacy budget ε of one private record (or label, with ``unit = "label"``): '
        "of one round's release (``randomized_response``, ``xor``, ``subsample_aggregate``) "
        "or of the whole run (``secure_votes``)."
    ),
    "method.privacy.sensitivity": _privacy_key(
        "How many released labels one private record can change; unset: all released labels."
    ),
    "method.privacy.unit": _privacy_key(
        "What ε protects: ``record`` (one private training record) or ``label`` (one "
        "released public label, the FedCT paper's notion; kept for comparison).",
        choices=UNITS,
    ),
    "method.privacy.n_teachers": _privacy_key(
        "Teachers per client: its rows are split among them by a keyed hash of each record."
    ),
    "method.privacy.sigma": _privacy_key(
        "The standard deviation of the Gaussian noise on each teacher vote count (give "
        "``sigma`` or ``epsilon``)."
    ),
    "method.privacy.noise_multiplier": _privacy_key(
        "DP-SGD's noise multiplier (the noise over the clipping norm)."
    ),
    "method.privacy.max_grad_norm": _privacy_key("DP-SGD's per-sample gradient clipping norm."),
    "method.privacy.sampling_rate": _privacy_key(
        "DP-SGD's Poisson sampling rate: the probability that a step's batch takes a row "
        "(required: public configuration, not derived from the private rows)."
    ),
    "method.privacy.steps": _privacy_key(
        "DP-SGD's steps per fit, the first included (required, for the same reason)."
    ),
    "method.privacy.delta": _privacy_key("The δ at which ε is calibrated and reported."),
    # --- [method.certainty] ---------------------------------------------------------------
    "method.certainty.lam": KeyDoc(
        "The L2 regularisation λ of each client's scorer (``C = 1/(λN)``).",
        default=0.1,
        accepts="a number > 0",
    ),
    "method.certainty.dp": KeyDoc(
        "Release each scorer with Gaussian noise, (ε, δ)-DP for one private record of that "
        "client against the server; without it the scores carry no guarantee.",
        default=False,
    ),
    "method.certainty.epsilon": KeyDoc(
        "The ε of each client's scorer (with ``dp = true``).",
        default=0.5,
        accepts="a number > 0",
    ),
    "method.certainty.delta": KeyDoc(
        "The δ of each client's scorer (with ``dp = true``).",
        default=1e-5,
        accepts="a number in (0, 1)",
    ),
    # --- [[clients]] ----------------------------------------------------------------------
    "clients.learner": KeyDoc(
        "The learner of these clients: a short name (the table below gives the class and the "
        "default parameters of each) or a class path such as "
        "``sklearn.svm.SVC``.",
        default=REQUIRED,
        choices=tuple(LEARNERS),
        accepts="or a class path ``module.Class``",
    ),
    "clients.params": KeyDoc(
        "Constructor parameters, over the short name's defaults; checked before anything runs.",
        default={},
        accepts="a table",
    ),
    "clients.count": KeyDoc(
        "How many clients use this learner; the counts add up to ``split.n_clients``.",
        default_note="all ``split.n_clients`` clients for a single entry, else 1",
        accepts="an integer >= 1",
    ),
    # --- [[variant]] ----------------------------------------------------------------------
    "variant.label": KeyDoc(
        "The results row's label (unique; also its folder name below ``runs/``).",
        default=REQUIRED,
    ),
    "variant.paper": KeyDoc(
        "The paper's number for the row, shown beside ours with the gap.",
        default_note="no paper number",
    ),
    "variant.seeds": KeyDoc(
        "Seeds for this variant only (e.g. fewer for a slow learner).",
        default_note="the top-level ``seeds``",
        accepts="a non-empty array of integers",
    ),
}
