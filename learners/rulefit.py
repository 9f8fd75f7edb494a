"""RuleFitClassifier: imodels' RuleFit made multiclass (one-vs-rest) for co-training.

imodels is imported only inside ``fit``, so importing this module is cheap and works without
imodels installed.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from ._alignment import check_classes, label_indices

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["RuleFitClassifier"]

#: Warnings imodels' RuleFit triggers in scikit-learn >= 1.8 on every one of its (hundreds of)
#: LogisticRegression fits: it still passes ``penalty="l1"``. They say nothing about the model.
_KNOWN_WARNINGS: tuple[tuple[type[Warning], str], ...] = (
    (FutureWarning, r"'penalty' was deprecated"),
    (UserWarning, r"Inconsistent values: penalty="),
)


def _import_imodels() -> Any:
    try:
        import imodels
    except ImportError as exc:
        raise ImportError('RuleFitClassifier needs imodels: pip install "cotrain[rules]"') from exc
    return imodels


@contextmanager
def _contained_imodels_fit() -> Iterator[None]:
    """Silence the known library warnings, and undo imodels' reseeding of numpy's global RNG.

    imodels calls ``np.random.seed(random_state)`` while growing its trees, which would
    otherwise change the random numbers of everything else in the process.
    """
    state = np.random.get_state()  # noqa: NPY002 (the legacy global state imodels reseeds)
    with warnings.catch_warnings():
        for category, message in _KNOWN_WARNINGS:
            warnings.filterwarnings("ignore", message=message, category=category)
        try:
            yield
        finally:
            np.random.set_state(state)  # noqa: NPY002


#: the comparisons an imodels rule term may use, as numpy does them
_TERM_OPS = {
    "<=": np.less_equal,
    "<": np.less,
    ">": np.greater,
    ">=": np.greater_equal,
    "==": np.equal,
}


def _terms(agg_dict: dict[Any, Any], column: dict[str, int]) -> list[Any] | None:
    """A rule's terms as (column, comparison, threshold); None for a term that is not
    ``feature op number`` (imodels then evaluates the rule itself)."""
    out = []
    for (feature, op), threshold in agg_dict.items():
        try:
            out.append((column[feature], _TERM_OPS[op], float(threshold)))
        except (KeyError, TypeError, ValueError):
            return None
    return out


def _decision(model: Any, X: NDArray[np.float64]) -> NDArray[np.float64]:
    """The linear output f(x) of a binary imodels RuleFit (its logistic regression's logit).

    imodels' own ``predict_proba`` returns ``softmax([1 - f, f])`` = ``sigmoid(2f - 1)``,
    which shifts the decision threshold to f = 0.5; ``sigmoid(f)`` is the probability its
    logistic regression actually fitted. There is no public accessor for f.

    The rules are evaluated here with numpy, the same sum as imodels'
    ``_predict_continuous_output`` in the same order (each term ``feature op threshold``
    with imodels' threshold, rules added one by one, then the linear terms and the
    intercept), instead of one pandas ``query`` per rule, which cost about 0.8 s a call and
    dominated a co-training round with a RuleFit site. A rule with a comparison this does
    not know falls back to imodels.
    """
    column = {name: i for i, name in enumerate(model.feature_placeholders)}
    terms = [_terms(rule.agg_dict, column) for rule in model.rules_without_feature_names_]
    if any(t is None for t in terms):
        return np.asarray(model._predict_continuous_output(X), dtype=np.float64)
    X = check_array(X, dtype=np.float64)  # as imodels checks it (NaN refused)
    y_pred = np.zeros(X.shape[0])
    scores = np.zeros(X.shape[0])
    for rule, rule_terms in zip(model.rules_without_feature_names_, terms, strict=True):
        holds = np.ones(X.shape[0], dtype=bool)
        for index, op, threshold in rule_terms or ():
            holds &= op(X[:, index], threshold)
        scores[holds] += rule.args[0]
    y_pred += scores
    if model.include_linear:
        linear = model.friedscale.scale(X) if model.lin_standardise else X
        y_pred += linear @ model.coef[: X.shape[1]]
    return np.asarray(y_pred + model.intercept, dtype=np.float64)


class RuleFitClassifier(ClassifierMixin, BaseEstimator):
    """RuleFit (Friedman & Popescu) rule ensembles from imodels, for any number of classes.

    Rules are the paths of shallow boosted trees; an L1-regularised logistic regression over
    the rules (and, optionally, the features themselves) picks the few that matter. imodels
    handles two classes only; this fits one binary RuleFit for two classes and one per class
    (one-vs-rest, probabilities renormalised) for more. A class missing from the training
    data gets probability 0, and a single class gives a constant model, so the classifier
    works on any client of a federation.

    Compared with ``imodels.RuleFitClassifier``: probabilities are ``sigmoid(f)`` of the
    fitted logistic regression (imodels returns ``sigmoid(2f - 1)``); the hundreds of
    scikit-learn ``'penalty' was deprecated`` warnings imodels triggers are silenced (only
    those); numpy's global random state is left as it was; and ``cv`` defaults to False.
    imodels' regularisation search always ends at the weakest regularisation whose rule
    count stays within `max_rules`: with ``cv=True`` it also computes 5-fold scores for every
    candidate but (imodels 3.0.4) never uses them, so the model is the same and the fit
    about 3.5x slower (1.8 s vs 0.5 s on 85 breast-cancer rows).

    ``fit`` takes no ``sample_weight`` (imodels' RuleFit does not), so
    :class:`ClassAlignedClassifier` gives it soft targets as their argmax labels.

    Parameters
    ----------
    n_estimators : int, default=100
        Number of boosted trees grown to generate candidate rules.
    tree_size : int, default=4
        Number of leaves of the generated trees (their mean if `exp_rand_tree_size`).
    max_rules : int, default=200
        Most terms (rules and linear terms) kept by the L1 regularisation; ignored when
        `alpha` is given. 200 with ``tree_size=4`` is the FedCT paper's setting.
    exp_rand_tree_size : bool, default=True
        Draw each tree's size from an exponential distribution around `tree_size`.
    include_linear : bool, default=True
        Include the (winsorised, standardised) features as linear terms as well as rules.
    alpha : float, optional
        Fixed L1 regularisation strength (the logistic regression's ``C`` is ``1/alpha``);
        overrides `max_rules`. Larger values keep fewer rules.
    cv : bool, default=False
        Passed to imodels; see above for why it is off.
    sample_fract : float or "default", default="default"
        Fraction of rows used to grow each tree (``"default"``: Friedman & Popescu's
        ``min(0.5, (100 + 6 sqrt(n)) / n)``).
    memory_par : float, default=0.01
        Learning rate of the tree boosting.
    lin_standardise : bool, default=True
        Standardise linear terms as Friedman & Popescu do (winsorise, then scale by
        0.4 / std).
    lin_trim_quantile : float, default=0.025
        Quantile at which linear terms are winsorised.
    random_state : int, RandomState or None, default=None
        Seed for the trees and the logistic regression.
    classes : array-like, optional
        The global classes, sorted and unique; defaults to the labels of `y`.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The classes, in the order of the probability columns.
    n_classes_ : int
        Number of classes.
    fitted_classes_ : ndarray
        The classes present in the training labels.
    estimators_ : list of imodels.RuleFitClassifier
        The binary models: none for a single class; one for two classes (scoring
        ``fitted_classes_[1]``); one per class in ``fitted_classes_`` otherwise.
    estimator_classes_ : ndarray
        The class each model in ``estimators_`` scores (its positive class).
    n_features_in_ : int
        Number of features seen in ``fit``.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from learners import RuleFitClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = RuleFitClassifier(max_rules=20, random_state=0).fit(X, y)  # doctest: +SKIP
    >>> clf.predict_proba(X[:2]).shape  # doctest: +SKIP
    (2, 3)
    >>> clf.get_rules().columns.tolist()  # doctest: +SKIP
    ['class', 'rule', 'type', 'coef', 'support', 'importance']
    """

    #: why fitted models cannot go into a cotrain checkpoint (None: they can)
    checkpoint_unsupported = "skops cannot store imodels' rule dictionaries (tuple keys)"

    def __init__(
        self,
        *,
        n_estimators: int = 100,
        tree_size: int = 4,
        max_rules: int = 200,
        exp_rand_tree_size: bool = True,
        include_linear: bool = True,
        alpha: float | None = None,
        cv: bool = False,
        sample_fract: float | str = "default",
        memory_par: float = 0.01,
        lin_standardise: bool = True,
        lin_trim_quantile: float = 0.025,
        random_state: int | np.random.RandomState | None = None,
        classes: ArrayLike | None = None,
    ) -> None:
        self.n_estimators = n_estimators
        self.tree_size = tree_size
        self.max_rules = max_rules
        self.exp_rand_tree_size = exp_rand_tree_size
        self.include_linear = include_linear
        self.alpha = alpha
        self.cv = cv
        self.sample_fract = sample_fract
        self.memory_par = memory_par
        self.lin_standardise = lin_standardise
        self.lin_trim_quantile = lin_trim_quantile
        self.random_state = random_state
        self.classes = classes

    def fit(self, X: ArrayLike, y: ArrayLike) -> RuleFitClassifier:
        """Fit one binary RuleFit (two classes) or one per class (one-vs-rest).

        Parameters
        ----------
        X : array-like, sparse matrix or DataFrame of shape (n_samples, n_features)
            Training inputs (a sparse matrix is made dense); a DataFrame's column names
            appear in the rules.
        y : array-like of shape (n_samples,)
            Labels, each one of `classes`.

        Returns
        -------
        self : RuleFitClassifier
            The fitted classifier.
        """
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None"
            )
        columns = getattr(X, "columns", None)
        names = None if columns is None else [str(c) for c in columns]
        Xa, y_arr = validate_data(self, X, y, accept_sparse=True, dtype=np.float64)
        Xa = Xa.toarray() if hasattr(Xa, "toarray") else Xa
        check_classification_targets(y_arr)
        classes = np.unique(y_arr) if self.classes is None else check_classes(self.classes)
        codes = label_indices(y_arr, classes, name="y")
        present = np.unique(codes)
        if present.size == 0:
            raise ValueError("y is empty")
        # the classes that get a binary model: none (constant), the second of two, or all
        positives = present[1:] if present.size <= 2 else present

        estimators = []
        if positives.size:
            imodels = _import_imodels()
            seed = self.random_state
            if seed is not None and not isinstance(seed, int | np.integer):
                seed = int(check_random_state(seed).randint(np.iinfo(np.int32).max))
            params = {
                "n_estimators": self.n_estimators,
                "tree_size": self.tree_size,
                # imodels warns that max_rules is ignored when alpha is given
                "max_rules": self.max_rules if self.alpha is None else None,
                "exp_rand_tree_size": self.exp_rand_tree_size,
                "include_linear": self.include_linear,
                "alpha": self.alpha,
                "cv": self.cv,
                "sample_fract": self.sample_fract,
                "memory_par": self.memory_par,
                "lin_standardise": self.lin_standardise,
                "lin_trim_quantile": self.lin_trim_quantile,
                "random_state": seed,
            }
            with _contained_imodels_fit():
                for k in positives:
                    model = imodels.RuleFitClassifier(**params)
                    estimators.append(model.fit(Xa, (codes == k).astype(int), feature_names=names))

        self.estimators_ = estimators
        self.estimator_classes_ = classes[positives]
        self.fitted_classes_ = classes[present]
        self.classes_ = classes
        self.n_classes_ = int(classes.size)
        return self

    def predict_proba(self, X: ArrayLike) -> NDArray[np.float64]:
        """Class probabilities, one column per class of ``classes_``.

        Parameters
        ----------
        X : array-like, sparse matrix or DataFrame of shape (n_samples, n_features)
            Inputs.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Rows sum to 1; classes absent from the training labels get 0.
        """
        check_is_fitted(self)
        Xa = validate_data(self, X, reset=False, accept_sparse=True, dtype=np.float64)
        Xa = Xa.toarray() if hasattr(Xa, "toarray") else Xa
        cols = label_indices(self.fitted_classes_, self.classes_, name="fitted_classes_")
        out = np.zeros((Xa.shape[0], self.n_classes_), dtype=np.float64)
        if not self.estimators_:
            out[:, cols[0]] = 1.0
            return out
        scores = expit(np.column_stack([_decision(m, Xa) for m in self.estimators_]))
        if cols.size == 2:
            out[:, cols[1]] = scores[:, 0]
            out[:, cols[0]] = 1.0 - scores[:, 0]
            return out
        total = scores.sum(axis=1, keepdims=True)
        uniform = np.full_like(scores, 1.0 / cols.size)
        out[:, cols] = np.divide(scores, total, out=uniform, where=total > 0)
        return out

    def predict(self, X: ArrayLike) -> NDArray[Any]:
        """Most probable class of each sample.

        Parameters
        ----------
        X : array-like, sparse matrix or DataFrame of shape (n_samples, n_features)
            Inputs.

        Returns
        -------
        ndarray of shape (n_samples,)
            Labels from ``classes_``.
        """
        proba = self.predict_proba(X)  # first: NotFittedError before classes_ is read
        return self.classes_[proba.argmax(axis=1)]

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # made dense
        return tags

    def get_rules(self, exclude_zero_coef: bool = True) -> pd.DataFrame:
        """The rules and linear terms of the fitted model(s), one row each.

        Parameters
        ----------
        exclude_zero_coef : bool, default=True
            Leave out terms whose coefficient is 0.

        Returns
        -------
        pandas.DataFrame
            Columns ``class`` (the class a term speaks for: its coefficient raises that
            class's log-odds), ``rule``, ``type`` (``"rule"`` or ``"linear"``), ``coef``,
            ``support`` (fraction of training rows the rule covers) and ``importance``
            (Friedman & Popescu's). Empty for a constant (single-class) model.

        Examples
        --------
        >>> from sklearn.datasets import load_breast_cancer
        >>> from learners import RuleFitClassifier
        >>> X, y = load_breast_cancer(return_X_y=True, as_frame=True)
        >>> clf = RuleFitClassifier(random_state=0).fit(X[:100], y[:100])  # doctest: +SKIP
        >>> clf.get_rules().sort_values("importance").tail(1)  # doctest: +SKIP
        """
        import pandas as pd

        check_is_fitted(self)
        columns = ["class", "rule", "type", "coef", "support", "importance"]
        frames = []
        for label, model in zip(self.estimator_classes_, self.estimators_, strict=True):
            rules = model.get_rules()
            if exclude_zero_coef:
                rules = rules[rules["coef"] != 0]
            rules = rules.drop(columns="prediction", errors="ignore")  # imodels' copy of coef
            frames.append(rules.assign(**{"class": label}))
        if not frames:
            return pd.DataFrame(columns=columns)
        rules = pd.concat(frames, ignore_index=True)
        return rules[columns + [c for c in rules.columns if c not in columns]]
