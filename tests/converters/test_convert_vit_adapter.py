"""``tools/convert_checkpoint.py --model vit_adapter --source official`` on tiny official-layout stand-ins of
ViT-Adapter's released segmentors (czczup/ViT-Adapter@fd64a51 ``segmentation/``, UPerNet and Mask2Former), and what
tools/infer.py makes of the converted files."""
import os.path as osp

import numpy as np
import pytest
import torch
from mmengine.config import Config
from PIL import Image

from beit_mm.apis.convert import ConversionError, convert_checkpoint
from beit_mm.apis.segment import infer_images
from beit_mm.converters.vit_adapter import convert_vit_adapter

from ..conftest import ROOT

CONFIG = osp.join(ROOT, 'configs/demo/beit-adapter-tiny_upernet_1xb8-1k_ade20k-demo-64x64.py')
NUM_CLASSES = 150  # the demo config's (ADE20K's) class count
# A class set and palette that are not ADE20K's (a released Cityscapes/COCO-Stuff model names its own)
CLASSES = tuple(f'class_{i}' for i in range(NUM_CLASSES))
PALETTE = [[(37 * i + 11) % 256, (101 * i + 3) % 256, (53 * i + 200) % 256] for i in range(NUM_CLASSES)]


def official_mask2former_head(channels: int = 32, levels: int = 3, enc_layers: int = 2,
                              dec_layers: int = 2, classes: int = 4) -> dict:
    """The ``decode_head.*`` tensors of ViT-Adapter's Mask2Former segmentor, named as the official modules name them:
    ``mmseg_custom/models/decode_heads/mask2former_head.py:98-124`` (pixel_decoder, transformer_decoder, query_embed,
    query_feat, level_embed, cls_embed, mask_embed as Linear/ReLU x 3), ``mmseg_custom/models/plugins/
    msdeformattn_pixel_decoder.py:84-130`` (input_convs / lateral_convs / output_convs as GN ConvModules, encoder,
    level_encoding, mask_feature) and mmcv 1.x's ``BaseTransformerLayer`` (``attentions.N``, ``ffns.0.layers.0.0`` /
    ``.1``, ``norms.N``; the decoder's ``operation_order`` cross_attn, norm, self_attn, norm, ffn, norm,
    ``configs/ade20k/mask2former_beit_adapter_large_640_160k_ade20k_ss.py:99``)."""
    c, sd = channels, {}

    def add(name, *shape):
        sd[f'decode_head.{name}'] = torch.randn(*shape)

    def ffn(prefix):
        add(f'{prefix}.ffns.0.layers.0.0.weight', 4 * c, c), add(f'{prefix}.ffns.0.layers.0.0.bias', 4 * c)
        add(f'{prefix}.ffns.0.layers.1.weight', c, 4 * c), add(f'{prefix}.ffns.0.layers.1.bias', c)

    for i in range(levels):
        add(f'pixel_decoder.input_convs.{i}.conv.weight', c, c, 1, 1), add(f'pixel_decoder.input_convs.{i}.conv.bias', c)
        add(f'pixel_decoder.input_convs.{i}.gn.weight', c), add(f'pixel_decoder.input_convs.{i}.gn.bias', c)
    for layer in range(enc_layers):
        prefix = f'pixel_decoder.encoder.layers.{layer}'
        for part, rows in (('sampling_offsets', 2 * 4 * levels * 4), ('attention_weights', 4 * levels * 4),
                           ('value_proj', c), ('output_proj', c)):
            add(f'{prefix}.attentions.0.{part}.weight', rows, c), add(f'{prefix}.attentions.0.{part}.bias', rows)
        ffn(prefix)
        for n in range(2):
            add(f'{prefix}.norms.{n}.weight', c), add(f'{prefix}.norms.{n}.bias', c)
    add('pixel_decoder.level_encoding.weight', levels, c)
    add('pixel_decoder.lateral_convs.0.conv.weight', c, c, 1, 1)
    add('pixel_decoder.lateral_convs.0.gn.weight', c), add('pixel_decoder.lateral_convs.0.gn.bias', c)
    add('pixel_decoder.output_convs.0.conv.weight', c, c, 3, 3)
    add('pixel_decoder.output_convs.0.gn.weight', c), add('pixel_decoder.output_convs.0.gn.bias', c)
    add('pixel_decoder.mask_feature.weight', c, c, 1, 1), add('pixel_decoder.mask_feature.bias', c)
    for layer in range(dec_layers):
        prefix = f'transformer_decoder.layers.{layer}'
        for a in range(2):
            add(f'{prefix}.attentions.{a}.attn.in_proj_weight', 3 * c, c)
            add(f'{prefix}.attentions.{a}.attn.in_proj_bias', 3 * c)
            add(f'{prefix}.attentions.{a}.attn.out_proj.weight', c, c)
            add(f'{prefix}.attentions.{a}.attn.out_proj.bias', c)
        ffn(prefix)
        for n in range(3):
            add(f'{prefix}.norms.{n}.weight', c), add(f'{prefix}.norms.{n}.bias', c)
    add('transformer_decoder.post_norm.weight', c), add('transformer_decoder.post_norm.bias', c)
    add('query_embed.weight', 100, c), add('query_feat.weight', 100, c), add('level_embed.weight', levels, c)
    add('cls_embed.weight', classes + 1, c), add('cls_embed.bias', classes + 1)
    for i in (0, 2, 4):
        add(f'mask_embed.{i}.weight', c, c), add(f'mask_embed.{i}.bias', c)
    return sd


def test_the_mask2former_stand_in_has_the_official_292_head_tensors():
    assert len(official_mask2former_head(enc_layers=6, dec_layers=9)) == 292  # issue 49's count of the real file


@pytest.fixture(scope='module')
def segmentor_state():
    """The demo adapter segmentor's weights (random, seeded): the backbone of the official-layout stand-ins."""
    from mmseg.registry import MODELS
    from mmseg.utils import register_all_modules
    register_all_modules()
    cfg = Config.fromfile(CONFIG)
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()
    return {k: v for k, v in model.state_dict().items()}


def official_file(state: dict, path: str, head: str = 'upernet', meta: dict | None = None) -> str:
    """Save ``state`` as a released ViT-Adapter checkpoint: ``{'state_dict', 'meta'}`` (mmcv 1.x
    ``save_checkpoint``), with the relative_position_index buffers and ``head``'s official tensors."""
    sd = {k: v for k, v in state.items() if k.startswith('backbone.') or head == 'upernet'}
    for i in range(4):
        sd[f'backbone.blocks.{i}.attn.relative_position_index'] = torch.zeros(17, 17, dtype=torch.long)
    if head == 'mask2former':
        sd.update(official_mask2former_head())
    torch.save({'state_dict': sd, 'meta': meta or {'mmseg_version': '0.20.2', 'CLASSES': CLASSES,
                                                   'PALETTE': PALETTE}}, path)
    return path


def convert(src: str, dst: str, **options) -> str:
    """``tools/convert_checkpoint.py --model vit_adapter --source official [options] src dst``'s one call."""
    return convert_checkpoint(src, dst, model='vit_adapter', source='official', **options)


def test_a_mask2former_head_is_refused_with_the_reason_and_the_backbone_only_conversion_offered(segmentor_state,
                                                                                                 tmp_path):
    """Issue 49: at 58420c0 this file converted with --keep-head (its head under decode_head.*) and, used as
    load_from, left most of its head at random init."""
    src = official_file(segmentor_state, str(tmp_path / 'mask2former_beit_adapter_large_640_160k_ade20k.pth'),
                        head='mask2former')
    dst = str(tmp_path / 'm2f.pth')
    with pytest.raises(ConversionError, match=r'Mask2Former head \(102 head tensors.*without --keep-head'):
        convert(src, dst, keep_head=True)
    assert not osp.exists(dst)
    convert(src, dst)  # the offered conversion: the backbone only, which the adapter loads strictly
    from beit_mm.models.backbones import BEiTAdapter
    cfg = Config.fromfile(CONFIG).model.backbone
    cfg.pop('type')
    BEiTAdapter(**cfg).load_state_dict(torch.load(dst)['state_dict'], strict=True)


def test_a_head_that_is_not_upernet_is_refused():
    sd = {'backbone.level_embed': torch.zeros(3, 8), 'decode_head.conv_seg.weight': torch.zeros(2, 8, 1, 1),
          'decode_head.some_other_head.weight': torch.zeros(1)}
    with pytest.raises(ValueError, match='UPerNet segmentors only.*some_other_head'):
        convert_vit_adapter(sd, keep_heads=True)


@pytest.mark.parametrize('meta', [{'CLASSES': CLASSES, 'PALETTE': PALETTE},
                                  {'dataset_meta': {'classes': CLASSES, 'palette': PALETTE}}])
def test_dataset_meta_is_read_from_mmseg_0x_and_1x_meta(meta):
    from beit_mm.converters.vit_adapter import dataset_meta
    assert dataset_meta({'meta': meta}) == {'classes': CLASSES, 'palette': PALETTE}
    assert dataset_meta({'state_dict': {}}) is None
    with pytest.raises(ValueError, match='palette has 2 colours for 150 classes'):
        dataset_meta({'meta': {'CLASSES': CLASSES, 'PALETTE': PALETTE[:2]}})


def test_class_names_and_palette_carry_over_into_the_overlays(segmentor_state, tmp_path):
    """Issue 49: at 58420c0 the converted file had no meta, so tools/infer.py painted ADE20K's colours (mmseg's
    fallback) whatever the released model's classes were."""
    src = official_file(segmentor_state, str(tmp_path / 'upernet_beit_adapter_large_640_160k_ade20k.pth.tar'))
    dst = str(tmp_path / 'upernet.pth')
    convert(src, dst, keep_head=True)
    assert torch.load(dst)['meta']['dataset_meta'] == {'classes': CLASSES, 'palette': PALETTE}
    image = str(tmp_path / 'img.png')
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(image)
    preds = infer_images(CONFIG, dst, [image], str(tmp_path / 'out'), opacity=1.0, device='cpu')
    overlay = np.array(Image.open(tmp_path / 'out' / 'vis' / 'img.png'))
    label = preds[image]
    painted = (overlay == np.array(PALETTE)[label]).all(-1).mean()  # mmseg also writes the class names on it
    assert painted > 0.5, f'{painted:.0%} of the overlay has the colour the checkpoint gives its predicted class'


def test_infer_names_keep_head_for_a_backbone_only_file(segmentor_state, tmp_path):
    """Issue 49: at 58420c0 the refusal of a backbone-only file said only 'pass a checkpoint that tools/train.py
    wrote ... (official weights: tools/convert_checkpoint.py first)'."""
    from beit_mm.apis.checkpoint import CheckpointMismatchError
    src = official_file(segmentor_state, str(tmp_path / 'upernet.pth.tar'))
    dst = str(tmp_path / 'backbone.pth')
    convert(src, dst)
    image = str(tmp_path / 'img.png')
    Image.fromarray(np.zeros((64, 64, 3), dtype=np.uint8)).save(image)
    with pytest.raises(CheckpointMismatchError, match='no head weights.*--keep-head'):
        infer_images(CONFIG, dst, [image], str(tmp_path / 'out'), device='cpu')


def test_a_released_zip_package_is_refused_with_the_unzip_fix(segmentor_state, tmp_path):
    """ViT-Adapter's Mask2Former releases are .zip packages holding the .pth (segmentation/configs/ade20k/README.md:53:
    "Please **unzip** them before load into model")."""
    import zipfile
    pth = official_file(segmentor_state, str(tmp_path / 'mask2former_beit_adapter_large_640_160k_ade20k.pth'),
                        head='mask2former')
    package = str(tmp_path / 'mask2former_beit_adapter_large_640_160k_ade20k.zip')
    with zipfile.ZipFile(package, 'w') as archive:
        archive.write(pth, osp.basename(pth))
    with pytest.raises(ConversionError, match=r'zip archive but not a torch\.save file.*not an archive of it'):
        convert(package, str(tmp_path / 'out.pth'))


def test_checkpoints_page_documents_the_model_and_the_unzip_step():
    text = open(osp.join(ROOT, 'docs', 'checkpoints.md')).read()
    assert '--model vit_adapter --source official' in text
    assert 'unzip' in text  # ViT-Adapter's Mask2Former releases are .zip packages (segmentation/README.md:53)
