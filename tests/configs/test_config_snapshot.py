"""``tools/analysis/config_snapshot.py`` over ``beit_mm.apis.config_snapshot``: a snapshot holds every config's values; compare names what changed."""
import json
import os
import os.path as osp

from ..conftest import load_tool


def _write(root, rel, text):
    path = osp.join(root, rel)
    os.makedirs(osp.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(text)


def test_snapshot_and_compare(tmp_path, capsys):
    tool = load_tool('tools/analysis/config_snapshot.py')
    before, after = str(tmp_path / 'before'), str(tmp_path / 'after')
    for root, lr in ((before, '1e-3'), (after, '2e-3')):
        _write(root, '_base_/schedule.py', f'lr = {lr}\noptim = dict(lr=lr, betas=(0.9, 0.999))\n')
        _write(root, 'family/a.py', "_base_ = ['../_base_/schedule.py']\nname = 'a'\n")
        _write(root, 'family/b.py', "name = 'b'\n")
    _write(after, 'family/broken.py', 'name = undefined_name\n')

    out = str(tmp_path / 'before.json')
    assert tool.main(['write', before, out]) == 0
    with open(out) as f:
        shot = json.load(f)
    assert sorted(shot) == ['family/a.py', 'family/b.py']  # _base_ fragments are left out
    assert shot['family/a.py'] == {'lr': 0.001, 'name': 'a', 'optim': {'lr': 0.001, 'betas': [0.9, 0.999]}}
    assert tool.main(['compare', out, before]) == 0
    capsys.readouterr()

    assert tool.main(['compare', out, after]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == 'family/broken.py: added'
    assert lines[1] == 'family/a.py: 2 keys differ: lr (0.001 -> 0.002), optim.lr (0.001 -> 0.002)'
    assert lines[-1] == '2 of 3 configs differ'
    from beit_mm.apis.config_snapshot import snapshot
    assert '__error__' in snapshot(after)['family/broken.py']
