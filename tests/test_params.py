"""Parameters declared once (cotrain.params), one get/set_params mixin, and optional hooks
declared on the base classes of consensus rules and privacy mechanisms."""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.tree import DecisionTreeClassifier

import consensus
from consensus import (
    CertaintyWeighted,
    Consensus,
    EntropyWeighted,
    MajorityVote,
    NoisyArgmax,
    QualifiedMajority,
    ReputationVote,
    SoftMean,
    TrimmedVote,
)
from consensus._params import ParamsMixin
from cotrain import FederatedCoTrainer, _validation
from cotrain.callbacks import Callback, EarlyStopping
from cotrain.params import PARAMS, REQUIRED, RULES, Interval, Param, check_params, param_defaults
from cotrain.privacy import GaussianSoftLabels, LabelMechanism, RandomizedResponse, XORMechanism
from cotrain.privacy.accounting.epsilon import is_accounted

# ------------------------------------------------------------------------------ the table


def test_table_defaults_are_the_trainers_signature_defaults():
    signature = inspect.signature(FederatedCoTrainer.__init__).parameters
    names = [n for n in signature if n != "self"]
    assert set(names) <= set(PARAMS), f"not in cotrain.params.PARAMS: {set(names) - set(PARAMS)}"
    for name in names:
        default = signature[name].default
        expected = REQUIRED if default is inspect.Parameter.empty else default
        assert PARAMS[name].default == expected, name


def test_every_table_entry_is_a_trainer_parameter_or_the_new_callbacks():
    signature = inspect.signature(FederatedCoTrainer.__init__).parameters
    assert set(PARAMS) - set(signature) <= {"callbacks"}


def test_old_names_stay_importable_and_agree_with_the_table():
    assert _validation.check_params is check_params
    assert _validation.PARAM_DEFAULTS == param_defaults()
    assert _validation.PARAM_DEFAULTS["rounds"] == 20 == PARAMS["rounds"].default
    assert "estimators" not in _validation.PARAM_DEFAULTS  # required, no default


def test_the_trainers_own_parameters_pass():
    trainer = FederatedCoTrainer([DecisionTreeClassifier()] * 3)
    check_params(trainer.get_params(deep=False), n_clients=3)
    check_params(param_defaults(), n_clients=1)


GOOD = {
    "consensus": ["qualified", QualifiedMajority(quorum=0.6)],
    "share": ["hard", "soft"],
    "soft_dtype": ["float16"],
    "encoding": ["delta"],
    "soft_bits": [None, 1, 16, np.int32(8)],
    "rounds": [1, np.int64(50)],
    "participation": [1, 0.01, np.float32(0.5)],
    "privacy": [None, RandomizedResponse(epsilon=1.0)],
    "early_stopping": [None, 1],
    "on_client_error": ["skip"],
    "min_clients": [1, 3],
    "n_jobs": [None, -1, 4],
    "runtime": [None, "sequential", "joblib", "ray"],
    "round_timeout": [None, 0.5, 10, float("inf")],
    "checkpoint_dir": [None, "runs/a", Path("runs")],
    "callbacks": [None, [], (), [EarlyStopping(2)]],
    "random_state": [None, 0, np.random.SeedSequence(3)],
    "verbose": [0, 2],
}


@pytest.mark.parametrize(("name", "value"), [(n, v) for n, vs in GOOD.items() for v in vs])
def test_good_values_pass(name, value):
    check_params({name: value}, n_clients=3)


# (parameter, value, error, exact message)
BAD = [
    ("share", "logits", ValueError, "share must be 'hard' or 'soft', got 'logits'"),
    ("share", 1, TypeError, "share must be 'hard' or 'soft', got int 1"),
    ("soft_dtype", "int8", ValueError, "soft_dtype must be 'float32' or 'float16', got 'int8'"),
    ("encoding", "gzip", ValueError, "encoding must be 'packed' or 'delta', got 'gzip'"),
    ("soft_bits", 0, ValueError, "soft_bits must be >= 1, got 0"),
    ("soft_bits", 17, ValueError, "soft_bits must be <= 16, got 17"),
    ("soft_bits", 2.5, TypeError, "soft_bits must be None or an integer in [1, 16], got float 2.5"),
    ("rounds", 0, ValueError, "rounds must be >= 1, got 0"),
    ("rounds", 2.5, TypeError, "rounds must be an integer >= 1, got float 2.5"),
    ("rounds", True, TypeError, "rounds must be an integer >= 1, got bool True"),
    ("participation", 0.0, ValueError, "participation must be > 0, got 0.0"),
    ("participation", 1.5, ValueError, "participation must be <= 1, got 1.5"),
    ("participation", float("nan"), ValueError, "participation must be > 0, got nan"),
    ("participation", "all", TypeError, "participation must be a number in (0, 1], got str 'all'"),
    ("early_stopping", 0, ValueError, "early_stopping must be >= 1, got 0"),
    ("on_client_error", "ignore", ValueError, "on_client_error must be 'raise' or 'skip'"),
    ("min_clients", 0, ValueError, "min_clients must be >= 1, got 0"),
    ("n_jobs", 0, ValueError, "n_jobs must be None or an integer other than 0, got 0"),
    ("n_jobs", "2", TypeError, "n_jobs must be None or an integer other than 0, got str '2'"),
    ("verbose", -1, ValueError, "verbose must be >= 0, got -1"),
    ("round_timeout", 0, ValueError, "round_timeout must be > 0, got 0"),
    ("round_timeout", "1s", TypeError, "round_timeout must be None or a number > 0, got str"),
    ("runtime", "dask", ValueError, "runtime must be None, 'sequential', 'joblib', 'ray' or an"),
    ("runtime", object(), TypeError, "with a map() method, got object"),
    ("random_state", "seed", TypeError, "random_state must be None, an integer or a numpy"),
    ("random_state", np.random.default_rng(0), TypeError, "got Generator"),
    ("consensus", 5, TypeError, "consensus must be a name (str) or a Consensus instance"),
    ("privacy", "rr", TypeError, "privacy must be a label-privacy mechanism"),
    ("checkpoint_dir", 3, TypeError, "checkpoint_dir must be a path"),
    ("callbacks", EarlyStopping(2), TypeError, "callbacks must be None or a list or tuple"),
]


@pytest.mark.parametrize(("name", "value", "error", "message"), BAD, ids=[b[3] for b in BAD])
def test_bad_values_name_the_parameter_what_was_expected_and_what_was_given(
    name, value, error, message
):
    with pytest.raises(error) as info:
        check_params({name: value})
    assert type(info.value) is error
    assert str(info.value).startswith(name)
    assert message in str(info.value)


def test_only_the_given_keys_are_checked_and_unknown_keys_are_left_alone():
    check_params({"rounds": 3})  # nothing else looked at, no n_clients needed
    check_params({"local_epochs": -5, "rounds": 3})  # a baseline's own parameter
    with pytest.raises(ValueError, match="rounds"):
        check_params({"local_epochs": -5, "rounds": -3})


def test_rule_min_clients_at_most_the_federation():
    check_params({"min_clients": 3}, n_clients=3)
    check_params({"min_clients": 7})  # without n_clients the rule cannot be checked
    with pytest.raises(ValueError, match=r"^min_clients=4 exceeds the number of clients \(3\)$"):
        check_params({"min_clients": 4}, n_clients=3)
    check_params({"rounds": 2}, n_clients=0)  # min_clients not given: rule not checked


def test_rule_privacy_randomises_what_share_sends():
    check_params({"privacy": GaussianSoftLabels(sigma=1.0), "share": "soft"})
    with pytest.raises(ValueError, match="randomises hard labels but share='soft'"):
        check_params({"privacy": RandomizedResponse(epsilon=1.0), "share": "soft"})
    with pytest.raises(ValueError, match="randomises soft labels but share='hard'"):
        check_params({"privacy": GaussianSoftLabels(sigma=1.0)})  # share takes its default
    check_params({"privacy": None, "share": "soft"})
    assert {rule.params for rule in RULES} == {("min_clients",), ("privacy", "share")}


class DuckCallback:
    def on_fit_start(self, loop):
        pass

    def on_round_start(self, loop, t, sampled):
        pass

    def on_round_end(self, loop, record):
        pass

    def on_fit_end(self, loop):
        pass


class HalfCallback:
    def on_round_end(self, loop, record):
        pass


def test_callbacks_are_callback_instances_or_have_the_four_hooks():
    check_params({"callbacks": [Callback(), EarlyStopping(1), DuckCallback()]})
    check_params({"callbacks": (DuckCallback(),)})
    with pytest.raises(TypeError, match=r"^callbacks\[1\] must be a cotrain.callbacks.Callback"):
        check_params({"callbacks": [DuckCallback(), HalfCallback()]})
    with pytest.raises(TypeError, match=r"callbacks\[2\].*got int 3$"):
        check_params({"callbacks": (Callback(), Callback(), 3)})
    with pytest.raises(TypeError, match=r"^callbacks must be None or a list or tuple"):
        check_params({"callbacks": {EarlyStopping(1)}})


def test_param_and_interval_describe_themselves():
    assert str(Interval(0, 1, closed="right")) == "in (0, 1]"
    assert str(Interval(0, 1, closed="left")) == "in [0, 1)"
    assert str(Interval(high=5, closed="neither")) == "< 5"
    assert Interval(0, 1, closed="neither").violation(1) == "< 1"
    assert Param(None, types=(int,), none=True).describe() == "None or a builtins.int"
    p = Param(checked_by="somewhere")
    assert not p.checked and p.describe() == "checked by somewhere"
    p.check("anything", object())  # not checked here


# ------------------------------------------------------------- get_params / set_params


RULE_OBJECTS = [
    MajorityVote(),
    QualifiedMajority(quorum=0.7),
    SoftMean(),
    EntropyWeighted(k=0.1),
    CertaintyWeighted(scores=np.array([0.5, 1.0, 2.0])),
    NoisyArgmax(sigma=2.0, random_state=0),
    TrimmedVote(trim=0.3),
    ReputationVote(decay=0.3, base=QualifiedMajority(quorum=0.6)),
]
MECHANISMS = [
    RandomizedResponse(epsilon=1.0, sensitivity=2),
    XORMechanism(epsilon=1.0, sensitivity=4, budget=5.0),
    GaussianSoftLabels(sigma=1.0),
]
EVERYTHING = RULE_OBJECTS + MECHANISMS


def _same(a, b):
    return np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b or repr(a) == repr(b)


def test_one_mixin_for_rules_and_mechanisms():
    assert issubclass(Consensus, ParamsMixin) and issubclass(LabelMechanism, ParamsMixin)
    for obj in EVERYTHING:
        for method in ("get_params", "set_params", "__repr__"):
            assert getattr(type(obj), method) is getattr(ParamsMixin, method), (obj, method)


@pytest.mark.parametrize("obj", EVERYTHING, ids=lambda o: type(o).__name__)
def test_get_params_lists_the_init_arguments(obj):
    names = sorted(
        p for p in inspect.signature(type(obj).__init__).parameters if p not in ("self",)
    )
    shallow = obj.get_params(deep=False)
    assert sorted(shallow) == names
    assert all(shallow[n] is getattr(obj, n) for n in names)  # stored untouched
    assert set(shallow) <= set(obj.get_params())


@pytest.mark.parametrize("obj", EVERYTHING, ids=lambda o: type(o).__name__)
def test_clone_gives_an_equal_fresh_object(obj):
    copy = clone(obj, safe=False)
    assert type(copy) is type(obj) and copy is not obj
    a, b = obj.get_params(deep=False), copy.get_params(deep=False)
    assert a.keys() == b.keys()
    assert all(_same(a[k], b[k]) for k in a), (a, b)
    assert repr(copy) == repr(obj)


@pytest.mark.parametrize("obj", EVERYTHING, ids=lambda o: type(o).__name__)
def test_set_params_sets_and_refuses_unknown_names(obj):
    obj = clone(obj, safe=False)
    assert obj.set_params() is obj
    for name in obj.get_params(deep=False):
        marker = object()
        assert obj.set_params(**{name: marker}) is obj
        assert getattr(obj, name) is marker
    valid = sorted(obj.get_params(deep=False))
    with pytest.raises(ValueError) as info:
        obj.set_params(no_such_parameter=1)
    message = str(info.value)
    assert "'no_such_parameter'" in message and type(obj).__name__ in message
    assert str(valid) in message


def test_nested_parameters_of_a_base_rule():
    rule = ReputationVote(base=QualifiedMajority(quorum=0.6))
    assert rule.get_params()["base__quorum"] == 0.6
    assert "base__quorum" not in rule.get_params(deep=False)
    rule.set_params(base__quorum=0.8, decay=0.1)
    assert rule.base.quorum == 0.8 and rule.decay == 0.1
    with pytest.raises(ValueError, match="invalid parameter 'base__k'"):
        ReputationVote(base="majority").set_params(base__k=1)
    with pytest.raises(ValueError, match="invalid parameter 'bsae'"):
        rule.set_params(bsae__quorum=0.5)


def test_repr_summarises_arrays_and_sorts_parameters():
    assert repr(CertaintyWeighted(np.ones((2, 3)))) == (
        "CertaintyWeighted(scorer_delta=None, scorer_epsilon=None, "
        "scores=<array shape=(2, 3) dtype=float64>)"
    )
    assert repr(RandomizedResponse(epsilon=2.0)) == (
        "RandomizedResponse(budget=None, delta=1e-05, epsilon=2.0, sensitivity=None, unit='record')"
    )


def test_clone_of_a_stateful_rule_forgets_its_state():
    rule = ReputationVote(decay=0.0)
    rule.observe([0, 1], np.array([[0, 0], [1, 1]]), np.array([0, 0]))
    assert rule.state_dict()["rounds"] == 1
    assert clone(rule, safe=False).state_dict()["rounds"] == 0


# ------------------------------------------------------------------------ optional hooks


STATELESS = [r for r in RULE_OBJECTS if not isinstance(r, ReputationVote | NoisyArgmax)]


@pytest.mark.parametrize("rule", STATELESS, ids=lambda o: type(o).__name__)
def test_base_hooks_are_documented_no_ops(rule):
    votes = np.array([[0, 1, 1], [0, 0, 1]])
    before = {name: id(value) for name, value in vars(rule).items()}
    assert rule.observe(np.array([0, 1]), votes, np.array([0, 0, 1])) is None
    assert {name: id(value) for name, value in vars(rule).items()} == before
    assert rule.state_dict() == {}
    assert rule.load_state_dict({}) is None
    with pytest.raises(ValueError, match=r"keeps no state.*\['reputation'\]"):
        rule.load_state_dict({"reputation": [1.0]})
    with pytest.raises(TypeError, match="state must be a dict"):
        rule.load_state_dict([("reputation", 1.0)])
    assert rule.accountable is False
    assert rule.delta is None and rule.budget is None
    with pytest.raises(NotImplementedError, match="adds no noise"):
        rule.dp_event(2, 10)
    assert not is_accounted(rule)


def test_hooks_are_documented_on_the_base_class():
    for hook in ("observe", "state_dict", "load_state_dict", "dp_event", "weights_for"):
        doc = getattr(Consensus, hook).__doc__
        assert doc and "Examples" in doc, hook
    assert "Examples" in (Consensus.accountable.__doc__ or "")
    assert "Examples" in (LabelMechanism.accountable.__doc__ or "")


def test_stateful_and_noisy_rules_override_the_hooks():
    assert ReputationVote.observe is not Consensus.observe
    assert ReputationVote.state_dict is not Consensus.state_dict
    assert ReputationVote.load_state_dict is not Consensus.load_state_dict
    assert NoisyArgmax.dp_event is not Consensus.dp_event
    assert CertaintyWeighted.weights_for is not Consensus.weights_for
    rule = ReputationVote(decay=0.5)
    rule.observe([0, 1], np.array([[0, 0], [1, 1]]), np.array([0, 0]))
    assert rule.state_dict()["reputation"].tolist() == [1.0, 0.5]  # 0.5 * 1 + 0.5 * 0
    assert ReputationVote().load_state_dict(rule.state_dict()).rounds_ == 1
    noisy = NoisyArgmax(sigma=3.0, random_state=0)
    assert noisy.accountable and noisy.delta == 1e-5 and noisy.budget is None
    assert NoisyArgmax(sigma=3.0, budget=2.0).budget == 2.0
    assert not NoisyArgmax(sigma=0.0).accountable


def test_noisy_argmax_state_round_trip_and_bad_state():
    votes = np.array([[0, 1, 1], [1, 1, 0]])
    a = NoisyArgmax(sigma=4.0, random_state=0)
    a(votes, n_classes=2)
    b = NoisyArgmax(sigma=4.0, random_state=0)
    b.load_state_dict(a.state_dict())
    np.testing.assert_array_equal(a(votes, n_classes=2), b(votes, n_classes=2))
    with pytest.raises(ValueError, match="single key 'spawned'"):
        NoisyArgmax(sigma=4.0, random_state=0).load_state_dict({})
    with pytest.raises(ValueError, match="single key 'generator'"):
        NoisyArgmax(sigma=4.0, random_state=np.random.default_rng(0)).load_state_dict(
            {"spawned": 1}
        )
    g = NoisyArgmax(sigma=4.0, random_state=np.random.default_rng(0))
    g.load_state_dict(g.state_dict())


# ---------------------------------------------------------------------------- is_accounted


class DuckMechanism:
    delta, budget = 1e-5, None

    def randomize(self, labels, n_classes, rng):
        return labels

    def dp_event(self, n_classes, n_labels):
        return None


class QuietDuck(DuckMechanism):
    accountable = False


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (None, False),
        (RandomizedResponse(epsilon=1.0), True),
        (XORMechanism(epsilon=1.0, sensitivity=2), True),
        (GaussianSoftLabels(sigma=1.0), True),
        (NoisyArgmax(sigma=2.0), True),
        (NoisyArgmax(sigma=0.0), False),
        (MajorityVote(), False),
        (ReputationVote(), False),
        (DuckMechanism(), True),
        (QuietDuck(), False),
        (object(), False),
    ],
    ids=repr,
)
def test_is_accounted(obj, expected):
    assert is_accounted(obj) is expected


def test_is_accounted_refuses_invalid_noise():
    with pytest.raises(ValueError, match="sigma"):
        is_accounted(NoisyArgmax(sigma=-1.0))


BUILT_IN = "majority qualified mean entropy certainty gnmax trimmed reputation".split()


def test_built_in_rules_all_carry_the_hooks():
    for name in BUILT_IN:
        rule = consensus.get_consensus(name)
        assert isinstance(rule.state_dict(), dict)
        assert isinstance(rule.accountable, bool)
        clone(rule, safe=False)
