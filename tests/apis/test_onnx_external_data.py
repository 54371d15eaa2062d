"""An ONNX file is one file: a tensor stored as external data, wherever it sits (an initializer, a sparse
initializer, a Constant node's attribute, a subgraph), is refused by name before an onnxruntime session is created,
and tools/export.py never writes one."""
import json
import os.path as osp

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from beit_mm.apis.export import KIND_KEY, SHAPE_KEY, external_tensors
from beit_mm.apis.onnx_inference import OnnxModelError, check_graph, infer_onnx

SHAPE = (1, 3, 64, 64)
SECRET = 'secret.bin'  # a file under the working directory that the hostile model points at


def _external(name: str) -> TensorProto:
    """A float tensor of SHAPE whose bytes are the file SECRET (relative: resolved from the working directory)."""
    t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=SHAPE)
    t.data_location = TensorProto.EXTERNAL
    for key, value in (('location', SECRET), ('offset', '0'), ('length', str(4 * int(np.prod(SHAPE))))):
        entry = t.external_data.add()
        entry.key, entry.value = key, value
    return t


def _model(where: str) -> onnx.ModelProto:
    """``logits = input + W`` with W stored externally as ``where`` says (a 1-node graph tools/infer.py would run)."""
    io = ([helper.make_tensor_value_info('input', TensorProto.FLOAT, SHAPE)],
          [helper.make_tensor_value_info('logits', TensorProto.FLOAT, SHAPE)])
    add = helper.make_node('Add', ['input', 'w'], ['logits'], name='add')
    initializers, sparse, nodes = [], [], [add]
    if where == 'initializer':
        initializers = [_external('w')]
    elif where == 'constant':
        nodes = [helper.make_node('Constant', [], ['w'], name='const', value=_external('w')), add]
    elif where == 'sparse initializer':
        indices = helper.make_tensor('w_idx', TensorProto.INT64, [1], [0])
        sparse = [helper.make_sparse_tensor(_external('w_values'), indices, SHAPE)]
        sparse[0].values.dims[:] = [1]
    elif where == 'subgraph':
        branch = helper.make_graph([helper.make_node('Constant', [], ['w_out'], value=_external('w'))], 'then', [],
                                   [helper.make_tensor_value_info('w_out', TensorProto.FLOAT, SHAPE)])
        cond = helper.make_node('Constant', [], ['c'], value=helper.make_tensor('c', TensorProto.BOOL, [], [True]))
        nodes = [cond, helper.make_node('If', ['c'], ['w'], name='if', then_branch=branch, else_branch=branch), add]
    graph = helper.make_graph(nodes, 'hostile', *io, initializer=initializers, sparse_initializer=sparse)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid('', 17)])
    for key, value in ((KIND_KEY, 'segmentor'), (SHAPE_KEY, json.dumps(list(SHAPE)))):
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    return model


@pytest.mark.parametrize('where, named', [
    ('initializer', "initializer 'w'"),
    ('constant', "node 'const' (Constant) attribute 'value' 'w'"),
    ('sparse initializer', "sparse initializer values 'w_values'"),
    ('subgraph', "node 'if' (If) attribute 'then_branch': node '' (Constant) attribute 'value' 'w'"),
])
def test_external_tensors_are_found_wherever_they_sit(where, named):
    proto = _model(where)
    assert named in external_tensors(proto)
    with pytest.raises(OnnxModelError, match=r'hostile\.onnx: .* is stored as external data .* nothing was run'):
        check_graph(proto.SerializeToString(), 'hostile.onnx')


def test_infer_refuses_an_onnx_file_that_reads_another_file(tmp_path, monkeypatch):
    """A file under the working directory whose bytes the hostile model's weight points at: tools/infer.py --onnx
    refuses the model, naming the tensor, before any session reads that file (and writes nothing)."""
    from ..tools.test_tools import CONFIG
    from PIL import Image
    monkeypatch.chdir(tmp_path)
    (tmp_path / SECRET).write_bytes(np.full(SHAPE, 7.0, np.float32).tobytes())
    onnx.save(_model('initializer'), str(tmp_path / 'hostile.onnx'))
    (tmp_path / 'images').mkdir()
    Image.new('RGB', (64, 64), (10, 200, 30)).save(tmp_path / 'images' / 'a.png')
    with pytest.raises(OnnxModelError, match=r"hostile\.onnx: initializer 'w' is stored as external data"):
        infer_onnx(CONFIG, str(tmp_path / 'hostile.onnx'), [str(tmp_path / 'images')], str(tmp_path / 'out'))
    assert not osp.exists(tmp_path / 'out' / 'pred')


def test_export_refuses_a_model_one_file_cannot_hold():
    """Weights over ONNX's 2 GiB message limit (on the meta device: nothing allocated) are refused by size."""
    import torch

    from beit_mm.apis.export import ExportError, check_one_file
    check_one_file(torch.nn.Linear(2**14, 2**14, device='meta'), 'small.onnx')  # 1 GiB
    with pytest.raises(ExportError, match=r'big\.onnx holds 2\.00 GiB of weights, more than the 2 GiB one ONNX file '
                       r'holds; tools/export.py writes no external data'):
        check_one_file(torch.nn.Linear(2**14, 2**15, device='meta'), 'big.onnx')
