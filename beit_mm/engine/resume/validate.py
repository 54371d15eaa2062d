"""The one pass over a resumed checkpoint: every field validated against this run, the rest dropped."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from mmengine.hooks import EMAHook
from mmengine.model import is_model_wrapper
from mmengine.runner import IterBasedTrainLoop, Runner

from .counters import batch_now, check_batch, check_batch_record, check_counters, check_seed, rescale_iterations
from .fields import CHECKPOINT_FIELDS, META_DROPPED, META_FIELDS, META_UNREAD, _bounded_int, _keep_only, _plain, _refuse
from .message_hub import clean_message_hub, same_run
from .optimizer import _WEIGHTS_FIX, _revised, check_optimizer_state, check_tensors
from .rng import check_rng_states
from .schedulers import check_param_schedulers


@dataclass
class ResumeReport:
    """What :func:`validate_resume` did besides checking: entries dropped, the batch record and the conversion."""

    dropped: list[str] = field(default_factory=list)
    record: tuple[int, int, int] | None = None
    samples_seen: int = 0
    ratio: float | None = None
    iter_before: int = 0
    iter_after: int = 0


def _model(runner) -> torch.nn.Module:
    return runner.model.module if is_model_wrapper(runner.model) else runner.model


def validate_resume(runner, checkpoint: dict, source: str, schedule_in_samples: bool = False) -> ResumeReport:
    """Validate and clean, in place, a checkpoint ``runner`` resumes from, before anything uses it; report what was
    dropped and converted.

    Args:
        runner: the runner in ``after_load_checkpoint``; under a ``FlexibleRunner`` weights, optimizer and schedulers
            are left to its strategy.
        checkpoint: the opened checkpoint.
        source: its path, for messages.
        schedule_in_samples: convert another global batch instead of refusing it.

    Raises:
        TrainingStateError: the first field that does not fit.
    """
    report = ResumeReport()
    _keep_only(checkpoint, CHECKPOINT_FIELDS, '', report.dropped)
    meta = checkpoint.get('meta')
    if not isinstance(meta, dict):
        raise _refuse(source, 'meta', meta, 'a training checkpoint keeps its iteration and seed in a dict',
                      'resume from a checkpoint tools/train.py wrote')
    _keep_only(meta, META_FIELDS, 'meta.', report.dropped, quiet=META_UNREAD + META_DROPPED)
    for key in ('dataset_meta', 'dense_probe'):
        if key in meta and not _plain(meta[key]):
            del meta[key]
            report.dropped.append(f'meta.{key} (not plain values of bounded size)')
    check_seed(meta.get('seed'), source)
    for key in ('iter', 'epoch'):
        if not _bounded_int(meta.get(key), 0, 2**62):
            raise _refuse(source, f'meta.{key}', meta.get(key), 'a resumed run continues at this count, an int >= 0',
                          'resume from a checkpoint tools/train.py wrote')
    training = getattr(runner.train_loop, 'dataloader', None) is not None
    if check_batch_record(meta, source) and training:
        world_size, batch_size, counts = batch_now(runner)
        report.record = (meta['world_size'], meta['batch_size'], meta['accumulative_counts'])
        report.ratio = check_batch(meta, world_size, batch_size, counts, source, schedule_in_samples)
        report.samples_seen = meta['samples_seen']
        report.iter_before = meta['iter']
        if report.ratio is not None:
            rescale_iterations(checkpoint, report.ratio)
            if isinstance(runner.train_loop, IterBasedTrainLoop):
                runner.train_loop._max_iters = int(round(runner.train_loop._max_iters * report.ratio))
        report.iter_after = meta['iter']
    max_iters, max_epochs = runner.max_iters, runner.max_epochs
    check_counters(meta, source, max_iters, max_epochs)
    check_rng_states(checkpoint.get('rng_states'), source)
    report.dropped += clean_message_hub(checkpoint.get('message_hub'), source, runner.work_dir,
                                        same_run(source, runner.work_dir), max(meta['iter'], meta['epoch']))
    if not isinstance(runner, Runner):
        return report
    model = _model(runner)
    own = model.state_dict()
    check_tensors(own, _revised(checkpoint.get('state_dict')), source, 'state_dict')
    emas = [hook for hook in runner.hooks if isinstance(hook, EMAHook)]
    if 'ema_state_dict' in checkpoint:
        if not emas:
            raise _refuse(source, 'ema_state_dict', f'{len(checkpoint["ema_state_dict"])} tensors', 'saved by a run '
                          'with an EMA (its state_dict holds the EMA weights): this run has no EMAHook and would '
                          'continue from the EMA weights', 'resume with --ema (or the config\'s EMAHook)')
        check_tensors(emas[0].ema_model.state_dict(), checkpoint['ema_state_dict'], source, 'ema_state_dict')
        steps = checkpoint['ema_state_dict'].get('steps')
        if steps is not None and not (steps.ndim == 0 and not steps.is_floating_point()
                                      and 0 <= int(steps) <= max_iters):
            raise _refuse(source, "ema_state_dict['steps']", steps, f'the EMA\'s update count, an int in '
                          f'[0, {max_iters}]', _WEIGHTS_FIX)
    if 'optimizer' in checkpoint:
        runner.optim_wrapper = runner.build_optim_wrapper(runner.optim_wrapper)
        report.dropped += check_optimizer_state(runner.optim_wrapper, checkpoint['optimizer'], source)
    if 'param_schedulers' in checkpoint:
        if runner.param_schedulers is None:
            del checkpoint['param_schedulers']
        else:
            runner.param_schedulers = runner.build_param_scheduler(runner.param_schedulers)
            report.dropped += check_param_schedulers(runner.param_schedulers, checkpoint['param_schedulers'], source,
                                                     max_iters, max_epochs)
    return report
