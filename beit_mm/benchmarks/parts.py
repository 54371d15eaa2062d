"""The benchmark parts: beit_mm's model and its peers, each built from its repository's own config with random
weights and no pretrained-weight paths.

- ``mim``, ``mim-tokamp``: the BEiT-B/16 MIM step with the DALL-E tokenizer vs mmpretrain 1.2.0's; ``-tokamp`` runs
  beit_mm's tokenizer under the step's autocast dtype, as mmpretrain does;
- ``mim2``: the BEiT v2 MIM step (VQ-KD tokenizer, cls-token pretraining) vs mmpretrain's; both codebooks get the
  same random unit codes, and mmpretrain's ``VQKD`` stands in where ``beit_mm.VQKD`` is not registered;
- ``finetune``: the BEiT-B/16 ImageNet fine-tuning step vs mmpretrain's and timm's;
- ``seg<SIZE>``, ``slide<SIZE>``: the BEiT-B UPerNet train step and slide inference vs mmseg 1.2.2's;
- ``heads<SIZE>``, ``headsinf<SIZE>`` (also ``-demo``, ``-study``): beit_mm's segmentors on one BEiT, train step or
  whole-image inference, each against UPerNet; ``eomt<SIZE>``: EoMT's train step alone;
- ``backbone``: the backbone-only step (BEiT-B vs mmseg's BEiT, or CvT-13 vs HF ``CvtModel``).

Peers that build the same architecture share beit_mm's FLOP count.
"""
from __future__ import annotations

import importlib
import importlib.util
import os.path as osp
import re
from collections.abc import Callable

import torch
from torch import nn

from beit_mm.benchmarks.measure import Part


def peer_config(package: str, rel_path: str) -> str:
    """A config shipped inside an installed OpenMMLab package (``<package>/.mim/configs/...``)."""
    path = osp.join(osp.dirname(importlib.import_module(package).__file__), '.mim', 'configs', rel_path)
    if not osp.isfile(path):
        raise FileNotFoundError(f'{path} is missing: install {package} from PyPI (its wheel ships .mim/configs)')
    return path


def build_model(path: str, overrides: Callable[[dict], None] | None = None) -> nn.Module:
    """``path``'s model with random init and SyncBN as BN, ``overrides`` applied to its model dict first."""
    from mmengine.config import Config

    from beit_mm.apis import build_from_config
    cfg = Config.fromfile(path)
    if overrides is not None:
        model_cfg = cfg.model.to_dict()
        overrides(model_cfg)
        cfg.model = model_cfg
    return build_from_config(cfg)


def mim_part(root: str, amp_dtype: torch.dtype | None, tokenizer_like_peer: bool = False) -> Part:
    """(a); with ``tokenizer_like_peer`` (``mim-tokamp``) beit_mm's DALL-E encoder runs under the step's autocast
    dtype (``DALLEEncoder(autocast_dtype=...)``) as mmpretrain's does, where the recipe keeps unilm's fp32 targets."""
    import numpy as np
    from mmpretrain.structures import DataSample

    from beit_mm.data.transforms.masking import BlockwiseMaskGenerator
    from beit_mm.models.tokenizers import map_pixels

    def make_inputs(batch: int, device: torch.device) -> dict:
        g = torch.Generator().manual_seed(0)
        masks = BlockwiseMaskGenerator(14, 75)
        rng = np.random.default_rng(0)
        mask = torch.from_numpy(np.stack([masks(rng) for _ in range(batch)])).to(device)
        images = torch.randn(batch, 3, 224, 224, generator=g).to(device)
        raw = (torch.rand(batch, 3, 112, 112, generator=g) * 255).to(device)
        return dict(images=images, target_images=raw, peer_target_images=map_pixels(raw / 255),
                    mask=mask, samples=[DataSample().set_mask(m) for m in mask])

    def step(model, ours, x):
        if ours:
            return model.loss(dict(images=x['images'], target_images=x['target_images'], mask=x['mask']))['loss']
        return model.loss([x['images'], x['peer_target_images']], x['samples'])['loss']

    ours_cfg = osp.join(root, 'configs/beit/beit_beit-base-p16_8xb256-amp-coslr-300e_in1k.py')
    peer_cfg = peer_config('mmpretrain', 'beit/beit_beit-base-p16_8xb256-amp-coslr-300e_in1k.py')
    amp = {torch.bfloat16: 'bfloat16', torch.float16: 'float16'}.get(amp_dtype)
    if tokenizer_like_peer and amp is None:
        raise SystemExit('--parts mim-tokamp compares the tokenizer under autocast: add --amp (on a device with an '
                         'AMP dtype)')

    def tokenizer_amp(m: dict) -> None:
        m['target_generator']['autocast_dtype'] = amp

    title = '(a) MIM step, BEiT-B 224 + DALL-E tokenizer'
    if tokenizer_like_peer:
        title = f"(a') MIM step, BEiT-B 224 + DALL-E tokenizer in {amp} on both sides"
    return Part(title,
                {'beit_mm': lambda: build_model(ours_cfg, tokenizer_amp if tokenizer_like_peer else None),
                 'mmpretrain': lambda: build_model(peer_cfg)}, make_inputs, step)


class PeerVQKDTargets(nn.Module):
    """mmpretrain's ``VQKD``, frozen, behind beit_mm's target-generator interface: ``get_targets(inputs)`` gives the
    ids of the 0..255 tokenizer view, fed as ``(x - 127.5) / 127.5`` as mmpretrain does."""

    def __init__(self, vqkd: nn.Module) -> None:
        super().__init__()
        self.vqkd = vqkd.requires_grad_(False).eval()
        self.vocab_size = vqkd.quantize.num_tokens

    def train(self, mode: bool = True) -> 'PeerVQKDTargets':
        return super().train(False)

    @torch.no_grad()
    def get_targets(self, inputs: dict) -> torch.Tensor:
        return self.vqkd((inputs['target_images'] - 127.5) / 127.5)


def mim2_part(root: str, amp_dtype: torch.dtype | None) -> Part:
    import numpy as np
    from mmpretrain.structures import DataSample

    from beit_mm.data.transforms.masking import BlockwiseMaskGenerator
    from beit_mm.registry import MODELS as BEIT_MM_MODELS

    def make_inputs(batch: int, device: torch.device) -> dict:
        g = torch.Generator().manual_seed(0)
        masks = BlockwiseMaskGenerator(14, 75)
        rng = np.random.default_rng(0)
        mask = torch.from_numpy(np.stack([masks(rng) for _ in range(batch)])).to(device)
        raw = torch.randint(0, 256, (batch, 3, 224, 224), generator=g).float().to(device)
        return dict(images=torch.randn(batch, 3, 224, 224, generator=g).to(device), target_images=raw,
                    peer_target_images=(raw - 127.5) / 127.5, mask=mask,
                    samples=[DataSample().set_mask(m) for m in mask])

    def step(model, ours, x):
        if ours:
            losses = model.loss(dict(images=x['images'], target_images=x['target_images'], mask=x['mask']))
            return losses['loss'] + losses['loss_cls_pt']
        losses = model.loss([x['images'], x['peer_target_images']], x['samples'])
        return losses['loss_1'] + losses['loss_2']

    ours_cfg = osp.join(root, 'configs/beit2/beitv2_beit-base-p16_8xb256-amp-coslr-300e_in1k.py')
    peer_cfg = peer_config('mmpretrain', 'beitv2/beitv2_beit-base-p16_8xb256-amp-coslr-300e_in1k.py')
    has_vqkd = BEIT_MM_MODELS.get('VQKD') is not None

    def random_codebook(embedding: nn.Module) -> None:
        # Both tokenizers start with an all-zero codebook (k-means init on the first training batch); a frozen
        # tokenizer needs trained codes (beit_mm's refuses zeros), so both get the same random unit codes.
        g = torch.Generator().manual_seed(0)
        embedding.weight.copy_(nn.functional.normalize(torch.randn(embedding.weight.shape, generator=g), dim=-1))
        embedding.initted.fill_(1)

    def build_peer() -> nn.Module:
        model = build_model(peer_cfg)
        with torch.no_grad():
            random_codebook(model.target_generator.quantize.embedding)
        return model

    def fp32_tokenizer(m: dict) -> None:  # without --amp the row is fp32 on both sides, the tokenizer included
        m['target_generator']['autocast_dtype'] = None

    def build_ours() -> nn.Module:
        if has_vqkd:
            model = build_model(ours_cfg, None if amp_dtype is not None else fp32_tokenizer)
            with torch.no_grad():
                random_codebook(model.target_generator.quantize.embedding)
            return model

        def stand_in(m: dict) -> None:  # replaced below; only lets BEiTPretrain check the 8192-id vocabulary
            m['target_generator'] = dict(type='beit_mm.DALLEEncoder', group_count=5, n_hid=8, n_blk_per_group=1,
                                         vocab_size=m['head']['vocab_size'], channels_last=False)

        model = build_model(ours_cfg, stand_in)
        model.target_generator = PeerVQKDTargets(build_peer().target_generator)
        return model

    tokenizer = 'beit_mm.VQKD' if has_vqkd else "mmpretrain's VQKD in both"
    return Part(f'(e) BEiT v2 MIM step, BEiT-B 224 + VQ-KD-size tokenizer ({tokenizer})',
                {'beit_mm': build_ours, 'mmpretrain': build_peer}, make_inputs, step)


TIMM_MISSING = ('timm is not installed (tools/setup_env.sh pins timm 1.0.31; on a GPU machine carry its wheel and '
                "safetensors': docs/performance.md)")


class TimmClassifier(nn.Module):
    """timm's ``beit_base_patch16_224`` (drop path 0.1) with mmpretrain's ``loss`` interface: cross-entropy with
    label smoothing 0.1; the model is ``backbone``, for the per-part split."""

    def __init__(self) -> None:
        super().__init__()
        import timm
        self.backbone = timm.create_model('beit_base_patch16_224', pretrained=False, drop_path_rate=0.1)

    def loss(self, images: torch.Tensor, samples: list, labels: torch.Tensor) -> dict:
        return dict(loss=nn.functional.cross_entropy(self.backbone(images), labels, label_smoothing=0.1))


def finetune_part(root: str) -> Part:
    from mmpretrain.structures import DataSample

    def make_inputs(batch: int, device: torch.device) -> dict:
        g = torch.Generator().manual_seed(0)
        labels = torch.randint(0, 1000, (batch, ), generator=g)
        return dict(images=torch.randn(batch, 3, 224, 224, generator=g).to(device), labels=labels.to(device),
                    samples=[DataSample().set_gt_label(int(l)).to(device) for l in labels])

    def step(model, ours, x):
        if isinstance(model, TimmClassifier):
            return model.loss(x['images'], x['samples'], x['labels'])['loss']
        return model.loss(x['images'], x['samples'])['loss']

    ours_cfg = osp.join(root, 'configs/beit/beit-base-p16_beit-pre_8xb128-coslr-100e_in1k.py')
    peer_cfg = peer_config('mmpretrain', 'beit/benchmarks/beit-base-p16_8xb128-coslr-100e_in1k.py')

    def no_batch_augments(m: dict) -> None:
        m.pop('train_cfg', None)  # Mixup/CutMix run in the data preprocessor, which the benchmark bypasses

    builders = {'beit_mm': lambda: build_model(ours_cfg, no_batch_augments)}
    skipped = {}
    if importlib.util.find_spec('timm') is None:
        skipped['timm'] = TIMM_MISSING
    else:
        builders['timm'] = TimmClassifier
    builders['mmpretrain'] = lambda: build_model(peer_cfg, no_batch_augments)
    return Part('(b) ImageNet fine-tuning step, BEiT-B 224', builders, make_inputs, step, skipped=skipped)


def seg_builders(root: str, size: int) -> dict[str, Callable[[], nn.Module]]:
    ours_cfg = osp.join(root, 'configs/beit/beit-base_upernet_8xb2-160k_ade20k-640x640.py')
    peer_cfg = peer_config('mmseg', 'beit/beit-base_upernet_8xb2-160k_ade20k-640x640.py')

    def at_size(m: dict) -> None:
        m['backbone']['img_size'] = size
        m['data_preprocessor']['size'] = (size, size)
        m['test_cfg'] = dict(mode='slide', crop_size=(size, size), stride=(size * 2 // 3, ) * 2)  # 640 -> 426

    return {'beit_mm': lambda: build_model(ours_cfg, at_size),
            'mmseg': lambda: build_model(peer_cfg, at_size)}


def seg_part(root: str, size: int) -> Part:
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample

    def make_inputs(batch: int, device: torch.device) -> dict:
        g = torch.Generator().manual_seed(0)
        samples = []
        for _ in range(batch):
            s = SegDataSample(metainfo=dict(img_shape=(size, size), pad_shape=(size, size), ori_shape=(size, size)))
            s.gt_sem_seg = PixelData(data=torch.randint(0, 150, (1, size, size), generator=g).to(device))
            samples.append(s)
        return dict(images=torch.randn(batch, 3, size, size, generator=g).to(device), samples=samples)

    def step(model, ours, x):
        losses = model.loss(x['images'], x['samples'])
        return sum(v for k, v in losses.items() if 'loss' in k)

    return Part(f'(c) segmentation train step, BEiT-B UPerNet {size}', seg_builders(root, size), make_inputs, step,
                bn_eval=True, flops_shape=(size, size))


def slide_part(root: str, size: int) -> Part:
    width = size * 3 // 2  # two windows across at stride 2/3 of the window, as an ADE20K 640 x 853-960 image
    def make_inputs(batch: int, device: torch.device) -> dict:
        g = torch.Generator().manual_seed(0)
        metas = [dict(img_shape=(size, width), pad_shape=(size, width), ori_shape=(size, width))] * batch
        return dict(images=torch.randn(batch, 3, size, width, generator=g).to(device), metas=metas)

    def step(model, ours, x):
        return model.inference(x['images'], x['metas'])

    stride = size * 2 // 3
    windows = -(-(width - size) // stride) + 1  # mmseg slide_inference: ceil((W - crop) / stride) + 1 across, 1 down
    return Part(f'(d) slide inference {size} (stride {stride}), {size}x{width} image', seg_builders(root, size),
                make_inputs, step, train=False, flops_shape=(size, size), windows=windows)


def heads_configs(root: str, size: str) -> tuple[dict[str, str], int]:
    """``({row: config}, crop)`` of ``heads<SIZE>`` (BEiT-B configs, built at SIZE) or ``heads-demo`` /
    ``heads-study``; UPerNet last, the reference of the other rows' ratios."""
    import glob

    def one(pattern: str) -> str:
        found = sorted(glob.glob(osp.join(root, 'configs', pattern)))
        if not found:
            raise SystemExit(f'no configs/{pattern} config; use heads-demo')
        return found[0]

    if size == '-demo':
        demo = osp.join(root, 'configs', 'demo')
        return {'EoMT': osp.join(demo, 'eomt_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py'),
                'ViT-Adapter + Mask2Former': osp.join(demo,
                                                      'mask2former_beit-adapter-tiny_1xb8-1k_ade20k-demo-64x64.py'),
                'Mask2Former': osp.join(demo, 'mask2former_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py'),
                'ViT-Adapter + UPerNet': osp.join(demo, 'beit-adapter-tiny_upernet_1xb8-1k_ade20k-demo-64x64.py'),
                'UPerNet': osp.join(demo, 'beit-tiny-p8_upernet_1xb8-1k_ade20k-demo-64x64.py')}, 64
    if size == '-study':
        return {head: osp.join(root, f'configs/studies/beit-tiny-p8_beit-pre_{key}_1xb8-1.2k_shapes-64x64.py')
                for head, key in (('EoMT', 'eomt'), ('Mask2Former', 'mask2former'), ('UPerNet', 'upernet'))}, 64
    return {'EoMT': one('eomt/eomt_beit-base_*512x512.py'),
            'ViT-Adapter + Mask2Former': one('vit_adapter/mask2former_beit-adapter-base_*.py'),
            'Mask2Former': one('mask2former/mask2former_beit-base_*.py'),
            'ViT-Adapter + UPerNet': one('vit_adapter/beit-adapter-base_upernet_*.py'),
            'UPerNet': one('beit/beit-base_upernet_8xb2-160k_ade20k-512x512.py')}, int(size)


def heads_part(root: str, size: str, train: bool, only: tuple[str, ...] | None = None) -> Part:
    """The segmentors of :func:`heads_configs` on the same BEiT: train step (EoMT masks on) or whole-image inference
    (EoMT annealed; with the FLOPs and parameters of each model)."""
    configs, crop = heads_configs(root, size)

    def at_size(m: dict) -> None:
        m['backbone']['img_size'] = crop
        m['data_preprocessor']['size'] = (crop, crop)
        m['test_cfg'] = dict(mode='whole')

    def builder(path: str) -> Callable[[], nn.Module]:
        def build() -> nn.Module:
            model = build_model(path, at_size)
            if hasattr(model, 'set_annealing_step'):  # EoMT: mask probabilities 1 (masks on) / 0 (annealed)
                model.set_annealing_step(0 if train else 10**9)
            return model
        return build

    from mmengine.config import Config
    seg = seg_part(root, crop)
    metas = [dict(img_shape=(crop, crop), pad_shape=(crop, crop), ori_shape=(crop, crop))]
    num_classes = Config.fromfile(configs['UPerNet']).model.decode_head.num_classes

    def make_inputs(batch: int, device: torch.device) -> dict:
        """Label maps as scenes have them, 8 classes per image on a 4 x 4 grid of regions: the matching losses'
        cost grows with the classes present."""
        from mmengine.structures import PixelData
        x = seg.make_inputs(batch, device)
        g = torch.Generator().manual_seed(1)
        for sample in x['samples']:
            classes = torch.randperm(num_classes, generator=g)[:8]
            cells = classes[torch.randint(0, len(classes), (1, 1, 4, 4), generator=g)].float()
            labels = torch.nn.functional.interpolate(cells, size=(crop, crop), mode='nearest')[0].long()
            sample.gt_sem_seg = PixelData(data=labels.to(device))
        return x

    def step(model, ours, x):
        if train:
            return seg.step(model, ours, x)
        return model.inference(x['images'], metas * x['images'].shape[0])

    what = 'train step (EoMT masks on)' if train else 'whole-image inference (EoMT annealed)'
    name = {'-demo': 'tiny BEiT demo', '-study': "MIM study's tiny BEiT"}.get(size, 'BEiT-B')
    models = 'segmentors / UPerNet' if only is None else ', '.join(only)
    return Part(f'(h) {models}, {what}, {name} {crop}',
                {row: builder(path) for row, path in configs.items() if only is None or row in only}, make_inputs, step,
                train=train, bn_eval=True, flops_shape=(crop, crop), flops_each=True)


def backbone_part(model: str, img_size: int) -> Part:
    if model == 'beit':
        from mmseg.models.backbones import BEiT as MMSegBEiT

        from beit_mm.models.backbones import BEiT
        builders = {
            'beit_mm': lambda: BEiT(arch='base', img_size=img_size, drop_path_rate=0.1, out_indices=(3, 5, 7, 11)),
            'mmseg': lambda: MMSegBEiT(img_size=img_size, embed_dims=768, num_layers=12, num_heads=12, mlp_ratio=4,
                                       qv_bias=True, drop_path_rate=0.1, init_values=0.1, out_indices=(3, 5, 7, 11),
                                       norm_cfg=dict(type='LN', eps=1e-6))}
        title = f'backbone train step, BEiT-B {img_size}'
    else:
        from transformers import CvtConfig, CvtModel

        from beit_mm.models.backbones import CvT

        class HFCvt(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.backbone = CvtModel(CvtConfig(drop_path_rate=[0.0, 0.0, 0.1]), add_pooling_layer=False)

            def forward(self, x):
                out = self.backbone(x, output_hidden_states=True)
                return tuple(out.hidden_states) + (out.cls_token_value, )

        builders = {'beit_mm': lambda: CvT(arch='cvt-13', act='gelu', out_indices=(0, 1, 2)), 'HF': HFCvt}
        title = f'backbone train step, CvT-13 {img_size}'

    class Wrapped(nn.Module):  # gives both peers a `backbone` attribute for the split
        def __init__(self, backbone: nn.Module) -> None:
            super().__init__()
            self.backbone = backbone

        def forward(self, x):
            return self.backbone(x)

    def make_inputs(batch: int, device: torch.device) -> dict:
        return dict(images=torch.randn(batch, 3, img_size, img_size, generator=torch.Generator().manual_seed(0)
                                       ).to(device))

    def step(model, ours, x):
        return sum(o.float().square().mean() for o in model(x['images']) if torch.is_tensor(o))

    return Part(title, {k: (lambda b=b: Wrapped(b())) for k, b in builders.items()}, make_inputs, step,
                flops_shape=None)


# Images per GPU of each part on CUDA: the recipes' per-GPU batch where it fills a GPU, else 8-16.
RECIPE_BATCH = {
    'mim': 256, 'mim-tokamp': 256, 'mim2': 256,  # configs/beit/beit_*_8xb256-*, configs/beit2/beitv2_*_8xb256-*
    'finetune': 128,  # configs/beit/beit-base-p16_beit-pre_8xb128-*
    'seg512': 16, 'seg640': 8, 'slide640': 8,  # the recipes' 8xb2 leaves an H100 mostly idle; 8-16 fill it
    'eomt512': 16,  # configs/eomt/*_4xb4-*: 4 per GPU in the recipe; 16 as the segmentation rows
    'backbone': 128,
}


def default_batch(name: str, device_type: str) -> int:
    """Images per step of part ``name``: :data:`RECIPE_BATCH` on CUDA (8 for other segmentation sizes and the heads
    parts), 2 on CPU (1 for segmentation), small enough for a 2-core machine."""
    seg = name.startswith(('seg', 'slide', 'heads', 'eomt'))
    if device_type != 'cuda':
        return 1 if seg else 2
    return RECIPE_BATCH.get(name, 8 if seg else 128)


def make_part(name: str, root: str, amp_dtype: torch.dtype | None, model: str = 'beit', img_size: int = 224) -> Part:
    """The part called ``name`` with configs under ``root/configs`` and the step's autocast dtype ``amp_dtype``
    (None: fp32)."""
    heads = re.fullmatch(r'heads(inf)?(\d+|-demo|-study)', name)
    if heads and (heads[2] in ('-demo', '-study') or int(heads[2]) % 16 == 0):
        return heads_part(root, heads[2], train=heads[1] is None)
    eomt = re.fullmatch(r'eomt(\d+|-demo)', name)
    if eomt and (eomt[1] == '-demo' or int(eomt[1]) % 16 == 0):
        return heads_part(root, eomt[1], train=True, only=('EoMT', ))
    match = re.fullmatch(r'(seg|slide)(\d+)', name)
    if match and int(match[2]) % 16 == 0:
        return (seg_part if match[1] == 'seg' else slide_part)(root, int(match[2]))
    if name == 'mim':
        return mim_part(root, amp_dtype)
    if name == 'mim-tokamp':
        return mim_part(root, amp_dtype, tokenizer_like_peer=True)
    if name == 'mim2':
        return mim2_part(root, amp_dtype)
    if name == 'finetune':
        return finetune_part(root)
    if name == 'backbone':
        return backbone_part(model, img_size)
    raise SystemExit(f'unknown part {name!r}: use mim, mim-tokamp, mim2, finetune, seg<SIZE>, slide<SIZE>, '
                     'eomt<SIZE>, heads<SIZE>, headsinf<SIZE> (SIZE divisible by 16), eomt-demo, heads-demo, '
                     'headsinf-demo, heads-study, headsinf-study or backbone')
