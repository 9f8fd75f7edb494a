"""Self-supervised losses and views (imports torch).

- :func:`nt_xent`: SimCLR's normalised temperature-scaled cross-entropy between two views
  of a batch (Chen et al. 2020), used for images and, SCARF-style, for tabular rows;
- :func:`rotations`: FedDS's pretext task (Gidaris et al. 2018): every image rotated by 0,
  90, 180 and 270 degrees, with the rotation as its label;
- :func:`augment_images`: SimCLR's augmentations made for small grey-scale images (random
  resized crop / shift / small rotation in one affine warp, brightness and contrast,
  cutout, Gaussian noise);
- :func:`corrupt_rows`: SCARF's feature corruption (Bahri et al. 2022): a random subset of
  each row's features replaced by values drawn from the features' empirical marginals.

All randomness comes from torch's global generator: callers seed it (see
:func:`cotrain.pretrain.loop.train_ssl`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

__all__ = ["augment_images", "corrupt_rows", "nt_xent", "rotations"]


def nt_xent(z1: torch.Tensor, z2: torch.Tensor, temperature: float = 0.5) -> torch.Tensor:
    """NT-Xent loss of two views: row ``i`` of `z1` and of `z2` are a positive pair.

    Each of the ``2n`` projections is classified against the other ``2n - 1`` by cosine
    similarity over `temperature`; the loss is the mean cross-entropy of finding its pair.

    Parameters
    ----------
    z1, z2 : torch.Tensor of shape (n, d)
        Projections of the two views.
    temperature : float, default=0.5
        Softmax temperature.

    Returns
    -------
    torch.Tensor
        The scalar loss (``log(2n - 1)`` for uninformative projections).

    Examples
    --------
    >>> z = torch.eye(4)
    >>> float(nt_xent(z, z, temperature=0.1)) < 0.01  # perfect pairs
    True
    >>> round(float(nt_xent(torch.ones(4, 2), torch.ones(4, 2))), 4) == round(math.log(7), 4)
    True
    """
    n = z1.shape[0]
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    sim = z @ z.T / temperature
    sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool, device=z.device), float("-inf"))
    target = torch.cat([torch.arange(n, 2 * n), torch.arange(n)]).to(z.device)
    return F.cross_entropy(sim, target)


def rotations(images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Every image rotated by 0, 90, 180 and 270 degrees, and the rotation labels 0-3.

    Parameters
    ----------
    images : torch.Tensor of shape (n, C, H, H)
        Square images.

    Returns
    -------
    rotated : torch.Tensor of shape (4n, C, H, H)
        The four rotations, one block of ``n`` after another.
    labels : torch.Tensor of shape (4n,)
        ``k`` for a rotation by ``90 k`` degrees.

    Examples
    --------
    >>> x = torch.arange(4.0).reshape(1, 1, 2, 2)
    >>> rotated, labels = rotations(x)
    >>> rotated[1, 0].tolist(), labels.tolist()
    ([[1.0, 3.0], [0.0, 2.0]], [0, 1, 2, 3])
    """
    n = images.shape[0]
    rotated = torch.cat([torch.rot90(images, k, dims=(2, 3)) for k in range(4)])
    labels = torch.arange(4, device=images.device).repeat_interleave(n)
    return rotated, labels


def augment_images(
    images: torch.Tensor,
    *,
    scale: tuple[float, float] = (0.75, 1.0),
    shift: float = 0.15,
    degrees: float = 10.0,
    jitter: float = 0.3,
    cutout: float = 0.5,
    noise: float = 0.1,
) -> torch.Tensor:
    """A random view of each image, with SimCLR's augmentations sized for small images.

    One affine warp per image does the random resized crop (zoom in by ``1/s``, ``s`` in
    `scale`), a shift of up to `shift` of the side and a rotation of up to `degrees`
    (bilinear, zero padding); then brightness and contrast are jittered by up to
    ``±jitter``, with probability `cutout` a square of a third of the side is zeroed, and
    Gaussian noise of `noise` times the batch's standard deviation is added. Colour
    distortion and blur (SimCLR's other augmentations) do not apply to 8×8 grey images.

    Parameters
    ----------
    images : torch.Tensor of shape (n, C, H, W)
        The batch.
    scale, shift, degrees, jitter, cutout, noise
        Strength of each augmentation (0 switches one off; `scale` ``(1, 1)``).

    Returns
    -------
    torch.Tensor of shape (n, C, H, W)
        The augmented views.

    Examples
    --------
    >>> _ = torch.manual_seed(0)
    >>> x = torch.rand(5, 1, 8, 8)
    >>> augment_images(x).shape
    torch.Size([5, 1, 8, 8])
    >>> torch.allclose(augment_images(x, scale=(1, 1), shift=0, degrees=0, jitter=0,
    ...                               cutout=0, noise=0), x, atol=1e-5)
    True
    """
    n, _, h, w = images.shape
    dev = images.device
    s = torch.empty(n, device=dev).uniform_(*scale)
    angle = torch.empty(n, device=dev).uniform_(-degrees, degrees) * math.pi / 180
    t = torch.empty(n, 2, device=dev).uniform_(-2 * shift, 2 * shift)
    cos, sin = torch.cos(angle) * s, torch.sin(angle) * s
    theta = torch.stack(
        [torch.stack([cos, -sin, t[:, 0]], 1), torch.stack([sin, cos, t[:, 1]], 1)], 1
    )
    grid = F.affine_grid(theta, list(images.shape), align_corners=False)
    out = F.grid_sample(images, grid, align_corners=False, padding_mode="zeros")
    if jitter > 0:
        mean = out.mean(dim=(1, 2, 3), keepdim=True)
        contrast = torch.empty(n, 1, 1, 1, device=dev).uniform_(1 - jitter, 1 + jitter)
        bright = torch.empty(n, 1, 1, 1, device=dev).uniform_(-jitter, jitter) * mean.abs()
        out = (out - mean) * contrast + mean + bright
    if cutout > 0:
        side = max(1, h // 3)
        top = torch.randint(0, h - side + 1, (n,), device=dev)
        left = torch.randint(0, w - side + 1, (n,), device=dev)
        rows = torch.arange(h, device=dev)[None, :, None]
        cols = torch.arange(w, device=dev)[None, None, :]
        box = (
            (rows >= top[:, None, None])
            & (rows < (top + side)[:, None, None])
            & (cols >= left[:, None, None])
            & (cols < (left + side)[:, None, None])
        )
        apply = torch.rand(n, device=dev) < cutout
        out = out.masked_fill((box & apply[:, None, None])[:, None], 0.0)
    if noise > 0:
        out = out + noise * images.std() * torch.randn_like(out)
    return out


def corrupt_rows(rows: torch.Tensor, pool: torch.Tensor, rate: float = 0.6) -> torch.Tensor:
    """SCARF's corrupted view: each feature replaced with probability `rate` by that
    feature's value in a random row of `pool` (its empirical marginal).

    Parameters
    ----------
    rows : torch.Tensor of shape (n, d)
        The batch.
    pool : torch.Tensor of shape (N, d)
        The rows whose marginals are sampled (the whole public pool).
    rate : float, default=0.6
        Probability that a feature is corrupted (SCARF's default).

    Returns
    -------
    torch.Tensor of shape (n, d)
        The corrupted rows.

    Examples
    --------
    >>> _ = torch.manual_seed(0)
    >>> x, pool = torch.zeros(3, 4), torch.ones(10, 4)
    >>> corrupt_rows(x, pool, rate=1.0).tolist() == torch.ones(3, 4).tolist()
    True
    >>> corrupt_rows(x, pool, rate=0.0).tolist() == x.tolist()
    True
    """
    n, d = rows.shape
    donors = torch.randint(0, pool.shape[0], (n, d), device=rows.device)
    marginal = torch.gather(pool, 0, donors)
    mask = torch.rand(n, d, device=rows.device) < rate
    return torch.where(mask, marginal, rows)
