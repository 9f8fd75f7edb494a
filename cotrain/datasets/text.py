"""Public text data for co-training language models.

:func:`load_movie_reviews` reads the Movie Review Polarity dataset v2.0 (Pang & Lee 2004:
1,000 positive and 1,000 negative film reviews) straight from its archive
``movie_reviews/review_polarity.tar.gz`` in the shared data folder (see
:func:`cotrain.datasets.data_home`); nothing is extracted to disk.
"""

from __future__ import annotations

import os
import tarfile

import numpy as np
from numpy.typing import NDArray

from cotrain.datasets import paths

__all__ = ["load_movie_reviews"]

_ARCHIVE = ("movie_reviews", "review_polarity.tar.gz")

#: where the archive comes from (polarity dataset v2.0, Pang & Lee 2004; 3 MB): the library
#: cannot ship it (its page gives no licence to redistribute)
MOVIE_REVIEWS_URL = (
    "https://www.cs.cornell.edu/people/pabo/movie-review-data/review_polarity.tar.gz"
)


def get_movie_reviews(folder: str = "DATA") -> str:
    """The one step that puts the movie reviews where :func:`load_movie_reviews` looks.

    Examples
    --------
    >>> print(get_movie_reviews("/data"))  # doctest: +NORMALIZE_WHITESPACE
    Download it once (3 MB): mkdir -p /data/movie_reviews && curl -L -o
    /data/movie_reviews/review_polarity.tar.gz
    https://www.cs.cornell.edu/people/pabo/movie-review-data/review_polarity.tar.gz
    """
    target = f"{folder}/{'/'.join(_ARCHIVE)}"
    return (
        f"Download it once (3 MB): mkdir -p {folder}/{_ARCHIVE[0]} && curl -L -o {target} "
        f"{MOVIE_REVIEWS_URL}"
    )


_LABELS = ("neg", "pos")


def load_movie_reviews(
    data_home: str | os.PathLike[str] | None = None,
) -> tuple[list[str], NDArray[np.str_]]:
    """Load the 2,000 movie reviews of Pang & Lee (2004) with their polarity.

    Parameters
    ----------
    data_home : str or path-like, optional
        The shared data folder (it holds ``movie_reviews/review_polarity.tar.gz``); located
        by :func:`cotrain.datasets.data_home` when omitted.

    Returns
    -------
    texts : list of str
        The reviews (UTF-8, lower-cased and tokenised by the dataset's authors), negative
        reviews first, each class in file-name order: a deterministic order.
    y : ndarray of shape (2000,)
        ``"neg"`` or ``"pos"`` for every review.

    Raises
    ------
    FileNotFoundError
        If the data folder or the archive is missing (the message says where it looked).

    Examples
    --------
    >>> from cotrain.datasets.text import load_movie_reviews
    >>> texts, y = load_movie_reviews()  # doctest: +SKIP
    >>> len(texts), sorted(set(y.tolist()))  # doctest: +SKIP
    (2000, ['neg', 'pos'])
    """
    try:
        root = paths.data_home(data_home)
    except FileNotFoundError as err:
        raise FileNotFoundError(
            f"the movie reviews need a data folder: {err} {get_movie_reviews()}, then "
            f"export {paths.ENV_VAR}=DATA (any folder in place of DATA)"
        ) from None
    path = root.joinpath(*_ARCHIVE)
    if not path.is_file():
        raise FileNotFoundError(
            f"{'/'.join(_ARCHIVE)} not found in the data folder {root} (looked for {path}). "
            f"{get_movie_reviews(str(root))}"
        )
    found: list[tuple[str, str, str]] = []
    with tarfile.open(path, "r:gz") as archive:
        for member in archive:
            parts = member.name.split("/")
            if not member.isfile() or len(parts) < 3 or parts[-2] not in _LABELS:
                continue
            if not parts[-1].endswith(".txt"):
                continue
            raw = archive.extractfile(member)
            if raw is None:
                continue
            found.append((parts[-2], parts[-1], raw.read().decode("utf-8", errors="replace")))
    if not found:
        raise FileNotFoundError(f"{path} holds no txt_sentoken/{{pos,neg}}/*.txt reviews")
    found.sort(key=lambda item: (item[0], item[1]))
    texts = [text for _, _, text in found]
    y = np.array([label for label, _, _ in found])
    return texts, y
