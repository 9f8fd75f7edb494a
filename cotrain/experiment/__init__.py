"""Experiments as data: ``cotrain run EXPERIMENT.toml`` and ``cotrain report DIR...``.

An experiment file names the data, the split, the clients' learners, the method and the
seeds; optional ``[[variant]]`` tables each override part of it (one results row per
variant: the columns of a paper's table). Example::

    name = "table3_breast_cancer"
    description = "FedCT Table 3, breast cancer: 5 clients of one learner"
    seeds = [0, 1, 2, 3, 4]

    [data]
    dataset = "breast_cancer"     # bundled: breast_cancer, digits; ../shared/data:
                                  # wine_quality, adult; or path = "my.csv" + target = "y"
                                  # (a relative path is read from this file's folder; a
                                  # CSV without a header row: header = false, target = 0;
                                  # header not stated: detected, with a warning; text
                                  # columns are one-hot encoded, announced)
    [split]
    n_public = 370                # |U|
    n_labeled = 85                # labelled rows over all clients
    n_test = 114
    n_clients = 5
    partition = "iid"             # iid | dirichlet (alpha) | two_alpha (alpha = [a1, a2])

    [method]
    name = "fedct"                # fedct | dp-fedct | dd | fedavg | dp-fedavg | pate | local
                                  # | centralized (one model per distinct learner of the
                                  # clients, on their pooled rows: a row "<label> (RF)" each)
    consensus = "majority"        # a name of consensus.available_consensus()
    rounds = 10

    [[clients]]
    learner = "DT"                # a name from LEARNERS, or a class path
    count = 5                     # params = { max_depth = 5 } passes parameters

    [[variant]]
    label = "DT"
    paper = 0.89                  # the paper's number, shown beside ours
                                  # (seeds = [0, 1] here would run this variant on fewer)
    clients = [{ learner = "DT", count = 5 }]

``run`` writes a results folder: ``runs/<variant>/seed-<s>/`` with ``history.csv``
and ``result.json`` (and a checkpoint while a FedCT run is going), ``summary.csv``,
``summary.md`` and ``accuracy.png``; with ``resume`` it skips finished runs and
continues an interrupted FedCT run from its last round (a finished run keeps only its
``history.csv`` and ``result.json``). ``variants`` and ``seeds`` (``--variant``,
``--seeds``) run a subset. An invalid file is refused before anything is written or
runs, with the line and the reason: keys and types, consensus names and parameters,
learners and their parameters in every ``[[clients]]`` block, and split sizes against
the rows of the data.

One module per job:

- :mod:`~cotrain.experiment.config`: the schema, validation and ``file:line: reason``;
- :mod:`~cotrain.experiment.locate`: the line of a key in the file;
- :mod:`~cotrain.experiment.learners`: learners by short name or class path;
- :mod:`~cotrain.experiment.data`: the dataset, its split and the clients' shares;
- :mod:`~cotrain.experiment.methods`: the registry of methods (one entry each);
- :mod:`~cotrain.experiment.run`: running the (variant, seed) pairs, resuming;
- :mod:`~cotrain.experiment.report`: ``summary.csv``, ``summary.md``, ``accuracy.png``
  and ``cotrain report``.

Examples
--------
>>> from cotrain.experiment import METHODS, make_learner
>>> list(METHODS)
['fedct', 'dp-fedct', 'dd', 'fedavg', 'dp-fedavg', 'pate', 'local', 'centralized']
>>> make_learner("RF")
RandomForestClassifier()
"""

from cotrain.experiment.config import (
    CLIENT_KEYS,
    PRIVACY_KEYS,
    SCHEMA,
    Run,
    load_experiment,
    slug,
)
from cotrain.experiment.data import BUNDLED, PARTITIONS, SHARED, client_parts, load_data
from cotrain.experiment.errors import ExperimentError, ExperimentWarning, RunFailed
from cotrain.experiment.learners import LEARNERS, client_learners, make_learner
from cotrain.experiment.methods import METHODS, Method, MethodInput
from cotrain.experiment.report import markdown_table, report, write_summary
from cotrain.experiment.run import run_experiment, run_fingerprint, run_one, select_runs

__all__ = [
    "BUNDLED",
    "CLIENT_KEYS",
    "LEARNERS",
    "METHODS",
    "PARTITIONS",
    "PRIVACY_KEYS",
    "SCHEMA",
    "SHARED",
    "ExperimentError",
    "ExperimentWarning",
    "Method",
    "MethodInput",
    "Run",
    "RunFailed",
    "client_learners",
    "client_parts",
    "load_data",
    "load_experiment",
    "make_learner",
    "markdown_table",
    "report",
    "run_experiment",
    "run_fingerprint",
    "run_one",
    "select_runs",
    "slug",
    "write_summary",
]


def __dir__() -> list[str]:
    return sorted(__all__)
