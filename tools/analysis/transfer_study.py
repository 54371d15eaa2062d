"""The MIM study on several datasets in one command: does a result on one dataset hold on another? A thin CLI over
``beit_mm.studies.transfer``.

    python tools/analysis/transfer_study.py [--datasets shapes digits] [--arms scratch vqkd-blockwise vqkd-supervised]
        [--heads upernet linear] [--seeds 0 1 2] [--jobs 2] [--data-dir data] [--work-dir work_dirs/transfer_study]
        [--num-train N] [--num-val N] [--num-unlabeled N] [MIM_STUDY_OPTION ...]

For every dataset (``beit_mm.studies.transfer.DATASETS``): the labeled set and the unlabeled pool are written by the
project's data tool (``beit_mm.data.demo.ade20k.make_demo_ade20k``: ``<data-dir>/<folder>`` with raw ids 1..K in ADE20K
layout, ``<data-dir>/<folder>_unlabeled``; a root that is not the tool's own is refused, never overwritten), then
the MIM study (``beit_mm.studies.mim``, what ``tools/analysis/mim_study.py`` runs) runs on them in this process with
the same arms, heads, seeds and budgets into
``<work-dir>/<folder>/`` (its own ``report.md``/``report.json``; finished runs are reused). The ``vqkd-supervised``
arm's teacher learns the labels of the *next* dataset in ``--datasets`` (shapes for the digits, digits for the shapes):
a teacher that knows something the pretraining pool does not, as CLIP does for BEiT v2. Options this tool does not
know (``--mim-iters 3000``, ``--ft-options ...``) go to every study unchanged.

``<work-dir>/report.md`` (also printed) holds, for every arm and decoder, the difference to scratch on each dataset
with its spread (the sum of the two standard deviations over seeds), the scratch and majority-class mIoU beside it,
and the verdict per dataset: ``gain`` / ``loss`` when the difference is larger than the spread, else ``within
spread`` (the frozen probe against random init: ``learned`` from the study's warning margin of 1 point); then each
dataset's own tables. A result that holds on one dataset only is reported as such.

Datasets (64 px, 2 cores, ~1.5 h each for the three default arms and both decoders):

- ``shapes``: 7 classes named by the outline of objects of random colour and texture on a flat background (300
  labeled + 300 validation images, 3000 unlabeled).
- ``digits``: scikit-learn's bundled UCI handwritten digits, four per image on a noisy textured background, label =
  digit + 1 on ink (10 classes; 400 labeled + 100 validation images from glyphs never used in training, 3000
  unlabeled).
- ``digits-dark`` (folder ``digits_dark``, not in the default ``--datasets``): the same digits in dark ink on light
  paper; the colour-ink digits defeat a from-scratch study model at this budget, these do not.
"""
from __future__ import annotations

import argparse

from beit_mm.fileio.outputs import OutputError
from beit_mm.studies.settings import StudySettingsError, TransferStudySettings, add_mim_study_arguments
from beit_mm.studies.transfer import DATASETS, DEFAULT_DATASETS, run_transfer_study


def parse_args(argv: list[str] | None = None) -> TransferStudySettings:
    parser = argparse.ArgumentParser(description='The MIM study on several datasets, one table each and a summary')
    parser.add_argument('--datasets', nargs='+', choices=tuple(DATASETS), default=list(DEFAULT_DATASETS))
    parser.add_argument('--arms', nargs='+', default=['scratch', 'vqkd-blockwise', 'vqkd-supervised'])
    parser.add_argument('--heads', nargs='+', default=['upernet', 'linear'])
    parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    parser.add_argument('--jobs', type=int, default=2, help='runs at a time within each study')
    parser.add_argument('--data-dir', default='data', help='where the datasets are written (or reused)')
    parser.add_argument('--work-dir', default='work_dirs/transfer_study')
    parser.add_argument('--num-train', type=int, default=None, help='labeled training images (default per dataset)')
    parser.add_argument('--num-val', type=int, default=None, help='validation images (default per dataset)')
    parser.add_argument('--num-unlabeled', type=int, default=None, help='unlabeled images (default per dataset)')
    args, extra = parser.parse_known_args(argv)
    passed_on = add_mim_study_arguments(argparse.ArgumentParser(prog=f'{parser.prog} (options of every dataset\'s '
                                                                     'study)'), passed_on=True)
    try:
        return TransferStudySettings(**vars(args), mim_options=vars(passed_on.parse_args(extra)))
    except StudySettingsError as error:
        parser.error(str(error))


def main(argv: list[str] | None = None) -> None:
    settings = parse_args(argv)
    from beit_mm.fileio.names import refusal
    from beit_mm.data.demo.root import NotADemoRootError
    try:
        text = run_transfer_study(settings)
    except (NotADemoRootError, OutputError) as error:
        raise refusal('transfer_study.py', error) from None
    print(text)


if __name__ == '__main__':
    main()
