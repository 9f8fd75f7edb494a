"""DP-SGD as a co-training privacy mechanism: cotrain.privacy.mechanisms.dpsgd (DPSGD,
dpsgd_epsilon).

The classifier itself (learners.dp_torch.DPTorchClassifier) is tested in test_dp_torch.py.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("opacus")
dp = pytest.importorskip("dp_accounting")

from sklearn.base import clone  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

from cotrain.privacy.mechanisms.base import ClientRound  # noqa: E402
from cotrain.privacy.mechanisms.dpsgd import DPSGD, dpsgd_epsilon  # noqa: E402
from cotrain.trust import FixedTrust, PseudoLabelTrust, client_trust  # noqa: E402
from learners import MLP, ClassAlignedClassifier, TorchClassifier  # noqa: E402
from learners.dp_torch import DPTorchClassifier  # noqa: E402

DELTA = 1e-5
CLASSES = np.arange(10)


def mech(**kw) -> DPSGD:
    params = dict(noise_multiplier=1.0, max_grad_norm=1.0, sampling_rate=0.1, steps=20)
    params.update(kw)
    return DPSGD(**params)


def event(q: float, sigma: float, steps: int):
    return dp.SelfComposedDpEvent(dp.PoissonSampledDpEvent(q, dp.GaussianDpEvent(sigma)), steps)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def digits(digits_split):
    return digits_split


class MyTorch(TorchClassifier):
    """A subclass with its own training (prepare must not silently replace it)."""


class CountingDP(DPTorchClassifier):
    """Counts its fits (class-level: clones share the count)."""

    fits: ClassVar[list[int]] = []

    def fit(self, X, y, sample_weight=None):
        CountingDP.fits.append(len(X))
        return super().fit(X, y, sample_weight=sample_weight)


# ------------------------------------------------------------------ accounting


@pytest.mark.slow
def test_dpsgd_epsilon_known_values_and_errors():
    step = dp.PoissonSampledDpEvent(0.05, dp.GaussianDpEvent(1.0))
    events = [dp.SelfComposedDpEvent(step, 100)] * 2
    assert dpsgd_epsilon([], DELTA) == 0.0
    assert dpsgd_epsilon(events, DELTA, accountant="rdp") == pytest.approx(5.3679, abs=1e-3)
    with pytest.raises(ValueError, match="replace-one"):
        dpsgd_epsilon(events, DELTA, accountant="rdp", neighbors="replace_one")
    with pytest.raises(ValueError, match="delta"):
        dpsgd_epsilon(events, 0.0)
    with pytest.raises(ValueError, match="accountant"):
        dpsgd_epsilon(events, DELTA, accountant="gdp")
    with pytest.raises(ValueError, match="neighbors must be"):
        dpsgd_epsilon(events, DELTA, neighbors="swap")
    with pytest.raises(TypeError, match="unexpected keyword argument 'neighbours'"):
        dpsgd_epsilon(events, DELTA, neighbours="replace_one")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("neighbors", "relation"),
    [("add_or_remove", "ADD_OR_REMOVE_ONE"), ("replace_one", "REPLACE_ONE")],
)
def test_epsilon_is_dp_accountings_pld_under_both_relations(neighbors, relation):
    """ε of R rounds = dp-accounting's PLD of the subsampled Gaussian composed R·steps times,
    built directly from the mechanism (not through the events), to 4 decimals."""
    m = mech(noise_multiplier=1.1, sampling_rate=0.08, steps=25)
    pld = dp.pld.privacy_loss_distribution.from_gaussian_mechanism(
        1.1, sampling_prob=0.08, neighboring_relation=getattr(dp.NeighboringRelation, relation)
    )
    for rounds in (1, 3):
        expected = pld.self_compose(25 * rounds).get_epsilon_for_delta(DELTA)
        assert m.epsilon(rounds, neighbors=neighbors) == pytest.approx(expected, abs=5e-5)
        events = [m.dp_event(10, 300)] * rounds
        assert dpsgd_epsilon(events, DELTA, neighbors=neighbors) == pytest.approx(
            expected, abs=5e-5
        )
        assert m.reported_epsilon(events, DELTA, neighbors=neighbors) == pytest.approx(
            expected, abs=5e-5
        )
    assert m.epsilon(0) == 0.0
    # replace-one costs more than add/remove (the relation the headline ε uses)
    assert m.epsilon(3, neighbors="replace_one") > m.epsilon(3) > m.epsilon(1)


# ------------------------------------------------------------------ parameters


def test_sampling_rate_and_steps_are_required():
    """Without them the sampling would depend on the number of private rows."""
    for incomplete in (DPSGD(), DPSGD(noise_multiplier=2.0, sampling_rate=0.1), DPSGD(steps=5)):
        with pytest.raises(ValueError, match=r"DPSGD needs sampling_rate .* and steps"):
            incomplete.validate()
        with pytest.raises(ValueError, match="DPSGD needs sampling_rate"):
            incomplete.prepare(TorchClassifier())
        with pytest.raises(ValueError, match="DPSGD needs sampling_rate"):
            incomplete.dp_event(2, 10)


@pytest.mark.parametrize(
    ("param", "value", "error"),
    [
        ("noise_multiplier", 0.0, ValueError),
        ("max_grad_norm", -0.5, ValueError),
        ("secure_mode", 1, TypeError),
        ("delta", 0.0, ValueError),
        ("budget", -1.0, ValueError),
        ("sampling_rate", 0.0, ValueError),
        ("sampling_rate", 1.5, ValueError),
        ("sampling_rate", True, ValueError),
        ("steps", 0, ValueError),
        ("steps", 2.5, ValueError),
        ("steps", True, ValueError),
    ],
)
def test_mechanism_params_checked_in_prepare(param, value, error):
    with pytest.raises(error, match=param):
        mech(**{param: value}).prepare(TorchClassifier())


def test_secure_mode_needs_torchcsprng():
    try:
        import torchcsprng  # noqa: F401
    except ImportError:
        pass
    else:  # pragma: no cover
        pytest.skip("torchcsprng is installed")
    with pytest.raises(ImportError, match="torchcsprng"):
        mech(secure_mode=True).prepare(TorchClassifier())


# ------------------------------------------------------------------ the mechanism


def test_mechanism_kind_and_its_public_event():
    m = mech()
    assert (m.shares, m.unit, m.adversary) == (("hard", "soft"), "record", "server")
    assert not m.reports_events and not m.cross_validated_trust
    assert m.neighbors == "add_or_remove" and m.accountable
    assert "noise_multiplier=2.0" in repr(mech(noise_multiplier=2.0))
    assert clone(mech(budget=3.0), safe=False).get_params()["budget"] == 3.0
    with pytest.raises(TypeError, match="not a label mechanism"):
        m.randomize(np.zeros(3, dtype=np.int64), 2, np.random.default_rng(0))
    # the server computes the round's event: the configured one, whatever C and |U|
    assert m.dp_event(2, 10) == m.dp_event(10, 5000) == event(0.1, 1.0, 20)


def test_prepare_converts_a_torch_client():
    base = TorchClassifier(
        MLP, module_params={"hidden": (8,)}, batch_size=16, lr=0.05, random_state=3
    )
    dp_est = mech(noise_multiplier=1.3, max_grad_norm=0.7, steps=9).prepare(base)
    assert type(dp_est) is DPTorchClassifier and type(base) is TorchClassifier
    params = dp_est.get_params()
    assert {k: params[k] for k in base.get_params() if k != "steps_per_fit"} == {
        k: v for k, v in base.get_params().items() if k != "steps_per_fit"
    }
    assert (params["noise_multiplier"], params["max_grad_norm"]) == (1.3, 0.7)
    assert (params["sample_rate"], params["steps_per_fit"]) == (0.1, 9)
    assert not hasattr(dp_est, "module_")
    # a DPTorchClassifier is cloned with the mechanism's DP parameters
    again = mech(noise_multiplier=2.0, sampling_rate=0.3).prepare(dp_est)
    assert again is not dp_est and again.noise_multiplier == 2.0 and again.batch_size == 16
    assert (again.sample_rate, dp_est.noise_multiplier) == (0.3, 1.3)


@pytest.mark.parametrize(
    ("estimator", "name"), [(LogisticRegression(), "LogisticRegression"), (MyTorch(), "MyTorch")]
)
def test_prepare_rejects_non_torch_clients(estimator, name):
    with pytest.raises(TypeError, match=name):
        mech().prepare(estimator)


def test_the_round_event_does_not_depend_on_the_number_of_rows(digits):
    """Fits on n and n + 1 private rows (first and continued fits): the same event, the
    configured one, which the server computes; the release carries no event."""
    Xtr, _, ytr, _ = digits
    m = mech(noise_multiplier=1.5, sampling_rate=0.05, steps=12)
    est = m.prepare(TorchClassifier(module_params={"hidden": (8,)}, batch_size=16))
    with pytest.raises(ValueError, match="not been fitted"):
        m.round_event(est)
    seen = []
    for n in (300, 301):
        model = ClassAlignedClassifier(clone(est), classes=CLASSES).fit(Xtr[:n], ytr[:n])
        seen.append(m.round_event(model))
        model.fit(Xtr[: n + 40], ytr[: n + 40])  # a later round: more rows (the pool)
        seen.append(m.round_event(model))
        labels = model.predict(Xtr[-5:])
        release = m.release_round(ClientRound(labels, CLASSES, model), np.random.default_rng(0))
        assert release.dp_event is None and release.labels is labels
    assert seen == [m.dp_event(10, 5)] * 4 == [event(0.05, 1.5, 12)] * 4
    # a model that was not trained the configured way releases nothing
    other = ClassAlignedClassifier(mech(steps=3).prepare(TorchClassifier()), classes=CLASSES)
    other.fit(Xtr[:50], ytr[:50])
    with pytest.raises(RuntimeError, match="is not the configured DP-SGD round"):
        m.release_round(ClientRound(labels, CLASSES, other), np.random.default_rng(0))
    # nor one with an earlier unaccounted fit, even if its last fit was the configured one
    other.estimator.set_params(sample_rate=0.05, steps_per_fit=12, noise_multiplier=1.5)
    other.fit(Xtr[:50], ytr[:50])
    assert m.round_event(other) == m.dp_event(10, 5)
    with pytest.raises(RuntimeError, match=r"count=3\)\) is not the configured"):
        m.release_round(ClientRound(labels, CLASSES, other), np.random.default_rng(0))
    with pytest.raises(TypeError, match="DPTorchClassifier"):
        m.round_event(TorchClassifier(max_epochs=1).fit(Xtr[:50], ytr[:50]))


# ------------------------------------------------------------------ trust


@pytest.mark.parametrize("trust", [0.5, 0.0, FixedTrust(0.25), PseudoLabelTrust()])
def test_dpsgd_refuses_any_pool_weight_but_one(trust):
    """A pool weight below 1 applies to the classes the client holds: the weights would
    depend on its private labels, outside the DP-SGD proof."""
    with pytest.raises(ValueError, match=r"trust.*DPSGD"):
        client_trust(trust, mech(), 7)


def test_dpsgd_trains_every_row_at_weight_one():
    for trust in (None, 1.0, 1, "auto", FixedTrust(1.0)):
        assert client_trust(trust, mech(), 7).weight == 1.0


def test_trainer_refuses_dpsgd_with_a_trust_before_any_training(digits):
    from cotrain import FederatedCoTrainer

    Xtr, _, ytr, _ = digits
    parts = np.array_split(np.arange(100), 2)
    CountingDP.fits.clear()
    trainer = FederatedCoTrainer(
        [CountingDP(max_epochs=1)] * 2, rounds=1, privacy=mech(), trust=0.5, classes=CLASSES
    )
    with pytest.raises(ValueError, match=r"trust=0\.5 cannot be combined with DPSGD"):
        trainer.fit([Xtr[p] for p in parts], [ytr[p] for p in parts], X_public=Xtr[200:260])
    assert CountingDP.fits == []


# ------------------------------------------------------------------ in the federation


@pytest.mark.slow
def test_a_dpsgd_client_uploads_no_event():
    """Nothing about the private rows goes with the labels: no dp_event in the upload."""
    from cotrain.federation.client import Client

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    m = mech(steps=5)
    client = Client(
        0, TorchClassifier(module_params={"hidden": (8,)}, batch_size=16), X[:80], y[:80],
        CLASSES, X_public=X[100:150], privacy=m,
    )  # fmt: skip
    result = client.run_round(1)
    assert result.error is None and result.message is not None
    assert result.dp_event is None
    assert m.round_event(client.model) == m.dp_event(10, 50)


@pytest.mark.slow
def test_a_dpsgd_federation_learns_and_is_accounted_from_its_configuration(digits):
    """3 clients of 150 digits, |U| = 300, 3 rounds of 50 steps at q = 0.1, σ = 1: every
    client far above chance (0.1); each client's ε is the composition of its rounds'
    configured events (add/remove one record, against the server)."""
    from sklearn.tree import DecisionTreeClassifier

    from cotrain import FederatedCoTrainer

    X_train, X_test, y_train, y_test = digits
    parts = np.array_split(np.arange(450), 3)
    est = TorchClassifier(module_params={"hidden": (32,)}, batch_size=32, lr=0.05, n_threads=1)
    m = mech(sampling_rate=0.1, steps=50)
    with pytest.warns(UserWarning, match="reproducible_noise=True"):
        trainer = FederatedCoTrainer(
            [est] * 3, rounds=3, privacy=m, random_state=0, reproducible_noise=True,
            classes=CLASSES,
        ).fit(
            [X_train[p] for p in parts], [y_train[p] for p in parts],
            X_public=X_train[600:900], eval_set=(X_test, y_test),
        )  # fmt: skip
    # measured (seeds 0-5): every client 0.698-0.774; chance is 0.1
    assert min(c.score(X_test, y_test) for c in trainer.clients_) > 0.55
    report = trainer.privacy_report()
    assert (report["unit"], report["adversary"]) == ("record", "server")
    exact = m.epsilon(3)  # 8.602: PLD, add/remove one record
    for i, client in enumerate(trainer.clients_):
        assert getattr(client, "estimator_", client).dp_events_ == [m.dp_event(10, 300)] * 3
        # the ledger's composition is a pessimistic PLD (interval 1e-3·ε): within 0.1 %
        assert exact <= report["clients"][i]["epsilon"] <= exact * 1.001
    assert trainer.history_[-1].epsilon == pytest.approx(report["max_epsilon"])
    # a client that cannot train with DP-SGD is refused before any training
    with pytest.raises(TypeError, match=r"client 1: .*torch client"):
        FederatedCoTrainer([est, DecisionTreeClassifier()], privacy=m, classes=CLASSES).fit(
            [X_train[p] for p in parts[:2]], [y_train[p] for p in parts[:2]],
            X_public=X_train[600:700],
        )  # fmt: skip


@pytest.mark.slow
def test_dpsgd_noise_in_a_federation_follows_reproducible_noise(digits):
    """By default a client's DP-SGD noise comes from its OS entropy (two runs with the same
    random_state differ); reproducible_noise=True seeds it per round from random_state."""
    from cotrain import FederatedCoTrainer

    X_train, _, y_train, _ = digits
    parts = np.array_split(np.arange(120), 2)
    est = TorchClassifier(module_params={"hidden": (8,)}, batch_size=32, lr=0.02)

    def weights(**kw):
        trainer = FederatedCoTrainer(
            [est, est], rounds=1, privacy=mech(steps=5), random_state=0, classes=CLASSES, **kw
        ).fit([X_train[p] for p in parts], [y_train[p] for p in parts], X_public=X_train[200:260])
        return trainer.clients_[0].get_weights()

    a, b = weights(), weights()
    assert any(not np.array_equal(v, b[k]) for k, v in a.items())
    with pytest.warns(UserWarning, match="reproducible_noise=True"):
        c, d = weights(reproducible_noise=True), weights(reproducible_noise=True)
    for k, v in c.items():
        np.testing.assert_array_equal(v, d[k])


def test_the_servers_ledger_accounts_dpsgd_without_any_reported_event():
    """The server composes the configured event for every client that answered; an upload
    needs no event (and any it carried would not be used)."""
    from consensus import MajorityVote
    from cotrain.federation.server import CoTrainingServer
    from cotrain.privacy import PrivacyLedger
    from cotrain.wire.format import WireFormat
    from cotrain.wire.upload import Upload

    m = mech(steps=10)
    wire = WireFormat(n_classes=2, n_public=4)
    ledger = PrivacyLedger([m], 3, 2, 4)
    server = CoTrainingServer(
        MajorityVote(), wire, n_clients=3, on_client_error="skip", ledger=ledger
    )
    labels = np.array([0, 1, 1, 0])
    uploads = [Upload(i, wire.encode_upload(labels)) for i in (0, 2)]
    record, answered = server.finish_round(1, np.array([0, 2]), uploads, started=0.0)
    assert answered == [0, 2] and not record.failed
    assert ledger.rounds_taken.tolist() == [1, 0, 1]
    exact = m.epsilon(1)
    assert exact <= ledger.epsilon(0) == ledger.epsilon(2) <= exact * 1.001
    assert ledger.epsilon(1) == 0.0


def test_a_flower_site_with_dpsgd_and_a_trust_refuses_to_start(tmp_path):
    """The site's own check, before it trains or answers anything."""
    from cotrain.flower.site import load_site, write_site

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 4)), np.arange(30) % 2
    path = write_site(
        tmp_path / "site", X, y, rng.normal(size=(20, 4)), TorchClassifier(), client_id=0,
        privacy=mech(), trust=0.5, classes=[0, 1],
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"site config .*trust=0\.5 cannot be combined with DPSGD"):
        load_site(path)
    ok = write_site(
        tmp_path / "ok", X, y, rng.normal(size=(20, 4)), TorchClassifier(), client_id=0,
        privacy=mech(), trust=None, classes=[0, 1],
    )  # fmt: skip
    assert load_site(ok).trust is None
