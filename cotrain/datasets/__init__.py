"""Public datasets and the papers' splits (private parts, public pool, test set).

Loaders read files from :func:`data_home` and never download: the tabular loaders and
splits are in :mod:`~cotrain.datasets.loaders`, the movie-review text corpus in
:mod:`~cotrain.datasets.text`.

Examples
--------
>>> from cotrain.datasets import load_breast_cancer_split
>>> split = load_breast_cancer_split(random_state=0)
>>> sorted(split)[:3]
['X_public', 'X_test', 'X_train']
"""

from cotrain.datasets.loaders import (
    ADULT_COLUMNS,
    PAPER_SPLITS,
    WINE_FEATURES,
    data_home,
    load_adult,
    load_breast_cancer_split,
    load_digits_split,
    load_paper_split,
    load_wine_quality,
    paper_split,
)
from cotrain.datasets.text import load_movie_reviews

__all__ = [
    "ADULT_COLUMNS",
    "PAPER_SPLITS",
    "WINE_FEATURES",
    "data_home",
    "load_adult",
    "load_breast_cancer_split",
    "load_digits_split",
    "load_movie_reviews",
    "load_paper_split",
    "load_wine_quality",
    "paper_split",
]
