"""Building blocks shared by the backbones (pure modules and functions)."""
from .attention import BEiTAttention  # noqa: F401
from .beit_block import BEiTBlock  # noqa: F401
from .dinov3_block import DINOv3Block  # noqa: F401
from .mlp import Mlp  # noqa: F401
from .ms_deform_attn import PortableMSDeformAttn, PortableMSDeformAttnPixelDecoder  # noqa: F401
from .pos_embed import resize_pos_embed  # noqa: F401
from .rope import RopePositionEmbedding  # noqa: F401
from .rel_pos_bias import (RelativePositionBias, gather_relative_position_bias,  # noqa: F401
                           relative_position_index, resize_rel_pos_bias_table)
