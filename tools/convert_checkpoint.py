"""Convert an official/foreign checkpoint into a beit_mm state dict file ``{'state_dict': ...}``.

Examples:
    python tools/convert_checkpoint.py --model beit --source unilm beit_base_patch16_224_pt22k.pth beit-b_pt22k.pth
    python tools/convert_checkpoint.py --model beit --source hf pytorch_model.bin beit-b.pth --img-size 640
    python tools/convert_checkpoint.py --model cvt --source official CvT-13-224x224-IN-1k.pth cvt-13.pth
    python tools/convert_checkpoint.py --model dalle --source openai encoder.pkl dalle_encoder.pth
    python tools/convert_checkpoint.py --model clip --source openai --trust-code ViT-B-16.pt clip_visual.pth
    python tools/convert_checkpoint.py --model dalle --source dvae work_dirs/dvae-.../iter_200.pth tokenizer.pth
    python tools/convert_checkpoint.py --model vqkd --source unilm vqkd_encoder_base_decoder_3x768x12_clip.pth vqkd.pth
    python tools/convert_checkpoint.py --model vqkd --source mmpretrain vqkd_encoder.pth vqkd_tokenize_only.pth
    python tools/convert_checkpoint.py --model dino --source official dino_vitbase16_pretrain.pth dino_vitb16.pth
    python tools/convert_checkpoint.py --model eomt --source hf model.safetensors eomt-large-512_ade20k.pth
    python tools/convert_checkpoint.py --model eomt --source hf --drop-class-head model.safetensors eomt-l_no-head.pth
    python tools/convert_checkpoint.py --model eomt --source beit_mm --drop-class-head work_dirs/RUN/iter_1000.pth \
        eomt_no-head.pth
    python tools/convert_checkpoint.py --model eomt --source hf --class-order ade20k-panoptic model.safetensors \
        eomt-large-640_ade20k-panoptic.pth
    python tools/convert_checkpoint.py --model vit_adapter --source official --keep-head \
        upernet_beit_adapter_large_640_160k_ade20k.pth.tar upernet_beit-adapter-large_ade20k.pth
    python tools/convert_checkpoint.py --model dinov2 --source timm --img-size 512 --patch-size 16 \
        vit_large_patch14_reg4_dinov2.lvd142m.safetensors dinov2-l-reg4_p16-512.pth
    python tools/convert_checkpoint.py --model dinov3 --source official dinov3_vitl16_pretrain_lvd1689m-8aa4cbdd.pth \
        dinov3-large.pth
    python tools/convert_checkpoint.py --model dinov3 --source hf model.safetensors dinov3-large.pth  # + config.json

The other way, a beit_mm training checkpoint (or work dir) -> HF transformers folder / timm state dict
(``beit_mm.apis.hub``; the model is built from ``--config``: the config source a checkpoint stores is code and is
never run):
    python tools/convert_checkpoint.py --to hf work_dirs/RUN/iter_1000.pth hf_dir --config CONFIG [--part backbone]
    python tools/convert_checkpoint.py --to timm work_dirs/RUN/iter_1000.pth timm/beit.pth --config CONFIG

Outputs are written atomically (a kill leaves the old file, the new one or nothing); an existing DST is refused
unless ``--overwrite``, and so is a DST that is a link, SRC or ``--config``, or lies in a dataset root
(:func:`beit_mm.fileio.outputs.check_output`). An HF folder carries a manifest of its files
(``.beit_mm_output.json``): ``--overwrite`` replaces a folder only when it holds nothing else.

Files are read with ``torch.load(weights_only=True)`` except the official DALL-E ``encoder.pkl``, a pickled module
that only the ``openai`` DALL-E source unpickles, and OpenAI's TorchScript CLIP release, which only ``--model clip
--source openai --trust-code`` loads (both run code the file carries: trusted files only). HF ``*.safetensors`` files are read with
safetensors when it is installed.
"""
from __future__ import annotations

import argparse

from beit_mm.converters.layouts import CLASS_ORDERS, MODELS


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('src', help='checkpoint to convert')
    parser.add_argument('dst', help='output file (a dict with key "state_dict"); --to hf: a folder')
    parser.add_argument('--model', choices=sorted(MODELS), help='architecture of SRC (with --source)')
    parser.add_argument('--source',
                        help='layout of SRC: ' + '; '.join(f'{m}: {", ".join(s)}' for m, s in MODELS.items()))
    parser.add_argument('--img-size', type=int, default=None,
                        help='BEiT: resample relative position tables / position embeddings to this image size; '
                        'DINOv2: the image size of the position embedding (required)')
    parser.add_argument('--patch-size', type=int, default=16,
                        help='BEiT patch size (for --img-size); DINOv2: the patch size its 14-px kernel is resampled to')
    parser.add_argument('--trust-code', action='store_true',
                        help='--model clip --source openai: load OpenAI\'s TorchScript file with torch.jit.load, which '
                        'runs code the file carries (only for a file you trust)')
    parser.add_argument('--keep-mim-head', action='store_true', help='BEiT: keep mask_token and lm_head.*')
    parser.add_argument('--keep-head', action='store_true',
                        help='BEiT/CvT: keep the classifier head.* (and BEiT\'s fc_norm.*); vit_adapter: keep the '
                        'UPerNet decode_head.*/auxiliary_head.* (a whole segmentor, for tools/infer.py and test.py; '
                        'a Mask2Former head is refused)')
    parser.add_argument('--drop-class-head', action='store_true',
                        help='EoMT: leave out class_head.* to fine-tune on a new class set (load_from=DST with the new '
                        'num_classes; the class head keeps its init, everything else loads; official '
                        'load_ckpt_class_head=False)')
    parser.add_argument('--class-order', choices=sorted(CLASS_ORDERS), default=None,
                        help='EoMT: put the class head in beit_mm\'s class order of that data (ade20k-panoptic: the '
                        'official ADE20K panoptic weights keep ADE20K\'s order, beit_mm.ADE20KPanopticDataset has '
                        'mmdet\'s, things first)')
    parser.add_argument('--keep-shared-rel-pos-bias', action='store_true',
                        help='BEiT: keep the shared rel_pos_bias table instead of copying it into every block')
    parser.add_argument('--to', choices=['hf', 'timm'], default=None,
                        help='the other way: SRC is a beit_mm checkpoint (or work dir), DST an HF folder / timm file')
    parser.add_argument('--config', default=None,
                        help='--to: the config SRC was trained with (required: the config a checkpoint stores is '
                        'code, never run); --model dinov3/eomt (DINOv3): the config that will load DST, whose '
                        'DINOv3 settings are checked against those SRC declares before anything is written')
    parser.add_argument('--overwrite', action='store_true',
                        help='replace DST if it exists (for --to hf the whole folder); without it an existing DST is '
                        'refused')
    parser.add_argument('--part', choices=['auto', 'backbone'], default='auto',
                        help='--to hf: the whole model (auto) or only its backbone (BeitModel / CvtModel)')
    parser.add_argument('--beitv2', action='store_true', help='--to timm: name the model beitv2_* instead of beit_*')
    args = parser.parse_args(argv)
    from beit_mm.apis.convert import ConversionError, ConversionUsageError, convert_checkpoint
    from beit_mm.fileio.names import refusal
    try:
        convert_checkpoint(**vars(args))
    except ConversionUsageError as error:
        parser.error(str(error))
    except ConversionError as error:
        raise refusal('convert_checkpoint.py', error) from None


if __name__ == '__main__':
    main()
