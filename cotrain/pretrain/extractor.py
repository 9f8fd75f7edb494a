"""PretrainedExtractor: a body fitted on the public pool, and what clients do with it.

Importing this module does not import torch; building a network does.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["ModuleFactory", "PretrainedExtractor"]

_PREDICT_BATCH = 1024


class PretrainedExtractor:
    """The body of a ``learners.modules`` network, pretrained on the public pool.

    Made by :func:`~cotrain.pretrain.pretrain_images` or
    :func:`~cotrain.pretrain.pretrain_tabular` at the server, **from public data only**
    (FedAUX's preparation phase P1): no client's private row is ever seen. The weights are
    held as numpy arrays, so the extractor pickles, deep-copies and travels to every client
    unchanged; each client gets a copy of the same pretrained weights.

    Parameters
    ----------
    architecture : {"SmallCNN", "MLP"}
        The network whose body was pretrained (see :mod:`learners.modules`).
    params : dict
        The network's keyword arguments besides the injected sizes.
    n_features : int
        Input values per sample (``prod(X.shape[1:])``).
    state : dict of str to ndarray
        The body's weights (state-dict entries of the network, head excluded).
    method : str
        How it was pretrained (e.g. ``"simclr+rotation"``, ``"scarf"``).
    loss_curve : sequence of float, optional
        The pretraining loss of every epoch.
    n_public : int, default=0
        Rows of the public pool it was fitted on.
    feature_mean, feature_scale : array-like of shape (embedding_dim,), optional
        Mean and standard deviation of the features on the public pool (see
        :meth:`fit_feature_scaling`), used by ``transform(X, standardize=True)``.

    Attributes
    ----------
    embedding_dim : int
        Length of the features the body produces.

    Examples
    --------
    >>> import pytest
    >>> _ = pytest.importorskip("torch")
    >>> from sklearn.datasets import load_digits
    >>> from learners import TorchClassifier
    >>> from cotrain.pretrain import pretrain_images
    >>> X = load_digits().data[:200] / 16
    >>> ext = pretrain_images(X, epochs=2, width=4, random_state=0)
    >>> ext.architecture, ext.embedding_dim
    ('SmallCNN', 32)
    >>> clf = TorchClassifier(module=ext.module_factory(), max_epochs=2, random_state=0)
    >>> clf.fit(X[:50], load_digits().target[:50]).predict(X[:3]).shape
    (3,)
    >>> ext.transform(X[:3]).shape  # features (PretrainedFeatures is the pipeline step)
    (3, 32)
    """

    def __init__(
        self,
        architecture: str,
        params: Mapping[str, Any],
        n_features: int,
        state: Mapping[str, ArrayLike],
        method: str,
        loss_curve: Sequence[float] = (),
        n_public: int = 0,
        feature_mean: ArrayLike | None = None,
        feature_scale: ArrayLike | None = None,
    ) -> None:
        from learners.checks import check_int

        if architecture not in ("SmallCNN", "MLP"):
            raise ValueError(f"architecture must be 'SmallCNN' or 'MLP', got {architecture!r}")
        self.architecture = architecture
        self.params = dict(params)
        self.n_features = check_int(n_features, "n_features", 1)
        self.state = {str(k): np.array(v, dtype=np.float32) for k, v in state.items()}
        self.method = str(method)
        self.loss_curve = [float(v) for v in loss_curve]
        self.n_public = int(n_public)
        self.feature_mean = None if feature_mean is None else np.asarray(feature_mean, np.float32)
        self.feature_scale = (
            None if feature_scale is None else np.asarray(feature_scale, np.float32)
        )

    def __repr__(self) -> str:
        return (
            f"PretrainedExtractor({self.architecture}, {self.params}, method={self.method!r}, "
            f"n_public={self.n_public}, embedding_dim={self.embedding_dim})"
        )

    def __getstate__(self) -> dict[str, Any]:
        # the cached torch body is rebuilt from `state` where needed
        return {k: v for k, v in self.__dict__.items() if k != "_body"}

    # -------------------------------------------------------------- networks
    @property
    def embedding_dim(self) -> int:
        """Length of one feature vector (the head's input size)."""
        if self.architecture == "MLP":
            hidden = [v for k, v in self.state.items() if k.endswith(".bias")]
            return int(hidden[-1].shape[0])
        width = int(self.params.get("width", 16))
        side = int(self.params.get("image_size") or self._side()) // 4
        return 2 * width * side * side

    def _side(self) -> int:
        import math

        return math.isqrt(self.n_features // int(self.params.get("in_channels", 1)))

    def network(self, n_classes: int, *, freeze: bool = False) -> Any:
        """A full network with the pretrained body and a freshly initialised head.

        The head is drawn from torch's global generator (inside
        :class:`learners.TorchClassifier`, from the estimator's own seeded stream).

        Parameters
        ----------
        n_classes : int
            Output units of the head.
        freeze : bool, default=False
            Freeze the body (``requires_grad=False``): only the head trains, and FedAvg
            averages only the head.

        Returns
        -------
        torch.nn.Module
            A :class:`learners.SmallCNN` or :class:`learners.MLP`.

        Examples
        --------
        >>> import pytest
        >>> _ = pytest.importorskip("torch")
        >>> import numpy as np
        >>> from cotrain.pretrain import pretrain_tabular
        >>> ext = pretrain_tabular(np.random.default_rng(0).normal(size=(40, 5)),
        ...                        hidden=(8,), epochs=1, random_state=0)
        >>> net = ext.network(3)
        >>> np.array_equal(net.layers[0].weight.detach().numpy(), ext.state["layers.0.weight"])
        True
        """
        import torch

        from cotrain.pretrain.networks import build_network

        net = build_network(self.architecture, self.params, self.n_features, int(n_classes))
        _, unexpected = net.load_state_dict(
            {k: torch.from_numpy(v.copy()) for k, v in self.state.items()}, strict=False
        )
        if unexpected:
            raise ValueError(f"pretrained state has keys the network lacks: {unexpected}")
        if freeze:
            for name, param in net.named_parameters():
                if name in self.state:
                    param.requires_grad_(False)
        return net

    def module_factory(self, *, freeze: bool = False) -> ModuleFactory:
        """A module for :class:`learners.TorchClassifier` that starts from this body.

        ``TorchClassifier(module=ext.module_factory())`` builds the network with the data's
        ``n_features`` and ``n_classes``, loads the pretrained body and draws the head
        from the estimator's seeded stream. The factory survives ``sklearn.clone``,
        pickling and joblib: every client starts from the same body weights.

        Parameters
        ----------
        freeze : bool, default=False
            Keep the body fixed (linear probing); by default the whole network trains.

        Returns
        -------
        ModuleFactory
            A picklable callable ``(n_features, n_classes) -> nn.Module``.

        Examples
        --------
        >>> import pytest
        >>> _ = pytest.importorskip("torch")
        >>> import numpy as np
        >>> from learners import TorchClassifier
        >>> from cotrain.pretrain import pretrain_tabular
        >>> X = np.random.default_rng(0).normal(size=(40, 5))
        >>> ext = pretrain_tabular(X, hidden=(8,), epochs=1, random_state=0)
        >>> a = TorchClassifier(ext.module_factory(), classes=[0, 1], random_state=1)
        >>> b = TorchClassifier(ext.module_factory(), classes=[0, 1], random_state=2)
        >>> wa, wb = a.initialize(X).get_weights(), b.initialize(X).get_weights()
        >>> np.array_equal(wa["layers.0.weight"], wb["layers.0.weight"])  # same body
        True
        """
        return ModuleFactory(self, freeze=freeze)

    def classifier(self, *, freeze: bool = False, **params: Any) -> Any:
        """A :class:`learners.TorchClassifier` that starts from this body.

        Parameters
        ----------
        freeze : bool, default=False
            Keep the body fixed (see :meth:`module_factory`).
        **params
            Other ``TorchClassifier`` parameters (``max_epochs``, ``lr``, ...).

        Returns
        -------
        learners.TorchClassifier
            Unfitted, with ``module=self.module_factory(freeze=freeze)``.

        Examples
        --------
        >>> import pytest
        >>> _ = pytest.importorskip("torch")
        >>> import numpy as np
        >>> from cotrain.pretrain import pretrain_tabular
        >>> ext = pretrain_tabular(np.ones((8, 3)) * np.arange(8)[:, None], hidden=(4,),
        ...                        epochs=1, random_state=0)
        >>> type(ext.classifier(lr=1e-2).module).__name__
        'ModuleFactory'
        """
        from learners import TorchClassifier

        if "module" in params or "module_params" in params:
            raise TypeError("classifier() sets module itself; do not pass module or module_params")
        return TorchClassifier(module=self.module_factory(freeze=freeze), **params)

    # -------------------------------------------------------------- features
    def fit_feature_scaling(self, X_public: ArrayLike) -> PretrainedExtractor:
        """Record the mean and standard deviation of the features on the public pool.

        The pretraining functions call it with their public pool, so that
        ``transform(X, standardize=True)`` (and :class:`PretrainedFeatures`) give
        standardised features without looking at any client's data.

        Parameters
        ----------
        X_public : array-like of shape (n_samples, n_features)
            Public rows (never a client's private data).

        Returns
        -------
        self : PretrainedExtractor
            With ``feature_mean`` and ``feature_scale`` (1 where a feature is constant).

        Examples
        --------
        >>> import pytest
        >>> _ = pytest.importorskip("torch")
        >>> import numpy as np
        >>> from cotrain.pretrain import pretrain_tabular
        >>> X = np.random.default_rng(0).normal(size=(40, 5))
        >>> ext = pretrain_tabular(X, hidden=(8,), epochs=1, random_state=0)
        >>> bool(np.allclose(ext.transform(X, standardize=True).mean(axis=0), 0, atol=1e-4))
        True
        """
        features = self.transform(X_public).astype(np.float64)
        std = features.std(axis=0)
        self.feature_mean = features.mean(axis=0).astype(np.float32)
        self.feature_scale = np.where(std > 1e-8, std, 1.0).astype(np.float32)
        return self

    def transform(self, X: ArrayLike, *, standardize: bool = False) -> NDArray[np.float32]:
        """The pretrained body's features of `X` (evaluation mode, no gradients).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            Inputs, scaled like the public pool.
        standardize : bool, default=False
            Subtract ``feature_mean`` and divide by ``feature_scale`` (the public pool's,
            see :meth:`fit_feature_scaling`).

        Returns
        -------
        ndarray of shape (n_samples, embedding_dim)
            Float32 features.

        Examples
        --------
        >>> import pytest
        >>> _ = pytest.importorskip("torch")
        >>> import numpy as np
        >>> from cotrain.pretrain import pretrain_tabular
        >>> ext = pretrain_tabular(np.random.default_rng(0).normal(size=(40, 5)),
        ...                        hidden=(8,), epochs=1, random_state=0)
        >>> ext.transform(np.zeros((2, 5))).shape
        (2, 8)
        """
        import torch

        from cotrain.pretrain.networks import embed

        arr = np.asarray(X, dtype=np.float32)
        if arr.ndim < 2 or int(np.prod(arr.shape[1:])) != self.n_features:
            raise ValueError(
                f"X must have {self.n_features} values per sample (the public pool's), "
                f"got shape {arr.shape}"
            )
        body = getattr(self, "_body", None)
        if body is None:
            with torch.random.fork_rng(devices=[]):  # the unused head's draw stays local
                body = self.network(1).eval()
            self._body = body
        with torch.no_grad():
            Xt = torch.from_numpy(np.ascontiguousarray(arr))
            out = [
                embed(self.architecture, body, Xt[i : i + _PREDICT_BATCH]).numpy()
                for i in range(0, Xt.shape[0], _PREDICT_BATCH)
            ]
        features = np.concatenate(out) if out else np.zeros((0, self.embedding_dim), np.float32)
        if standardize:
            if self.feature_mean is None or self.feature_scale is None:
                raise ValueError(
                    "standardize=True needs the public pool's feature statistics: "
                    "call fit_feature_scaling(X_public) first"
                )
            features = (features - self.feature_mean) / self.feature_scale
        return features


class ModuleFactory:
    """Builds a network with a pretrained body, for ``TorchClassifier(module=...)``.

    :class:`learners.TorchClassifier` calls it with the data's ``n_features`` and
    ``n_classes`` when it initialises its network (inside the estimator's seeded stream,
    which draws the head). It holds numpy weights only, so ``sklearn.clone``, pickle and
    joblib give every client the same pretrained body.

    Parameters
    ----------
    extractor : PretrainedExtractor
        The pretrained body (copied).
    freeze : bool, default=False
        Freeze the body's parameters.

    Examples
    --------
    >>> import pytest
    >>> _ = pytest.importorskip("torch")
    >>> import numpy as np
    >>> from cotrain.pretrain import pretrain_tabular
    >>> ext = pretrain_tabular(np.random.default_rng(0).normal(size=(40, 5)),
    ...                        hidden=(8,), epochs=1, random_state=0)
    >>> ModuleFactory(ext)(n_features=5, n_classes=3).layers[-1].out_features
    3
    """

    def __init__(self, extractor: PretrainedExtractor, freeze: bool = False) -> None:
        if not isinstance(extractor, PretrainedExtractor):
            raise TypeError(
                f"extractor must be a PretrainedExtractor, got {type(extractor).__name__}"
            )
        self.extractor = copy.deepcopy(extractor)
        self.freeze = bool(freeze)

    def __repr__(self) -> str:
        return f"ModuleFactory({self.extractor!r}, freeze={self.freeze})"

    def __call__(self, n_features: int, n_classes: int) -> Any:
        """The network for `n_features` inputs and `n_classes` outputs."""
        if int(n_features) != self.extractor.n_features:
            raise ValueError(
                f"n_features={n_features}: the extractor was pretrained on "
                f"{self.extractor.n_features} values per sample"
            )
        return self.extractor.network(n_classes, freeze=self.freeze)
