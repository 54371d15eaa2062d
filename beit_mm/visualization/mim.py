"""What masked image modeling sees and predicts, decoded to pixels through the decoder of the dVAE whose encoder is
the MIM model's tokenizer.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn



def masked_token_logits(model: nn.Module, images: Tensor, mask: Tensor) -> Tensor:
    """Vocabulary logits of a MIM model at every patch, with ``mask`` applied to the input.

    Args:
        model: ``beit_mm.BEiTPretrain`` with a token head.
        images: (B, 3, H, W) normalized backbone view.
        mask: (B, h, w) bool, True = masked.
    Returns:
        (B, h*w, vocab_size).
    """
    return model.head(model.extract_feat(images, mask))


@dataclass
class MIMPictures:
    """One MIM visualization.

    Attributes:
        target_ids: the tokenizer's tokens of its view, (B, h*w): the MIM targets.
        predicted_ids: the model's argmax at masked patches, the target elsewhere, (B, h*w).
        reconstruction: ``target_ids`` decoded, (B, 3, H', W') in [0, 1]: the best any MIM model can do.
        prediction: ``predicted_ids`` decoded, (B, 3, H', W') in [0, 1].
        mask: (B, h, w) bool, True = masked.
        accuracy: fraction of masked patches predicted right (the logged ``mim_acc``).
    """
    target_ids: Tensor
    predicted_ids: Tensor
    reconstruction: Tensor
    prediction: Tensor
    mask: Tensor
    accuracy: float


def decode_ids(dvae: nn.Module, ids: Tensor, grid: tuple[int, int]) -> Tensor:
    """Token ids (B, h*w) -> images (B, 3, 8h, 8w) in [0, 1] through ``beit_mm.DVAE.decode`` (one-hot codes)."""
    one_hot = F.one_hot(ids.view(ids.shape[0], *grid), dvae.vocab_size).permute(0, 3, 1, 2).float()
    return dvae.decode(one_hot)


@torch.no_grad()
def mim_pictures(model: nn.Module, dvae: nn.Module, images: Tensor, target_images: Tensor,
                 mask: Tensor) -> MIMPictures:
    """Compute :class:`MIMPictures` for one batch (in eval mode, without gradients; the modes are restored).

    Args:
        model: the MIM model (``model.target_generator`` is the tokenizer).
        dvae: ``beit_mm.DVAE`` whose encoder is that tokenizer (its decoder is used).
        images: (B, 3, H, W) normalized backbone view.
        target_images: (B, 3, H', W') tokenizer view, float RGB 0..255.
        mask: (B, h, w) bool, True = masked.
    """
    vocab = model.head.vocab_size
    if dvae.vocab_size != vocab:
        raise ValueError(f'the dVAE has {dvae.vocab_size} codes but the MIM head predicts {vocab}; pass the dVAE '
                         'whose encoder is the MIM tokenizer')
    modes = model.training, dvae.training
    model.eval()
    dvae.eval()
    try:
        grid = tuple(mask.shape[1:])
        target_ids = model.target_generator.get_targets(dict(target_images=target_images))  # (B, h*w)
        logits = masked_token_logits(model, images, mask)
        flat_mask = mask.flatten(1)
        predicted_ids = torch.where(flat_mask, logits.argmax(-1), target_ids)
        accuracy = (predicted_ids[flat_mask] == target_ids[flat_mask]).float().mean().item()
        return MIMPictures(target_ids=target_ids, predicted_ids=predicted_ids,
                           reconstruction=decode_ids(dvae, target_ids, grid),
                           prediction=decode_ids(dvae, predicted_ids, grid), mask=mask, accuracy=accuracy)
    finally:
        model.train(modes[0])
        dvae.train(modes[1])
