"""Confident-GNMax on one site's own teachers: SubsampleAndAggregate(threshold=...).

Known answers: the answered set of hand-made vote counts; the round's single Gaussian event
against the two Gaussian mechanisms composed by dp-accounting; abstaining uploads on the wire
and through a federation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("dp_accounting")

from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer
from cotrain.privacy import SubsampleAndAggregate, epsilon_spent, gaussian_epsilon
from cotrain.privacy.accounting.epsilon import gaussian_event
from cotrain.wire.format import MalformedMessage, WireFormat

COUNTS = np.array([[9, 1], [5, 5], [0, 10], [7, 3]])


def test_only_the_confident_examples_are_answered():
    exact = SubsampleAndAggregate(n_teachers=10, sigma=1e-6, threshold=0.8, check_noise=1.0)
    rng = np.random.default_rng(0)
    assert exact.aggregate_votes(COUNTS, rng).tolist() == [0, -1, 1, -1]  # tops 9, 5, 10, 7
    one_slot = exact.set_params(max_answered=0.25)  # 1 of 4: the largest noisy top count
    assert one_slot.aggregate_votes(COUNTS, rng).tolist() == [-1, -1, 1, -1]
    assert SubsampleAndAggregate(sigma=1.0).aggregate_votes(COUNTS, rng).min() >= 0


def test_the_round_event_is_the_two_gaussians_composed():
    import dp_accounting as dp

    mech = SubsampleAndAggregate(sigma=30.0, threshold=0.6, check_noise=2.0, max_answered=0.5)
    n = 200
    check = dp.GaussianDpEvent(60.0 / math.sqrt(n))  # top counts: L2 sqrt(n)
    answer = dp.GaussianDpEvent(30.0 / math.sqrt(2 * 100))  # 100 slots: L2 sqrt(2 * 100)
    for relation in ("add_or_remove", "replace_one"):
        ours = epsilon_spent([mech.relation_event(2, n, relation)], 1e-5, relation=relation)
        both = epsilon_spent([dp.ComposedDpEvent([check, answer])], 1e-5, relation=relation)
        assert ours == pytest.approx(both, rel=1e-3)
    z = 1 / math.sqrt(n / 60.0**2 + 200 / 30.0**2)
    assert mech.dp_event(2, n) == gaussian_event(z)
    assert gaussian_epsilon(z, 1e-5) == pytest.approx(
        epsilon_spent([mech.dp_event(2, n)], 1e-5), rel=1e-3
    )


def test_epsilon_calibrates_check_and_answer_together():
    mech = SubsampleAndAggregate(epsilon=2.0, threshold=0.6, max_answered=0.5)
    assert epsilon_spent([mech.dp_event(3, 500)], 1e-5) == pytest.approx(2.0, rel=1e-3)
    assert mech.check_std(500) == pytest.approx(2 * mech.noise_std(500))
    # answering fewer examples buys less noise than GNMax on all of them
    assert mech.noise_std(500) < SubsampleAndAggregate(epsilon=2.0).noise_std(500)


def test_abstaining_uploads_travel_only_where_the_format_allows_them():
    wire = WireFormat(n_classes=3, n_public=4, abstain=True)
    data = wire.encode_upload(np.array([2, -1, 0, -1]))
    assert wire.decode_upload(data).tolist() == [2, -1, 0, -1]
    with pytest.raises(MalformedMessage, match="upload abstains"):
        WireFormat(n_classes=3, n_public=4).decode_upload(data)
    with pytest.raises(ValueError, match=r"-1 or 0\.\.2"):
        wire.encode_upload(np.array([2, -2, 0, 1]))
    assert WireFormat.from_config(wire.to_config()) == wire
    delta = WireFormat(n_classes=3, n_public=4, encoding="delta", abstain=True)
    first = delta.encode_upload(np.array([2, -1, 0, -1]))
    again = delta.encode_upload(np.array([2, 1, 0, -1]), reference=np.array([2, -1, 0, -1]))
    assert delta.decode_upload(again, reference=delta.decode_upload(first)).tolist() == [
        2, 1, 0, -1,
    ]  # fmt: skip
    with pytest.raises(ValueError, match="share='hard'"):
        WireFormat(n_classes=3, n_public=4, share="soft", abstain=True)


def test_a_federation_trains_on_the_answered_examples():
    rng = np.random.default_rng(0)

    def draw(n):
        y = rng.integers(0, 2, n)
        return rng.normal(size=(n, 2)) + 2.0 * y[:, None], y

    sites = [draw(120) for _ in range(3)]
    U, yU = draw(80)
    mech = SubsampleAndAggregate(n_teachers=12, sigma=0.5, threshold=1.0, check_noise=1.0)
    model = FederatedCoTrainer(
        [DecisionTreeClassifier(random_state=i) for i in range(3)], rounds=2, privacy=mech,
        classes=[0, 1], random_state=0,
    ).fit([s[0] for s in sites], [s[1] for s in sites], X_public=U, y_public=yU)  # fmt: skip
    first = model.history_[0]
    assert 0.2 < first.coverage < 1.0  # near the boundary not every teacher agrees
    assert first.pseudo_label_accuracy > 0.9  # the unanimous examples
    report = model.privacy_report()
    assert report["max_epsilon"] == pytest.approx(
        epsilon_spent([mech.dp_event(2, 80)] * 2, 1e-5), rel=1e-6
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epsilon": 1.0, "threshold": 1.5}, "threshold \\(Confident-GNMax\\) must be"),
        ({"epsilon": 1.0, "threshold": 0.5, "aggregate": "rr"}, "aggregate='gnmax'"),
        ({"sigma": 1.0, "threshold": 0.5, "check_noise": 0.5}, "check_noise must be"),
        ({"sigma": 1.0, "threshold": 0.5, "max_answered": 0.0}, "max_answered must be"),
    ],
)
def test_bad_thresholds_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SubsampleAndAggregate(**kwargs).validate()
