"""How two paths relate once links are resolved: the one rule the readers and the writers of the file room share."""
from __future__ import annotations

import os
import os.path as osp


def inside(path: str, folder: str) -> bool:
    """Whether ``path``, links resolved, is ``folder`` or lies under it (links resolved too)."""
    path, folder = osp.realpath(path), osp.realpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)
