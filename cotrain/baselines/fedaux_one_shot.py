"""The one-shot FedAUX round: a DP softmax head per client, weighted by DP certainty scores.

After FedAUXfdp (Hoech et al. 2022): every client fits a DP multinomial logistic head
(:class:`~cotrain.privacy.fedaux.DPSoftmaxHead`, sensitivity ``2√C/(λ|D|)``) on features of a
public-only extractor; the clients' DP soft labels on the public pool are averaged with their DP
certainty scores (:mod:`cotrain.privacy.fedaux.scorer`) and a student is trained on the result
(:func:`one_shot_fedaux`). Privacy composes basically: ``ε = ε_scores + ε_labels``,
``δ = δ_scores + δ_labels`` per client.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.utils import Bunch

from consensus import certainty_weighted
from cotrain.privacy.fedaux.head import DPSoftmaxHead
from cotrain.privacy.fedaux.noise import REPLAYABLE_WARNING, as_seed_sequence, replayable_noise
from cotrain.privacy.fedaux.scorer import CertaintyScorer, as_2d_float, certainty_scores

__all__ = ["one_shot_fedaux"]


def one_shot_fedaux(
    heads: DPSoftmaxHead | Sequence[DPSoftmaxHead] | None,
    X_clients: Sequence[ArrayLike],
    y_clients: Sequence[ArrayLike],
    X_negative: ArrayLike,
    X_public: ArrayLike,
    *,
    lam: float = 0.1,
    epsilon_scores: float = 0.1,
    epsilon_labels: float = 0.5,
    delta: float = 1e-5,
    classes: ArrayLike | None = None,
    feature_map: Any = None,
    student: Any = None,
    confidence_weights: bool = False,
    random_state: Any = None,
    reproducible_noise: bool = False,
) -> Bunch:
    """One round of fully private FedAUX (in the spirit of FedAUXfdp), with a student.

    Each client ``i`` releases, once: (a) a DP certainty scorer
    (:class:`CertaintyScorer`, ``(ε_scores, δ)``) and (b) a DP multinomial head
    (:class:`DPSoftmaxHead`, ``(ε_labels, δ)``) fitted on its private data. From them come the
    certainty scores ``s_i(U)`` and the soft labels ``p_i(U)`` on the public pool (both
    post-processing). The server forms the certainty-weighted mean
    ``Σ_i s_i p_i / Σ_i s_i`` (:func:`consensus.certainty_weighted`) and trains ``student`` on
    ``(U, argmax)``. Each client's data is ``(ε_scores + ε_labels, 2δ)``-DP by basic composition
    (FedAUXfdp adds them: 0.1 + 0.5 = 0.6, δ = 2e-5 with the defaults).

    Parameters
    ----------
    heads : DPSoftmaxHead, sequence of DPSoftmaxHead, or None
        Unfitted head template(s) (cloned; one template for all clients or one per client).
        ``None``: ``DPSoftmaxHead(lam=lam, epsilon=epsilon_labels, delta=delta)``. A head's
        own ``lam``, ``epsilon`` and ``delta`` are used and reported. Arbitrary scikit-learn
        estimators are refused: their labels carry no DP guarantee.
    X_clients, y_clients : sequence of array-like
        The clients' private data.
    X_negative : array-like
        Public negatives for the scorers.
    X_public : array-like of shape (n_public, n_features)
        The public pool the student is trained on.
    lam : float, default=0.1
        λ of the scorers (and of the default heads).
    epsilon_scores, epsilon_labels, delta : float
        Per-client budgets of the scorer and of the default head.
    classes : array-like, optional
        Global label space; default: the union of the clients' labels.
    feature_map : callable or fitted transformer, optional
        Public-fitted extractor used by the scorers and the default heads. The student sees
        ``X_public`` as given.
    student : classifier, optional
        Trained on the public pool; default ``LogisticRegression(max_iter=1000)``.
    confidence_weights : bool, default=False
        Pass the consensus probability of the chosen class as ``sample_weight``.
    random_state : int or None, default=None
        Seeds the privacy noise only with ``reproducible_noise=True``: client ``i``'s
        noise then comes from ``SeedSequence(random_state).spawn(m)[i]`` (spawned again into
        its scorer's and its head's).
    reproducible_noise : bool, default=False
        False: every client draws the noise of its scorer and of its head from the operating
        system's entropy, so the server, who knows ``random_state``, cannot replay it. True
        (simulations only; warns once): seeded from ``random_state``, so that whoever knows
        it recovers every client's exact non-private scorer and head.

    Returns
    -------
    sklearn.utils.Bunch
        ``student`` (fitted), ``pseudo_labels`` (n_public,) in label values,
        ``soft_labels`` (n_public, C), ``scores`` (m, n_public), ``classes``, ``scorers``,
        ``heads``, ``epsilon_total`` (m,), ``delta_total`` (m,), ``epsilon_scores`` (m,),
        ``epsilon_labels`` (m,), ``noise_replayable`` (True when the noise was seeded from
        ``random_state``: the ε then does not hold against whoever knows it).

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.baselines.fedaux_one_shot import one_shot_fedaux
    >>> rng = np.random.default_rng(0)
    >>> def blob(c, n):
    ...     return rng.normal(c, size=(n, 2))
    >>> Xc = [np.vstack([blob(-2, 300), blob(2, 30)]), np.vstack([blob(2, 300), blob(-2, 30)])]
    >>> yc = [np.repeat([0, 1], [300, 30]), np.repeat([1, 0], [300, 30])]
    >>> X_pub = np.vstack([blob(-2, 100), blob(2, 100)])
    >>> res = one_shot_fedaux(None, Xc, yc, rng.normal(size=(500, 2)), X_pub, lam=1.0)
    >>> float(res.epsilon_total[0]), float(res.delta_total[0]), res.noise_replayable
    (0.6, 2e-05, False)
    >>> bool((res.student.predict(X_pub) == np.repeat([0, 1], 100)).mean() > 0.9)
    True
    """
    m = len(X_clients)
    if m == 0 or len(y_clients) != m:
        raise ValueError(
            f"one_shot_fedaux needs one y per X and at least one client; got {m} X and "
            f"{len(y_clients)} y"
        )
    if heads is None:
        templates = [
            DPSoftmaxHead(lam=lam, epsilon=epsilon_labels, delta=delta, feature_map=feature_map)
        ] * m
    elif isinstance(heads, DPSoftmaxHead):
        templates = [heads] * m
    else:
        templates = list(heads)
        if len(templates) != m:
            raise ValueError(f"got {len(templates)} heads for {m} clients")
    for h in templates:
        if not isinstance(h, DPSoftmaxHead):
            raise TypeError(
                "one_shot_fedaux releases DP soft labels and needs DPSoftmaxHead heads (or "
                f"None); got {type(h).__name__}, whose labels carry no DP guarantee"
            )
    y_all = [np.asarray(yi) for yi in y_clients]
    classes_arr = np.unique(np.concatenate(y_all)) if classes is None else np.asarray(classes)
    X_public_arr = as_2d_float(X_public, "X_public")
    replay = replayable_noise(random_state, reproducible_noise, "one_shot_fedaux")
    seeds = as_seed_sequence(random_state).spawn(m) if replay else [None] * m
    scorers, fitted, probs = [], [], []
    for Xi, yi, template, seed in zip(X_clients, y_all, templates, seeds, strict=True):
        # replayable noise only: client i's seed spawns its scorer's and its head's
        s_rng, h_rng = (None, None) if seed is None else map(np.random.default_rng, seed.spawn(2))
        with warnings.catch_warnings():  # warned once above
            warnings.filterwarnings("ignore", message=REPLAYABLE_WARNING, category=UserWarning)
            scorers.append(
                CertaintyScorer(
                    lam=lam,
                    epsilon=epsilon_scores,
                    delta=delta,
                    feature_map=feature_map,
                    random_state=s_rng,
                    reproducible_noise=replay,
                ).fit(Xi, X_negative)
            )
            # a shallow re-construction, not sklearn.clone: clone would un-fit a fitted
            # estimator-valued feature_map (e.g. a public PCA)
            head = type(template)(**template.get_params(deep=False)).set_params(
                classes=classes_arr, random_state=h_rng, reproducible_noise=replay
            )
            fitted.append(head.fit(Xi, yi))
        probs.append(head.predict_proba(X_public_arr))
    scores = certainty_scores(scorers, X_public_arr)
    soft = certainty_weighted(np.stack(probs), classes_arr.size, scores)
    codes = np.argmax(soft, axis=1)
    pseudo = classes_arr[codes]
    student_ = LogisticRegression(max_iter=1000) if student is None else clone(student)
    if confidence_weights:
        student_.fit(X_public_arr, pseudo, sample_weight=soft[np.arange(len(codes)), codes])
    else:
        student_.fit(X_public_arr, pseudo)
    eps_s = np.array([s.epsilon_ for s in scorers])
    eps_l = np.array([h.epsilon_ for h in fitted])
    delta_tot = np.array([s.delta_ + h.delta_ for s, h in zip(scorers, fitted, strict=True)])
    return Bunch(
        student=student_,
        pseudo_labels=pseudo,
        soft_labels=soft,
        scores=scores,
        classes=classes_arr,
        scorers=scorers,
        heads=fitted,
        epsilon_scores=eps_s,
        epsilon_labels=eps_l,
        epsilon_total=eps_s + eps_l,
        delta_total=delta_tot,
        noise_replayable=replay,
    )
