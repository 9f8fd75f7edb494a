"""FederatedCoTrainer(privacy=...): randomised labels, accounting, budget, determinism."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.naive_bayes import GaussianNB
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer
from cotrain.trust import PseudoLabelTrust

privacy = pytest.importorskip("cotrain.privacy")
pytest.importorskip("dp_accounting")


def fit(cancer, mechanism, **params):
    params.setdefault("rounds", 3)
    params.setdefault("random_state", 0)
    ests = [DecisionTreeClassifier(), GaussianNB(), DecisionTreeClassifier()]
    return FederatedCoTrainer(ests, privacy=mechanism, classes=[0, 1], **params).fit(
        cancer["X"], cancer["y"], X_public=cancer["X_public"], y_public=cancer["y_public"]
    )


def test_negligible_noise_gives_the_non_private_result(cancer):
    plain = fit(
        cancer, None, consensus="majority", trust=PseudoLabelTrust()
    )  # as "auto" with privacy
    # record level over all 300 released labels: ε' = 50000/300 per label, keep prob ~ 1
    private = fit(cancer, privacy.RandomizedResponse(epsilon=50_000.0))
    np.testing.assert_array_equal(plain.pseudo_label_codes_, private.pseudo_label_codes_)


def test_strong_noise_destroys_the_pseudo_labels(cancer):
    noisy = fit(cancer, privacy.RandomizedResponse(epsilon=0.01), rounds=1)
    assert abs(noisy.history_[0].pseudo_label_accuracy - 0.5) < 0.12
    assert fit(cancer, None, rounds=1).history_[0].pseudo_label_accuracy > 0.85


def test_epsilon_is_composed_over_rounds_and_reported(cancer):
    mech = privacy.RandomizedResponse(epsilon=0.5)
    trainer = fit(cancer, mech, rounds=4, participation=0.67)
    eps = [r.epsilon for r in trainer.history_]
    assert eps == sorted(eps) and eps[0] > 0
    report = trainer.privacy_report()
    assert report["max_epsilon"] == pytest.approx(eps[-1])
    event = mech.dp_event(2, len(cancer["X_public"]))
    for client in report["clients"]:
        taken = sum(client["client"] in r.clients for r in trainer.history_)
        assert client["rounds"] == taken
        assert client["epsilon"] == pytest.approx(
            privacy.epsilon_spent([event] * taken, mech.delta)
        )


def test_budget_stops_before_it_is_exceeded(cancer):
    one = privacy.RandomizedResponse(epsilon=0.5)
    two_rounds = privacy.epsilon_spent([one.dp_event(2, 300)] * 2, one.delta)
    trainer = fit(
        cancer, privacy.RandomizedResponse(epsilon=0.5, budget=two_rounds * 1.0001), rounds=10
    )
    assert trainer.n_rounds_ == 2 and trainer.stopped_reason_ == "privacy budget"
    assert trainer.history_[-1].epsilon <= two_rounds * 1.0001


def test_budget_below_one_round_is_refused_before_training(cancer):
    with pytest.raises(ValueError, match=r"privacy budget .* smaller than the ε of one round"):
        fit(cancer, privacy.RandomizedResponse(epsilon=1.0, budget=0.01))


@pytest.mark.slow
def test_reproducible_noise_is_an_explicit_warned_opt_in(cancer):
    mech = privacy.RandomizedResponse(epsilon=300.0)
    with pytest.warns(UserWarning, match="reproducible_noise=True.*replay"):
        a = fit(cancer, mech, reproducible_noise=True)
    with pytest.warns(UserWarning, match="reproducible_noise=True"):
        b = fit(cancer, mech, reproducible_noise=True, n_jobs=2)
    np.testing.assert_array_equal(a.pseudo_label_codes_, b.pseudo_label_codes_)
    with pytest.warns(UserWarning, match="reproducible_noise=True"):
        c = fit(cancer, mech, reproducible_noise=True, random_state=1)
    assert not np.array_equal(a.pseudo_label_codes_, c.pseudo_label_codes_)


def test_default_noise_differs_between_runs_with_the_same_random_state(cancer):
    mech = privacy.RandomizedResponse(epsilon=300.0)
    a, b = fit(cancer, mech, rounds=1), fit(cancer, mech, rounds=1)
    assert not np.array_equal(a.pseudo_label_codes_, b.pseudo_label_codes_)
    # while without privacy the same random_state gives the same run
    plain = [fit(cancer, None, rounds=1).pseudo_label_codes_ for _ in range(2)]
    np.testing.assert_array_equal(*plain)


def test_mechanism_must_match_what_is_shared(cancer):
    with pytest.raises(ValueError, match="randomises hard labels but share='soft'"):
        fit(cancer, privacy.RandomizedResponse(epsilon=1.0), share="soft", consensus="mean")


def test_gnmax_consensus_is_accounted_over_rounds(cancer):
    import dp_accounting

    from consensus import NoisyArgmax

    gnmax = NoisyArgmax(sigma=60.0, random_state=0)
    with pytest.warns(UserWarning, match="replay"):
        trainer = fit(cancer, None, consensus=gnmax, rounds=3)
    n = len(cancer["X_public"])
    event = dp_accounting.GaussianDpEvent(60.0 / np.sqrt(2 * n))
    for t, record in enumerate(trainer.history_, start=1):
        assert record.epsilon == pytest.approx(privacy.epsilon_spent([event] * t, 1e-5))
    assert (record.epsilon_unit, record.epsilon_adversary) == ("record", "broadcast observers")
    # refitting with the same consensus object reproduces the noise (it is copied per fit)
    with pytest.warns(UserWarning, match="replay"):
        again = fit(cancer, None, consensus=gnmax, rounds=3)
    np.testing.assert_array_equal(trainer.pseudo_label_codes_, again.pseudo_label_codes_)


def test_guarantees_against_different_adversaries_are_reported_apart(cancer):
    """Client-side noise holds against the server; GNMax only against broadcast observers.
    The two ε are never summed: each guarantee composes its own mechanisms."""
    from consensus import NoisyArgmax

    rr = privacy.RandomizedResponse(epsilon=0.5)
    both = fit(cancer, rr, consensus=NoisyArgmax(sigma=60.0), rounds=2)
    alone = fit(cancer, rr, rounds=2)
    gnmax = fit(cancer, None, consensus=NoisyArgmax(sigma=60.0), rounds=2)
    assert both.history_[-1].epsilon == pytest.approx(alone.history_[-1].epsilon)
    report = both.privacy_report()
    assert len(report["mechanisms"]) == 2
    assert [(g["unit"], g["adversary"]) for g in report["guarantees"]] == [
        ("record", "server"),
        ("record", "broadcast observers"),
    ]
    assert report["guarantees"][1]["max_epsilon"] == pytest.approx(
        gnmax.privacy_report()["max_epsilon"]
    )
    assert report["unit"] == "record" and report["adversary"] == "server"
    assert "one private training record" in report["protects"]


def test_label_level_epsilon_warns_and_is_never_mixed_with_record_level(cancer):
    from consensus import NoisyArgmax

    label = privacy.RandomizedResponse(epsilon=1.0, unit="label")
    with pytest.warns(UserWarning, match="protects one released public label"):
        trainer = fit(cancer, label, consensus=NoisyArgmax(sigma=60.0), rounds=2)
    report = trainer.privacy_report()
    # the record-level guarantee (GNMax) is the headline; the label-level one stays apart
    assert [(g["unit"], g["adversary"]) for g in report["guarantees"]] == [
        ("record", "broadcast observers"),
        ("label", "server"),
    ]
    assert trainer.history_[-1].epsilon_unit == "record"
    assert report["guarantees"][1]["max_epsilon"] == pytest.approx(
        privacy.epsilon_spent([label.dp_event(2, 300)] * 2, 1e-5)
    )


def test_noiseless_gnmax_has_nothing_to_account(cancer):
    from consensus import NoisyArgmax

    trainer = fit(cancer, None, consensus=NoisyArgmax(sigma=0.0), rounds=1)
    assert trainer.history_[0].epsilon is None
    with pytest.raises(ValueError, match="no privacy mechanism"):
        trainer.privacy_report()


def test_fedaux_scorer_budget_enters_the_ledger(cancer):
    """The DP certainty scores are released once, before the run: their (ε, δ) is added to
    every client's record-level ε against the server by basic composition."""
    from consensus import CertaintyWeighted

    scores = np.abs(np.random.default_rng(0).normal(size=(3, 300)))
    rule = CertaintyWeighted(scores, scorer_epsilon=0.5, scorer_delta=1e-6)
    with pytest.warns(UserWarning, match="labels are released to the server without noise"):
        alone = fit(cancer, None, consensus=rule, rounds=2)
    report = alone.privacy_report()
    assert report["max_epsilon"] == pytest.approx(0.5)
    assert report["delta"] == pytest.approx(1e-6)
    assert (report["unit"], report["adversary"]) == ("record", "server")

    rr = privacy.RandomizedResponse(epsilon=1.0, sensitivity=1)
    both = fit(cancer, rr, consensus=rule, rounds=2).privacy_report()
    # the scorer's bound is proved for replace-one neighbours only: the run is reported
    # under replace-one, where the claimed s* = 1 counts twice
    assert both["relation"] == "replace_one"
    assert both["epsilon_by_relation"]["add_or_remove"] is None
    event = rr.relation_event(2, 300, "replace_one")
    rounds_only = privacy.epsilon_spent([event] * 2, 1e-5, relation="replace_one")
    assert rounds_only > privacy.epsilon_spent([rr.dp_event(2, 300)] * 2, 1e-5)
    assert both["max_epsilon"] == pytest.approx(rounds_only + 0.5)
    assert both["delta"] == pytest.approx(1e-5 + 1e-6)
    assert len(both["guarantees"]) == 1  # the same unit and adversary: composed
    with pytest.raises(ValueError, match="scorer_delta"):
        fit(cancer, None, consensus=CertaintyWeighted(scores, scorer_epsilon=0.5), rounds=1)


def test_a_private_client_keeps_its_warnings_and_timing_off_the_upload(cancer):
    """Warning texts and fit times are data-dependent side channels outside the ε: a client
    with a privacy mechanism sends the server only its labels (and a failure, if any). The
    experimenter still gets the warning summary and the timing from the simulation."""
    from sklearn.linear_model import LogisticRegression

    from cotrain.callbacks import Callback

    class ServerWarnings(Callback):  # the run is not kept after fit: look at its end
        def on_fit_end(self, loop):
            self.heard = dict(loop.owner._federation.server.warnings)

    ests = [LogisticRegression(max_iter=1), GaussianNB(), DecisionTreeClassifier()]
    server = ServerWarnings()
    with pytest.warns(UserWarning, match="ConvergenceWarning"):
        trainer = FederatedCoTrainer(
            ests,
            rounds=2,
            privacy=privacy.RandomizedResponse(epsilon=300.0),
            classes=[0, 1],
            random_state=0,
            callbacks=[server],
        ).fit(cancer["X"], cancer["y"], X_public=cancer["X_public"])
    assert server.heard == {}  # the server heard nothing
    assert any(key[1] == "ConvergenceWarning" for key in trainer.learner_warnings_)
    assert all(r.learner_time_s > 0 for r in trainer.history_)
