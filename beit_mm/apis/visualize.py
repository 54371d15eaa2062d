"""Pictures of what a beit_mm model sees, as PNG files; the keywords are the visualization entry point's flags.

- :func:`draw_attention`: per-head attention of one query patch at one block, plus attention rollout;
- :func:`draw_tokens`: a dVAE's token ids as a colour map next to the image, and the tokens decoded;
- :func:`draw_token_maps`: token maps of labeled images side by side, with how much a token id tells about the
  patch's class, colour and position;
- :func:`draw_mim`: image, mask, tokenizer reconstruction and model prediction, decoded through the dVAE.

Images are resized to ``size`` and normalized as the config does, without random augmentation; ``block`` indexes the
attention modules in forward order and ``query`` is a (row, col) on that block's query grid. ``out`` is checked before
any model is built and written atomically; each function draws with torch's CPU generator seeded 0 and restores it.
"""
from __future__ import annotations

import numpy as np
import torch
from mmengine.config import Config
from PIL import Image

from ..fileio.inputs import open_image
from ..models.tokenizers.dalle import map_pixels
from ..visualization.attention import record_attention
from ..visualization.figures import (attention_figure, mim_figure, save_png, to_uint8, token_map_figure,
                                     token_maps_figure)
from ..visualization.mim import decode_ids, mim_pictures
from ..models.builder import load_model, resolve_checkpoint

DEFAULT_SIZE = 224


class VisualizationError(ValueError):
    """A picture that cannot be drawn from these arguments (the message names the problem and the fix)."""


def default_size(cfg: Config, size=None) -> tuple[int, int]:
    """``size`` ((S,) or (H, W)) if given, else the config's ``data_preprocessor.size``, its ``img_size``, or 224."""
    if size:
        return (size[0], size[-1])
    pre_size = cfg.model.get('data_preprocessor', {}).get('size')
    if pre_size is not None:
        return tuple(pre_size)
    img_size = cfg.get('img_size')
    if isinstance(img_size, int):
        return (img_size, img_size)
    return (DEFAULT_SIZE, DEFAULT_SIZE)


def read_image(path: str, size: tuple[int, int], resample=Image.BICUBIC) -> np.ndarray:
    """RGB uint8 (H, W, 3) resized to ``size`` (H, W)."""
    return np.asarray(open_image(path).convert('RGB').resize((size[1], size[0]), resample))


def normalize(image: np.ndarray, cfg: Config) -> torch.Tensor:
    """(H, W, 3) uint8 RGB -> (1, 3, H, W) with the config's data_preprocessor mean/std (RGB order)."""
    pre = cfg.model.get('data_preprocessor', {})
    mean = torch.tensor(pre.get('mean', [123.675, 116.28, 103.53]), dtype=torch.float32).view(1, 3, 1, 1)
    std = torch.tensor(pre.get('std', [58.395, 57.12, 57.375]), dtype=torch.float32).view(1, 3, 1, 1)
    x = torch.from_numpy(image).permute(2, 0, 1)[None].float()
    return (x - mean) / std


def dvae_token_ids(dvae, images: torch.Tensor) -> torch.Tensor:
    """(N, 3, S, S) RGB 0..255 -> (N, h*w) the dVAE's hard codes (argmax of its encoder), as :func:`draw_tokens`."""
    with torch.no_grad():
        return torch.cat([dvae.encode(x / 255).argmax(1).flatten(1) for x in images.split(64)])


def vqkd_token_ids(vqkd, images: torch.Tensor) -> torch.Tensor:
    """(N, 3, S, S) RGB 0..255 -> (N, h*w) VQ-KD ids (``VQKD.get_token_ids``, unilm's ``get_codebook_indices``)."""
    return torch.cat([vqkd.get_token_ids(x) for x in images.split(64)])


def mask_generator(cfg: Config, seed: int):
    """The ``BEiTMaskGenerator`` of a MIM config's training pipeline, seeded ``seed``."""
    from ..data.transforms.masking import BEiTMaskGenerator
    from ..registry import TRANSFORMS
    for t in cfg.train_dataloader.dataset.pipeline:
        cls = t['type'] if isinstance(t['type'], type) else TRANSFORMS.get(t['type'])
        if isinstance(cls, type) and issubclass(cls, BEiTMaskGenerator):
            kwargs = {k: v for k, v in t.items() if k != 'type'}
            kwargs['seed'] = seed
            return cls(**kwargs)
    raise VisualizationError('the MIM config has no BEiTMaskGenerator in train_dataloader.dataset.pipeline')


def check_picture_output(out: str, overwrite: bool, files: list[str], checkpoints: list[str]) -> None:
    """Refuse ``out`` before any model is built (:func:`beit_mm.fileio.outputs.check_output`): none of the files and
    folders a picture reads may be its ``out``; a work dir given as a checkpoint is the checkpoint it names (a picture
    may go into the work dir)."""
    from ..fileio.outputs import check_output

    def checkpoint_file(path: str) -> str:
        try:
            return resolve_checkpoint(path)
        except FileNotFoundError:
            return path  # named when the model is loaded

    check_output(out, overwrite, inputs=[f for f in files if f] + [checkpoint_file(c) for c in checkpoints if c])


def draw_attention(config: str, checkpoint: str, image: str, out: str, *, block: int = -1, query=None, size=None,
                   title: str = '', overwrite: bool = False) -> str:
    """Per-head attention of ``query`` (default: the centre) at ``block``, plus attention rollout -> ``out``."""
    check_picture_output(out, overwrite, [config, image], [checkpoint])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model, cfg = load_model(config, checkpoint)
        size = default_size(cfg, size)
        pixels = read_image(image, size)
        maps = record_attention(model.backbone, normalize(pixels, cfg))
        amap = maps[block]
        query = tuple(query) if query else (amap.query_grid[0] // 2, amap.query_grid[1] // 2)
        title = title or f'{type(model.backbone).__name__}: {config.split("/")[-1]}'
        path = save_png(attention_figure(pixels, maps, block, query, title=title), out)
    print(f'attention of query {query} at {amap.name} ({len(maps)} blocks recorded) -> {path}')
    return path


def draw_tokens(dvae_config: str, dvae_checkpoint: str, image: str, out: str, *, size=None, title: str = '',
                overwrite: bool = False) -> str:
    """A dVAE's token ids of ``image`` (``size`` square, default 64) as a colour map, and the decoded tokens."""
    check_picture_output(out, overwrite, [dvae_config, image], [dvae_checkpoint])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        dvae, _ = load_model(dvae_config, dvae_checkpoint, need=('encoder.', 'decoder.'))
        side = size or 8 * 8
        pixels = read_image(image, (side, side), Image.LANCZOS)
        x = torch.from_numpy(pixels).permute(2, 0, 1)[None].float() / 255
        with torch.no_grad():
            logits = dvae.encode(x)
            grid = tuple(logits.shape[2:])
            ids = logits.argmax(1).flatten(1)
            recon = to_uint8(decode_ids(dvae, ids, grid)[0])
        path = save_png(token_map_figure(pixels, ids[0], grid, dvae.vocab_size, recon, title=title), out)
    print(f'{grid[0]}x{grid[1]} tokens, {ids.unique().numel()} distinct of {dvae.vocab_size} -> {path}')
    return path


def draw_token_maps(out: str, *, data_root: str, num_classes: int, dvae=None, vqkd=None, split: str = 'validation',
                    show: int = 6, size: int = 64, img_suffix: str = '.jpg', seg_map_suffix: str = '.png',
                    title: str = '', overwrite: bool = False) -> str:
    """Token maps of ``dvae`` and/or ``vqkd`` (each ``(config, checkpoint)``) on an ADE20K-layout split, and a
    markdown table (printed) of what their codes group."""
    from ..data.datasets.labeled_sets import ade20k_dataset_cfg, build_seg_dataset, load_seg_split
    from ..evaluation.token_groups import token_group_stats
    pairs = [p for p in (dvae, vqkd) if p]
    check_picture_output(out, overwrite, [data_root, *(p[0] for p in pairs)], [p[1] for p in pairs])
    if not (dvae or vqkd):
        raise VisualizationError('token-maps: give --dvae CONFIG CHECKPOINT and/or --vqkd CONFIG CHECKPOINT')
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        dataset = build_seg_dataset(ade20k_dataset_cfg(data_root, split, num_classes, img_suffix, seg_map_suffix))
        data = load_seg_split(dataset, size)
        maps, rows = {}, []
        for name, spec, need, tokenize, vocab in (
                ('dVAE', dvae, ('encoder.', ), dvae_token_ids, lambda m: m.vocab_size),
                ('VQ-KD', vqkd, ('encoder.', 'quantize.'), vqkd_token_ids, lambda m: m.num_codes)):
            if not spec:
                continue
            model, _ = load_model(spec[0], spec[1], need=need)
            ids = tokenize(model, data.images)
            maps[name] = (ids, vocab(model))
            s = token_group_stats(ids, data.labels, data.images, num_classes)
            rows.append(f'| {name} | {s["codes_used"]} of {vocab(model)} | {s["nmi_class"]:.3f} '
                        f'({s["nmi_class_shuffled"]:.3f}) | {s["nmi_colour"]:.3f} ({s["nmi_colour_shuffled"]:.3f}) | '
                        f'{s["nmi_position"]:.3f} ({s["nmi_position_shuffled"]:.3f}) | '
                        f'{s["purity"]:.1f} ({s["purity_majority"]:.1f}) |')
        shown = slice(0, show)
        images = data.images[shown].permute(0, 2, 3, 1).numpy().astype(np.uint8)
        figure = token_maps_figure(images, data.labels[shown].numpy(),
                                   {k: (v[0][shown], v[1]) for k, v in maps.items()}, num_classes, title=title)
        path = save_png(figure, out)
    print(f'What the codes group on {len(dataset)} {split} images of {data_root} '
          f'({data.labels.shape[-1]} px; {maps[next(iter(maps))][0].shape[1]} patches each); in brackets the trivial '
          'baseline (shuffled ids; for purity the majority class):\n')
    print('| tokenizer | codes used | NMI(id; class) | NMI(id; colour) | NMI(id; position) | purity % |\n'
          '|---|---|---|---|---|---|')
    print('\n'.join(rows))
    print(f'\n-> {path}')
    return path


def draw_mim(config: str, checkpoint: str, dvae_config: str, dvae_checkpoint: str, image: str, out: str, *,
             seed: int = 0, size=None, title: str = '', overwrite: bool = False) -> str:
    """MIM: ``image``, its blockwise mask (the config's generator, ``seed``), the dVAE's reconstruction and the
    model's prediction decoded through the dVAE decoder -> ``out``."""
    check_picture_output(out, overwrite, [config, dvae_config, image], [checkpoint, dvae_checkpoint])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model, cfg = load_model(config, checkpoint, need=('backbone.', 'head.'))
        dvae, _ = load_model(dvae_config, dvae_checkpoint, need=('encoder.', 'decoder.'))
        size = default_size(cfg, size)
        gen = mask_generator(cfg, seed)
        grid = (gen.generator.height, gen.generator.width)
        if (size[0] // grid[0], size[1] // grid[1]) != (size[0] / grid[0], size[1] / grid[1]):
            raise VisualizationError(f'--size {size} is not a multiple of the mask grid {grid}')
        down = model.target_generator.downsample
        pixels = read_image(image, size)
        tokenizer_image = read_image(image, (grid[0] * down, grid[1] * down), Image.LANCZOS)
        target = map_pixels(torch.from_numpy(tokenizer_image).permute(2, 0, 1)[None].float() / 255)
        mask = torch.from_numpy(gen.transform({})['mask'])[None]
        pics = mim_pictures(model, dvae, normalize(pixels, cfg), target, mask)
        path = save_png(mim_figure(pixels, tokenizer_image, pics, title=title), out)
    print(f'{int(mask.sum())} of {mask.numel()} patches masked, masked-token accuracy {pics.accuracy:.3f} -> {path}')
    return path
