"""The study's runs: ``tools/train.py`` in a subprocess (:func:`train`, which resumes a run that was cut short) and the
run cache (:func:`cached`: a finished run's metrics with the settings that produced them, reused, never mixed with
other settings), plus what a finished run leaves (its log values, last checkpoint, tokenizer statistics, probe curve).
"""
from __future__ import annotations

import glob
import json
import math
import os
import os.path as osp
import re
import subprocess
import sys
import time
from collections.abc import Callable

from beit_mm.fileio.json_file import read_json
from beit_mm.fileio.outputs import atomic_file
from beit_mm.fileio.paths import inside
from beit_mm.fileio.work_dir import check_replaceable, write_work_dir_file

from .configs import ROOT


def study_env() -> dict[str, str]:
    """The environment of a study subprocess: this one's, with the checkout first on ``PYTHONPATH``."""
    return dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''))


def train(config: str, work_dir: str, options: list[str]) -> str:
    """``tools/train.py config`` in a subprocess; the log text (also in ``work_dir/train.log``, this process's part).

    :func:`cached` trains only where no finished run is, so any checkpoints there are the study's own, left by a run
    that was cut short (a killed job, the end of a session). The run records what it was started with (the config
    text and ``options``) in ``work_dir/run.json``; a later call with the same ones continues the cut run from its last
    complete checkpoint (``tools/train.py --resume``, bit-identical to an uncut run in tests/engine/test_kill_resume.py; the
    pretraining configs save every 500 iterations, the dVAE's every 250); with other ones, or none recorded, it starts
    again over them (``--overwrite``)."""
    os.makedirs(work_dir, exist_ok=True)
    with open(config) as f:
        started = dict(config=f.read(), options=list(options))
    record = osp.join(work_dir, 'run.json')
    same = False
    for name in ('run.json', 'train.log'):  # files of the study's own runs only (the work dir's manifest lists them)
        check_replaceable(work_dir, name)
    if osp.isfile(record):
        same = read_json(record) == started
    cmd = [sys.executable, osp.join(ROOT, 'tools', 'train.py'), config, '--work-dir', work_dir,
           '--resume' if same else '--overwrite']
    if not same:
        write_work_dir_file(work_dir, 'run.json', json.dumps(started))
    if options:
        cmd += ['--cfg-options', *options]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=study_env())
    log = proc.stdout + proc.stderr
    write_work_dir_file(work_dir, 'train.log', log)
    if proc.returncode != 0:
        raise RuntimeError(f'{" ".join(cmd)} failed (exit {proc.returncode}); log {work_dir}/train.log:\n'
                           f'{log[-3000:]}')
    return log


def last_value(log: str, key: str) -> float:
    """The last ``key: <number>`` of a training log (MMEngine's logger lines)."""
    found = re.findall(rf'(?<![\w/]){re.escape(key)}: (-?[0-9.]+(?:e-?\d+)?)', log)
    if not found:
        raise RuntimeError(f'no "{key}: <number>" in the training log')
    return float(found[-1])


#: The study's record of a finished run, next to its ``metrics.json``: the settings and the sha256 of every file the
#: cached metrics rest on (``metrics.json``, the run's last checkpoint), written by :func:`cached` after the run.
RUN_RECORD = '.beit_mm_study_run.json'
METRICS = 'metrics.json'


class UntrustedRecordError(RuntimeError):
    """A run folder holds records the study cannot prove it wrote; the message names them and the fix."""


def _sha256(path: str) -> str:
    from beit_mm.fileio.manifest import file_sha256
    return file_sha256(path)


def _plain_file(path: str) -> bool:
    return osp.isfile(path) and not osp.islink(path)


def _check_values(value, where: str) -> None:
    """Numbers finite, no URL anywhere (a record's strings never name something to fetch)."""
    if isinstance(value, dict):
        for key, item in value.items():
            _check_values(item, f'{where}.{key}')
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_values(item, f'{where}[{i}]')
    elif isinstance(value, float) and not math.isfinite(value):
        raise UntrustedRecordError(f'{where} is {value}')
    elif isinstance(value, str) and '://' in value:
        raise UntrustedRecordError(f'{where} names a URL ({value[:200]!r})')


def trusted_metrics(work_dir: str, settings: dict) -> dict:
    """The metrics of the finished run in ``work_dir``, when the study's record vouches for them: ``metrics.json`` and
    :data:`RUN_RECORD` plain files, the record's settings equal to ``settings`` and to the metrics' own, the sha256 of
    ``metrics.json`` and of the ``checkpoint`` it names (a plain file inside ``work_dir``) equal to the recorded ones,
    every number finite and no URL in it.

    Raises:
        UntrustedRecordError: which of these fails, naming the folder and the fix; the metrics are not used.
        RuntimeError: the record is the study's, but for other settings (another ``--num-labeled``...).
    """
    path, record_path = osp.join(work_dir, METRICS), osp.join(work_dir, RUN_RECORD)
    try:
        if not _plain_file(path) or not _plain_file(record_path):
            raise UntrustedRecordError(f'{METRICS} or {RUN_RECORD} is missing, a link or not a plain file')
        record = read_json(record_path)
        files = record.get('files') if isinstance(record, dict) else None
        if not isinstance(files, dict) or files.get(METRICS) != _sha256(path):
            raise UntrustedRecordError(f'{METRICS} is not the file the study recorded (its sha256 differs)')
        metrics = read_json(path)
        if not isinstance(metrics, dict) or not isinstance(metrics.get('settings'), dict):
            raise UntrustedRecordError(f'{METRICS} holds no settings')
        if metrics['settings'] != record.get('settings'):
            raise UntrustedRecordError(f'the settings in {METRICS} are not the recorded ones')
        _check_values(metrics, METRICS)
        checkpoint = metrics.get('checkpoint')
        if checkpoint is not None:
            if not isinstance(checkpoint, str) or not inside(checkpoint, work_dir) or not _plain_file(checkpoint):
                raise UntrustedRecordError(f'its checkpoint {checkpoint!r} is not a plain file inside {work_dir}')
            rel = osp.relpath(checkpoint, work_dir)
            if files.get(rel) != _sha256(checkpoint):
                raise UntrustedRecordError(f'its checkpoint {checkpoint} is not the file the study recorded')
    except (UntrustedRecordError, OSError, ValueError) as error:
        raise UntrustedRecordError(
            f'{work_dir} holds a finished-run record that the study cannot prove it wrote ({error}): its numbers are '
            'neither reported nor used. Fix: delete that folder to redo the run, or start the study with another '
            '--work-dir') from None
    stored = metrics['settings']
    if stored != settings:
        changed = '; '.join(f'{k}: {stored.get(k)!r} there, {v!r} now' for k, v in settings.items()
                            if stored.get(k) != v)
        raise RuntimeError(f'{work_dir} holds a finished run with other settings ({changed}). Fix: start the '
                           'study with another --work-dir, or delete that folder to redo the run.')
    return metrics


def cached(work_dir: str, run: Callable[[], dict], settings: dict) -> dict:
    """``run()``'s metrics, stored with the ``settings`` that produced them in ``work_dir/metrics.json`` and reused
    when the study's record vouches for that file (:func:`trusted_metrics`: settings and sha256 of the metrics and
    of the checkpoint they name). A finished run with other settings (e.g. another ``--num-labeled`` in the same work
    dir), or records the study did not write, stop the study with an error: their results are neither overwritten
    nor reported as this study's."""
    path = osp.join(work_dir, METRICS)
    if osp.lexists(path) or osp.lexists(osp.join(work_dir, RUN_RECORD)):
        return trusted_metrics(work_dir, settings)
    start = time.time()
    metrics = run()
    metrics['seconds'] = round(time.time() - start, 1)
    metrics['settings'] = settings
    with atomic_file(path) as tmp, open(tmp, 'w') as f:  # a kill leaves no half-written metrics.json
        json.dump(metrics, f, indent=1)
    files = {METRICS: _sha256(path)}
    checkpoint = metrics.get('checkpoint')
    if isinstance(checkpoint, str) and inside(checkpoint, work_dir) and _plain_file(checkpoint):
        files[osp.relpath(checkpoint, work_dir)] = _sha256(checkpoint)
    with atomic_file(osp.join(work_dir, RUN_RECORD)) as tmp, open(tmp, 'w') as f:  # last: the run is finished
        json.dump(dict(written_by='beit_mm.studies', settings=settings, files=files), f, indent=1)
    return metrics


def last_checkpoint(work_dir: str) -> str:
    """The checkpoint MMEngine's ``last_checkpoint`` pointer of ``work_dir`` names, in ``work_dir``."""
    with open(osp.join(work_dir, 'last_checkpoint')) as f:  # only its file name is used: the checkpoint stays in work_dir
        return osp.join(work_dir, osp.basename(f.read(4096).strip()))


def last_tokenizer_eval(work_dir: str) -> dict:
    """The held-out statistics ``TokenizerEvalHook`` wrote last (``tokenizer_eval/iter_N.json``, largest N)."""
    evals = glob.glob(osp.join(work_dir, 'tokenizer_eval', 'iter_*.json'))
    return read_json(max(evals, key=lambda p: int(re.search(r'iter_(\d+)', p).group(1))))



def probe_curve(checkpoint: str) -> dict | None:
    """The ``DenseProbeHook`` curve a MIM run left next to its checkpoint (``dense_probe.json``), if any."""
    path = osp.join(osp.dirname(checkpoint), 'dense_probe.json')
    if not osp.isfile(path):
        return None
    return read_json(path)
