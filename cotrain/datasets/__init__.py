"""Public datasets and the papers' splits (private parts, public pool, test set).

Loaders read files from :func:`data_home` and never download. One job per module:

- :mod:`~cotrain.datasets.paths`: where the data folder is (:func:`data_home`);
- :mod:`~cotrain.datasets.splits`: private, public and test parts of exact sizes
  (:func:`paper_split`), standardised by the public pool only;
- :mod:`~cotrain.datasets.tabular`: the UCI wine quality and adult income files;
- :mod:`~cotrain.datasets.loaders`: the papers' datasets cut the papers' way in one call
  (:func:`load_paper_split`, :func:`load_breast_cancer_split`, :func:`load_digits_split`);
- :mod:`~cotrain.datasets.text`: the movie-review corpus for language models.

Examples
--------
>>> from cotrain.datasets import load_breast_cancer_split
>>> split = load_breast_cancer_split(random_state=0)
>>> split.X_labeled.shape, split.X_public.shape, split.X_test.shape
((85, 30), (370, 30), (114, 30))
"""

from cotrain.datasets.loaders import (
    PAPER_SPLITS,
    load_breast_cancer_split,
    load_digits_split,
    load_paper_split,
)
from cotrain.datasets.paths import data_home
from cotrain.datasets.splits import paper_split
from cotrain.datasets.tabular import ADULT_COLUMNS, WINE_FEATURES, load_adult, load_wine_quality
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


def __dir__() -> list[str]:
    return sorted(__all__)
