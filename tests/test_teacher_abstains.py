"""A teacher that cannot be fitted on its shard abstains instead of failing its client."""

from __future__ import annotations

import numpy as np
from sklearn.neighbors import KNeighborsClassifier

from cotrain.privacy.mechanisms.teacher_counts import teacher_votes


def test_a_teacher_with_too_few_rows_for_its_learner_abstains() -> None:
    rng = np.random.default_rng(0)
    X, y, U = rng.normal(size=(12, 2)), np.tile([0, 1], 6), rng.normal(size=(5, 2))
    # 12 rows over 4 keyed-hash shards: with this key one shard holds both classes in fewer
    # rows than the 3 neighbours KNN needs, so that teacher abstains and 3 of 4 vote
    votes = teacher_votes(
        KNeighborsClassifier(n_neighbors=3), X, y, U, np.array([0, 1]),
        np.random.default_rng(2), n_teachers=4,
    )  # fmt: skip
    assert votes.sum(axis=1).tolist() == [3, 3, 3, 3, 3]
