"""The CUDA paths of the torch and language-model learners, where a GPU is present.

Skipped on a machine without CUDA (CI has none); ``benchmarks/gpu_check.py`` runs this file
on a GPU machine and records the result. Each test fits on the GPU and checks what must not
depend on the device: the probabilities of the same weights read on the CPU, seeded
repeatability, a seeded accuracy floor, pickling, and a federation whose clients train on
the GPU (FedCT and FedAvg).
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device here", allow_module_level=True)

from sklearn.datasets import load_digits  # noqa: E402

from cotrain import FederatedCoTrainer  # noqa: E402
from cotrain.baselines import FedAvg  # noqa: E402
from learners import TorchClassifier  # noqa: E402
from learners.modules import MLP  # noqa: E402


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    return X[:1200], y[:1200], X[1200:], y[1200:]


def mlp(**params) -> TorchClassifier:
    defaults = {"module_params": {"hidden": (64,)}, "max_epochs": 30, "lr": 3e-3, "random_state": 0}
    return TorchClassifier(MLP, **{**defaults, **params})


def test_torch_classifier_trains_on_the_gpu_and_reads_the_same_on_the_cpu(digits):
    X, y, X_test, y_test = digits
    gpu = mlp(device="cuda").fit(X, y)
    assert next(gpu.module_.parameters()).device.type == "cuda"
    assert np.mean(gpu.predict(X_test) == y_test) >= 0.90  # 0.928 on the CPU
    cpu = mlp(device="cpu", max_epochs=1).fit(X[:50], y[:50])
    cpu.set_weights(gpu.get_weights())
    np.testing.assert_allclose(cpu.predict_proba(X_test), gpu.predict_proba(X_test), atol=1e-4)


def test_a_seeded_gpu_fit_repeats(digits):
    X, y, X_test, _ = digits
    first = mlp(device="cuda", max_epochs=3).fit(X, y).predict_proba(X_test)
    second = mlp(device="cuda", max_epochs=3).fit(X, y).predict_proba(X_test)
    np.testing.assert_allclose(first, second, atol=1e-5)


def test_a_gpu_model_pickles_and_continues(digits):
    X, y, X_test, _ = digits
    model = mlp(device="cuda", max_epochs=2).fit(X, y)
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_allclose(again.predict_proba(X_test), model.predict_proba(X_test), atol=1e-6)
    again.fit(X, y)  # warm start: one more epoch on the GPU
    assert len(again.loss_curve_) == 3


def federation(digits, n: int = 3):
    X, y, X_test, y_test = digits
    parts = np.array_split(np.arange(300), n)
    return [X[p] for p in parts], [y[p] for p in parts], X[300:1200], X_test, y_test


def test_fedct_with_gpu_clients(digits):
    Xs, ys, U, X_test, y_test = federation(digits)
    trainer = FederatedCoTrainer(
        [mlp(device="cuda", random_state=i) for i in range(3)], rounds=3, random_state=0
    )
    trainer.fit(Xs, ys, X_public=U, eval_set=(X_test, y_test))
    assert trainer.history_[-1].mean_accuracy >= 0.75  # 0.800 on the CPU


def test_fedavg_with_gpu_clients(digits):
    Xs, ys, _, X_test, y_test = federation(digits)
    fedavg = FedAvg(mlp(device="cuda", max_epochs=5), rounds=6, local_epochs=5, random_state=0)
    fedavg.fit(Xs, ys, eval_set=(X_test, y_test))
    assert fedavg.history_[-1].mean_accuracy >= 0.75  # 0.809 on the CPU


# ------------------------------------------------------------------ language models
transformers = pytest.importorskip("transformers")
pytest.importorskip("peft")

from learners import LMClassifier  # noqa: E402
from tests.test_gpt2 import make_texts  # noqa: E402
from tests.test_lm import tiny_config  # noqa: E402


def tiny_bert(**params) -> LMClassifier:
    defaults = dict(model=tiny_config("bert"), max_epochs=10, lr=3e-3, random_state=0)
    return LMClassifier(**{**defaults, **params})


@pytest.mark.parametrize("lora", [False, True])
def test_lm_classifier_trains_on_the_gpu_and_reads_the_same_on_the_cpu(lora):
    X, y = make_texts(40, seed=0)
    X_test, y_test = make_texts(40, seed=1)
    gpu = tiny_bert(device="cuda", lora=lora).fit(X, y)
    assert next(gpu.model_.parameters()).device.type == "cuda"
    assert np.mean(gpu.predict(X_test) == y_test) >= 0.9  # five sentiment words a text
    cpu = pickle.loads(pickle.dumps(gpu))
    cpu.set_params(device="cpu")
    cpu.model_.to("cpu")
    np.testing.assert_allclose(cpu.predict_proba(X_test), gpu.predict_proba(X_test), atol=1e-4)


def test_lm_classifier_reads_long_texts_in_windows_on_the_gpu():
    X, y = make_texts(40, seed=0)
    long = [" ".join([a, b, c]) for a, b, c in zip(X[::3], X[1::3], X[2::3], strict=False)]
    params = dict(max_length=8, long_texts="windows", max_windows=4)
    gpu = tiny_bert(device="cuda", **params).fit(X, y)
    proba = gpu.predict_proba(long)
    assert proba.shape == (len(long), 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-6)
    cpu = pickle.loads(pickle.dumps(gpu))
    cpu.set_params(device="cpu")
    cpu.model_.to("cpu")
    np.testing.assert_allclose(cpu.predict_proba(long), proba, atol=1e-4)


def test_fedct_with_gpu_language_model_clients():
    texts, y = make_texts(100, seed=0)
    X_test, y_test = make_texts(40, seed=1)
    Xs = [texts[:20], texts[20:40], texts[40:60]]
    ys = [y[:20], y[20:40], y[40:60]]
    trainer = FederatedCoTrainer(
        [tiny_bert(device="cuda", random_state=i, epochs_per_fit=2) for i in range(3)],
        rounds=2,
        random_state=0,
    )
    trainer.fit(Xs, ys, X_public=texts[60:], eval_set=(X_test, y_test))
    assert trainer.history_[-1].mean_accuracy >= 0.85
