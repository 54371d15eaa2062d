"""AdamW with ``fused=True`` where torch has a fused kernel for the device (CPU and CUDA in torch 2.13)."""
from mmengine.config import Config
from mmengine.logging import print_log
from mmengine.registry import OPTIMIZERS
from torch.optim import AdamW

from ...registry import config_type_is
from ..run_options import train_device_type
from ..amp_optim_wrapper import fused_adamw_supported


def use_fused_adamw(cfg: Config) -> None:
    """``optimizer.fused=True`` for AdamW where torch has a fused kernel for the device, unless the config sets
    ``fused`` or ``foreach`` itself."""
    optimizer = cfg.get('optim_wrapper', {}).get('optimizer')
    if not optimizer or not config_type_is(optimizer.get('type'), AdamW, OPTIMIZERS):
        return
    if 'fused' in optimizer or 'foreach' in optimizer or not fused_adamw_supported(train_device_type()):
        return
    optimizer['fused'] = True
    print_log(f'AdamW: fused=True on {train_device_type()}', logger='current')
