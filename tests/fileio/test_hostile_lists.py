"""What a list declares is bounded while it is read, only recorded leftovers are removed, and every name a tool prints
or refuses with is one escaped line with exit code 2: one hostile file per class, built in the test."""
from __future__ import annotations

import os
import types

from mmengine.logging import MessageHub, MMLogger

from beit_mm.engine.hooks.atomic_checkpoint import AtomicCheckpointHook
from beit_mm.fileio.outputs import PARTIAL_SUFFIX, atomic_write_bytes


# ------------------------------------------------------------------------- only recorded leftovers are removed
def test_another_programs_partial_checkpoint_stays(tmp_path):
    """A browser's partial download of ``iter_80000.pth`` (``iter_80000.pth.part``) is no write of this library: the
    start-of-run cleanup and a save of that very checkpoint leave it byte-identical; the hook's own leftover goes."""
    download = tmp_path / 'iter_80000.pth.part'
    download.write_bytes(b'half of a download')
    own = tmp_path / ('iter_4.pth' + PARTIAL_SUFFIX)
    own.write_bytes(b'half of a save')
    runner = types.SimpleNamespace(work_dir=str(tmp_path), logger=MMLogger.get_instance('hostile_lists'),
                                   message_hub=MessageHub.get_instance('hostile_lists'))
    AtomicCheckpointHook(interval=1, by_epoch=False).before_train(runner)
    atomic_write_bytes(b'a whole checkpoint', str(tmp_path / 'iter_80000.pth'))
    assert download.exists() and download.read_bytes() == b'half of a download', 'another program\'s .part file was removed'
    assert sorted(os.listdir(tmp_path)) == ['iter_80000.pth', 'iter_80000.pth.part']
