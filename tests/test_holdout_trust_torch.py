"""HoldoutTrust with a real warm-started torch learner (issue 28 item 4): the default
``trust="auto"`` of a TorchClassifier client, one training a round that continues from the
previous weights."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from cotrain import FederatedCoTrainer  # noqa: E402
from cotrain.trust import get_trust  # noqa: E402
from cotrain.trust.holdout import HoldoutTrust  # noqa: E402
from learners import MLP, BlendedClassifier, TorchClassifier  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _mlp(**params) -> TorchClassifier:
    defaults = {"module_params": {"hidden": (8,)}, "batch_size": 32, "lr": 0.05, "random_state": 0}
    return TorchClassifier(MLP, **{**defaults, "max_epochs": 20, "epochs_per_fit": 5, **params})


def _task(seed: int = 0, n: int = 60, n_public: int = 120):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4)).astype(np.float32)
    U = rng.normal(size=(n_public, 4)).astype(np.float32)
    return X, (X[:, 0] > 0).astype(int), U, (U[:, 0] > 0).astype(int)


def test_torch_client_gets_holdout_and_keeps_training_one_epoch_a_round() -> None:
    X, y, U, truth = _task()
    classes = np.array([0, 1])
    trust = get_trust(HoldoutTrust(), 0, _mlp())
    state: dict = {}
    first = trust.fit_round(_mlp(), X, y, U, None, classes, state)
    co, local = state["co"], state["local"]
    assert first.alpha == 0.0 and first.quality is not None
    assert co.estimator_.n_epochs_ == 20 and local.estimator_.n_epochs_ == 20  # one training
    for rnd in range(2):
        out = trust.fit_round(_mlp(), X, y, U, 1 - truth, classes, state)
        assert state["co"] is co and co.estimator_.n_epochs_ == 20 + 5 * (rnd + 1)  # continues
        assert local.estimator_.n_epochs_ == 20  # the local model is never trained again
    # a flipped consensus: the site falls back to its local model, and says it is poor
    assert out.alpha == 0.0 and out.quality < 0.5
    np.testing.assert_allclose(out.model.predict_proba(U), local.predict_proba(U), rtol=1e-6)


def test_trainer_with_holdout_trust_gives_torch_clients_the_held_out_blend() -> None:
    X, y, U, truth = _task(1, n=120)
    parts = np.array_split(np.arange(len(y)), 2)
    trainer = FederatedCoTrainer(
        [_mlp(), _mlp()], rounds=2, random_state=0, trust=HoldoutTrust()
    ).fit([X[p] for p in parts], [y[p] for p in parts], X_public=U, y_public=truth)
    assert all(isinstance(m, BlendedClassifier) for m in trainer.clients_)
    assert all(len(m.cotrained) == 1 for m in trainer.clients_)
    assert set(trainer.history_[1].quality) == {0, 1}
    assert trainer.clients_[0].cotrained[0].estimator_.n_epochs_ == 20 + 5
