"""Reference side of test_eomt_hf.py's instance parity: a tiny random HF ``EomtForUniversalSegmentation``
(transformers 4.57.6), its logits and the official EoMT instance post-processing; imports nothing of beit_mm.

    python eomt_hf_instance_reference.py OUT

Writes OUT/hf (``save_pretrained``) and OUT/ref.pt: ``x`` (B, 3, 64, 64), ``img_shapes``, ``ori_shapes``, ``top_k``,
``class_logits`` (B, Q, C + 1), ``mask_logits`` (B, Q, 16, 16) with ``attn_mask_probs`` all 0, and per image
``masks`` (K, H, W) bool, ``labels`` (K,), ``scores`` (K,). Not transformers' post-processing
(``image_processing_eomt.py:907-970``: one instance per query); the official rule, tue-mps/eomt @ 7bd19dd:

- ``training/mask_classification_instance.py:103-106``, ``training/lightning_module.py:731-745`` and ``699-705``:
  mask logits resized to the padded side, cropped to the resized image, resized to the original size;
- ``mask_classification_instance.py:110-130``: the ``top_k`` largest query x class pairs without "no object";
  label = pair mod C, query = pair div C; mask = logit > 0; score = class probability x mean sigmoid in the mask."""
import os
import sys

import torch
import torch.nn.functional as F
import transformers

from eomt_hf_reference import CONFIG  # the same tiny network as the semantic parity (tests/support/)

NUM_CLASSES = 8  # all things, as an instance checkpoint
TOP_K = 20  # of 10 queries x 8 classes: the ranking is exercised
IMG_SHAPES = [(48, 64), (64, 48)]  # resized images inside the 64 x 64 input, padded at the bottom / right
ORI_SHAPES = [(96, 128), (80, 60)]


def official_instances(mask_logits: torch.Tensor, class_logits: torch.Tensor, side: int, img_shape, ori_shape,
                       top_k: int) -> dict:
    """One image: ``mask_logits`` (Q, h, w), ``class_logits`` (Q, C + 1) -> masks, labels, scores."""
    full = F.interpolate(mask_logits[None], (side, side), mode='bilinear')
    full = full[:, :, :img_shape[0], :img_shape[1]]
    full = F.interpolate(full, ori_shape, mode='bilinear')[0]
    probs = class_logits.softmax(-1)
    probs = probs[:, :probs.shape[1] - 1]
    num_classes = probs.shape[1]
    pair_scores, pairs = probs.reshape(-1).topk(top_k, sorted=False)
    query = torch.div(pairs, num_classes, rounding_mode='floor')
    labels = pairs - query * num_classes
    chosen = full.index_select(0, query)
    masks = chosen > 0
    inside = masks.reshape(len(query), -1).float()
    mean_sigmoid = (chosen.sigmoid().reshape(len(query), -1) * inside).sum(1) / (inside.sum(1) + 1e-6)
    return dict(masks=masks, labels=labels, scores=pair_scores * mean_sigmoid)


def main(out_dir: str) -> None:
    torch.manual_seed(0)
    model = transformers.EomtForUniversalSegmentation(transformers.EomtConfig(**dict(CONFIG, num_labels=NUM_CLASSES)))
    with torch.no_grad():  # layer scales, biases (the key bias included) and registers matter
        for name, p in model.named_parameters():
            if 'lambda1' in name or name.endswith('bias') or 'register_tokens' in name:
                p.copy_(torch.randn_like(p) * 0.5)
        model.class_predictor.bias.mul_(4)  # spread the class probabilities: a clear top-k
        # mask logits of either sign: the last features (a LayerNorm2d) and the query embeddings without a shift
        model.upscale_block.block[-1].layernorm2d.bias.zero_()
        model.mask_head.fc3.bias.zero_()
    model.attn_mask_probs.fill_(0.0)
    model.save_pretrained(os.path.join(out_dir, 'hf'))
    model.eval()
    side = CONFIG['image_size']
    x = torch.randn(2, 3, side, side)
    for i, (h, w) in enumerate(IMG_SHAPES):  # the padding the data preprocessor adds (zeros after normalisation)
        x[i, :, h:] = 0
        x[i, :, :, w:] = 0
    with torch.no_grad():
        out = model(pixel_values=x)
    class_logits, mask_logits = out.class_queries_logits, out.masks_queries_logits
    instances = [official_instances(mask_logits[i], class_logits[i], side, IMG_SHAPES[i], ORI_SHAPES[i], TOP_K)
                 for i in range(len(x))]
    torch.save(dict(x=x, img_shapes=IMG_SHAPES, ori_shapes=ORI_SHAPES, top_k=TOP_K, class_logits=class_logits,
                    mask_logits=mask_logits, instances=instances, version=transformers.__version__),
               os.path.join(out_dir, 'ref.pt'))


if __name__ == '__main__':
    main(sys.argv[1])
