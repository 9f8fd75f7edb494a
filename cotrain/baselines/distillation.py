"""Distributed distillation (DD): federated co-training with soft labels and their mean."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, ClassVar

from numpy.typing import ArrayLike
from sklearn.base import clone

from cotrain.callbacks import Callback
from cotrain.clustering import AgreementClustering
from cotrain.privacy.mechanisms import LabelMechanism
from cotrain.runtime.runtimes import Runtime
from cotrain.trainer import FederatedCoTrainer, TrustSpec
from cotrain.trust import DEFAULT_TRUST

__all__ = ["DistributedDistillation"]


class DistributedDistillation(FederatedCoTrainer):
    """Distributed distillation (DD): co-training with soft labels and their mean.

    Each round every client uploads its class probabilities on the public pool, the
    server averages them (:class:`consensus.SoftMean`), and every client trains on its
    private data plus the public pool with the averaged soft labels as targets
    (learners without soft-target support train on weighted rows, see
    :class:`learners.ClassAlignedClassifier`). The clients really train on the average:
    the reference implementation only logged it, which made its "DD" local training.

    This is a :class:`~cotrain.FederatedCoTrainer` with ``share="soft"`` and
    ``consensus="mean"`` fixed, not a separate implementation: every other parameter,
    attribute and method is the trainer's.

    Parameters
    ----------
    estimators : list of classifiers
        One classifier with ``predict_proba`` per client (cloned, never mutated).
    soft_dtype : {"float32", "float16"}, default="float32"
        Precision of the soft labels on the wire.
    encoding : {"packed", "delta"}, default="packed"
        Hard-label encoding (unused here, since soft labels are shared; kept so that the
        parameters are the trainer's).
    soft_bits : int, default=None
        Quantise the soft labels to this many bits per class; None sends floats.
    trust : "auto", None, float or cotrain.trust.PseudoLabelTrust, default="auto"
        How much each client trusts the pseudo-labelled pool in its own fit (see
        :class:`~cotrain.FederatedCoTrainer`); None trains on every averaged soft label at
        full weight.
    clustering : None, "agreement" or cotrain.clustering.AgreementClustering, default=None
        Clustered co-training: clients whose labels disagree beyond chance get their own
        cluster's mean.
    rounds : int, default=20
        Communication rounds.
    participation : float, default=1.0
        Fraction of clients asked each round.
    privacy : cotrain.privacy mechanism, default=None
        A label-privacy mechanism for soft labels (e.g. ``GaussianSoftLabels``).
    reproducible_noise : bool, default=False
        Derive the privacy noise from ``random_state`` (simulations only; warns).
    early_stopping : int, default=None
        Stop once the (argmax of the) consensus has not changed for this many rounds.
    on_client_error : {"raise", "skip"}, default="raise"
        A failing client stops the run, or sits the round out.
    min_clients : int, default=1
        With "skip", a round in which fewer clients answer fails.
    classes : array-like, default=None
        The global label space; default: the union of all clients' labels.
    n_jobs : int, default=None
        Joblib workers for the client steps.
    runtime : {"sequential", "joblib", "ray"} or runtime object, default=None
        Where client steps run.
    round_timeout : float, default=None
        Seconds a round waits for its clients.
    checkpoint_dir : str or path, default=None
        Write a checkpoint after every round, for ``fit(..., resume=True)``.
    callbacks : list of cotrain.callbacks.Callback, default=None
        Called around every round, after the trainer's own callbacks.
    random_state : int, default=None
        Seeds client sampling and every client estimator whose ``random_state`` is None.
    verbose : int, default=0
        0: silent; 1: a progress bar over rounds; 2: also one line per round.

    Attributes
    ----------
    share : str
        Always "soft".
    consensus : str
        Always "mean".

    See :class:`~cotrain.FederatedCoTrainer` for the fitted attributes and for every
    parameter in full.

    Notes
    -----
    ``share`` and ``consensus`` are not constructor parameters, but `get_params` reports
    them (as the trainer's checks and checkpoints read them), `set_params` refuses to
    change them, and ``sklearn.base.clone`` gives another `DistributedDistillation`.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.naive_bayes import GaussianNB
    >>> from cotrain import FederatedCoTrainer
    >>> from cotrain.baselines import DistributedDistillation
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> dd = DistributedDistillation([GaussianNB()] * 2, rounds=2, random_state=0)
    >>> isinstance(dd, FederatedCoTrainer), dd.share, dd.consensus
    (True, 'soft', 'mean')
    >>> dd = dd.fit([X[:50], X[50:100]], [y[:50], y[50:100]], X_public=X[100:400])
    >>> dd.history_[0].bytes_up  # 2 clients x (10-byte header + 300 x 2 float32)
    4820
    """

    #: The trainer's parameters this class fixes, with their values.
    FIXED_PARAMS: ClassVar[dict[str, str]] = {"share": "soft", "consensus": "mean"}

    def __init__(
        self,
        estimators: list[Any],
        *,
        soft_dtype: str = "float32",
        encoding: str = "packed",
        soft_bits: int | None = None,
        trust: TrustSpec = DEFAULT_TRUST,
        clustering: str | AgreementClustering | None = None,
        rounds: int = 20,
        participation: float = 1.0,
        privacy: LabelMechanism | None = None,
        reproducible_noise: bool = False,
        early_stopping: int | None = None,
        on_client_error: str = "raise",
        min_clients: int = 1,
        classes: ArrayLike | None = None,
        n_jobs: int | None = None,
        runtime: str | Runtime | None = None,
        round_timeout: float | None = None,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        callbacks: Sequence[Callback] | None = None,
        random_state: int | None = None,
        verbose: int = 0,
    ) -> None:
        super().__init__(
            estimators,
            consensus=self.FIXED_PARAMS["consensus"],
            share=self.FIXED_PARAMS["share"],
            soft_dtype=soft_dtype,
            encoding=encoding,
            soft_bits=soft_bits,
            trust=trust,
            clustering=clustering,
            rounds=rounds,
            participation=participation,
            privacy=privacy,
            reproducible_noise=reproducible_noise,
            early_stopping=early_stopping,
            on_client_error=on_client_error,
            min_clients=min_clients,
            classes=classes,
            n_jobs=n_jobs,
            runtime=runtime,
            round_timeout=round_timeout,
            checkpoint_dir=checkpoint_dir,
            callbacks=callbacks,
            random_state=random_state,
            verbose=verbose,
        )

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Parameters of this estimator, with the fixed ``share`` and ``consensus``.

        Parameters
        ----------
        deep : bool, default=True
            Also return the parameters of contained estimators.

        Returns
        -------
        dict
            Parameter names mapped to their values.

        Examples
        --------
        >>> from sklearn.naive_bayes import GaussianNB
        >>> from cotrain.baselines import DistributedDistillation
        >>> params = DistributedDistillation([GaussianNB()] * 2).get_params()
        >>> params["share"], params["consensus"], params["rounds"]
        ('soft', 'mean', 20)
        """
        params = super().get_params(deep=deep)
        params.update({name: getattr(self, name) for name in self.FIXED_PARAMS})
        return params

    def set_params(self, **params: Any) -> DistributedDistillation:
        """Set parameters; ``share`` and ``consensus`` cannot be changed.

        Parameters
        ----------
        **params
            Estimator parameters.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            If ``share`` or ``consensus`` is given a value other than the fixed one.

        Examples
        --------
        >>> from sklearn.naive_bayes import GaussianNB
        >>> from cotrain.baselines import DistributedDistillation
        >>> DistributedDistillation([GaussianNB()] * 2).set_params(rounds=3).rounds
        3
        """
        for name, fixed in self.FIXED_PARAMS.items():
            if name in params and params.pop(name) != fixed:
                raise ValueError(
                    f"DistributedDistillation fixes {name}={fixed!r}; "
                    "use FederatedCoTrainer for other settings"
                )
        return super().set_params(**params)

    def __sklearn_clone__(self) -> DistributedDistillation:
        """An unfitted copy with cloned parameters (what ``sklearn.base.clone`` returns)."""
        own = {
            name: clone(value, safe=False) for name, value in super().get_params(deep=False).items()
        }
        return type(self)(**own)
