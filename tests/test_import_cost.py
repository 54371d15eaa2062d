"""Importing beit_mm and asking a tool for ``--help`` import no model library (mmseg's, mmdet's and mmpretrain's
models, transformers); a config's ``type`` imports what it names when it is built. Each check runs in a fresh
interpreter: this process has imported everything already."""
from __future__ import annotations

import glob
import json
import os
import os.path as osp
import subprocess
import sys

from .conftest import ROOT

MODEL_LIBRARIES = ('mmseg.models', 'mmdet.models', 'mmpretrain.models', 'transformers')
TOOLS = sorted(osp.relpath(p, ROOT) for p in glob.glob(osp.join(ROOT, 'tools', '*.py')) +
               glob.glob(osp.join(ROOT, 'tools', 'analysis', '*.py')))


def _run(code: str) -> dict:
    """``code`` in a fresh interpreter in the checkout; what it prints last, read as JSON."""
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join(filter(None, [ROOT, os.environ.get('PYTHONPATH')]))}
    proc = subprocess.run([sys.executable, '-c', code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


_LOADED = f'[m for m in {MODEL_LIBRARIES!r} if m in sys.modules]'


def test_import_beit_mm_leaves_the_model_libraries_out_until_a_config_names_a_model():
    found = _run(f"""
import json, sys
import beit_mm
before = {_LOADED}
from mmengine.registry import MODELS
backbone = MODELS.build(dict(type='beit_mm.BEiT', arch=dict(embed_dims=32, num_layers=1, num_heads=2,
                                                            mlp_ratio=2.0), img_size=32, patch_size=16))
print(json.dumps(dict(before=before, built=type(backbone).__module__, models=beit_mm.models.__name__)))
""")
    assert found == dict(before=[], built='beit_mm.models.backbones.beit', models='beit_mm.models'), found


def test_every_tool_answers_help_before_a_model_library_is_imported():
    found = _run(f"""
import contextlib, io, json, runpy, sys
result = {{}}
for tool in {TOOLS!r}:
    sys.argv = [tool, '--help']
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            runpy.run_path(tool, run_name='__main__')
            code = 'no exit'
        except SystemExit as stop:
            code = stop.code
    result[tool] = dict(code=code, usage=out.getvalue().startswith('usage:'), loaded={_LOADED})
    if result[tool]['loaded']:
        break
print(json.dumps(result))
""")
    assert list(found) == TOOLS, f'stopped at {list(found)[-1]}, which imported {found[list(found)[-1]]["loaded"]}'
    assert all(r == dict(code=0, usage=True, loaded=[]) for r in found.values()), found


def test_the_cheap_layout_table_names_what_the_converters_convert():
    from beit_mm.apis.convert import CONVERTERS, class_orders
    from beit_mm.converters import beit
    from beit_mm.converters.layouts import CLASS_ORDERS, MODELS
    assert {m: tuple(s) for m, s in CONVERTERS.items()} == MODELS and MODELS['beit'] == beit.SOURCES
    assert tuple(class_orders()) == CLASS_ORDERS
