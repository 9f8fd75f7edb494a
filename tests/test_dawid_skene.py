"""Dawid–Skene consensus (``consensus="dawid_skene"``): who to believe, learnt from the votes.

Known answers on seeded simulations where each client errs independently with a known
accuracy: the EM vote beats the plain majority when one strong client faces weak ones, ranks
the clients by their true accuracy, does not collapse on a tiny pool, and never overturns a
unanimous vote.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer

from consensus import DawidSkene, dawid_skene, dawid_skene_vote, get_consensus, majority_vote


def _simulate(accuracy, n, n_classes, seed):
    """Votes of clients right with the given probabilities, wrong uniformly otherwise."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, n_classes, n)
    right = rng.random((len(accuracy), n)) < np.asarray(accuracy)[:, None]
    wrong = (truth + rng.integers(1, n_classes, (len(accuracy), n))) % n_classes
    return np.where(right, truth, wrong), truth


@pytest.mark.parametrize(
    ("n_classes", "accuracy"),
    [(2, [0.95, 0.6, 0.6, 0.6, 0.6]), (3, [0.9, 0.5, 0.5, 0.5, 0.5, 0.5])],
)
def test_a_strong_client_outvotes_weak_ones_without_labels(n_classes, accuracy):
    votes, truth = _simulate(accuracy, 2000, n_classes, seed=1)
    majority = (majority_vote(votes, n_classes) == truth).mean()
    learnt = (dawid_skene_vote(votes, n_classes) == truth).mean()
    assert learnt >= majority + 0.08, (learnt, majority)
    assert learnt >= 0.85
    fit = dawid_skene(votes, n_classes)
    assert np.argmax(fit.accuracy) == 0  # the strong client is found
    assert np.all(np.abs(fit.accuracy[1:] - accuracy[1]) < 0.06)


def test_a_tiny_pool_does_not_collapse_to_one_class():
    """EM without a prior ends, on three examples, with every example in class 1 and
    uninformative clients; the Dirichlet prior keeps the plurality."""
    votes = np.array([[0, 1, 1], [0, 1, 0], [0, 1, 1]])
    assert dawid_skene_vote(votes, 2, max_iter=500).tolist() == [0, 1, 1]
    fit = dawid_skene(votes, 2, max_iter=500)
    assert fit.posterior[0, 0] > 0.9 and fit.posterior[1, 1] > 0.9


def test_a_unanimous_vote_is_never_overturned_and_absent_examples_abstain():
    votes = np.array([[0, 1, -1, 1], [0, 0, -1, 1], [1, 0, -1, -1]])
    out = dawid_skene_vote(votes, 2)
    assert out[2] == -1 and out[3] == 1
    fit = dawid_skene(votes, 2)
    assert fit.unanimous.tolist() == [-1, -1, -1, 1]
    assert np.isnan(fit.posterior[2]).all()
    assert dawid_skene_vote(np.array([[0, -1], [0, 0]]), 1).tolist() == [0, 0]  # one class


def test_soft_votes_and_relative_weights():
    votes, _ = _simulate([0.9, 0.65, 0.65, 0.65], 500, 2, seed=3)
    probs = np.eye(2)[votes]  # one-hot probabilities: the same evidence as hard votes
    np.testing.assert_array_equal(dawid_skene_vote(probs, 2), dawid_skene_vote(votes, 2))
    w = np.array([1.0, 2.0, 2.0, 4.0])
    np.testing.assert_array_equal(
        dawid_skene_vote(votes, 2, w), dawid_skene_vote(votes, 2, w * 1024.0)
    )


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"max_iter": 0}, "max_iter"), ({"tol": 0.0}, "tol"), ({"alpha": -1.0}, "alpha"),
     ({"prior_accuracy": 0.4}, "prior_accuracy"), ({"prior_accuracy": 1.0}, "prior_accuracy")],
)  # fmt: skip
def test_bad_parameters_are_refused_by_name(kwargs, name):
    with pytest.raises(ValueError, match=name):
        dawid_skene(np.array([[0, 1]]), 2, **kwargs)


def test_the_trainer_takes_it_by_name():
    from sklearn.tree import DecisionTreeClassifier

    from cotrain import FederatedCoTrainer

    assert isinstance(get_consensus("dawid_skene"), DawidSkene)
    assert isinstance(get_consensus("staple"), DawidSkene)
    X, y = load_breast_cancer(return_X_y=True)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(y))
    sites = np.array_split(order[:150], 3)
    U, test = order[150:450], order[450:]
    trainer = FederatedCoTrainer(
        [DecisionTreeClassifier(max_depth=d, random_state=0) for d in (1, 2, 3)],
        rounds=2, consensus="dawid_skene", trust=None, random_state=0,
    ).fit([X[s] for s in sites], [y[s] for s in sites], X_public=X[U],
          eval_set=(X[test], y[test]))  # fmt: skip
    assert len(trainer.history_) == 2 and trainer.history_[-1].mean_accuracy > 0.85
