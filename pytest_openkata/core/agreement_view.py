"""An agreement report as people and programs read it: the terminal's table and the JSON
document (:mod:`pytest_openkata.core.agreement` computes it).

Every text that came from a model or a reviewer (answers, reasons, notes, criteria) is masked
with the secrets of the environment, cut to a bound (an excerpt says how much it left out),
and on the terminal :func:`~pytest_openkata.infra.text.visible`, so that it can neither drive
the terminal nor flood it. The JSON holds no machine path: runs are named by their files'
names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pytest_openkata.core.agreement import (
    AgreementReport,
    CriterionAgreement,
    Kappa,
    PairedVerdict,
    RatedVerdict,
    below_min_kappa,
)
from pytest_openkata.infra.redact import Redactor, secrets_from_environment
from pytest_openkata.infra.text import valid_unicode, visible

__all__ = [
    "ANSWER_EXCERPT_CHARS",
    "DISAGREEMENTS_SHOWN",
    "MOST_DISAGREED",
    "REASON_EXCERPT_CHARS",
    "agreement_document",
    "agreement_text",
    "document_lines",
    "excerpt",
    "stored_kappa_text",
]

ANSWER_EXCERPT_CHARS = 400
REASON_EXCERPT_CHARS = 200
MOST_DISAGREED = 5  # criteria the "disagree most" section shows
DISAGREEMENTS_SHOWN = 3  # pairs shown per such criterion


def excerpt(text: str, limit: int) -> str:
    """``text`` cut to its first ``limit`` characters, saying how many were left out."""
    if len(text) <= limit:
        return text
    return text[:limit] + f" [… {len(text) - limit} more characters]"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _percent(share: float) -> str:
    return f"{share * 100:.0f}%"


def _kappa_text(kappa: Kappa) -> str:
    head = f"n={kappa.n}  agreement {_percent(kappa.raw)}  "
    if kappa.kappa is None:
        return head + f"κ undefined ({kappa.undefined})"
    if kappa.by_construction:
        return head + "κ 0.00 (one side gave one verdict throughout)"
    return head + f"κ {kappa.kappa:.2f} [{kappa.low:.2f}, {kappa.high:.2f}]"


def _criterion_title(c: CriterionAgreement, mask: Callable[[str], str]) -> str:
    return f"{c.skill_dir}::{c.scenario} [{c.criterion_index}] {mask(_one_line(c.criterion))}"


def _verdict_text(verdict: RatedVerdict, mask: Callable[[str], str]) -> str:
    said = "pass" if verdict.passed else "fail"
    if verdict.votes is not None:
        said += f" ({verdict.votes[0]} of {verdict.votes[1]} votes)"
    if verdict.reviewer:
        said += f" by {mask(_one_line(verdict.reviewer))}"
    reason = mask(_one_line(verdict.reason))
    return said + (f": {excerpt(reason, REASON_EXCERPT_CHARS)}" if reason else "")


def _pair_lines(pair: PairedVerdict, mask: Callable[[str], str]) -> list[str]:
    arm = f" (arm {pair.arm})" if pair.arm else ""
    answer = excerpt(mask(_one_line(pair.answer)), ANSWER_EXCERPT_CHARS)
    return [
        f"    trial {pair.trial}{arm}:",
        f"      first:  {_verdict_text(pair.first, mask)}",
        f"      second: {_verdict_text(pair.second, mask)}",
        f"      answer: {answer}",
    ]


def agreement_text(report: AgreementReport, min_kappa: float | None = None) -> str:
    """The report as the terminal shows it: the two sides, overall, per scenario, per
    criterion, where they disagree most with the answers, what was left out, each judge's
    self-consistency and, with ``min_kappa``, the gate's verdict."""
    mask = Redactor(secrets_from_environment())
    lines = [
        f"first:  {mask(report.first)}",
        f"second: {mask(report.second)}",
        f"overall: {_kappa_text(report.overall)}",
    ]
    for why, count in sorted(report.left_out.items()):
        lines.append(f"left out: {count} {why}")
    lines += ["", "per scenario:"]
    lines += [f"  {s.skill_dir}::{s.scenario}  {_kappa_text(s.kappa)}" for s in report.scenarios]
    lines += ["", "per criterion:"]
    lines += [f"  {_criterion_title(c, mask)}  {_kappa_text(c.kappa)}" for c in report.criteria]
    most = report.most_disagreed(MOST_DISAGREED)
    if most:
        lines += ["", "where they disagree most:"]
        for c in most:
            shown = c.disagreements[:DISAGREEMENTS_SHOWN]
            lines.append(
                f"  {_criterion_title(c, mask)}: {len(c.disagreements)} of {c.kappa.n} disagree"
                + (f" ({len(shown)} shown)" if len(shown) < len(c.disagreements) else "")
            )
            for pair in shown:
                lines += _pair_lines(pair, mask)
    for judge in report.consistency:
        lines += ["", f"self-consistency of {mask(judge.judge)}:"]
        if judge.agreement is None:
            lines.append("  one vote per trial: nothing to measure (set judge_votes above 1)")
            continue
        lines.append(
            f"  {judge.split} of {judge.trials} trial verdicts split between votes; "
            f"votes agree {_percent(judge.agreement)} two by two"
        )
        for v in judge.criteria:
            if v.split:
                title = f"{v.skill_dir}::{v.scenario} [{v.criterion_index}] {v.criterion}"
                lines.append(f"  {mask(_one_line(title))}: {v.split} of {v.trials} split")
    if min_kappa is not None:
        lines += ["", *_gate_lines(report, min_kappa, mask)]
    return "\n".join(visible(line) for line in lines) + "\n"


def _gate_lines(report: AgreementReport, minimum: float, mask: Callable[[str], str]) -> list[str]:
    below = below_min_kappa(report, minimum)
    undefined = [c for c in report.criteria if c.kappa.kappa is None]
    lines = []
    if below:
        of = f"{len(below)} of {len(report.criteria)} criteria"
        lines.append(f"FAILED: κ below {minimum:g} on {of}:")
        lines += [f"  {_criterion_title(c, mask)}  {_kappa_text(c.kappa)}" for c in below]
    else:
        lines.append(f"passed: κ at least {minimum:g} on every criterion where it is defined")
    if undefined:
        lines.append(
            f"not gated: κ undefined on {len(undefined)} "
            f"{'criterion' if len(undefined) == 1 else 'criteria'} (both sides gave one verdict "
            "throughout)"
        )
    return lines


def _kappa_document(kappa: Kappa) -> dict[str, Any]:
    both_pass, first_only, second_only, both_fail = kappa.table
    return {
        "n": kappa.n,
        "agreed": kappa.agreed,
        "raw_agreement": kappa.raw,
        "kappa": kappa.kappa,
        "std_error": kappa.std_error,
        "ci95": None if kappa.low is None else [kappa.low, kappa.high],
        "undefined": kappa.undefined or None,
        "one_side_constant": kappa.by_construction,
        "table": {
            "both_pass": both_pass,
            "first_pass_second_fail": first_only,
            "first_fail_second_pass": second_only,
            "both_fail": both_fail,
        },
    }


def _verdict_document(verdict: RatedVerdict, mask: Callable[[str], str]) -> dict[str, Any]:
    return {
        "verdict": "pass" if verdict.passed else "fail",
        "reason": excerpt(mask(verdict.reason), REASON_EXCERPT_CHARS),
        "votes": None if verdict.votes is None else list(verdict.votes),
        "reviewer": mask(verdict.reviewer),
    }


def _where(c: CriterionAgreement) -> dict[str, Any]:
    return {"skill_dir": c.skill_dir, "scenario": c.scenario, "criterion_index": c.criterion_index}


def agreement_document(report: AgreementReport, min_kappa: float | None = None) -> dict[str, Any]:
    """The report as JSON data: what the text shows, every disagreement of every criterion
    (bounded excerpts), and the gate when ``min_kappa`` is given."""
    mask = Redactor(secrets_from_environment())

    def clean(text: str) -> str:
        return valid_unicode(mask(text))

    criteria = []
    for c in report.criteria:
        criteria.append(
            {
                "skill_dir": c.skill_dir,
                "scenario": c.scenario,
                "criterion_index": c.criterion_index,
                "criterion": clean(c.criterion),
                **_kappa_document(c.kappa),
                "disagreements": [
                    {
                        "arm": p.arm,
                        "trial": p.trial,
                        "first": _verdict_document(p.first, clean),
                        "second": _verdict_document(p.second, clean),
                        "answer": excerpt(clean(p.answer), ANSWER_EXCERPT_CHARS),
                    }
                    for p in c.disagreements
                ],
            }
        )
    document: dict[str, Any] = {
        "first": clean(report.first),
        "second": clean(report.second),
        "overall": _kappa_document(report.overall),
        "left_out": dict(sorted(report.left_out.items())),
        "scenarios": [
            {"skill_dir": s.skill_dir, "scenario": s.scenario, **_kappa_document(s.kappa)}
            for s in report.scenarios
        ],
        "criteria": criteria,
        "self_consistency": [
            {
                "judge": clean(judge.judge),
                "trials": judge.trials,
                "split": judge.split,
                "vote_agreement": judge.agreement,
                "criteria": [
                    {
                        "skill_dir": v.skill_dir,
                        "scenario": v.scenario,
                        "criterion_index": v.criterion_index,
                        "criterion": clean(v.criterion),
                        "trials": v.trials,
                        "split": v.split,
                        "vote_agreement": v.agreement,
                    }
                    for v in judge.criteria
                ],
            }
            for judge in report.consistency
        ],
        "gate": None,
    }
    if min_kappa is not None:
        below = below_min_kappa(report, min_kappa)
        document["gate"] = {
            "min_kappa": min_kappa,
            "passed": not below,
            "below": [_where(c) for c in below],
            "undefined": [_where(c) for c in report.criteria if c.kappa.kappa is None],
        }
    return document


def document_lines(document: object) -> list[str]:
    """A stored agreement document (a run log's ``agreement`` record) as lines of text: the two
    sides and the overall figure, a line per criterion, and the gate. Read defensively: a
    record that is not such a document gives no line."""
    if not isinstance(document, Mapping) or not isinstance(document.get("overall"), Mapping):
        return []
    overall = document["overall"]
    lines = [
        f"{document.get('first', '?')} and {document.get('second', '?')}: "
        f"{overall.get('n', '?')} paired verdicts, κ {stored_kappa_text(overall)}"
    ]
    criteria = document.get("criteria")
    for row in criteria if isinstance(criteria, list) else ():
        if not isinstance(row, Mapping):
            continue
        where = f"{row.get('skill_dir')}::{row.get('scenario')} [{row.get('criterion_index')}]"
        raw = row.get("raw_agreement")
        share = f"{raw * 100:.0f}%" if isinstance(raw, int | float) else "?"
        lines.append(
            f"{where} {row.get('criterion', '')}: n={row.get('n', '?')}, agreement {share}, "
            f"κ {stored_kappa_text(row)}"
        )
    gate = document.get("gate")
    if isinstance(gate, Mapping):
        below = gate.get("below")
        verdict = "passed" if gate.get("passed") else f"failed ({len(below or ())} below)"
        lines.append(f"Gate: κ at least {gate.get('min_kappa')} on every criterion: {verdict}")
    return [valid_unicode(line) for line in lines]


def stored_kappa_text(figures: Mapping[str, Any]) -> str:
    """κ and its interval as a stored document (:func:`agreement_document`) holds them, or why
    it is undefined; read defensively, as a run log may have been edited."""
    kappa, interval = figures.get("kappa"), figures.get("ci95")
    if not isinstance(kappa, int | float):
        return f"undefined ({figures.get('undefined') or 'no figure'})"
    if figures.get("one_side_constant"):
        return f"{kappa:.2f} (one side gave one verdict throughout)"
    if isinstance(interval, list) and len(interval) == 2:
        low, high = interval
        if isinstance(low, int | float) and isinstance(high, int | float):
            return f"{kappa:.2f} [{low:.2f}, {high:.2f}]"
    return f"{kappa:.2f}"
