# unilm `vqkd_encoder_base_decoder_1x768x12_clip`: the 3x recipe with a 1-block decoder (beit2/TOKENIZER.md).
_base_ = ['./vqkd-base-p16-dec3x_clip-b16_8xb64-amp-coslr-100e_in1k.py']
model = dict(arch='base_decoder_1x_clip')
