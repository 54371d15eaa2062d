"""The study's runs: :func:`train` (training in a child process, resuming a run that was cut short), the run cache
(:func:`cached`: a finished run's metrics with the settings that produced them, never mixed with other settings), and
what a finished run leaves (:func:`last_scalar` of MMEngine's scalar file, its last checkpoint, tokenizer statistics,
probe curve).
"""
from __future__ import annotations

import glob
import json
import math
import multiprocessing
import os
import os.path as osp
import re
import sys
import time
import traceback
from collections.abc import Callable

from beit_mm.fileio.json_file import parse_json, read_json
from beit_mm.fileio.outputs import atomic_file
from beit_mm.fileio.paths import inside
from beit_mm.fileio.text_file import TextFileError, read_bounded
from beit_mm.fileio.work_dir import check_replaceable, record_written, write_work_dir_file

MAX_LOG_BYTES = 256 * 2**20  # a run's captured output (train.log) and its scalars.json: far below this


def cfg_options(options: list[str]) -> dict:
    """``KEY=VALUE`` strings (as ``--cfg-options`` takes them) as the dict MMEngine's ``DictAction`` makes of them."""
    import argparse

    from mmengine.config import DictAction
    if not options:
        return {}
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument('--options', nargs='+', action=DictAction)
    return parser.parse_args(['--options', *options]).options


def _train_child(log_path: str, config: str, kwargs: dict) -> None:
    """The child process of :func:`train`: its output (file descriptors 1 and 2: MMEngine's logger, warnings, C
    extensions) into ``log_path``, written atomically, then ``beit_mm.apis.train.train(config, **kwargs)``; exit 2
    when training is refused, 1 on any other error."""
    status = 0
    with atomic_file(log_path) as tmp, open(tmp, 'w') as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        from beit_mm.apis.train import TrainingRefused
        from beit_mm.apis.train import train as train_run
        try:
            train_run(config, **kwargs)
        except TrainingRefused as error:
            print(f'train.py: error: {error}', file=sys.stderr)
            status = 2
        except BaseException:  # noqa: B902 -- any failure: its traceback in the log, the parent reports it
            traceback.print_exc()
            status = 1
        sys.stdout.flush()
        sys.stderr.flush()
    sys.exit(status)


def start_training(log_path: str, config: str, kwargs: dict) -> int:
    """Run :func:`_train_child` in a fresh interpreter (``multiprocessing``'s ``spawn``: MMEngine's global instances,
    the registries' scopes and the RNG of one run never meet another's, and a study can run several at a time); its
    exit code."""
    process = multiprocessing.get_context('spawn').Process(target=_train_child, args=(log_path, config, kwargs))
    process.start()
    process.join()
    return process.exitcode


def train(config: str, work_dir: str, options: list[str]) -> str:
    """``beit_mm.apis.train.train(config, work_dir=work_dir, cfg_options=options)`` in a child process
    (:func:`start_training`); its output goes to ``work_dir/train.log``, whose text is returned.

    :func:`cached` trains only where no finished run is, so any checkpoints there are the study's own, left by a run
    that was cut short (a killed job, the end of a session). The run records what it was started with (the config
    text and ``options``) in ``work_dir/run.json``; a later call with the same ones continues the cut run from its last
    complete checkpoint (``resume='auto'``, bit-identical to an uncut run); with other ones, or none recorded, it
    starts again over them (``overwrite=True``)."""
    os.makedirs(work_dir, exist_ok=True)
    started = dict(config=read_bounded(config, MAX_LOG_BYTES, TextFileError, 'config').decode('utf-8'),
                   options=list(options))
    record = osp.join(work_dir, 'run.json')
    same = False
    for name in ('run.json', 'train.log'):  # files of the study's own runs only (the work dir's manifest lists them)
        check_replaceable(work_dir, name)
    if osp.isfile(record):
        same = read_json(record) == started
    if not same:
        write_work_dir_file(work_dir, 'run.json', json.dumps(started))
    kwargs = dict(work_dir=work_dir, resume='auto' if same else None, overwrite=not same,
                  cfg_options=cfg_options(options) or None)
    log_path = osp.join(work_dir, 'train.log')
    code = start_training(log_path, config, kwargs)
    record_written(work_dir, 'train.log')
    log = read_bounded(log_path, MAX_LOG_BYTES, TextFileError, 'log').decode('utf-8', errors='replace') \
        if osp.isfile(log_path) else ''
    if code != 0:
        raise RuntimeError(f'training {config} in {work_dir} failed (exit {code}); log {work_dir}/train.log:\n'
                           f'{log[-3000:]}')
    return log


def scalar_files(work_dir: str) -> list[str]:
    """The ``scalars.json`` files MMEngine's ``LocalVisBackend`` wrote in ``work_dir`` (one per start of the run:
    ``<timestamp>/vis_data/scalars.json``), oldest first."""
    return sorted(glob.glob(osp.join(work_dir, '*', 'vis_data', 'scalars.json')),
                  key=lambda p: osp.basename(osp.dirname(osp.dirname(p))))


def last_scalar(work_dir: str, key: str) -> float:
    """The last value of the scalar ``key`` that the run in ``work_dir`` logged (a training loss, a validation metric
    such as ``mIoU``), read from its :func:`scalar_files` (JSON lines), the latest start's last."""
    found = None
    for path in scalar_files(work_dir):
        text = read_bounded(path, MAX_LOG_BYTES, TextFileError, 'scalars').decode('utf-8')
        for line in filter(None, (line.strip() for line in text.splitlines())):
            record = parse_json(line, path)
            if isinstance(record, dict) and key in record:
                found = float(record[key])
    if found is None:
        raise RuntimeError(f'no scalar "{key}" in {", ".join(scalar_files(work_dir)) or "no scalars.json"} of '
                           f'{work_dir} (MMEngine\'s LocalVisBackend writes <timestamp>/vis_data/scalars.json; the '
                           "config's visualizer needs it)")
    return found


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
    """The checkpoint MMEngine's ``last_checkpoint`` pointer of ``work_dir`` names, in ``work_dir`` (only its file
    name is used: the checkpoint stays in ``work_dir``, wherever the pointer says the run was)."""
    named = read_bounded(osp.join(work_dir, 'last_checkpoint'), 4096, TextFileError, 'checkpoint pointer')
    return osp.join(work_dir, osp.basename(named.decode('utf-8', errors='replace').strip()))


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
