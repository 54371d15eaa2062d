"""BEiT v2's normalized EMA vector quantizer (unilm ``beit2/norm_ema_quantizer.py``, ``NormEMAVectorQuantizer``).

Features and codes live on the unit sphere: the encoder output is l2-normalized, each position takes the nearest code
(squared Euclidean distance = cosine for unit vectors), and the codebook is not trained by gradients but moved by an
exponential moving average (decay 0.99) towards the l2-normalized mean of the features assigned to each code. Before
the first training batch is quantized, the codebook is initialized by 10 iterations of spherical k-means on that batch.

Per-step statistics (assignment counts, feature sums) are all-reduced over the processes when ``torch.distributed``
is initialized, so every process applies the same update. unilm runs k-means on each process's own batch (codebooks
then differ between processes until the EMA pulls them together); here process 0's k-means result is broadcast.

Parameter names are unilm's: ``embedding.weight`` (K, D) and ``embedding.initted`` (1,) (a float flag), and
``cluster_size`` (K,) (the EMA of per-step assignment counts, a usage statistic). unilm's ``embedding.cluster_size``
and ``embedding.embed_avg`` are written but never read by its quantizer; they are left out here and dropped by
``beit_mm.converters.vqkd``.

Guardrail beyond unilm (off by default): ``dead_code_ratio > 0`` re-seeds, after every training update, the codes
whose ``cluster_size`` fell below ``dead_code_ratio`` times the mean ``cluster_size`` with randomly drawn normalized
encoder outputs of the current batch, and sets their ``cluster_size`` to the mean (the rule of
``vector-quantize-pytorch``'s ``threshold_ema_dead_code``, relative to the mean so it needs no batch-size tuning).
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
    """``num`` rows of ``samples`` (N, D): a random subset without replacement when N >= num, else drawn with
    replacement (norm_ema_quantizer.py ``sample_vectors``; same random calls, so the same draw under one seed)."""
    n = samples.shape[0]
    if n >= num:
        idx = torch.randperm(n, device=samples.device)[:num]
    else:
        idx = torch.randint(0, n, (num, ), device=samples.device)
    return samples[idx]


def spherical_kmeans(samples: Tensor, num_clusters: int, num_iters: int = KMEANS_ITERS) -> tuple[Tensor, Tensor]:
    """k-means with cosine similarity on unit vectors (norm_ema_quantizer.py ``kmeans(use_cosine_sim=True)``).

    Means start as :func:`sample_rows`; each iteration assigns every sample to the most similar mean, replaces every
    non-empty cluster's mean by the l2-normalized average of its samples and keeps empty clusters' means.

    Args:
        samples: (N, D) unit vectors.
        num_clusters: K.
        num_iters: assignment/update rounds.
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
    """How often each of ``num`` ids occurs in ``ids`` (any shape): float (num,). ``bincount(ids, minlength=num)``
    in a static shape (ids >= num raise), so ``torch.compile(fullgraph=True)`` traces it."""
    ids = ids.flatten()
    return torch.zeros(num, device=ids.device).index_add_(0, ids, torch.ones(ids.shape, device=ids.device))


class Codebook(nn.Module):
    """The code vectors (buffers, not trained by gradients): ``weight`` (K, D) unit rows and ``initted`` (1,) float,
    1 once the codebook holds codes (after k-means or from a checkpoint).

    :meth:`ready` says whether ``initted`` is set. Compiled code cannot read a tensor's value into a branch, so it
    reads ``initted_host``, the value last seen on the host: by an eager call, a state-dict load, the k-means init or
    :meth:`refresh_host_state` (which :func:`beit_mm.engine.compile.compile_model` calls before compiling); a compiled
    model is re-traced once when it changes."""

    def __init__(self, num_codes: int, code_dims: int, kmeans_init: bool) -> None:
        super().__init__()
        # norm_ema_quantizer.py EmbeddingEMA: zeros awaiting k-means, or random unit vectors without it
        weight = torch.zeros(num_codes, code_dims) if kmeans_init else l2norm(torch.randn(num_codes, code_dims))
        self.register_buffer('weight', weight)
        self.register_buffer('initted', torch.tensor([float(not kmeans_init)]))
        self.initted_host = not kmeans_init

    def ready(self) -> bool:
        """Whether the codebook holds codes (``initted``)."""
        if not torch.compiler.is_compiling():
            self.refresh_host_state()
        return self.initted_host

    def refresh_host_state(self) -> None:
        """Read ``initted`` into ``initted_host``."""
        self.initted_host = bool(self.initted.item())

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self.refresh_host_state()

    def forward(self, ids: Tensor) -> Tensor:
        """Code vectors of int ids of any shape -> (*ids.shape, D)."""
        return F.embedding(ids, self.weight)


class NormEMAQuantizer(nn.Module):
    """l2-normalized nearest-code quantizer with an EMA codebook (module docstring).

    Args:
        num_codes: codebook size K (8192 in BEiT v2).
        code_dims: code dimension D (32 in BEiT v2).
        decay: EMA decay of the codebook and of ``cluster_size``.
        beta: weight of the commitment loss ``mse(sg(z_q), z)``.
        kmeans_init: start from spherical k-means on the first training batch (else random unit vectors).
        dead_code_ratio: 0 (unilm) or the relative usage below which a code is re-seeded (module docstring).
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
        """Ids of the nearest codes to unit vectors ``z`` (N, D) -> (N,) int64.

        The distance is unilm's expanded form ``|z|^2 + |e|^2 - 2 z.e`` (not ``-z.e``), so ties and rounding pick the
        same codes as unilm and mmpretrain.
        """
        w = self.embedding.weight
        d = z.pow(2).sum(dim=1, keepdim=True) + w.pow(2).sum(dim=1) - 2 * torch.einsum('bd,nd->bn', z, w)
        return d.argmin(dim=1)

    @torch.no_grad()
    def init_codebook(self, z: Tensor) -> None:
        """Spherical k-means on unit vectors ``z`` (N, D) (process 0's result on every process); no-op once
        ``initted``."""
        if self.embedding.ready():
            return
        means, _ = spherical_kmeans(z, self.num_codes)
        self.embedding.weight.copy_(broadcast_from_rank0(means))
        self.embedding.initted.fill_(1.0)
        self.embedding.initted_host = True

    @torch.no_grad()
    def ema_update(self, z: Tensor, ids: Tensor) -> None:
        """One codebook update from unit vectors ``z`` (N, D) and their ids (N,) (norm_ema_quantizer.py, training
        branch of ``NormEMAVectorQuantizer.forward``)."""
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
        """Replace codes used less than ``dead_code_ratio`` x the mean ``cluster_size`` by rows of ``z`` (N, D);
        returns the bool mask (K,) of re-seeded codes (the same on every process)."""
        mean = self.cluster_size.mean()
        dead = self.cluster_size < self.dead_code_ratio * mean
        # static shapes: a row of z drawn for every code (distinct rows where z has enough), kept where dead
        new = broadcast_from_rank0(sample_rows(z, self.num_codes).contiguous())
        self.embedding.weight.copy_(torch.where(dead[:, None], new, self.embedding.weight))
        self.cluster_size.copy_(torch.where(dead, mean, self.cluster_size))
        return dead

    def forward(self, z: Tensor, update: bool | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Quantize features.

        With ``update`` (default: in training mode) the codebook is k-means initialized on the first call and
        EMA-updated after the codes are looked up (the returned codes are the pre-update ones, as in unilm).

        Args:
            z: (B, N, D) encoder features (any norm; they are l2-normalized here).
            update: whether to initialize and update the codebook (None: ``self.training``).
        Returns:
            ``z_q`` (B, N, D): the codes with the straight-through gradient ``z + sg(z_q - z)`` of the normalized
            features; ``loss``: ``beta * mse(sg(z_q), z)``, a scalar; ``ids`` (B, N) int64.
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
