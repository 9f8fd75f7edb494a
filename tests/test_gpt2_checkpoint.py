"""GPT2Classifier in checkpoints (skops + torch weights_only, no pickle) and on Flower sites."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("skops")
transformers = pytest.importorskip("transformers")

import torch  # noqa: E402

from cotrain import FederatedCoTrainer  # noqa: E402
from cotrain.persistence.checkpoint import (  # noqa: E402
    checkpoint_blocker,
    estimator_types,
    load_model,
    save_model,
)
from learners import ClassAlignedClassifier, GPT2Classifier  # noqa: E402
from tests.test_gpt2 import LORA, make_texts, one_thread, tiny_config  # noqa: E402, F401


def small(model=None, **kwargs):
    params = dict(model=tiny_config() if model is None else model, max_epochs=2, lr=3e-3)
    return GPT2Classifier(**{**params, "random_state": 0, **kwargs})


@pytest.mark.slow
@pytest.mark.parametrize("lora", [False, LORA], ids=["full", "lora"])
def test_save_load_round_trip_predicts_and_continues_identically(tmp_path, lora):
    X, y = make_texts(24, seed=0)
    X_test, _ = make_texts(30, seed=1)
    assert checkpoint_blocker(small()) is None
    model = ClassAlignedClassifier(small(lora=lora), classes=["neg", "pos"]).fit(X, y)
    files = save_model(model, tmp_path, "client-0")
    assert sorted(files) == ["client-0.estimator.pt", "client-0.pt", "client-0.skops"]
    state = torch.load(tmp_path / "client-0.pt", weights_only=True)  # no pickle needed
    assert isinstance(state["model_"]["config"], str)
    restored = load_model(tmp_path, "client-0", estimator_types([model]))
    inner = restored.estimator_
    assert isinstance(inner.model, transformers.GPT2Config)
    assert isinstance(restored.estimator.model, transformers.GPT2Config)
    assert inner.n_fits_ == 1 and inner.seed_ == model.estimator_.seed_
    np.testing.assert_array_equal(restored.predict_proba(X_test), model.predict_proba(X_test))
    # weights, optimizer state and seeds travel along: the next fit is bit-identical
    restored.fit(X, y)
    model.fit(X, y)
    np.testing.assert_array_equal(restored.predict_proba(X_test), model.predict_proba(X_test))


@pytest.mark.slow
def test_interrupted_federation_resumes_to_the_uninterrupted_result(tmp_path):
    parts = [make_texts(16, seed=s) for s in (3, 4)]
    X_public, _ = make_texts(20, seed=5)
    X_test, _ = make_texts(20, seed=6)

    def trainer(rounds, **kw):
        clients = [small(random_state=1), small(lora=LORA, random_state=2)]
        return FederatedCoTrainer(clients, rounds=rounds, encoding="delta", random_state=0, **kw)

    def fit(t, **kw):
        return t.fit([p[0] for p in parts], [p[1] for p in parts], X_public=X_public, **kw)

    whole = fit(trainer(3))
    fit(trainer(1, checkpoint_dir=tmp_path))  # the run stops after round 1
    resumed = fit(trainer(3, checkpoint_dir=tmp_path), resume=True)
    assert resumed.n_rounds_ == 3
    np.testing.assert_array_equal(resumed.pseudo_label_codes_, whole.pseudo_label_codes_)
    np.testing.assert_array_equal(resumed.predict_proba(X_test), whole.predict_proba(X_test))
    for client in resumed.clients_:  # rounds 2 and 3 continued the stored model
        assert getattr(client, "estimator_", client).n_fits_ == 3


@pytest.mark.slow
def test_flower_gpt2_sites_continue_training_as_in_process(tmp_path):
    pytest.importorskip("flwr")
    from flwr.supercore.task_identity import TaskIdentity

    from cotrain.flower.server_app import FlowerCoTraining
    from cotrain.flower.site import load_site, write_sites
    from tests.test_flower_strategy import InMemoryGrid

    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
    try:
        # a site file holds TOML values: the model is a local directory (save_pretrained)
        X0, y0 = make_texts(16, seed=3)
        seedling = small(max_epochs=1).fit(X0, y0)
        folder = tmp_path / "gpt2"
        seedling.model_.save_pretrained(folder)
        seedling.tokenizer_.save_pretrained(folder)

        def clients():
            return [small(str(folder)), small(str(folder), lora=LORA)]

        parts = [make_texts(16, seed=s) for s in (7, 8)]
        X = [np.array(p[0]) for p in parts]
        y = [p[1] for p in parts]
        U = np.array(make_texts(20, seed=9)[0])
        np.save(tmp_path / "public.npy", U)
        paths = write_sites(tmp_path / "sites", X, y, U, clients())
        site = load_site(paths[1])
        assert site.estimator.get_params() == clients()[1].get_params()
        flower = FlowerCoTraining(
            tmp_path / "public.npy", rounds=3, encoding="delta", random_state=5
        ).run(InMemoryGrid(paths))
        local = FederatedCoTrainer(clients(), rounds=3, encoding="delta", random_state=5).fit(
            X, y, X_public=U
        )
        assert not flower.refused_
        np.testing.assert_array_equal(flower.pseudo_label_codes_, local.pseudo_label_codes_)
        for a, b in zip(flower.history_, local.history_, strict=True):
            assert (a.bytes_up, a.changed) == (b.bytes_up, b.changed)
        assert not any("SiteStateWarning" in key[1] for key in flower.learner_warnings_)
        assert any((paths[0].parent / "state").glob("run-*/round-*/client-0.pt"))
    finally:
        TaskIdentity.run_id = TaskIdentity.node_id = TaskIdentity.task_id = None
