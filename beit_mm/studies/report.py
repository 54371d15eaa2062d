"""The study's report: mean ± sample std over seeds, the majority-class baseline, the probe's warning and the
recommendation it leads to, the per-block feature table, the report text and probe-curve picture, and the chain's
status lines from a ``report.json``.

A pretrained arm whose frozen-feature probe does not beat the random-init probe by :data:`PROBE_MIN_GAIN` mIoU points
is flagged (:func:`probe_warnings`) and never recommended as a fine-tuning start (:func:`recommendation`).
"""
from __future__ import annotations

import os.path as osp
import statistics
from typing import TYPE_CHECKING

import numpy as np

from beit_mm.fileio.outputs import atomic_file

from .configs import FT_CONFIGS

if TYPE_CHECKING:
    from .settings import MimStudySettings

PROBE_MIN_GAIN = 1.0  # probe mIoU points over random init that count as learned (DenseProbeHook's min_gain)
FEATURE_IMAGES = 64  # validation images of the per-block feature statistics


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for one value)."""
    return float(np.mean(values)), (statistics.stdev(values) if len(values) > 1 else 0.0)


def fmt(values: list[float]) -> str:
    """``mean ± std`` with two decimals."""
    mean, std = mean_std(values)
    return f'{mean:.2f} ± {std:.2f}'


def probe_warnings(results: dict, min_gain: float = PROBE_MIN_GAIN) -> list[str]:
    """Report lines for the pretrained arms whose frozen features do not beat the random-init probe (the
    ``scratch`` arm's) by ``min_gain`` mIoU points: their pretraining taught the backbone nothing the probe sees, and
    fine-tuning from them can end below scratch. Empty without a ``scratch`` arm."""
    if 'scratch' not in results or not results['scratch']['probe']:
        return []
    init = statistics.mean(p['probe_mIoU'] for p in results['scratch']['probe'])
    lines = []
    for arm, res in results.items():
        if arm == 'scratch' or not res['pretrain'] or not res['probe']:
            continue
        probe = statistics.mean(p['probe_mIoU'] for p in res['probe'])
        if probe < init + min_gain:
            lines.append(f'- WARNING {arm}: frozen-feature probe mIoU {probe:.2f} vs {init:.2f} at random init '
                         f'(gain {probe - init:+.2f} < {min_gain:g}): this pretraining taught the backbone nothing '
                         'the probe sees; fine-tuning from it may end below scratch.')
    return lines


def recommendation(results: dict, heads: list[str], min_gain: float = PROBE_MIN_GAIN) -> str | None:
    """One line: where fine-tuning should start, ``recommendation: start from <arm or scratch>: <the numbers>``.

    The probe decides first: a pretrained arm whose mean frozen-feature probe mIoU does not beat the random-init
    probe (``scratch``'s) by ``min_gain`` points is never recommended (its pretraining taught nothing the probe sees;
    :func:`probe_warnings`). Of the arms that pass, the one whose fine-tuning mean mIoU beats scratch's by more than
    the spread (the sum of the two sample standard deviations over seeds) under every decoder in ``heads`` is
    recommended (the largest smallest margin wins); else scratch, with the numbers of each arm that decided it.
    None without a probed ``scratch`` arm and a probed pretrained arm.
    """
    if 'scratch' not in results or not results['scratch']['probe']:
        return None
    init = statistics.mean(p['probe_mIoU'] for p in results['scratch']['probe'])
    probes = {arm: statistics.mean(p['probe_mIoU'] for p in res['probe']) for arm, res in results.items()
              if arm != 'scratch' and res['pretrain'] and res['probe']}
    if not probes:
        return None
    reasons, margins = [], {}
    for arm, probe in probes.items():
        said = f'{arm} probe {probe:.2f} vs {init:.2f} at random init, gain {probe - init:+.2f}'
        if probe - init < min_gain:
            reasons.append(f'{said} < {min_gain:.1f}')
            continue
        fine = []
        for head in heads:
            m0, s0 = mean_std([r['mIoU'] for r in results['scratch']['finetune'][head]])
            m1, s1 = mean_std([r['mIoU'] for r in results[arm]['finetune'][head]])
            fine.append((m1 - m0 - (s1 + s0), f'{head} {m1 - m0:+.2f} vs scratch (spread {s1 + s0:.2f})'))
        said += f' >= {min_gain:.1f}, fine-tuning ' + ', '.join(text for _, text in fine)
        if min(margin for margin, _ in fine) > 0:
            margins[arm] = (min(margin for margin, _ in fine), said)
        else:
            reasons.append(f'{said}: not above scratch by more than the spread')
    if margins:
        arm = max(margins, key=lambda a: margins[a][0])
        return f'recommendation: start from {arm}: {margins[arm][1]}'
    return 'recommendation: start from scratch: ' + '; '.join(reasons)


def feature_table(results: dict) -> list[str]:
    """Report lines: the per-block statistics of every arm's fine-tuning start (pretraining run 0; scratch = random
    init), for what a MIM checkpoint carries over; empty when the probe results predate them."""
    if not all(res['probe'] and 'features' in res['probe'][0] for res in results.values()):
        return []
    columns = (('rms', 'token RMS'), ('token_cosine', 'token cosine'), ('gamma_1', 'mean abs gamma_1'),
               ('gamma_2', 'mean abs gamma_2'), ('rel_pos_bias_std', 'rel. pos. bias std'))
    lines = ['', f'What each fine-tuning start carries (the first {FEATURE_IMAGES} validation images; one value per '
             'block, block 1 first; token cosine: mean cosine between the patch tokens of an image, 1 = all alike; '
             'gamma: layer scales):', '', '| arm | ' + ' | '.join(title for _, title in columns) + ' |',
             '|---|' + '---|' * len(columns)]
    for arm, res in results.items():
        stats = res['probe'][0]['features']
        lines.append(f'| {arm} | ' + ' | '.join(' / '.join(f'{v:.2f}' for v in stats[key]) or '-'
                                               for key, _ in columns) + ' |')
    return lines


def mim_report(args: MimStudySettings, results: dict, tokenizer: dict | None, vqkd: dict | None, baseline: dict,
               seconds: float, teacher: dict | None = None, vqkd_supervised: dict | None = None) -> str:
    """The MIM study's report (Markdown): settings, tokenizers, the probe table with its warnings, the feature table,
    one fine-tuning table per decoder with each arm's difference to scratch, and the :func:`recommendation`.
    ``results``: ``{arm: {pretrain: [...], probe: [...], finetune: {head: [...]}}}`` (runs in seed order)."""
    runs = [r for res in results.values() for r in res['pretrain'] + res['probe'] +
            [r for per_head in res['finetune'].values() for r in per_head]] + [
                t for t in (tokenizer, vqkd, teacher, vqkd_supervised) if t]
    run_seconds = sum(r.get('seconds', 0.0) for r in runs)
    labeled = f'first {args.num_labeled} training images, ' if args.num_labeled else ''
    lines = [f'# MIM study: {args.labeled_root} (labeled, {labeled}{args.num_classes} classes) + '
             f'{args.unlabeled_root} (unlabeled)', '',
             f'Fine-tuning {args.ft_iters} iterations, seeds {args.seeds}; pretraining {args.mim_iters} iterations, '
             f'{args.pretrain_seeds} run(s) per arm'
             + (f'; dVAE {args.dvae_iters} iterations. ' if tokenizer else '. ')
             + (f'Fine-tuning options: {" ".join(args.ft_options)}. ' if args.ft_options else '')
             + (f'Pretrained arms keep the random init of {args.ft_keep_init}. ' if args.ft_keep_init else '')
             + (f'Tokenizers and pretraining runs from {args.pretrain_dir}. ' if args.pretrain_dir != args.work_dir
                else '') + 'Mean ± sample std over '
             f'seeds. Wall time {seconds / 60:.1f} min with --jobs {args.jobs} (this invocation; runs finished by '
             f'an earlier one in the work dir are reused); the runs\' own times add up to {run_seconds / 60:.1f} '
             'min.', '']
    if tokenizer:
        lines += [f'Tokenizer (held-out {args.labeled_root}/images/validation): codebook usage '
                  f'{tokenizer["usage"]:.3f}, perplexity {tokenizer["perplexity"]:.1f} '
                  f'({tokenizer["perplexity_fraction"]:.3f} of the vocabulary), PSNR {tokenizer["psnr"]:.2f} dB '
                  f'(mean-colour baseline {tokenizer["psnr_mean_colour"]:.2f} dB); grid {tokenizer["grid"]}.', '']
    if vqkd:
        lines += [f'VQ-KD tokenizer of vqkd-blockwise ({args.vqkd_iters} iterations, teacher = the '
                  f'{args.vqkd_teacher} backbone {vqkd["teacher_checkpoint"]}, dead_code_ratio '
                  f'{args.vqkd_dead_code_ratio}; held-out {args.labeled_root}/images/validation): codebook usage '
                  f'{vqkd["usage"]:.3f} ({vqkd["dead_codes"]} dead codes), perplexity {vqkd["perplexity"]:.1f}, '
                  f'teacher-feature cosine {vqkd["teacher_cosine"]:.3f}.', '']
    if teacher and vqkd_supervised:
        lines += [f'VQ-KD tokenizer of vqkd-supervised (same recipe; teacher = the last block of a {args.teacher_head} '
                  f'segmentor trained from random init with the labels of {args.teacher_labeled_root} '
                  f'({args.teacher_num_classes} classes, {args.teacher_iters} iterations; its validation mIoU there '
                  f'{teacher["mIoU"]:.2f}), so it knows classes the pretraining pool has no labels for): codebook '
                  f'usage {vqkd_supervised["usage"]:.3f} ({vqkd_supervised["dead_codes"]} dead codes), perplexity '
                  f'{vqkd_supervised["perplexity"]:.1f}, teacher-feature cosine '
                  f'{vqkd_supervised["teacher_cosine"]:.3f}.', '']
    probe_base = next(res['probe'][0] for res in results.values())
    lines += ['Pretraining and frozen features (dense probe of the layers a segmentor reads, on the labeled set\'s '
              'validation patches; beit_mm.evaluation.probe):', '',
              '| arm | MIM end metric | probe mIoU | probe mAcc | k-NN acc |', '|---|---|---|---|---|',
              f'| trivial baseline (majority class) | - | {probe_base["majority_mIoU"]:.2f} | '
              f'{probe_base["majority_mAcc"]:.2f} | {probe_base["majority_aAcc"]:.2f} |']
    for arm, res in results.items():
        pre = res['pretrain']
        if not pre:
            mim = '- (random init)'
        elif 'mim_acc' in pre[0]:
            mim = (f'mim_acc {fmt([100 * p["mim_acc"] for p in pre])} (most frequent token '
                   f'{fmt([100 * p["mim_acc_baseline"] for p in pre])})')
        else:
            mim = (f'L2 {fmt([p["loss"] for p in pre])} (predict-the-mean {fmt([p["loss_baseline"] for p in pre])})')
        probes = res['probe']
        lines.append(f'| {arm} | {mim} | {fmt([p["probe_mIoU"] for p in probes])} | '
                     f'{fmt([p["probe_mAcc"] for p in probes])} | {fmt([p["knn_acc"] for p in probes])} |')
    warnings = probe_warnings(results)
    if warnings:
        lines += [''] + warnings
    lines += feature_table(results)
    for head in args.heads:
        lines += ['', f'Fine-tuning with the {head} decoder ({osp.basename(FT_CONFIGS[head])}):', '',
                  '| arm | mIoU | mIoU per seed | aAcc | mAcc |', '|---|---|---|---|---|',
                  f'| trivial baseline (majority class) | {baseline["mIoU"]:.2f} | - | {baseline["aAcc"]:.2f} | '
                  f'{baseline["mAcc"]:.2f} |']
        for arm, res in results.items():
            ft = res['finetune'][head]
            per_seed = ', '.join(f'{r["mIoU"]:.2f}' for r in ft)
            lines.append(f'| {arm} | {fmt([r["mIoU"] for r in ft])} | {per_seed} | {fmt([r["aAcc"] for r in ft])} | '
                         f'{fmt([r["mAcc"] for r in ft])} |')
        if 'scratch' in results:
            m0, s0 = mean_std([r['mIoU'] for r in results['scratch']['finetune'][head]])
            lines.append('')
            for arm in (a for a in results if a != 'scratch'):
                m1, s1 = mean_std([r['mIoU'] for r in results[arm]['finetune'][head]])
                verdict = 'more' if abs(m1 - m0) > s1 + s0 else 'not more'
                lines.append(f'- {head}: {arm} - scratch = {m1 - m0:+.2f} mIoU; the sum of the two standard '
                             f'deviations is {s1 + s0:.2f}: the difference is {verdict} than the spread.')
    advice = recommendation(results, args.heads)
    if advice:
        lines += ['', advice]
    return '\n'.join(lines) + '\n'


def plot_probe_curves(curves: dict, path: str) -> str | None:
    """Every pretrained arm's dense-probe mIoU over pretraining (``DenseProbeHook`` curves ``{arm: curve}``,
    pretraining run 0) in one picture, with the random-init and majority-class levels; returns the path, or None
    without curves."""
    curves = {arm: curve for arm, curve in curves.items() if curve}
    if not curves:
        return None
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for arm, curve in curves.items():
        points = [dict(curve['init'], iter=0)] + curve['history']
        ax.plot([p['iter'] for p in points], [p['probe_mIoU'] for p in points], marker='o', label=arm)
    first = next(iter(curves.values()))
    ax.axhline(first['init']['probe_mIoU'], color='grey', ls='--', lw=1,
               label=f'random init (iteration 0, first arm) {first["init"]["probe_mIoU"]:.2f}')
    ax.axhline(first['init']['majority_mIoU'], color='black', ls=':', lw=1,
               label=f'majority class {first["init"]["majority_mIoU"]:.2f}')
    ax.set_xlabel('pretraining iteration')
    ax.set_ylabel('dense linear-probe mIoU (frozen)')
    blocks = first['layers'] if first['layers'] is not None else "the segmentor's"
    ax.set_title(f'Dense probe during MIM pretraining ({first["num_classes"]} classes, blocks {blocks})', fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_file(path) as tmp:
        fig.savefig(tmp, format='png')
    plt.close(fig)
    return path


def majority_baseline(train_dataset, val_dataset) -> dict:
    """mIoU / aAcc / mAcc (percent) of predicting the most frequent training class (pixels of the training dataset,
    e.g. its first ``--num-labeled`` images) everywhere on the validation set (``majority_metrics``)."""
    from beit_mm.data.datasets.labeled_sets import label_counts
    from beit_mm.evaluation.probe import majority_metrics
    val_counts = label_counts(val_dataset)
    if val_counts.sum() == 0:
        raise RuntimeError(f'no label of the {len(val_counts)} classes in the {len(val_dataset)} validation maps under '
                           f'{val_dataset.data_prefix["seg_map_path"]}: raw ids must be 1..{len(val_counts)}')
    return majority_metrics(label_counts(train_dataset), val_counts)


def chain_lines(report: dict) -> list[str]:
    """The chain's status lines (``[chain] <stage>: ...``) from a study's ``report.json``: tokenizer statistics, each
    arm's MIM and fine-tuning result next to its baselines (seed 0), and the :func:`recommendation`."""
    a, t, v, b, res = report['args'], report['tokenizer'], report['vqkd'], report['baseline'], report['results']
    lines = []
    if t:
        lines.append(f"[chain] dvae: iters={a['dvae_iters']} usage={t['usage']:.4f} perplexity={t['perplexity']:.1f} "
                     f"psnr={t['psnr']:.2f} (held-out; mean-colour psnr {t['psnr_mean_colour']:.2f})")
    if v:
        lines.append(f"[chain] vqkd: iters={a['vqkd_iters']} usage={v['usage']:.4f} perplexity={v['perplexity']:.1f} "
                     f"teacher_cosine={v['teacher_cosine']:.3f} (held-out; teacher = {a['vqkd_teacher']})")
    for arm in (x for x in res if x != 'scratch'):
        pre = res[arm]['pretrain'][0]
        target = (f"mim_acc={pre['mim_acc']:.4f} (most frequent token {pre['mim_acc_baseline']:.4f})"
                  if 'mim_acc' in pre else f"(predict-the-mean loss {pre['loss_baseline']:.4f})")
        lines.append(f"[chain] mim {arm}: iters={a['mim_iters']} loss={pre['loss']:.4f} {target}")
    for head in a['heads']:
        scratch = res['scratch']['finetune'][head][0]['mIoU']
        for arm in (x for x in res if x != 'scratch'):
            ft = res[arm]['finetune'][head][0]['mIoU']
            lines.append(f"[chain] seg ({head} decoder) {arm}: iters={a['ft_iters']} mIoU={ft:.2f} from MIM vs "
                         f"{scratch:.2f} from scratch, {ft - scratch:+.2f} (majority class {b['mIoU']:.2f})")
    advice = recommendation(res, a['heads'])
    if advice:
        lines.append(f'[chain] {advice}')
    return lines
