"""scikit-learn's estimator checks on every learner adapter, in tiny configurations, offline.

Each adapter declares the checks it is known to fail, with a one-line reason, next to its tags
(``_expected_failed_checks``, read by :func:`learners.expected_failed_checks`); those run as
expected failures, every other check must pass. The learners of an extra that is not
installed (xgboost, imodels, torch, opacus, transformers) leave their test with an empty
parameter set, which pytest reports as skipped: the core-only tier runs the rest.
"""

from __future__ import annotations

import importlib.util
import warnings
from typing import Any

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import DataConversionWarning, NotFittedError, SkipTestWarning
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils.estimator_checks import parametrize_with_checks

from cotrain import FederatedCoTrainer
from learners import BlendedClassifier, ClassAlignedClassifier, expected_failed_checks


def installed(*modules: str) -> bool:
    try:
        return all(importlib.util.find_spec(m) is not None for m in modules)
    except (ImportError, ValueError):  # e.g. a module blocked with sys.modules[name] = None
        return False


TORCH = ("torch",)
DP = ("torch", "opacus", "dp_accounting")
TEXT = ("torch", "transformers", "tokenizers")
#: the extras each optional learner needs
EXTRAS = {
    "XGBoostClassifier": ("xgboost",),
    "RuleFitClassifier": ("imodels",),
    "TorchClassifier": TORCH,
    "DPTorchClassifier": DP,
    "LMClassifier": TEXT,
    "GPT2Classifier": TEXT,
}

#: FederatedCoTrainer is not a learner adapter (it lives in cotrain.trainer, whose tags this
#: suite does not own): the checks call ``fit(X, y)``, and co-training needs the public pool
_NEEDS_X_PUBLIC = "fit needs the public pool: fit(X, y, X_public=...), which the checks omit"
TRAINER_EXPECTED_FAILURES = dict.fromkeys(
    [
        "check_fit_score_takes_y",
        "check_estimators_overwrite_params",
        "check_dont_overwrite_parameters",
        "check_estimators_fit_returns_self",
        "check_readonly_memmap_input",
        "check_n_features_in_after_fitting",
        "check_positive_only_tag_during_fit",
        "check_estimators_dtypes",
        "check_complex_data",
        "check_dtype_object",
        "check_estimators_empty_data_messages",
        "check_pipeline_consistency",
        "check_estimators_nan_inf",
        "check_estimator_sparse_tag",
        "check_estimator_sparse_array",
        "check_estimator_sparse_matrix",
        "check_estimators_pickle",
        "check_f_contiguous_array_estimator",
        "check_classifier_data_not_an_array",
        "check_classifiers_one_label",
        "check_classifiers_classes",
        "check_classifiers_train",
        "check_classifiers_regression_target",
        "check_supervised_y_no_nan",
        "check_supervised_y_2d",
        "check_methods_sample_order_invariance",
        "check_methods_subset_invariance",
        "check_fit2d_1sample",
        "check_fit2d_1feature",
        "check_dict_unchanged",
        "check_fit_idempotent",
        "check_fit_check_is_fitted",
        "check_n_features_in",
        "check_fit1d",
        "check_fit2d_predict1d",
        "check_requires_y_none",
    ],
    _NEEDS_X_PUBLIC,
)


def expected(estimator: Any) -> dict[str, str]:
    if isinstance(estimator, FederatedCoTrainer):
        return TRAINER_EXPECTED_FAILURES
    return expected_failed_checks(estimator)


def tree() -> DecisionTreeClassifier:
    return DecisionTreeClassifier(random_state=0)


def core_estimators() -> list[Any]:
    return [
        ClassAlignedClassifier(tree()),
        BlendedClassifier(ClassAlignedClassifier(tree())),
        FederatedCoTrainer([tree(), tree()], rounds=2, random_state=0),
    ]


def xgboost_estimators() -> list[Any]:
    if not installed("xgboost"):
        return []
    from learners import XGBoostClassifier

    return [
        XGBoostClassifier(n_estimators=10, continue_rounds=2, random_state=0),
        ClassAlignedClassifier(XGBoostClassifier(n_estimators=10, random_state=0)),
    ]


def rulefit_estimators() -> list[Any]:
    if not installed("imodels"):
        return []
    from learners import RuleFitClassifier

    # a fixed regularisation (no search over it) and two stumps: seconds, not
    # minutes (the default searches a regularisation path over 100 trees at every fit)
    return [RuleFitClassifier(n_estimators=2, tree_size=2, alpha=0.01, random_state=0)]


def torch_estimators() -> list[Any]:
    if not installed(*TORCH):
        return []
    from learners import MLP, TorchClassifier

    return [
        TorchClassifier(
            MLP, module_params={"hidden": (16,)}, max_epochs=10, lr=3e-2, random_state=0
        )
    ]


def dp_torch_estimators() -> list[Any]:
    if not installed(*DP):
        return []
    from learners import MLP, DPTorchClassifier

    return [
        DPTorchClassifier(
            MLP,
            module_params={"hidden": (16,)},
            max_epochs=10,
            lr=3e-2,
            noise_multiplier=0.5,
            max_grad_norm=5.0,
            random_state=0,
            noise_seed=0,  # the checks compare repeated fits: reproducible noise
        )
    ]


def tiny_config(family: str) -> Any:
    import transformers

    if family == "gpt2":
        return transformers.GPT2Config(
            n_layer=1, n_head=2, n_embd=16, n_positions=32, vocab_size=300,
            bos_token_id=0, eos_token_id=0,
        )  # fmt: skip
    return transformers.BertConfig(
        vocab_size=300, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=32,
    )  # fmt: skip


def text_estimators() -> list[Any]:
    if not installed(*TEXT):
        return []
    from learners import GPT2Classifier, LMClassifier

    tiny = {"max_epochs": 1, "max_length": 16, "random_state": 0}
    return [LMClassifier(tiny_config("bert"), **tiny), GPT2Classifier(tiny_config("gpt2"), **tiny)]


def check_quietly(estimator: Any, check: Any) -> None:
    with warnings.catch_warnings():
        # the checks fit on random data: convergence and the single-class fallback warn
        warnings.simplefilter("ignore", UserWarning)
        check(estimator)


@parametrize_with_checks(core_estimators(), expected_failed_checks=expected)
def test_core(estimator, check):
    check_quietly(estimator, check)


@parametrize_with_checks(xgboost_estimators(), expected_failed_checks=expected)
def test_xgboost(estimator, check):
    check_quietly(estimator, check)


@parametrize_with_checks(rulefit_estimators(), expected_failed_checks=expected)
def test_rulefit(estimator, check):
    check_quietly(estimator, check)


@pytest.mark.usefixtures("one_torch_thread")
@parametrize_with_checks(torch_estimators(), expected_failed_checks=expected)
def test_torch(estimator, check):
    check_quietly(estimator, check)


@pytest.mark.usefixtures("one_torch_thread")
@parametrize_with_checks(dp_torch_estimators(), expected_failed_checks=expected)
def test_dp_torch(estimator, check):
    check_quietly(estimator, check)


# Text learners declare raw-text input (two_d_array=False, string=True), so scikit-learn runs
# only check_estimator_cloneable on them (its checks generate numeric arrays, and it says so
# with a SkipTestWarning); the checks that apply to text are in test_text_learners_on_text.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", SkipTestWarning)
    text_checks = parametrize_with_checks(text_estimators(), expected_failed_checks=expected)


@text_checks
def test_text(estimator, check):
    check_quietly(estimator, check)


@pytest.mark.skipif(not installed(*TEXT), reason="needs torch, transformers and tokenizers")
@pytest.mark.usefixtures("one_torch_thread")
@pytest.mark.parametrize("index", [0, 1], ids=["LMClassifier", "GPT2Classifier"])
def test_text_learners_on_text(index):
    clf = text_estimators()[index]
    texts = ["a good film", "a great film", "a bad film", "an awful film"] * 3
    y = np.array(["pos", "pos", "neg", "neg"] * 3)
    for method in ("predict", "predict_proba"):
        with pytest.raises(NotFittedError):
            getattr(clone(clf), method)(texts)
    with pytest.raises(ValueError, match="requires y to be passed, but the target y is None"):
        clone(clf).fit(texts, None)
    with pytest.raises(ValueError, match="Unknown label type"):
        clone(clf).fit(texts, np.linspace(0.0, 1.0, len(texts)))
    assert clf.fit(texts, y) is clf
    assert set(clf.predict(texts)) <= {"neg", "pos"}
    with pytest.warns(DataConversionWarning, match="column-vector y"):
        column = clone(clf).fit(texts, y[:, None])
    np.testing.assert_array_equal(column.classes_, ["neg", "pos"])


def test_every_adapter_is_checked():
    """A new learner adapter joins this suite: every estimator class the learners package
    exports appears in one of the lists above (when its extra is installed)."""
    import learners

    exported = {
        name
        for name in learners.__all__
        if name.endswith("Classifier") and installed(*EXTRAS.get(name, ()))
    }
    checked = {
        type(est).__name__
        for make in (
            core_estimators, xgboost_estimators, rulefit_estimators, torch_estimators,
            dp_torch_estimators, text_estimators,
        )
        for est in make()
    }  # fmt: skip
    assert exported <= checked
