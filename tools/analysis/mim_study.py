"""Does BEiT pretraining help when labels are scarce? The study a user runs before trusting beit_mm's MIM (a thin CLI
over ``beit_mm.studies.mim``; the protocol, what it reports and how to read it: docs/pretraining.md).

    python tools/analysis/mim_study.py --labeled-root data/shapes --unlabeled-root data/shapes_unlabeled \
        --num-classes 7 [--num-labeled N] [--seeds 0 1 2] [--jobs 2] [--arms ...] [--heads linear upernet ...]
        [--work-dir work_dirs/mim_study]   (every option: --help)

Writes ``report.md``, ``report.json`` and ``probe_curves.png`` to the work dir and prints the report, which ends with
one ``recommendation: start from ...`` line. Finished runs in the work dir are reused; a cut run resumes.
"""
from __future__ import annotations

import argparse

from beit_mm.studies.settings import MimStudySettings, StudySettingsError, add_mim_study_arguments


def parse_args(argv: list[str] | None = None) -> MimStudySettings:
    parser = argparse.ArgumentParser(description='MIM pretraining vs scratch (and its ablations) with few labels')
    add_mim_study_arguments(parser)
    try:
        return MimStudySettings(**vars(parser.parse_args(argv)))
    except StudySettingsError as error:
        parser.error(str(error))


def main(argv: list[str] | None = None) -> None:
    settings = parse_args(argv)
    from beit_mm.data.datasets.labeled_sets import LabeledDataError
    from beit_mm.fileio.names import refusal
    from beit_mm.fileio.outputs import OutputError
    from beit_mm.studies.mim import run_study
    try:
        text = run_study(settings)
    except (OutputError, LabeledDataError) as error:
        raise refusal('mim_study.py', error) from None
    print(text)


if __name__ == '__main__':
    main()
