"""BEiT v2's normalized EMA vector quantizer (unilm ``beit2/norm_ema_quantizer.py``, ``NormEMAVectorQuantizer``).

Features and codes are unit vectors; each position takes the nearest code, and the codebook moves by an EMA (decay
0.99) towards the normalized mean of its assigned features, after a spherical k-means init on the first batch.
Statistics are all-reduced over processes and process 0's k-means result is broadcast, so every process holds the
same codebook. Parameter names are unilm's (``embedding.weight``, ``embedding.initted``, ``cluster_size``).
"""
from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

# norm_ema_quantizer.py EmbeddingEMA.init_embed_: kmeans(data, num_tokens, 10, use_cosine_sim=True)
KMEANS_ITERS = 10


def l2norm(x: Tensor) -> Tensor:
    """Unit vectors along the last dimension (``F.normalize(p=2, eps=1e-12)``). Any shape."""
    return F.normalize(x, p=2, dim=-1)


def _dist_ready() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def all_reduce_sum(x: Tensor) -> Tensor:
    """Sum ``x`` over processes in place when ``torch.distributed`` is initialized; returns ``x``."""
    if _dist_ready():
        dist.all_reduce(x)
    return x


def broadcast_from_rank0(x: Tensor) -> Tensor:
    """Overwrite ``x`` in place with process 0's copy when ``torch.distributed`` is initialized; returns ``x``."""
    if _dist_ready():
        dist.broadcast(x, src=0)
    return x


def sample_rows(samples: Tensor, num: int) -> Tensor:
    """``num`` rows of ``samples`` (N, D), without replacement when N >= num (unilm ``sample_vectors``)."""
    n = samples.shape[0]
    if n >= num:
        idx = torch.randperm(n, device=samples.device)[:num]
    else:
        idx = torch.randint(0, n, (num, ), device=samples.device)
    return samples[idx]


def spherical_kmeans(samples: Tensor, num_clusters: int, num_iters: int = KMEANS_ITERS) -> tuple[Tensor, Tensor]:
    """k-means with cosine similarity on unit vectors (unilm ``kmeans(use_cosine_sim=True)``).

    Args:
        samples: (N, D) unit vectors; ``num_clusters``: K; ``num_iters``: assignment/update rounds.
    Returns:
        means (K, D) and the cluster sizes of the last assignment (K,) int64.
    """
    means = sample_rows(samples, num_clusters)
    bins = torch.zeros(num_clusters, dtype=torch.long, device=samples.device)
    for _ in range(num_iters):
        buckets = (samples @ means.t()).max(dim=-1).indices
        bins = count_ids(buckets, num_clusters).long()
        empty = bins == 0
        sums = samples.new_zeros(num_clusters, samples.shape[1]).index_add_(0, buckets, samples)
        new_means = l2norm(sums / bins.masked_fill(empty, 1)[:, None])
        means = torch.where(empty[:, None], means, new_means)
    return means, bins


def count_ids(ids: Tensor, num: int) -> Tensor:
    """Occurrences of each of ``num`` ids in ``ids``: float (num,); a static-shape ``bincount``."""
    ids = ids.flatten()
    return torch.zeros(num, device=ids.device).index_add_(0, ids, torch.ones(ids.shape, device=ids.device))


class Codebook(nn.Module):
    """The code vectors: buffers ``weight`` (K, D) and ``initted`` (1,), 1 once the codebook holds codes.

    Compiled code cannot branch on a tensor's value, so :meth:`ready` reads ``initted_host``, refreshed eagerly, on
    load, after k-means and by :meth:`refresh_host_state`.
    """

    def __init__(self, num_codes: int, code_dims: int, kmeans_init: bool) -> None:
        super().__init__()
        # norm_ema_quantizer.py EmbeddingEMA: zeros awaiting k-means, or random unit vectors without it
        weight = torch.zeros(num_codes, code_dims) if kmeans_init else l2norm(torch.randn(num_codes, code_dims))
        self.register_buffer('weight', weight)
        self.register_buffer('initted', torch.tensor([float(not kmeans_init)]))
        self.initted_host = not kmeans_init

    def ready(self) -> bool:
        if not torch.compiler.is_compiling():
            self.refresh_host_state()
        return self.initted_host

    def refresh_host_state(self) -> None:
        self.initted_host = bool(self.initted.item())

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self.refresh_host_state()

    def forward(self, ids: Tensor) -> Tensor:
        """Code vectors of int ids of any shape -> (*ids.shape, D)."""
        return F.embedding(ids, self.weight)


class NormEMAQuantizer(nn.Module):
    """l2-normalized nearest-code quantizer with an EMA codebook.

    Args:
        num_codes, code_dims: codebook size K and code dimension D.
        decay: EMA decay of the codebook and of ``cluster_size``.
        beta: weight of the commitment loss ``mse(sg(z_q), z)``.
        kmeans_init: start from spherical k-means on the first training batch (else random unit vectors).
        dead_code_ratio: re-seed, after each update, the codes whose ``cluster_size`` falls below this fraction of the
            mean with batch features (``vector-quantize-pytorch``'s ``threshold_ema_dead_code``); 0 turns it off.
    """

    def __init__(self,
                 num_codes: int,
                 code_dims: int,
                 decay: float = 0.99,
                 beta: float = 1.0,
                 kmeans_init: bool = True,
                 dead_code_ratio: float = 0.0) -> None:
        super().__init__()
        if not 0 <= dead_code_ratio < 1:
            raise ValueError(f'dead_code_ratio={dead_code_ratio} must be in [0, 1) (a fraction of the mean usage; '
                             '0 turns the re-seeding off)')
        self.num_codes = num_codes
        self.code_dims = code_dims
        self.decay = decay
        self.beta = beta
        self.dead_code_ratio = dead_code_ratio
        self.embedding = Codebook(num_codes, code_dims, kmeans_init)
        self.register_buffer('cluster_size', torch.zeros(num_codes))

    @torch.no_grad()
    def nearest(self, z: Tensor) -> Tensor:
        """Ids of the nearest codes to unit vectors ``z`` (N, D) -> (N,) int64, by unilm's
        ``|z|^2 + |e|^2 - 2 z.e``."""
        w = self.embedding.weight
        d = z.pow(2).sum(dim=1, keepdim=True) + w.pow(2).sum(dim=1) - 2 * torch.einsum('bd,nd->bn', z, w)
        return d.argmin(dim=1)

    @torch.no_grad()
    def init_codebook(self, z: Tensor) -> None:
        """Spherical k-means on ``z`` (N, D), broadcast from process 0; no-op once ``initted``."""
        if self.embedding.ready():
            return
        means, _ = spherical_kmeans(z, self.num_codes)
        self.embedding.weight.copy_(broadcast_from_rank0(means))
        self.embedding.initted.fill_(1.0)
        self.embedding.initted_host = True

    @torch.no_grad()
    def ema_update(self, z: Tensor, ids: Tensor) -> None:
        """One EMA codebook update from unit vectors ``z`` (N, D) and their ids (N,)."""
        bins = count_ids(ids, self.num_codes).to(z.dtype)
        all_reduce_sum(bins)
        self.cluster_size.mul_(self.decay).add_(bins, alpha=1 - self.decay)
        empty = bins == 0
        sums = z.new_zeros(self.num_codes, self.code_dims).index_add_(0, ids, z)
        all_reduce_sum(sums)
        target = l2norm(sums / bins.masked_fill(empty, 1.0)[:, None])
        target = torch.where(empty[:, None], self.embedding.weight, target)
        weight = self.embedding.weight
        weight.mul_(self.decay).add_(target, alpha=1 - self.decay)
        weight.copy_(l2norm(weight))
        if self.dead_code_ratio > 0:
            self.reseed_dead_codes(z)

    @torch.no_grad()
    def reseed_dead_codes(self, z: Tensor) -> Tensor:
        """Re-seed rarely used codes from rows of ``z`` (N, D); returns the re-seeded mask (K,)."""
        mean = self.cluster_size.mean()
        dead = self.cluster_size < self.dead_code_ratio * mean
        new = broadcast_from_rank0(sample_rows(z, self.num_codes).contiguous())
        self.embedding.weight.copy_(torch.where(dead[:, None], new, self.embedding.weight))
        self.cluster_size.copy_(torch.where(dead, mean, self.cluster_size))
        return dead

    def forward(self, z: Tensor, update: bool | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Quantize features, initializing and EMA-updating the codebook when ``update``.

        Args:
            z: (B, N, D) encoder features, l2-normalized here.
            update: whether to initialize and update the codebook (None: ``self.training``).
        Returns:
            ``z_q`` (B, N, D) with the straight-through gradient, the commitment loss (scalar), ``ids`` (B, N) int64.
        """
        update = self.training if update is None else update
        z = l2norm(z.float())
        flat = z.reshape(-1, self.code_dims)
        if update:
            self.init_codebook(flat.detach())
        elif not self.embedding.ready():
            raise RuntimeError('the VQ-KD codebook is uninitialized (all zeros): load a trained tokenizer '
                               '(init_cfg=dict(type="Pretrained", checkpoint=...)) or train it first')
        ids = self.nearest(flat.detach())
        z_q = self.embedding(ids).view_as(z)
        if update:
            self.ema_update(flat.detach(), ids)
        loss = self.beta * F.mse_loss(z_q.detach(), z)
        z_q = z + (z_q - z).detach()
        return z_q, loss, ids.view(z.shape[:-1])
