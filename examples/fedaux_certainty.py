"""FedAUX certainty weighting in federated co-training, and a one-shot FedAUXfdp-style round.

Part 1 (digits, label-skewed Dirichlet split): five clients co-train logistic regressions; the
consensus on the public pool is a plain majority vote, or a vote weighted by each client's
FedAUX certainty score, non-private or (ε = 0.1, δ = 1e-5)-DP. Each client's scorer is an
L2-regularised logistic regression separating its private data from a public negative set
(``C = 1/(λN)``), released with Gaussian noise.

Part 2 (breast cancer): one round only; each client releases a DP certainty scorer
(ε = 0.1) and a DP multinomial head (ε = 0.5); the server averages the heads' soft labels on
the public pool with the certainty weights and trains a student. Each client's total budget
is (0.6, 2e-5) by basic composition.

The DP noise is drawn from the operating system's entropy, never from ``--seed``: the server
knows the run's seed, and with noise seeded from it could subtract the noise and recover every
client's exact non-private scorer and head. ``--reproducible-noise`` seeds it from ``--seed``
so that a run repeats exactly (simulations only: the printed ε then does not hold against
whoever knows the seed, and the output says so).

Run::

    python examples/fedaux_certainty.py
    python examples/fedaux_certainty.py --alpha 0.05 --rounds 5 --seed 1
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.decomposition import PCA
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from consensus import CertaintyWeighted
from cotrain import FederatedCoTrainer, partition
from cotrain.baselines.fedaux_one_shot import one_shot_fedaux
from cotrain.privacy.fedaux import fedaux_weights


def split(X, y, n_lab, n_neg, n_pub, seed):
    """Labeled / public negatives / public pool / test, standardised on public data only."""
    idx = np.random.default_rng(seed).permutation(len(y))
    a, b, c = n_lab, n_lab + n_neg, n_lab + n_neg + n_pub
    lab, neg, pub, test = idx[:a], idx[a:b], idx[b:c], idx[c:]
    scale = StandardScaler().fit(X[np.r_[neg, pub]]).transform
    return scale(X[lab]), y[lab], scale(X[neg]), scale(X[pub]), y[pub], scale(X[test]), y[test]


def digits_clients(alpha: float, seed: int) -> tuple:
    """Part 1's data: the clients' rows ``Xc, yc``, public negatives ``Xn``, public pool
    ``Xp`` with its hidden labels ``yp``, and the test rows ``Xt, yt``."""
    X, y = load_digits(return_X_y=True)
    Xl, yl, Xn, Xp, yp, Xt, yt = split(X, y, 500, 300, 500, seed)
    parts = partition.dirichlet(yl, 5, alpha=alpha, random_state=seed)
    return [Xl[p] for p in parts], [yl[p] for p in parts], Xn, Xp, yp, Xt, yt


def dp_scores(Xc, Xn, Xp, seed: int, reproducible_noise: bool = False) -> np.ndarray:
    """Part 1's (0.1, 1e-5)-DP certainty scores of the clients on the public pool."""
    with warnings.catch_warnings():  # the opt-in is reported by main, once
        warnings.filterwarnings("ignore", message="reproducible_noise=True")
        return fedaux_weights(
            Xc, Xn, Xp, epsilon=0.1, random_state=seed, reproducible_noise=reproducible_noise
        )


def cotraining(alpha: float, rounds: int, seed: int, reproducible_noise: bool = False) -> None:
    Xc, yc, Xn, Xp, yp, Xt, yt = digits_clients(alpha, seed)
    rules = {
        "majority vote": "majority",
        "certainty, exact": CertaintyWeighted(scores=fedaux_weights(Xc, Xn, Xp, dp=False)),
        "certainty, DP ε=0.1": CertaintyWeighted(
            scores=dp_scores(Xc, Xn, Xp, seed, reproducible_noise)
        ),
    }
    print(f"digits, 5 clients, Dirichlet alpha={alpha}, {rounds} rounds")
    print(f"{'consensus':<22}{'pseudo-label acc':>18}{'test acc':>10}")
    for name, rule in rules.items():
        trainer = FederatedCoTrainer(
            [LogisticRegression(max_iter=500)] * 5,
            consensus=rule,
            rounds=rounds,
            random_state=seed,
        ).fit(Xc, yc, X_public=Xp, y_public=yp)
        pl = trainer.history_[-1].pseudo_label_accuracy
        print(f"{name:<22}{pl:>18.3f}{trainer.score(Xt, yt):>10.3f}")


def cancer_clients(seed: int) -> tuple:
    """Part 2's data: the clients' rows ``Xc, yc``, public negatives ``Xn``, public pool
    ``Xp`` with its hidden labels ``yp``, the test rows ``Xt, yt`` and the PCA fitted on
    public data only."""
    X, y = load_breast_cancer(return_X_y=True)
    Xl, yl, Xn, Xp, yp, Xt, yt = split(X, y, 300, 100, 100, seed)
    parts = partition.dirichlet(yl, 2, alpha=0.3, random_state=seed)
    pca = PCA(5, random_state=0).fit(np.vstack([Xn, Xp]))  # fitted on public data only
    return [Xl[p] for p in parts], [yl[p] for p in parts], Xn, Xp, yp, Xt, yt, pca


def one_shot_round(seed: int, reproducible_noise: bool = False):
    """Part 2's one-shot round (``lam=3.0``): what ``one_shot_fedaux`` returns."""
    Xc, yc, Xn, Xp, _yp, _Xt, _yt, pca = cancer_clients(seed)
    with warnings.catch_warnings():  # the opt-in is reported by main, once
        warnings.filterwarnings("ignore", message="reproducible_noise=True")
        return one_shot_fedaux(
            None,
            Xc,
            yc,
            Xn,
            Xp,
            lam=3.0,
            feature_map=pca,
            random_state=seed,
            reproducible_noise=reproducible_noise,
        )


def one_shot(seed: int, reproducible_noise: bool = False) -> None:
    *_, yp, Xt, yt, _pca = cancer_clients(seed)
    res = one_shot_round(seed, reproducible_noise)
    print("\nbreast cancer, 2 clients, one shot (FedAUXfdp-style)")
    print(f"student test accuracy      {res.student.score(Xt, yt):.3f}")
    print(f"pseudo-label accuracy      {(res.pseudo_labels == yp).mean():.3f}")
    note = " (not against whoever knows --seed)" if res.noise_replayable else ""
    print(
        f"per-client (ε, δ)          ({res.epsilon_total[0]:.1f}, {res.delta_total[0]:.0e}){note}"
    )
    print(f"noise σ: scorer {res.scorers[0].sigma_:.3f}, head {res.heads[0].sigma_:.3f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--alpha",
        type=float,
        default=0.1,
        help="part 1: label skew of the clients' split, Dirichlet(alpha); smaller is more "
        "skewed (default 0.1)",
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="part 1: co-training rounds (default 3)"
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the data split and the clients of both parts; not of the DP noise, "
        "which comes from the operating system's entropy (default 0)",
    )
    parser.add_argument(
        "--reproducible-noise",
        action="store_true",
        help="seed the DP noise from --seed too, so that a run repeats exactly; whoever "
        "knows the seed can then remove the noise, so the printed ε no longer protects "
        "anyone against them (simulations only)",
    )
    args = parser.parse_args(argv)
    if args.reproducible_noise:
        print(
            f"reproducible noise: the DP noise is seeded from --seed {args.seed}, so whoever "
            "knows it can replay the noise and recover the non-private scorers and heads; "
            "the ε below does not hold against them"
        )
    else:
        print("DP noise from the operating system's entropy: not replayable from --seed")
    cotraining(args.alpha, args.rounds, args.seed, args.reproducible_noise)
    one_shot(args.seed, args.reproducible_noise)


if __name__ == "__main__":
    main()
