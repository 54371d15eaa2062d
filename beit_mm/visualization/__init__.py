"""Attention maps and rollout (BEiT, CvT), tokenizer token maps and MIM reconstructions. Not imported by
``beit_mm``: matplotlib is needed only when a figure is drawn."""
from .attention import AttentionMap, AttentionRecorder, query_attention, record_attention  # noqa: F401
from .mim import MIMPictures, decode_ids, masked_token_logits, mim_pictures  # noqa: F401
from .rollout import attention_rollout, rollout_of_maps, spread_matrix, square_cvt_attention  # noqa: F401
