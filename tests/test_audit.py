"""Membership-inference audit (cotrain.audit): calibration on known cases, end to end."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, make_classification
from sklearn.ensemble import RandomForestClassifier
from sklearn.neighbors import KNeighborsClassifier
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer
from cotrain.audit import (
    ATTACKS,
    AuditResult,
    ClientsAudit,
    audit_clients,
    audit_labels,
    audit_model,
    label_privatizer,
    membership_auc,
    membership_scores,
    tpr_at_fpr,
)
from cotrain.audit.metrics import LOW_FPRS, membership_metrics


def _noisy_data(n: int = 4000, flip: float = 0.3, seed: int = 0):
    X, y = make_classification(
        n, n_features=10, n_informative=5, flip_y=flip, class_sep=1.5, random_state=seed
    )
    half = n // 2
    return X[:half], y[:half], X[half:], y[half:]


# ---------------------------------------------------------------- membership_auc
def test_membership_auc_hand_made():
    assert membership_auc([0.9, 0.8, 0.7], [0.1, 0.2]) == 1.0
    assert membership_auc([0.1, 0.2], [0.9, 0.8]) == 0.0
    assert membership_auc([0.5] * 4, [0.5] * 3) == 0.5
    assert membership_auc([1, 0], [1, 0]) == 0.5
    assert membership_auc([1, 1, 0, 0], [0, 0, 0, 0]) == 0.75


def test_membership_auc_rejects_bad_input():
    with pytest.raises(ValueError, match="at least one"):
        membership_auc([], [0.1])
    with pytest.raises(ValueError, match="finite"):
        membership_auc([np.nan], [0.1])


# ------------------------------------------------------------ TPR at low FPR
def test_tpr_at_fpr_hand_made():
    members, nonmembers = [9, 8, 7, 2], [6, 5, 1, 0, -1, -2, -3, -4, -5, -6]
    assert tpr_at_fpr(members, nonmembers, 0.0) == 0.75  # 3 members above every non-member
    assert tpr_at_fpr(members, nonmembers, 0.1) == 0.75  # one FP (6) buys nothing
    assert tpr_at_fpr(members, nonmembers, 0.19) == 0.75  # no interpolation below 2/10
    assert tpr_at_fpr(members, nonmembers, 0.2) == 1.0  # threshold 2: FPs 6 and 5
    assert tpr_at_fpr([1, 1], [1, 1], 0.5) == 0.0  # a tie cannot be split: FPR jumps to 1
    assert tpr_at_fpr([1, 1], [1, 1], 1.0) == 1.0
    with pytest.raises(ValueError, match="fpr"):
        tpr_at_fpr([1], [0], 1.5)
    assert LOW_FPRS == (0.001, 0.01)
    assert membership_metrics([3, 2, 1], [0, 0, 5]) == {
        "auc": pytest.approx(6 / 9),
        "tpr_at_0_1pct_fpr": 0.0,
        "tpr_at_1pct_fpr": 0.0,
    }


def test_every_result_carries_low_fpr_metrics():
    Xm, ym, Xn, yn = _noisy_data(n=1000)
    forest = RandomForestClassifier(50, random_state=0, n_jobs=1).fit(Xm, ym)
    res = audit_model(forest, Xm, ym, Xn, yn)
    assert 0.0 <= res.tpr_at_0_1pct_fpr <= res.tpr_at_1pct_fpr <= 1.0
    # a memorising forest: high AUC, but its confidence saturates at 1 on members and on
    # many non-members alike, so at 1 % FPR it identifies (almost) no member: the AUC alone
    # is no worst-case evidence (measured: AUC 0.762, TPR 0.0)
    assert res.auc > 0.7 and res.tpr_at_1pct_fpr < 0.05
    assert res.as_dict()["tpr_at_1pct_fpr"] == res.tpr_at_1pct_fpr
    audit = audit_clients([forest], [(Xm, ym)], (Xn, yn))
    assert audit.mean_tpr_at_1pct_fpr == res.tpr_at_1pct_fpr
    assert audit.mean_tpr_at_0_1pct_fpr == res.tpr_at_0_1pct_fpr


# ------------------------------------------------------- Yeom (gap) attack
def test_yeom_auc_identity_and_ceiling():
    """AUC of the correctness score = 0.5 + (train acc − test acc)/2, exactly, and so at
    most 0.5 + test error / 2; its TPR at an FPR below the test accuracy is 0."""
    X, y = make_classification(
        900, n_features=8, n_informative=4, flip_y=0.25, class_sep=1.0, random_state=3
    )
    Xm, ym, Xn, yn = X[:300], y[:300], X[300:], y[300:]
    for model in (
        DecisionTreeClassifier(max_depth=6, random_state=0),
        KNeighborsClassifier(5),
        KNeighborsClassifier(1),
    ):
        model.fit(Xm, ym)
        train_acc, test_acc = model.score(Xm, ym), model.score(Xn, yn)
        res = audit_labels(model.predict, Xm, ym, Xn, yn)
        assert res.attack == "yeom"
        assert res.auc == pytest.approx(0.5 + (train_acc - test_acc) / 2, abs=1e-12)
        assert res.auc <= 0.5 + (1 - test_acc) / 2 + 1e-12
        assert res.tpr_at_1pct_fpr == 0.0 and res.tpr_at_0_1pct_fpr == 0.0
    # the 1-NN reaches the ceiling: train accuracy 1
    assert res.auc == pytest.approx(0.5 + (1 - test_acc) / 2, abs=1e-12)


def test_label_is_no_attack_name():
    Xm, ym, Xn, yn = _noisy_data(n=200)
    knn = KNeighborsClassifier(1).fit(Xm, ym)
    assert "yeom" in ATTACKS and "label" not in ATTACKS
    with pytest.raises(ValueError, match="attack"):
        audit_labels(knn.predict, Xm, ym, Xn, yn, attack="label")


def test_label_privatizer_is_still_exported():
    from cotrain.privacy import RandomizedResponse

    privatize = label_privatizer(RandomizedResponse(epsilon=50.0), [0, 1], seed=0)
    assert privatize(np.array([0, 1, 1]), 0).tolist() == [0, 1, 1]


# ------------------------------------------------- random labels: no signal
def test_random_labels_give_auc_near_half():
    """A model fitted to SHUFFLED labels memorises those, not the truth. The attacker
    scores with the TRUE labels (what it knows of a candidate record), which are
    independent of the model's answers on members and on non-members alike: AUC ≈ 0.5,
    although the same model is a perfect memoriser of the labels it was given."""
    Xm, ym, Xn, yn = _noisy_data(flip=0.0)
    rng = np.random.default_rng(0)
    shuffled = rng.permutation(ym)
    tree = DecisionTreeClassifier(random_state=0).fit(Xm, shuffled)
    forest = RandomForestClassifier(50, random_state=0, n_jobs=1).fit(Xm, shuffled)
    label = audit_labels(tree.predict, Xm, ym, Xn, yn)
    conf = audit_model(forest, Xm, ym, Xn, yn)
    assert label.attack == "yeom" and conf.attack == "confidence"
    assert abs(label.auc - 0.5) < 0.08, label
    assert abs(conf.auc - 0.5) < 0.08, conf
    # with the labels it was trained on, the same tree is maximally exposed
    assert audit_labels(tree.predict, Xm, shuffled, Xn, rng.permutation(yn)).auc > 0.7


# ----------------------------------------------------- memorising models: signal
def test_memorising_model_label_only_attack():
    Xm, ym, Xn, yn = _noisy_data()
    knn = KNeighborsClassifier(1).fit(Xm, ym)
    assert knn.score(Xm, ym) == 1.0 and knn.score(Xn, yn) < 0.85
    result = audit_labels(knn.predict, Xm, ym, Xn, yn)
    # label-only AUC of a binary score = 0.5 + (train acc - test acc) / 2
    expected = 0.5 + (knn.score(Xm, ym) - knn.score(Xn, yn)) / 2
    assert result.auc == pytest.approx(expected, abs=1e-9)
    assert result.auc >= 0.6
    assert (result.n_members, result.n_nonmembers) == (len(ym), len(yn))


def test_memorising_model_confidence_and_reference_attacks():
    Xm, ym, Xn, yn = _noisy_data()
    forest = RandomForestClassifier(100, random_state=0, n_jobs=1).fit(Xm, ym)
    conf = audit_model(forest, Xm, ym, Xn, yn)
    assert conf.auc >= 0.6
    # reference model trained by the attacker on half of the non-members; audit on the rest
    ref = RandomForestClassifier(100, random_state=1, n_jobs=1).fit(Xn[:1000], yn[:1000])
    refres = audit_model(forest, Xm, ym, Xn[1000:], yn[1000:], reference=ref)
    assert refres.attack == "reference" and refres.auc >= 0.6
    # the label-only attack calibrated by the reference model
    hard = audit_labels(forest.predict, Xm, ym, Xn[1000:], yn[1000:], reference=ref)
    assert hard.attack == "reference" and hard.auc >= 0.6


def test_label_noise_attack_is_finer_than_binary():
    Xm, ym, Xn, yn = _noisy_data(n=1200)
    knn = KNeighborsClassifier(1).fit(Xm, ym)
    params = {"attack": "label-noise", "n_noise": 8, "noise_scale": 0.5}
    scores = membership_scores(knn.predict, Xn, yn, **params)
    assert len(np.unique(scores)) > 2
    result = audit_labels(knn.predict, Xm, ym, Xn, yn, **params)
    assert result.auc >= 0.6


def test_attack_kind_mismatch_is_an_error():
    Xm, ym, Xn, yn = _noisy_data(n=200)
    knn = KNeighborsClassifier(1).fit(Xm, ym)
    with pytest.raises(ValueError, match="hard labels"):
        audit_labels(knn.predict_proba, Xm, ym, Xn, yn, kind="soft", attack="yeom")
    with pytest.raises(ValueError, match="probabilities"):
        audit_labels(knn.predict, Xm, ym, Xn, yn, attack="confidence")
    with pytest.raises(ValueError, match="reference model"):
        audit_labels(knn.predict, Xm, ym, Xn, yn, attack="reference")


# ------------------------------------------------------------------ end to end
def test_fedct_run_audited_end_to_end():
    X, y = load_breast_cancer(return_X_y=True)
    rng = np.random.default_rng(0)
    idx = rng.permutation(len(y))
    train, public, test = idx[:180], idx[180:400], idx[400:]
    parts = np.array_split(train, 3)
    fedct = FederatedCoTrainer(
        [DecisionTreeClassifier(min_samples_leaf=1)] * 3, rounds=3, random_state=0
    ).fit([X[p] for p in parts], [y[p] for p in parts], X_public=X[public])
    members = [(X[p], y[p]) for p in parts]
    audit = audit_clients(fedct, members, (X[test], y[test]))
    assert isinstance(audit, ClientsAudit) and audit.attack == "yeom"
    assert len(audit.results) == 3
    assert all(isinstance(r, AuditResult) and 0.0 <= r.auc <= 1.0 for r in audit.results)
    assert audit.results[0].n_members == len(parts[0])
    assert audit.max_auc >= audit.mean_auc
    # soft view of the same clients (what DD would share) and a privatised view
    soft = audit_clients(fedct, members, (X[test], y[test]), kind="soft")
    assert soft.attack == "confidence" and len(soft.aucs) == 3

    def flip_all(labels: np.ndarray, client: int) -> np.ndarray:
        return 1 - labels

    flipped = audit_clients(fedct, members, (X[test], y[test]), privatize=flip_all)
    # flipping every label mirrors the label-only AUC around 0.5
    np.testing.assert_allclose(np.array(flipped.aucs), 1 - np.array(audit.aucs))


def test_audit_clients_checks_client_count():
    X, y = load_breast_cancer(return_X_y=True)
    models = [DecisionTreeClassifier(random_state=0).fit(X[:100], y[:100])]
    with pytest.raises(ValueError, match="clients"):
        audit_clients(models, [(X[:100], y[:100])] * 2, (X[400:], y[400:]))
    audit = audit_clients(models, [(X[:100], y[:100])], (X[400:], y[400:]))
    assert audit.attack == "confidence" and audit.aucs[0] > 0.5


def test_repeated_randomised_releases_average_the_label_score():
    Xm, ym, Xn, yn = _noisy_data(n=1000)
    knn = KNeighborsClassifier(1).fit(Xm, ym)
    rng = np.random.default_rng(0)

    def randomised(labels: np.ndarray, client: int) -> np.ndarray:
        flip = rng.random(len(labels)) < 0.4  # binary randomized response, keep 60%
        return np.where(flip, 1 - labels, labels)

    once = audit_clients([knn], [(Xm, ym)], (Xn, yn), kind="hard", privatize=randomised)
    many = audit_clients(
        [knn], [(Xm, ym)], (Xn, yn), kind="hard", privatize=randomised, n_releases=25
    )
    clean = audit_labels(knn.predict, Xm, ym, Xn, yn).auc
    # one noisy release hides most of the signal; many releases average the noise out
    assert once.aucs[0] < many.aucs[0] <= clean + 0.02
    assert abs(once.aucs[0] - 0.5) < abs(clean - 0.5)
    with pytest.raises(ValueError, match="n_releases"):
        audit_clients([knn], [(Xm, ym)], (Xn, yn), kind="hard", privatize=randomised, n_releases=0)


@pytest.mark.slow
def test_privacy_utility_example_runs(monkeypatch, capsys):
    pytest.importorskip("torch")
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "examples"))
    import privacy_utility

    table = privacy_utility.main(
        ["--rounds", "2", "--max-epochs", "2", "--epochs-per-round", "1", "--epsilons", "1"]
    )
    out = capsys.readouterr().out
    for method in ["FedCT", "DD", "FedAvg", "DP-FedAvg", "PATE"]:
        assert method in table.index
    assert "ordering FedCT < DD < FedAvg" in out
    assert ((table["VUL"] >= 0) & (table["VUL"] <= 1)).all()
