"""DPTorchClassifier: a TorchClassifier trained with DP-SGD (Opacus), record-level private.

Each optimizer step draws a Poisson sample of the training rows (every row independently with
probability ``q``), clips every row's gradient to L2 norm ``max_grad_norm``, sums them and adds
Gaussian noise of standard deviation ``noise_multiplier * max_grad_norm`` (Opacus'
``GradSampleModule`` computes the per-row gradients, its ``DPOptimizer`` clips and noises them).
Everything computed from the trained network afterwards (its predictions, the labels a
co-training client releases) is post-processing and costs no further privacy.

This module imports torch, opacus and dp-accounting (``pip install "cotrain[torch,dp]"``).
"""

from __future__ import annotations

import math
import secrets
import warnings
from collections.abc import Iterator
from numbers import Integral, Real
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.utils.validation import check_is_fitted

from .torch import TorchClassifier

try:
    import dp_accounting
    import torch
    from opacus import GradSampleModule
    from opacus.accountants import create_accountant
    from opacus.optimizers import DPOptimizer
    from opacus.validators import ModuleValidator
except ImportError as exc:  # pragma: no cover - exercised only without the extras
    raise ImportError(
        'DPTorchClassifier needs torch, opacus and dp-accounting: pip install "cotrain[torch,dp]"'
    ) from exc

__all__ = ["DPTorchClassifier"]

_ACCOUNTANTS = ("rdp", "prv")
#: attributes Opacus' hooks leave on the network's layers (the last batch's inputs among them)
_HOOK_ATTRS = ("activations", "max_batch_len")


def _positive(name: str, value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, Real)
        or not math.isfinite(float(value))
        or float(value) <= 0
    ):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def _secure_generator() -> Any:
    """A cryptographically secure torch generator (torchcsprng), as Opacus' secure mode uses."""
    try:
        import torchcsprng
    except ImportError:
        raise ImportError(
            "secure_mode=True needs torchcsprng (a cryptographically secure random generator "
            "for torch, which Opacus' PrivacyEngine(secure_mode=True) also requires): "
            "https://github.com/pytorch/csprng. It is not installed; use secure_mode=False "
            "(torch's pseudo-random generator: fine for research, not for a deployment)"
        ) from None
    return torchcsprng.create_random_device_generator("/dev/urandom")  # pragma: no cover


def _on_device(generator: Any, device: torch.device, secure: bool) -> Any:
    """The generator of the gradient noise, on the device the noise is drawn on.

    On the CPU (and in secure mode) it is ``generator`` itself, so a seeded CPU fit draws
    exactly what it always did; on a CUDA device torch needs a generator of that device,
    seeded from ``generator`` (so ``noise_seed`` still makes the noise reproducible, and
    without it the noise still comes from the operating system's entropy).
    """
    if secure or device.type == "cpu":
        return generator
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    return torch.Generator(device=device).manual_seed(seed)


def _event(rate: float, noise_multiplier: float, steps: int) -> Any:
    """The dp-accounting event of `steps` DP-SGD steps (``NoOpDpEvent`` for none)."""
    if steps == 0:
        return dp_accounting.NoOpDpEvent()
    step = dp_accounting.PoissonSampledDpEvent(
        float(rate), dp_accounting.GaussianDpEvent(float(noise_multiplier))
    )
    return dp_accounting.SelfComposedDpEvent(step, int(steps))


class DPTorchClassifier(TorchClassifier):
    """A :class:`~learners.TorchClassifier` trained by DP-SGD with Opacus.

    Same contract as :class:`~learners.TorchClassifier` — any torch module, fixed global
    classes, soft targets, sample weights, continued training across fits (``warm_start``),
    ``predict`` / ``predict_proba`` — but every optimizer step is a DP-SGD step:

    1. **Poisson sampling**: each of the fit's n training rows joins the batch independently
       with probability q (batches may be empty). With ``sample_rate`` set (what a
       co-training client uses, :class:`cotrain.privacy.DPSGD`), q = ``sample_rate`` and
       **every** fit, the first included, runs exactly ``steps_per_fit`` steps: neither q
       nor the number of steps depends on n. Without it (the stand-alone default),
       ``q = min(1, batch_size / n)``, an epoch is ``ceil(n / batch_size)`` steps and the
       fits run ``max_epochs`` / ``epochs_per_fit`` epochs (or ``steps_per_fit`` steps) as
       for :class:`~learners.TorchClassifier` — then q and the steps are functions of n;
    2. **per-row clipping**: each row's gradient of its (sample-weighted) loss is clipped to
       L2 norm ``max_grad_norm`` = C;
    3. **noise**: N(0, (noise_multiplier · C)²) is added to the sum of clipped gradients,
       which is divided by the expected batch size B and passed to the optimizer (Adam,
       SGD, …; its state is post-processing of the noisy gradients). B = ``batch_size``
       with ``sample_rate`` set (a constant of the configuration: set it near q times the
       usual number of training rows, which only scales the step), ``min(batch_size, n)``
       without.

    Guarantee
    ---------
    Unit: **one training row** (in co-training, one private record of the client; the
    pseudo-labelled public rows are trained on alike, their privacy is not at stake).
    Neighbours: **add/remove one row** — the relation Opacus' accountants (and
    dp-accounting's ``ADD_OR_REMOVE_ONE``) assume for Poisson-sampled Gaussian steps. For
    replace-one neighbours the guarantee is weaker; its direct accounting is
    :func:`cotrain.privacy.mechanisms.dpsgd.dpsgd_epsilon` with ``neighbors="replace_one"``.
    Adversary: **anyone who sees the trained network** — its weights after any fit, hence
    also its predictions and the labels a client uploads (post-processing). Fits compose
    adaptively (each fit may start from the previous network and use pseudo-labels that
    depend on earlier releases): fit k's privacy cost is ``dp_events_[k]``, the
    ``SelfComposedDpEvent(PoissonSampledDpEvent(q_k, GaussianDpEvent(noise_multiplier)),
    steps_k)`` of its steps, and the total is their composition (:meth:`epsilon_`, or a
    ledger composing the events).

    Why it holds (one step; the steps then compose adaptively): a step's output is
    ``(Σ_{i ∈ S} clip_C(g_i) + N(0, σ²C²·I)) / B`` with S the Poisson sample. Adding or
    removing one row x changes the sum by at most one clipped gradient, of norm ≤ C, and
    only when x is sampled (probability q, drawn independently of every other row); the
    noise scale σ·C and the divisor B are constants of the configuration, and dividing by
    a constant is post-processing. So each step is the Poisson-subsampled Gaussian
    mechanism with noise multiplier σ and rate q, whose privacy-loss distribution is
    exactly what ``PoissonSampledDpEvent(q, GaussianDpEvent(σ))`` describes. With
    ``sample_rate`` set, q, the number of steps, σ, C and B are all public configuration,
    so the event (and the ε it gives) is the same for every training set: it reveals
    nothing about n. Rows the training set holds besides the protected one (public rows,
    pseudo-labels) may be anything chosen *without* looking at the private rows.

    Stated assumptions: without ``sample_rate``, the number of rows n of each fit (which
    sets q and the number of steps per epoch) is treated as public, as in Opacus — the
    event itself reveals it. The output layer's size is public (pass ``classes``; a
    :class:`~learners.ClassAlignedClassifier` does). Sample weights must be a function of
    their own row (or of public data) only: each row's weighted gradient is clipped to C,
    so a weight cannot raise one row's influence above C, but weights that depend on other
    private rows (e.g. on which classes the client holds) make one row change many rows'
    gradients, outside the proof. **Not covered**: ``loss_curve_`` (and ``verbose``
    output) are training losses computed on the private rows without noise: local
    diagnostics, never to be released. With ``secure_mode=False`` the noise and the
    Poisson samples come from a torch generator of their own, seeded per fit from the
    operating system's entropy (``noise_seed=None``), never from ``random_state``: whoever
    knows ``random_state`` (the co-training server) cannot replay them. torch's generator is
    not cryptographically secure (floating-point attacks on Gaussian sampling are known): a
    deployment should use ``secure_mode=True``.

    The network must be DP-compatible: no layer that mixes rows of a batch (BatchNorm); a
    module failing ``opacus.validators.ModuleValidator.validate`` is rejected before any
    training (``ModuleValidator.fix(module)`` swaps BatchNorm for GroupNorm).

    Parameters
    ----------
    module, module_params, classes, max_epochs, epochs_per_fit, steps_per_fit, batch_size, \
lr, optimizer, optimizer_params, weight_decay, device, warm_start, random_state, \
n_threads, verbose
        As for :class:`~learners.TorchClassifier`; ``batch_size`` is the *expected* batch
        size of the Poisson sampling (with ``sample_rate`` set: the constant the noisy
        gradient sum is divided by). With ``sample_rate`` set, ``max_epochs`` and
        ``epochs_per_fit`` are not used: every fit runs ``steps_per_fit`` steps.
    noise_multiplier : float, default=1.0
        σ / C, the noise standard deviation relative to the clipping norm (> 0).
    max_grad_norm : float, default=1.0
        C, the L2 norm every row's gradient is clipped to (> 0).
    secure_mode : bool, default=False
        Draw the noise and the Poisson samples from a cryptographically secure generator
        (torchcsprng, as Opacus' ``PrivacyEngine(secure_mode=True)``) with Opacus' noise
        that resists floating-point attacks; needs ``torchcsprng`` installed — without it,
        fitting raises ImportError before any training. Such runs are not reproducible.
    accountant : {"rdp", "prv"}, default="rdp"
        The Opacus accountant behind :meth:`epsilon_` (a cross-check of the events'
        composition: RDP is an upper bound; PRV is tighter, numerically approximated).
    noise_seed : int, optional
        None (the default): every fit seeds its noise and sampling generator from the
        operating system's entropy. An int makes them reproducible (fit k draws from
        ``SeedSequence([noise_seed, k])``, so fits never repeat each other's noise) — for
        simulations only: anyone who knows the seed can remove the noise. Ignored with
        ``secure_mode=True``.
    sample_rate : float, optional
        q in (0, 1], the Poisson rate of every step, as public configuration; needs
        ``steps_per_fit``, the number of steps of every fit (the first included). None
        (the default): ``q = min(1, batch_size / n)`` and epochs of n rows, as above.

    Attributes
    ----------
    dp_events_ : list of dp_accounting.DpEvent
        One event per fit since the network was initialised: the self-composition of the
        fit's DP-SGD steps (``NoOpDpEvent()`` for a fit of 0 steps).
    sample_rates_ : list of float
        ``q`` of every fit.
    dp_steps_ : list of int
        DP-SGD steps of every fit.
    accountant_ : opacus.accountants.IAccountant
        Opacus' own accountant, fed every step.
    module_, optimizer_, classes_, n_classes_, n_features_in_, input_shape_, loss_curve_, \
n_epochs_, n_steps_
        As for :class:`~learners.TorchClassifier` (``optimizer_`` is the plain optimizer;
        it is wrapped in Opacus' ``DPOptimizer`` only while fitting).

    See Also
    --------
    cotrain.privacy.mechanisms.dpsgd.DPSGD
        The mechanism that makes a co-training client train this way.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.preprocessing import StandardScaler
    >>> from learners.dp_torch import DPTorchClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> clf = DPTorchClassifier(module_params={"hidden": (16,)}, max_epochs=10, lr=0.05,
    ...                         batch_size=15, noise_multiplier=1.5, max_grad_norm=1.0,
    ...                         random_state=0, noise_seed=0)   # noise_seed: doctest only
    >>> clf.fit(X, y).score(X, y) > 0.9
    True
    >>> clf.sample_rates_, clf.dp_steps_           # q = 15/150, 10 epochs of 10 steps
    ([0.1], [100])
    >>> clf.dp_events_[0]
    SelfComposedDpEvent(event=PoissonSampledDpEvent(sampling_probability=0.1, \
event=GaussianDpEvent(noise_multiplier=1.5)), count=100)
    >>> round(clf.epsilon_(1e-5), 2)               # Opacus' RDP accountant, add/remove-one
    3.92
    >>> len(clf.fit(X, y).dp_events_)               # a second fit continues: one more event
    2

    With a configured rate and number of steps, the event does not depend on the rows:

    >>> fixed = DPTorchClassifier(module_params={"hidden": (16,)}, batch_size=15,
    ...                           sample_rate=0.1, steps_per_fit=30, random_state=0)
    >>> fixed.fit(X, y).dp_events_[0] == fixed.fit(X[1:], y[1:]).dp_events_[1]   # one row less
    True
    >>> fixed.dp_events_[0]
    SelfComposedDpEvent(event=PoissonSampledDpEvent(sampling_probability=0.1, \
event=GaussianDpEvent(noise_multiplier=1.0)), count=30)
    """

    def __init__(
        self,
        module: Any = None,
        *,
        module_params: dict[str, Any] | None = None,
        classes: ArrayLike | None = None,
        max_epochs: int = 10,
        epochs_per_fit: int = 1,
        steps_per_fit: int | None = None,
        batch_size: int = 64,
        lr: float = 1e-3,
        optimizer: str | type[torch.optim.Optimizer] = "adam",
        optimizer_params: dict[str, Any] | None = None,
        weight_decay: float = 0.0,
        device: str = "cpu",
        warm_start: bool = True,
        random_state: int | np.random.RandomState | None = None,
        n_threads: int | None = None,
        verbose: int = 0,
        noise_multiplier: float = 1.0,
        max_grad_norm: float = 1.0,
        secure_mode: bool = False,
        accountant: str = "rdp",
        noise_seed: int | None = None,
        sample_rate: float | None = None,
    ) -> None:
        super().__init__(
            module=module,
            module_params=module_params,
            classes=classes,
            max_epochs=max_epochs,
            epochs_per_fit=epochs_per_fit,
            steps_per_fit=steps_per_fit,
            batch_size=batch_size,
            lr=lr,
            optimizer=optimizer,
            optimizer_params=optimizer_params,
            weight_decay=weight_decay,
            device=device,
            warm_start=warm_start,
            random_state=random_state,
            n_threads=n_threads,
            verbose=verbose,
        )
        self.noise_multiplier = noise_multiplier
        self.max_grad_norm = max_grad_norm
        self.secure_mode = secure_mode
        self.accountant = accountant
        self.noise_seed = noise_seed
        self.sample_rate = sample_rate

    # ------------------------------------------------------------------ checks
    def _check_params(self) -> None:
        super()._check_params()
        _positive("noise_multiplier", self.noise_multiplier)
        _positive("max_grad_norm", self.max_grad_norm)
        if not isinstance(self.secure_mode, bool | np.bool_):
            raise TypeError(f"secure_mode must be True or False, got {self.secure_mode!r}")
        if self.accountant not in _ACCOUNTANTS:
            raise ValueError(
                f"accountant must be one of {list(_ACCOUNTANTS)}, got {self.accountant!r}"
            )
        if self.noise_seed is not None and (
            isinstance(self.noise_seed, bool) or not isinstance(self.noise_seed, Integral)
        ):
            raise TypeError(f"noise_seed must be None or an int, got {self.noise_seed!r}")
        if self.sample_rate is not None:
            rate = _positive("sample_rate", self.sample_rate)
            if rate > 1.0:
                raise ValueError(f"sample_rate must be in (0, 1], got {self.sample_rate!r}")
            if self.steps_per_fit is None:
                raise ValueError(
                    "sample_rate needs steps_per_fit: with a configured Poisson rate every fit "
                    "runs steps_per_fit steps (epochs of n rows would make the number of steps "
                    "depend on the number of training rows)"
                )
        if self.secure_mode:
            _secure_generator()

    def _noise_generator(self) -> torch.Generator:
        """The generator of this fit's noise and Poisson samples (see ``noise_seed``)."""
        if self.secure_mode:
            return _secure_generator()
        if self.noise_seed is None:
            seed = secrets.randbits(63)
        else:
            fit_index = len(getattr(self, "dp_events_", []))
            sequence = np.random.SeedSequence([int(self.noise_seed), fit_index])
            seed = int(sequence.generate_state(1)[0])
        return torch.Generator().manual_seed(seed)

    def _check_module(self) -> None:
        errors = ModuleValidator.validate(self.module_, strict=False)
        if errors:
            reasons = "; ".join(str(e).split(". ")[0] for e in errors)
            raise ValueError(
                f"module {type(self.module_).__name__} cannot be trained with DP-SGD: {reasons}. "
                "opacus.validators.ModuleValidator.fix(module) replaces BatchNorm by GroupNorm"
            )

    # ------------------------------------------------------------------ training
    def _init_model(self, X: NDArray[np.float32], classes: NDArray[Any]) -> None:
        super()._init_model(X, classes)
        self.dp_events_: list[Any] = []
        self.sample_rates_: list[float] = []
        self.dp_steps_: list[int] = []
        self.accountant_ = create_accountant(mechanism=self.accountant)

    def _train(
        self,
        X: NDArray[np.float32],
        targets: NDArray[np.float32],
        weight: NDArray[np.float32],
        epochs: int,
        steps: int | None,
    ) -> None:
        self._check_module()  # before any step
        n = int(X.shape[0])
        if self.sample_rate is None:  # q and the steps per epoch are functions of n
            rate, expected = min(1.0, self.batch_size / n), min(self.batch_size, n)
        else:  # public configuration: the same whatever n
            rate, expected = float(self.sample_rate), int(self.batch_size)
            steps = int(self.steps_per_fit)  # type: ignore[arg-type]  # checked with sample_rate
        generator = self._noise_generator()  # the Poisson samples, drawn on the CPU
        noise = _on_device(generator, self._device(), bool(self.secure_mode))
        sampler = GradSampleModule(self.module_, batch_first=True, loss_reduction="sum")
        optimizer = DPOptimizer(
            self.optimizer_,
            noise_multiplier=float(self.noise_multiplier),
            max_grad_norm=float(self.max_grad_norm),
            expected_batch_size=expected,
            loss_reduction="mean",
            generator=noise,
            secure_mode=bool(self.secure_mode),
        )
        optimizer.attach_step_hook(self.accountant_.get_optimizer_hook_fn(sample_rate=rate))
        self._dp_run = (sampler, optimizer, rate, generator)
        before = self.n_steps_
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Full backward hook is firing")
                super()._train(X, targets, weight, epochs, steps)
        finally:  # steps taken are accounted even if training failed half-way
            del self._dp_run
            self._detach(sampler)
            self._account(rate, self.n_steps_ - before)

    def _detach(self, sampler: GradSampleModule) -> None:
        """Remove Opacus' hooks and every attribute they left on the network."""
        sampler._close()
        for param in self.module_.parameters():
            if hasattr(param, "summed_grad"):
                del param.summed_grad
        for layer in self.module_.modules():
            for name in _HOOK_ATTRS:
                if name in vars(layer):
                    delattr(layer, name)

    def _account(self, rate: float, steps: int) -> None:
        self.sample_rates_.append(float(rate))
        self.dp_steps_.append(int(steps))
        self.dp_events_.append(_event(rate, float(self.noise_multiplier), steps))

    def _batches(self, n: int) -> Iterator[torch.Tensor]:
        """One epoch: Poisson samples of the rows at rate q, ``ceil(n / batch_size)`` of them
        (``ceil(1 / q)`` with a configured ``sample_rate``: one expected pass)."""
        _, _, rate, generator = self._dp_run
        if self.sample_rate is None:
            count = math.ceil(n / min(self.batch_size, n))
        else:
            count = math.ceil(1.0 / rate)
        for _ in range(count):
            draw = torch.rand(n, generator=generator)
            yield torch.nonzero(draw < rate).flatten()

    def _step(self, xb: torch.Tensor, tb: torch.Tensor, wb: torch.Tensor) -> float:
        """One DP-SGD step: per-row gradients of the weighted loss, clipped, summed, noised."""
        sampler, optimizer, _, _ = self._dp_run
        optimizer.zero_grad(set_to_none=True)
        logp = torch.log_softmax(sampler(xb), dim=1)
        loss = (wb * -(tb * logp).sum(dim=1)).sum()  # per-row losses: per-row gradients
        loss.backward()
        optimizer.step()
        return float(loss.detach())

    def _expected_failed_checks(self) -> dict[str, str]:
        """The scikit-learn checks this classifier fails, and why (see
        :func:`learners.sklearn_checks.expected_failed_checks`)."""
        failed = super()._expected_failed_checks()
        failed["check_sample_weight_equivalence_on_dense_data"] = (
            "DP-SGD: Poisson-sampled batches and noise; a row of weight 2 is not the row "
            "repeated twice"
        )
        return failed

    # -------------------------------------------------------------- checkpoints
    #: the privacy record travels with the tensors (plain numbers, ``weights_only``-safe)
    _checkpoint_tensor_attrs = (
        *TorchClassifier._checkpoint_tensor_attrs,
        "accountant_",
        "dp_events_",
    )

    def _checkpoint_tensors(self) -> dict[str, Any]:
        saved = super()._checkpoint_tensors()
        saved["dp_history"] = [tuple(h) for h in self.accountant_.history]
        saved["dp_noise"] = [
            float(e.event.event.noise_multiplier)
            if isinstance(e, dp_accounting.SelfComposedDpEvent)
            else 0.0
            for e in self.dp_events_
        ]
        return saved

    def _restore_tensors(self, saved: dict[str, Any]) -> None:
        super()._restore_tensors(saved)
        self.accountant_ = create_accountant(mechanism=self.accountant)
        self.accountant_.history = [tuple(h) for h in saved["dp_history"]]
        fits = zip(self.sample_rates_, saved["dp_noise"], self.dp_steps_, strict=True)
        self.dp_events_ = [_event(q, z, steps) for q, z, steps in fits]

    # ------------------------------------------------------------------ privacy
    def epsilon_(self, delta: float) -> float:
        """ε at `delta` of all training since the network was initialised (Opacus' accountant).

        Add/remove-one neighbours, unit one training row (see the class docstring). A
        cross-check of the composition of ``dp_events_``; a co-training run's ledger composes
        the events itself.

        Parameters
        ----------
        delta : float
            δ in (0, 1).

        Returns
        -------
        float
            ε ≥ 0 (0.0 before any step).

        Examples
        --------
        >>> import numpy as np
        >>> from learners.dp_torch import DPTorchClassifier
        >>> X = np.random.default_rng(0).normal(size=(100, 3)); y = (X[:, 0] > 0).astype(int)
        >>> clf = DPTorchClassifier(batch_size=10, max_epochs=1, random_state=0).fit(X, y)
        >>> round(clf.epsilon_(1e-5), 3)     # 10 steps at q = 0.1, σ/C = 1
        3.441
        """
        check_is_fitted(self, "accountant_")
        if isinstance(delta, bool) or not isinstance(delta, Real) or not 0 < delta < 1:
            raise ValueError(f"delta must be a number in (0, 1), got {delta!r}")
        if not self.accountant_.history:
            return 0.0
        return float(self.accountant_.get_epsilon(delta=float(delta)))
