# BEiT-L + UPerNet, ADE20K 640x640: the recipe of beit-large_upernet_8xb1-amp-160k_ade20k-640x640.py with parameters,
# gradients and optimizer state sharded by PyTorch FSDP (one unit per block, full state dicts saved by rank 0).
# Published (the DDP recipe): 56.7 mIoU (unilm), 56.33 (mmseg).
#   bash tools/dist_train.sh configs/beit/beit-large_upernet_8xb1-amp-fsdp-160k_ade20k-640x640.py 8
# CPU runs (torchrun + gloo): add --cfg-options strategy.model_wrapper.device_id=cpu
#   strategy.state_dict_cfg.state_dict_config.offload_to_cpu=False
#   strategy.state_dict_cfg.optim_state_dict_config.offload_to_cpu=False
_base_ = ['./beit-large_upernet_8xb1-amp-160k_ade20k-640x640.py']
custom_imports = dict(imports=['beit_mm', 'beit_mm.engine.fsdp'], allow_failed_imports=False)
runner_type = 'FlexibleRunner'
strategy = dict(
    type='TorchFSDPStrategy',
    model_wrapper=dict(
        auto_wrap_policy=dict(type='beit_mm.engine.fsdp.transformer_block_wrap_policy'), use_orig_params=True),
    state_dict_cfg=dict(
        state_dict_type='FULL_STATE_DICT',
        state_dict_config=dict(type='FullStateDictConfig', offload_to_cpu=True, rank0_only=True),
        optim_state_dict_config=dict(type='FullOptimStateDictConfig', offload_to_cpu=True, rank0_only=True)))
compile = dict(scope='blocks', devices=['cuda'])
