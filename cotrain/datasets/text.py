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
    root = paths.data_home(data_home)
    path = root.joinpath(*_ARCHIVE)
    if not path.is_file():
        raise FileNotFoundError(
            f"{'/'.join(_ARCHIVE)} not found in the data folder {root} (looked for {path}). "
            f"Place the archive there, or point data_home= / {paths.ENV_VAR} at a folder "
            "that has it."
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
