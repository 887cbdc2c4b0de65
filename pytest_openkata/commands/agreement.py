"""``python -m pytest_openkata agreement LOG_A (LOG_B | --labels FILE) [--json OUT]
[--min-kappa X]``: how far two judges, or a judge and human labels, agree on the same answers.

``LOG_A`` and ``LOG_B`` are run logs of the same answers judged by two judges (a run and its
re-judge, or two runs whose agent answers came from the cache); ``--labels`` is a labels file
of human verdicts on ``LOG_A``'s trials (:mod:`pytest_openkata.core.verdict_labels`). The
table goes to standard output; ``--json OUT`` also writes the report as JSON (atomically, never
over an existing file: ``OUT-2`` and on when taken). ``--min-kappa X`` is the gate of a team
that calibrates a cheaper judge: exit 1 when κ is below X on any criterion; a criterion whose
κ is undefined (both sides gave it one verdict throughout) is reported, not failed.

Exit codes: 0 agreement measured (and the gate passed), 1 the gate failed or the JSON could
not be written, 2 bad arguments or inputs that cannot be read or compared.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pytest_openkata.core.agreement import (
    AgreementError,
    AgreementReport,
    agreement_report,
    below_min_kappa,
    pair_labels,
    pair_runs,
    self_consistency,
)
from pytest_openkata.core.agreement_view import agreement_document, agreement_text
from pytest_openkata.core.runlog import RunLogError, read_run_log
from pytest_openkata.core.verdict_labels import LabelsError, read_labels
from pytest_openkata.infra.atomic import write_new_report
from pytest_openkata.infra.config import FIELDS_BY_KEY
from pytest_openkata.infra.tempfiles import REMOVED
from pytest_openkata.infra.text import visible

__all__ = ["main", "measure"]

USAGE_ERROR = 2
GATE_FAILED = 1


def _kappa_bound(value: str) -> float:
    """The ``min_kappa`` setting's rule: a number from -1 to 1."""
    try:
        bound: float = FIELDS_BY_KEY["min_kappa"].parse(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return bound


def measure(first: Path, second: Path | None, labels: Path | None) -> AgreementReport:
    """The agreement of run log ``first`` with run log ``second`` or with the labels file
    ``labels``; :class:`RunLogError`, :class:`LabelsError` or :class:`AgreementError` when
    they cannot be read or compared."""
    run = read_run_log(first)
    if labels is not None:
        pairing = pair_labels(run, read_labels(labels), str(labels))
        return agreement_report(pairing, [self_consistency(run)])
    assert second is not None
    other = read_run_log(second)
    pairing = pair_runs(run, other)
    return agreement_report(pairing, [self_consistency(run), self_consistency(other)])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_openkata agreement",
        description="Measure how far two judges, or a judge and human labels, agree on the "
        "same answers: raw agreement and Cohen's kappa with 95%% intervals per criterion and "
        "per scenario, where they disagree most, and each judge's self-consistency.",
    )
    parser.add_argument("log", type=Path, help="a run log (.openkata/runs/*.jsonl)")
    parser.add_argument(
        "other", type=Path, nargs="?", help="a run log of the same answers by another judge"
    )
    parser.add_argument(
        "--labels", type=Path, metavar="FILE", help="human verdicts on LOG's trials (JSON Lines)"
    )
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the report as JSON")
    parser.add_argument(
        "--min-kappa",
        type=_kappa_bound,
        metavar="X",
        help="exit 1 when kappa is below X on any criterion (undefined kappa is not gated)",
    )
    try:
        args = parser.parse_intermixed_args(argv)  # options before, between or after the logs
        if (args.other is None) == (args.labels is None):
            parser.error("give a second run log or --labels FILE, not both nor neither")
    except SystemExit as exc:  # argparse has printed why
        return 0 if exc.code is None else exc.code if isinstance(exc.code, int) else USAGE_ERROR
    if args.json is not None and args.json.is_dir():
        print(f"error: {args.json} is a folder; give the report's file name", file=sys.stderr)
        return USAGE_ERROR
    try:
        report = measure(args.log, args.other, args.labels)
    except (RunLogError, LabelsError, AgreementError) as exc:
        print(visible(f"error: {exc}"), file=sys.stderr)
        return USAGE_ERROR
    sys.stdout.write(agreement_text(report, args.min_kappa))
    status = 0
    if args.json is not None:
        document = agreement_document(report, args.min_kappa)
        text = json.dumps(document, ensure_ascii=False, indent=2, allow_nan=False) + "\n"
        removed: list[Path] = []
        try:
            written = write_new_report(args.json, text, removed=removed)
        except OSError as exc:
            print(f"error: cannot write {args.json}: {exc.strerror or exc}", file=sys.stderr)
            status = GATE_FAILED
        else:
            for leftover in removed:
                print(f"note: {REMOVED}: {leftover}", file=sys.stderr)
            print(f"agreement report: {written}")
    if args.min_kappa is not None and below_min_kappa(report, args.min_kappa):
        status = GATE_FAILED
    return status
