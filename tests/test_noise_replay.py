"""A server that knows random_state tries to replay the clients' privacy noise.

Before this fix the noise seeds were derived from ``random_state`` (32 bits each): the server
recomputed them and recovered every clean label. Now the noise comes from the client's OS
entropy; derived noise survives only as the warned opt-in ``reproducible_noise=True``.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer
from cotrain.federation.seeding import noise_seed_for, spawn_seeds
from cotrain.privacy import RandomizedResponse

pytest.importorskip("dp_accounting")

SEED = 0


def one_client_run(cancer, privacy, **params):
    """One client, majority of one: the consensus of round 1 IS the client's upload."""
    X, y = np.concatenate(cancer["X"]), np.concatenate(cancer["y"])
    return FederatedCoTrainer(
        [DecisionTreeClassifier(max_depth=3)], rounds=1, privacy=privacy, random_state=SEED,
        classes=[0, 1], **params,
    ).fit([X], [y], X_public=cancer["X_public"])  # fmt: skip


def replay(noisy: np.ndarray, mech: RandomizedResponse, n_classes: int) -> np.ndarray:
    """The server's attack: recompute the round-1 seed of client 0 from random_state, redraw
    the noise exactly as RandomizedResponse.randomize does, and undo it."""
    seed = noise_seed_for(spawn_seeds(SEED, 1)[2], 1, 0)
    rng = np.random.default_rng(seed)
    keep = mech.keep_probability(n_classes, noisy.size)
    flip = rng.random(noisy.size) >= keep
    shift = rng.integers(1, n_classes, size=noisy.size)
    return np.where(flip, (noisy - shift) % n_classes, noisy)


def test_server_replay_recovers_every_label_only_with_reproducible_noise(cancer):
    clean = one_client_run(cancer, None).pseudo_label_codes_
    # record level over |U| = 300 labels: ε' = 120/300 per label, keep probability ~ 0.6
    mech = RandomizedResponse(epsilon=120.0)
    keep = mech.keep_probability(2, clean.size)
    assert 0.55 < keep < 0.65

    with pytest.warns(UserWarning, match="replay"):
        opted_in = one_client_run(cancer, mech, reproducible_noise=True).pseudo_label_codes_
    assert np.mean(opted_in == clean) < 0.75  # the upload is noisy ...
    assert np.mean(replay(opted_in, mech, 2) == clean) == 1.0  # ... and the server undoes it

    recovered = []
    for _ in range(3):  # the default: noise from each client's OS entropy
        noisy = one_client_run(cancer, mech).pseudo_label_codes_
        recovered.append(np.mean(replay(noisy, mech, 2) == clean))
    # replaying a wrong seed is a coin flip on top of the noise: for K = 2 it recovers
    # keep² + (1 − keep)² ≈ 0.52 of the labels, worse than taking the noisy labels as they are
    assert max(recovered) < keep + 0.08
    assert np.mean(recovered) == pytest.approx(keep**2 + (1 - keep) ** 2, abs=0.06)


def test_two_runs_with_the_same_random_state_release_different_noise(cancer):
    mech = RandomizedResponse(epsilon=120.0)
    a = one_client_run(cancer, mech).pseudo_label_codes_
    b = one_client_run(cancer, mech).pseudo_label_codes_
    # independent noise: the two releases disagree on about 2·keep·(1 − keep) ≈ 48 % of labels
    assert 0.35 < np.mean(a != b) < 0.6
