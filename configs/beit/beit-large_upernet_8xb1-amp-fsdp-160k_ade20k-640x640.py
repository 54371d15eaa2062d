# BEiT-L + UPerNet, ADE20K 640x640: the recipe of beit-large_upernet_8xb1-amp-160k_ade20k-640x640.py (8 GPUs x 1
# image, 2-step accumulation, AMP, lr 2e-5, layer decay 0.95) with parameters, gradients and optimizer state sharded
# over the GPUs by PyTorch FSDP (MMEngine FlexibleRunner + FSDPStrategy) instead of replicated by DDP.
#   bash tools/dist_train.sh configs/beit/beit-large_upernet_8xb1-amp-fsdp-160k_ade20k-640x640.py 8
# - one FSDP unit per BEiT block (beit_mm.engine.fsdp.transformer_block_wrap_policy) + the root unit;
# - use_orig_params=True: the optimizer sees the original parameters, so the layer-decay param groups (one lr/wd per
#   layer id) are kept exactly as under DDP;
# - TorchFSDPStrategy (beit_mm.engine.fsdp): MMEngine's FSDPStrategy with --resume fixed for torch >= 2.1;
# - full state dicts: rank 0 writes ordinary full checkpoints (iter_N.pth, loadable by tools/test.py, tools/infer.py
#   and --resume, which re-shards them), gathered to CPU memory (offload_to_cpu) so GPU memory does not peak on save.
# CPU runs (torchrun + gloo, e.g. a smoke test): add --cfg-options strategy.model_wrapper.device_id=cpu
#   strategy.state_dict_cfg.state_dict_config.offload_to_cpu=False
#   strategy.state_dict_cfg.optim_state_dict_config.offload_to_cpu=False
# (FSDP without CUDA needs an explicit CPU device; with torch 2.13 on CPU, gathering a full state dict with
# offload_to_cpu=True crashes rank 0 with SIGSEGV, tests/engine/test_fsdp.py).
# Published (the DDP recipe): 56.7 mIoU (unilm), 56.33 (mmseg).
# Precision: the base's dtype='auto'. Where it resolves to fp16 (GPUs without bf16) the loss scaler is
# torch.amp.GradScaler, whose inf/NaN check sees only this process's gradient shards (torch's ShardedGradScaler
# all-reduces it); that combination is untested here: prefer bf16 GPUs for this config.
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
# under FSDP each transformer block is compiled (PyTorch's advice for FSDP + compile), not the whole model
compile = dict(scope='blocks', devices=['cuda'])
