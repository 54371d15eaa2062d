"""The compiled-op audit (beit_mm.benchmarks.op_audit): one training and one test step of every family's demo config on
CPU calls no compiled op that this install (mmcv 2.1.0 built with FORCE_CUDA=0, as the installation guide builds it)
lacks for CPU or CUDA; docs/compiled-ops.md shows this audit's table."""
import os.path as osp

import mmcv._ext
import mmcv.ops
import pytest
import torch
import torchvision

from beit_mm.benchmarks import op_audit
from beit_mm.benchmarks.op_audit import FAMILIES, OpRecorder, audit, markdown_table, missing_kernels
from beit_mm.models.layers import vit_adapter
from beit_mm.models.layers.ms_deform_attn import PortableMSDeformAttn

from ..conftest import ROOT

README_BUILD_HAS_CUDA_OPS = mmcv.ops.get_compiling_cuda_version() != 'not available'


@pytest.fixture(scope='module')
def audit_data(tmp_path_factory) -> str:
    return op_audit.make_audit_data(str(tmp_path_factory.mktemp('op_audit')))


@pytest.fixture(scope='module')
def found(audit_data) -> dict:
    return audit(ROOT, audit_data)


def test_every_family_calls_only_ops_with_a_kernel_on_every_device(found):
    assert sorted(found) == sorted(FAMILIES)
    missing = missing_kernels(found)
    assert not missing, '; '.join(f'{family} calls {op} with no {device} kernel' for family, op, device in missing)


def test_docs_table_is_the_audits(found):
    with open(osp.join(ROOT, 'docs', 'compiled-ops.md'), encoding='utf-8') as f:
        page = f.read()
    assert markdown_table(found) in page, markdown_table(found)


def _attn(cls, **kw):
    attn = cls(embed_dims=16, num_heads=2, num_levels=1, num_points=2, batch_first=True, **kw)
    x = torch.randn(1, 4, 16)
    return attn(x, reference_points=torch.rand(1, 4, 1, 2), spatial_shapes=torch.tensor([[2, 2]]),
                level_start_index=torch.tensor([0]))


def test_recorder_sees_ext_torchvision_and_device_routed_calls():
    """mmcv's nms (a CPU kernel), torchvision's nms, mmcv's MultiScaleDeformableAttention (on CUDA tensors it would call
    ms_deform_attn); PortableMSDeformAttn calls nothing compiled where the probe found no kernel."""
    boxes, scores = torch.tensor([[0., 0., 2., 2.], [0., 0., 2., 2.1]]), torch.tensor([0.9, 0.8])
    with OpRecorder() as rec:
        mmcv.ops.nms(boxes, scores, 0.5)
        torchvision.ops.nms(boxes, scores, 0.5)
        _attn(mmcv.ops.MultiScaleDeformableAttention)
        _attn(PortableMSDeformAttn)
    assert dict(rec.calls) == {'mmcv._ext::nms': {'cpu'}, 'torchvision::nms': {'cpu'},
                               'mmcv._ext::ms_deform_attn_forward': {'cuda'},
                               'mmcv._ext::ms_deform_attn_backward': {'cuda'}}
    assert type(mmcv._ext.nms).__name__ == 'builtin_function_or_method'  # the wrappers are gone after the run
    want = [] if README_BUILD_HAS_CUDA_OPS else [('f', 'mmcv._ext::ms_deform_attn_backward', 'cuda'),
                                                ('f', 'mmcv._ext::ms_deform_attn_forward', 'cuda'),
                                                ('f', 'mmcv._ext::nms', 'cuda')]
    assert missing_kernels({'f': dict(rec.calls)}) == want


@pytest.mark.skipif(README_BUILD_HAS_CUDA_OPS, reason='mmcv built with CUDA ops has ms_deform_attn for CUDA')
def test_a_family_on_mmcvs_deformable_attention_is_named(audit_data, monkeypatch):
    """The ViT-Adapter built with mmcv's class: the audit names the family and the CUDA op it would call."""
    monkeypatch.setattr(vit_adapter, 'PortableMSDeformAttn', mmcv.ops.MultiScaleDeformableAttention)
    family = 'ViT-Adapter UPerNet'
    assert missing_kernels(audit(ROOT, audit_data, {family: FAMILIES[family]})) == [
        (family, 'mmcv._ext::ms_deform_attn_backward', 'cuda'), (family, 'mmcv._ext::ms_deform_attn_forward', 'cuda')]
