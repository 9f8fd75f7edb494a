"""Quality-aware hard-label consensus (consensus.quality): known answers, fallbacks, checks."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from consensus import CertaintyWeighted, MajorityVote, get_consensus
from consensus.quality import QualityVote, quality_vote, quality_weights
from cotrain.experiment.config import load_experiment
from cotrain.experiment.errors import ExperimentError

NAN = np.nan

# 4 clients, 3 examples. Client 0 "recognises" example 0, client 3 example 2; everyone is
# equally (un)certain on example 1.
VOTES = np.array(
    [
        [1, 0, 2],
        [0, 0, 1],
        [0, 2, 1],
        [2, 2, 0],
    ]
)
CERTAINTY = np.array(
    [
        [0.8, 0.5, 0.2],
        [0.4, 0.5, 0.3],
        [0.4, 0.5, 0.3],
        [0.2, 0.5, 0.6],
    ]
)


# ---------------------------------------------------------------- known answers
def test_power_one_is_the_certainty_weighted_vote():
    # example 0: class 1 gets 0.8, class 0 gets 0.8, class 2 gets 0.2 -> tie 0/1 -> 0
    # example 1: 0 gets 1.0, 2 gets 1.0 -> tie -> 0; example 2: 1 gets 0.6, 0 gets 0.6 -> 0
    got = quality_vote(VOTES, 3, CERTAINTY, power=1.0)
    np.testing.assert_array_equal(got, [0, 0, 0])
    np.testing.assert_array_equal(got, CertaintyWeighted()(VOTES, n_classes=3, weights=CERTAINTY))


def test_sharpened_certainty_lets_the_recognising_client_decide():
    # power 2, per-example normalised: example 0 -> class 1: 1, class 0: 2*(0.5^2)=0.5,
    # class 2: 0.0625 -> 1; example 2 -> class 0: 1, class 1: 2*(0.5^2)=0.5, class 2: 1/9 -> 0
    np.testing.assert_array_equal(quality_vote(VOTES, 3, CERTAINTY, power=2.0), [1, 0, 0])


def test_top_k_one_is_the_most_certain_clients_vote():
    # example 1: all certainties equal -> the first client (ties by client order) decides
    np.testing.assert_array_equal(quality_vote(VOTES, 3, CERTAINTY, power=1.0, top_k=1), [1, 0, 0])
    np.testing.assert_array_equal(
        quality_weights(CERTAINTY, 3, power=1.0, top_k=1),
        [[1.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 1.0]],
    )


def test_weights_are_normalised_per_example_and_never_underflow():
    w = quality_weights(np.array([[1e-8, 0.3], [2e-8, 0.6]]), 2, power=64.0)
    np.testing.assert_allclose(w, [[0.5**64, 0.5**64], [1.0, 1.0]])
    # nobody certain at all on an example: weight 0 -> abstain (-1)
    got = quality_vote(np.array([[1, 1], [0, 0]]), 2, np.array([[0.0, 1.0], [0.0, 0.5]]))
    np.testing.assert_array_equal(got, [-1, 1])


def test_scalar_quality_weights_the_votes():
    votes = np.array([[0, 1], [2, 1], [2, 2]])
    np.testing.assert_array_equal(quality_vote(votes, 3), [2, 1])
    # client 0 weight 1 beats 0.3 + 0.3 on example 0; example 1: 1 + 0.3 for class 1
    np.testing.assert_array_equal(quality_vote(votes, 3, quality=[1.0, 0.3, 0.3]), [0, 1])
    # quality_power 0 ignores the quality
    np.testing.assert_array_equal(
        quality_vote(votes, 3, quality=[1.0, 0.3, 0.3], quality_power=0.0), [2, 1]
    )


def test_probabilities_vote_with_their_argmax():
    probs = np.array([[[0.9, 0.1]], [[0.2, 0.8]], [[0.4, 0.6]]])
    np.testing.assert_array_equal(quality_vote(probs, 2), [1])
    np.testing.assert_array_equal(quality_vote(probs, 2, certainty=[1.0, 0.5, 0.5]), [0])


# ---------------------------------------------------------------- NaN quality fallback
def test_all_nan_quality_falls_back_to_certainty_only():
    for quality in (None, [NAN] * 4, np.full(4, NAN)):
        np.testing.assert_array_equal(
            quality_vote(VOTES, 3, CERTAINTY, quality, power=2.0), [1, 0, 0]
        )
    rule = QualityVote(scores=CERTAINTY, power=2.0)
    w = rule.weights_for([0, 1, 2, 3], n_public=3, quality=np.full(4, NAN))
    np.testing.assert_array_equal(w, CERTAINTY)
    np.testing.assert_array_equal(rule(VOTES, n_classes=3, weights=w), [1, 0, 0])


def test_missing_quality_counts_as_the_mean_of_the_sent_ones():
    w = quality_weights(None, 1, quality=[0.9, NAN, 0.5], n_clients=3)
    np.testing.assert_allclose(w[:, 0], [0.9, 0.7, 0.5])


def test_weights_for_folds_the_quality_into_the_certainty():
    quality = np.array([0.2, 1.0, 0.9, NAN])
    rule = QualityVote(scores=CERTAINTY, power=3.0, quality_power=2.0)
    w = rule.weights_for([0, 1, 2, 3], n_public=3, quality=quality)
    direct = quality_vote(VOTES, 3, CERTAINTY, quality, power=3.0, quality_power=2.0)
    np.testing.assert_array_equal(rule(VOTES, n_classes=3, weights=w), direct)
    # sharpened weights of the folded input equal the documented formula up to a factor per
    # example: (s / max s)^power * q^quality_power
    q = np.where(np.isnan(quality), np.nanmean(quality), quality)
    expected = (CERTAINTY / CERTAINTY.max(axis=0)) ** 3.0 * (q**2.0)[:, None]
    got = quality_weights(w, 3, power=3.0)
    ratio = got / expected
    np.testing.assert_allclose(ratio, np.broadcast_to(ratio[0], ratio.shape))


def test_quality_only_rule_without_scores():
    rule = QualityVote()
    votes = np.array([[0, 1], [2, 1], [2, 2]])
    assert rule.weights_for([0, 1, 2], n_public=2) is None
    np.testing.assert_array_equal(rule(votes, n_classes=3), [2, 1])
    w = rule.weights_for([0, 1, 2], n_public=2, quality=[1.0, 0.3, 0.3])
    np.testing.assert_array_equal(rule(votes, n_classes=3, weights=w), [0, 1])


def test_registry_flags_and_privacy():
    assert isinstance(get_consensus("quality"), QualityVote)
    assert QualityVote.uses_quality is True
    assert MajorityVote.uses_quality is False and CertaintyWeighted.uses_quality is False
    assert not QualityVote(CERTAINTY).accountable
    private = QualityVote(CERTAINTY, scorer_epsilon=0.5, scorer_delta=1e-5)
    assert private.accountable and private.one_off_privacy() == (0.5, 1e-5)


# ---------------------------------------------------------------- input validation
@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"power": 0.0}, "power"),
        ({"power": -1.0}, "power"),
        ({"power": np.inf}, "power"),
        ({"quality_power": -0.5}, "quality_power"),
        ({"top_k": 0}, "top_k"),
        ({"top_k": 1.5}, "top_k"),
        ({"quality": [0.5, 0.5]}, "quality"),
        ({"quality": [0.5, 1.5, 0.5, 0.5]}, "quality"),
        ({"certainty": -CERTAINTY}, "certainty"),
        ({"certainty": np.full((4, 3), NAN)}, "certainty"),
        ({"certainty": np.ones((4, 2))}, "certainty"),
    ],
)
def test_bad_arguments_raise_value_error_naming_them(kwargs, name):
    kwargs = {"certainty": CERTAINTY, **kwargs}
    with pytest.raises(ValueError, match=name):
        quality_vote(VOTES, 3, **kwargs)


def test_bad_types_raise_type_error():
    with pytest.raises(TypeError, match="power"):
        quality_vote(VOTES, 3, CERTAINTY, power="16")
    with pytest.raises(TypeError, match="quality"):
        quality_vote(VOTES, 3, CERTAINTY, quality=["a", "b", "c", "d"])
    with pytest.raises(ValueError, match="n_clients"):
        quality_weights(None, 3)


def test_called_with_scores_of_the_wrong_federation():
    with pytest.raises(ValueError, match="weights_for"):
        QualityVote(scores=CERTAINTY[:2])(VOTES, n_classes=3)


# ---------------------------------------------------------------- experiment files
def _write(tmp_path, method):
    path = tmp_path / "exp.toml"
    path.write_text(
        'name = "q"\nseeds = [0]\n[data]\ndataset = "digits"\n[split]\nn_clients = 2\n'
        f'[method]\n{method}\n[[clients]]\nlearner = "DT"\n'
    )
    return path


def test_experiment_file_accepts_quality_and_refuses_misplaced_keys(tmp_path):
    ok = 'name = "fedct"\nconsensus = "quality"\npower = 8\ntop_k = 2\n'
    ok += "certainty = { lam = 0.01, dp = true, epsilon = 0.5, delta = 1e-5 }"
    _, runs = load_experiment(_write(tmp_path, ok))
    assert runs[0].config["method"]["certainty"]["epsilon"] == 0.5
    with pytest.raises(ExperimentError, match="power needs consensus"):
        load_experiment(_write(tmp_path, 'name = "fedct"\npower = 8'))
    with pytest.raises(ExperimentError, match=r"method\.certainty\.sigma"):
        load_experiment(
            _write(tmp_path, 'name = "fedct"\nconsensus = "quality"\ncertainty = { sigma = 1.0 }')
        )
    with pytest.raises(ExperimentError, match=r"needs \[method.certainty\]"):
        load_experiment(_write(tmp_path, 'name = "fedct"\nconsensus = "certainty"'))


# ---------------------------------------------------------------- seeded end-to-end floor
@pytest.mark.slow
def test_pathological_digits_quality_beats_majority():
    """Digits, 10 logistic-regression clients, Dir(0.01, 0.01), 3 rounds, seed 0.

    Measured: majority 0.798, quality (FedAUX scores, power 16) 0.907.
    """
    from sklearn.linear_model import LogisticRegression

    from cotrain import FederatedCoTrainer
    from cotrain.datasets.loaders import load_digits_split
    from cotrain.partition import two_alpha
    from cotrain.privacy.fedaux import fedaux_weights

    d = load_digits_split(random_state=0)
    parts = two_alpha(d.y_labeled, 10, 0.01, 0.01, random_state=0)
    X = [d.X_labeled[p] for p in parts]
    y = [d.y_labeled[p] for p in parts]
    scores = fedaux_weights(X, d.X_public, d.X_public, lam=0.01, dp=False)
    acc = {}
    for name, rule in [("majority", "majority"), ("quality", QualityVote(scores))]:
        model = FederatedCoTrainer(
            [LogisticRegression(max_iter=200) for _ in range(10)],
            consensus=rule,
            rounds=3,
            random_state=0,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(X, y, X_public=d.X_public, eval_set=(d.X_test, d.y_test))
        acc[name] = model.history_[-1].mean_accuracy
    assert acc["quality"] >= 0.85
    assert acc["quality"] >= acc["majority"] + 0.05


def test_trainer_passes_the_clients_quality_when_they_send_it():
    """With per-client trust on, each upload carries its out-of-fold accuracy (quality)."""
    from sklearn.datasets import make_classification
    from sklearn.tree import DecisionTreeClassifier

    from cotrain import FederatedCoTrainer
    from cotrain.trust import PseudoLabelTrust

    seen = []

    class Spy(QualityVote):
        def weights_for(self, client_ids, n_public, quality=None):
            seen.append(quality)
            return super().weights_for(client_ids, n_public, quality=quality)

    X, y = make_classification(n_samples=200, n_features=5, random_state=0)
    X_parts, y_parts = [X[:40], X[40:80], X[80:120]], [y[:40], y[40:80], y[80:120]]
    for trust, sent in [(None, False), (PseudoLabelTrust(), True)]:
        seen.clear()
        FederatedCoTrainer(
            [DecisionTreeClassifier(random_state=0) for _ in range(3)],
            consensus=Spy(),
            rounds=2,
            trust=trust,
            random_state=0,
        ).fit(X_parts, y_parts, X_public=X[120:])
        rounds = [q for q in seen if q is not None]  # the trainer's dry run passes none
        assert len(rounds) == 2 and all(q.shape == (3,) for q in rounds)
        # round 1 fits without a pool: nobody has chosen a trust yet, so nobody sends quality
        assert np.isnan(rounds[0]).all()
        if sent:
            assert ((rounds[1] >= 0) & (rounds[1] <= 1)).all()
        else:
            assert np.isnan(rounds[1]).all()
