"""The controller's side of a run: every scenario's result, the reporters and the exit status.

Registered only where reports are final (no xdist, or the xdist controller), it receives each
scenario's result on its reports (:mod:`.xdist_transport`), whichever worker ran
it. Once the session is over (after pytest's own JUnit file is written) it summarises the
skills, hands them to every reporter, sets the exit status from the gate and calls the hook
``pytest_openkata_skill_summary`` for each skill. While the session runs it keeps the run's
live log (:mod:`pytest_openkata.core.live_log`): each scenario's trials as they finish,
removed once the session ends, whatever ended it.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Generator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.results import ScenarioResult
from pytest_openkata.core.budget import BUDGET_REACHED
from pytest_openkata.core.excerpts import scenario_sections
from pytest_openkata.core.gate import gate_line
from pytest_openkata.core.reporting import Segment, make_run, report_run
from pytest_openkata.core.spending import BUDGET_EXTRA, budget_line, budget_summary
from pytest_openkata.core.summary import SkillSummary, gate_failed, summarise
from pytest_openkata.infra.tempfiles import REMOVED, remove_stale
from pytest_openkata.infra.text import visible
from pytest_openkata.plugin import shard
from pytest_openkata.plugin.budget import NOT_RUN_PROPERTY, budget_record
from pytest_openkata.plugin.fixtures import REFS_FOLDER, result_cache, shared_folder
from pytest_openkata.plugin.items import ScenarioItem, is_scenario_nodeid
from pytest_openkata.plugin.xdist_transport import result_of

if TYPE_CHECKING:
    from pytest_openkata.core.live_log import LiveLog
    from pytest_openkata.core.recorded import RecordedRun
    from pytest_openkata.core.run_agreement import RunAgreement
    from pytest_openkata.plugin.triggers import TriggerSummary

BODY_RAISED_ATTR = "openkata_body_raised"

_FINISHED = (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
_STOPPED: dict[int, str] = {  # what ended a run that did not finish
    pytest.ExitCode.INTERRUPTED: "interrupted",
    pytest.ExitCode.INTERNAL_ERROR: "internal error",
    pytest.ExitCode.USAGE_ERROR: "usage error",
}


def _is_soft_failure(report: pytest.TestReport, result: ScenarioResult | None) -> bool:
    """An unmet criterion (a failed subtest, or the parent that "contains failed subtests")
    is soft: it counts through the percentage, not through pytest's failure count."""
    if result is None or report.when != "call":
        return False
    if isinstance(report, pytest.SubtestReport):
        return True
    return getattr(report, BODY_RAISED_ATTR, True) is False


def _shows_why(report: pytest.TestReport, result: ScenarioResult) -> bool:
    """Whether this report of a scenario shows what the judge judged: once per scenario, on
    its setup error or on the call that holds its failed criteria (not on every subtest)."""
    if isinstance(report, pytest.SubtestReport):
        return False
    if report.when == "setup":
        return report.failed
    return report.when == "call" and not result.passed


def _shown(path: Path, config: pytest.Config) -> str:
    try:
        return path.relative_to(config.rootpath).as_posix()
    except ValueError:
        return str(path)


class _Terminal:
    """Reporter lines kept until pytest's terminal summary writes them, in colour when pytest
    uses colour."""

    def __init__(self) -> None:
        self.blocks: list[str] = []
        self._writer: pytest.TerminalReporter | None = None

    def attach(self, writer: pytest.TerminalReporter | None) -> None:
        self._writer = writer

    def write_lines(self, lines: Sequence[Sequence[Segment]]) -> None:
        if self._writer is None:
            return
        self.blocks.append("\n".join(self.render(line) for line in lines))

    def render(self, line: Sequence[Segment]) -> str:
        if self._writer is None:
            return ""
        markup = self._writer.config.get_terminal_writer().markup
        return "".join(markup(text, **{colour: True}) if colour else text for text, colour in line)

    def write_last_line(self, line: Sequence[Segment]) -> None:
        """A line after pytest's own final line (at ``pytest_unconfigure``)."""
        if self._writer is not None:
            self._writer.write_line(self.render(line))


class EvalAggregator:
    """Collects scenario results and decides the run's outcome."""

    def __init__(
        self, config: pytest.Config, settings: EvalSettings, triggers: TriggerSummary | None = None
    ) -> None:
        self.config = config
        self.settings = settings
        # The trigger queries' outcomes, for the run log and the trigger report.
        self.triggers = triggers
        self.results: dict[str, ScenarioResult] = {}
        self.hard_failures: list[str] = []
        self.summaries: list[SkillSummary] = []
        self.terminal = _Terminal()
        self._session: pytest.Session | None = None
        self._stopped: str | None = None
        self._run_errors = 0
        self._shard_note = ""  # where a shard without scenarios left its file
        # Whether the run selected scenarios: one stopped before any finished still leaves
        # its run log.
        self._scenarios_selected = False
        self._agreement_failed = ""  # why the judge agreement gate failed the run
        self._crashed = ""  # what ended pytest with a traceback after the run
        self._crash_status = 1  # the exit status the interpreter then gives
        self._summary_written = False  # pytest's terminal summary called this plugin's part
        # The scenarios the budget left unrun, by node id (plugin/budget.py).
        self.not_run: list[str] = []
        self._live: LiveLog | None = None
        self._live_tried = False
        self._stale_live_logs: list[Path] = []  # removed when the live log was started

    # tryfirst: the terminal reporter later flips a parent report with failed subtests to
    # "failed"; here the parent's own outcome is still what its body did.
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.nodeid not in self.results:
            result = result_of(report)
            if result is not None:
                self.results[report.nodeid] = result
                if self._live is not None:
                    self._live.add(result)
        result = self.results.get(report.nodeid)
        if report.skipped and (NOT_RUN_PROPERTY, BUDGET_REACHED) in report.user_properties:
            self.not_run.append(report.nodeid)
        if report.failed and not _is_soft_failure(report, result):
            self.hard_failures.append(report.nodeid)
        if result is not None and _shows_why(report, result):
            # Before pytest's terminal keeps the report to show it with the failures.
            report.sections.extend(scenario_sections(result))

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, None, None]:
        """After every plain implementation (pytest's teardown of the session's fixtures,
        junitxml's file), and also when one of them raised: a fixture's teardown that fails
        after Ctrl-C ends pytest with a traceback, and must not take the run's reports with
        it."""
        try:
            return (yield)
        except pytest.exit.Exception:
            raise  # pytest's own way out: it sets the session's status itself
        except BaseException as error:  # the interpreter ends with its traceback
            self._crashed = f"the session's end raised {type(error).__name__}"
            self._crash_status = _status_of_uncaught(error)
            raise
        finally:
            self._finish(session)

    def _finish(self, session: pytest.Session) -> None:
        try:
            if not self.results and not self._trigger_records():
                if shard.shard_of(self.config) is not None:
                    self._empty_shard(session)
                elif session.exitstatus not in _FINISHED and self._scenarios_selected:
                    self._report(session, finished=False)  # stopped before any finished
                return
            self._report(session, finished=session.exitstatus in _FINISHED)
        finally:  # the run log is written (or could not be): the live log has had its day
            self._close_live_log()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._scenarios_selected = any(isinstance(item, ScenarioItem) for item in session.items)
        if self._scenarios_selected:
            self._start_live_log()

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: object, ids: list[str]) -> None:
        if any(is_scenario_nodeid(nodeid) for nodeid in ids):
            self._scenarios_selected = True
            self._start_live_log()

    def _start_live_log(self) -> None:
        """Start the run's live log, once, when the settings keep one; first remove those of
        runs that were killed. A live log that cannot be made leaves the run as it was. A
        ``--collect-only`` run runs nothing: it keeps none, and leaves the log folder alone."""
        if self._live_tried or not self.settings.live_log or self.config.getoption("collectonly"):
            return
        self._live_tried = True
        from pytest_openkata.core.live_log import LiveLog, remove_stale_live_logs
        from pytest_openkata.core.runlog import log_folder

        folder = log_folder(self.settings, self.config.rootpath)
        if folder is None:
            return
        self._stale_live_logs = remove_stale_live_logs(folder)
        try:
            self._live = LiveLog.start(
                folder, self.settings, self.config.rootpath, datetime.now(UTC)
            )
        except OSError:
            self._live = None

    def _close_live_log(self) -> None:
        live, self._live = self._live, None
        if live is not None:
            live.close()

    def _report(self, session: pytest.Session, *, finished: bool) -> None:
        """Hand the run to every reporter, decide the exit status of a run that finished,
        and call the summary hook for each skill."""
        sharded = shard.shard_of(self.config) is not None
        spending = budget_record(self.config, self.settings, self.not_run)
        over_budget = spending is not None and spending["reached"]
        stopped_by_budget = finished and over_budget
        finished = finished and not over_budget  # partial: no gate, no results JSON
        self.summaries = summarise(
            self.results.values(),
            self.settings.threshold,
            self.config.rootpath,
            partial=self._partial() or sharded or over_budget,
        )
        xml_path = self.config.getoption("xmlpath", None)  # --junitxml
        self.terminal.attach(self.config.pluginmanager.get_plugin("terminalreporter"))
        finished_at = datetime.now(UTC)
        # A shard writes no results JSON, not even at --eval-output: the merge writes it.
        settings = self.settings.model_copy(update={"output": ""}) if sharded else self.settings
        removed = self._remove_stale()
        written: dict[str, Path] = {}
        errors: tuple[str, ...] = ()
        if sharded:  # a stopped shard too: the merge then says it stopped
            shard_file = self._shard_file(
                finished_at,
                removed,
                complete=finished and not session.shouldstop,
                spending=spending,
            )
            if isinstance(shard_file, str):
                errors = (shard_file,)
            else:
                written[f"shard {shard.shard_of(self.config)}"] = shard_file
        agreement = self._agreement(finished_at) if finished and not sharded else None
        run = report_run(
            make_run(
                self.summaries,
                settings,
                finished_at,
                self.config.rootpath,
                complete=finished,
                junit_xml=Path(xml_path) if xml_path else None,
                terminal=self.terminal,
                removed=tuple(removed),
                log_extras={
                    **self._trigger_records(),
                    **(agreement.log_extras if agreement else {}),
                    **({} if spending is None else {BUDGET_EXTRA: [spending]}),
                },
                written=written,
                errors=errors,
                rejudged=self._rejudged(),
                live_log="" if self._live is None else self._live.path.name,
                rendered=None if self._live is None else self._live.rendered,
            )
        )
        if agreement is not None:
            colour = "red" if agreement.failed else ""
            self.terminal.write_lines([[(line, colour)] for line in agreement.lines])
            self._agreement_failed = agreement.reason
        self.summaries = list(run.summaries)
        self._run_errors = len(run.errors)
        if spending is not None and not stopped_by_budget:
            self.terminal.write_lines([[(visible(budget_summary(spending)), None)]])
        if finished:  # interrupted, usage or internal errors keep pytest's own status
            failed = gate_failed(
                self.summaries,
                require_uplift=self.settings.require_uplift,
                fail_on_regression=self.settings.fail_on_regression,
            ) or bool(self.hard_failures or run.errors or (agreement and agreement.failed))
            session.exitstatus = pytest.ExitCode.TESTS_FAILED if failed else pytest.ExitCode.OK
        elif stopped_by_budget and spending is not None:
            # Wound down on purpose: no gate; what ran and errored still fails the run.
            failed = bool(self.hard_failures or run.errors)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED if failed else pytest.ExitCode.OK
            self._stopped = budget_line(spending)
            self.terminal.write_lines([[(visible(budget_summary(spending)), "yellow")]])
        else:
            status = int(session.exitstatus)
            self._stopped = _STOPPED.get(status, f"exit status {status}")
        self._session = session
        for summary in self.summaries:
            self.config.hook.pytest_openkata_skill_summary(summary=summary, config=self.config)

    def _agreement(self, finished_at: datetime) -> RunAgreement | None:
        """The judge's agreement with ``agreement_with`` (None when not asked for); its module
        loads only for a run that asks for it."""
        if not self.settings.agreement_with:
            return None
        from pytest_openkata.core.run_agreement import run_agreement

        results = self.results.values()
        return run_agreement(self.settings, results, self.config.rootpath, finished_at)

    def _rejudged(self) -> RecordedRun | None:
        """The recorded run a re-judging run graded again (read at configure time: it can be
        read), or None."""
        from pytest_openkata.core.recorded import recorded_run

        return recorded_run(self.settings, self.config.rootpath)

    def _trigger_records(self) -> dict[str, list[dict[str, Any]]]:
        return {} if self.triggers is None else self.triggers.records()

    def _remove_stale(self) -> list[Path]:
        """Remove the temporary files that killed runs left in the cache, among the skills
        extracted at git refs and in the log folder (their live logs): once per run, in the
        process that can say so."""
        cache = result_cache(self.config, self.settings)
        removed = [] if cache is None else cache.remove_stale()
        removed += self._stale_live_logs  # at the start of the live log
        from pytest_openkata.core.live_log import remove_stale_live_logs
        from pytest_openkata.core.runlog import log_folder

        logs = log_folder(self.settings, self.config.rootpath)
        if logs is not None:  # a run that keeps no live log of its own removes them too
            removed += remove_stale_live_logs(logs)
        return removed + remove_stale(shared_folder(self.config, REFS_FOLDER))

    def _partial(self) -> bool:
        """Counted as partial whatever ran: ``--eval-partial``, or some categories of criteria
        (not the skill's effectiveness)."""
        return bool(self.config.getoption("eval_partial") or self.settings.category)

    def _shard_file(
        self,
        finished_at: datetime,
        removed: list[Path],
        *,
        complete: bool,
        spending: dict[str, Any] | None = None,
    ) -> Path | str:
        """The shard's file for the merge (its path), or why it could not be written; the
        temporary files of killed runs removed from the shard folder are added to
        ``removed``."""
        try:
            return shard.write_shard_file(
                self.config,
                list(self.results.values()),
                self.settings,
                finished_at,
                failed=len(set(self.hard_failures) - set(self.results)),
                partial=self._partial(),
                complete=complete,
                removed=removed,
                extras={} if spending is None else {BUDGET_EXTRA: [spending]},
            )
        except OSError as exc:
            spec = shard.shard_of(self.config)
            return f"could not write the file of shard {spec}: {exc.strerror or exc}"

    def _empty_shard(self, session: pytest.Session) -> None:
        """A shard whose part holds no scenario (more shards than scenarios) still leaves its
        file, and passes when the run selected scenarios for the other parts."""
        finished = session.exitstatus in (*_FINISHED, pytest.ExitCode.NO_TESTS_COLLECTED)
        if session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and shard.selection(
            self.config
        ):
            session.exitstatus = pytest.ExitCode.OK
        removed: list[Path] = []
        written = self._shard_file(
            datetime.now(UTC), removed, complete=finished and not session.shouldstop
        )
        if isinstance(written, str):
            self._shard_note = written
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        else:
            self._shard_note = (
                f"shard {shard.shard_of(self.config)}: {_shown(written, self.config)}"
            )
        for path in removed:
            self._shard_note += f"\n{REMOVED}: {_shown(path, self.config)}"

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        self._summary_written = True
        if self._shard_note:
            terminalreporter.write_line(self._shard_note)
        if not self.terminal.blocks:
            return
        terminalreporter.write_sep("=", "openkata eval summary")
        for block in self.terminal.blocks:
            terminalreporter.write(block + "\n")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """The gate's decision and the exit status, as the run's last line: pytest's terminal
        reporter writes its final ``N passed in …`` line at the end of its own
        ``pytest_sessionfinish``, after every other plugin's, and nothing of the session comes
        after ``pytest_unconfigure`` (pytest writes a late KeyboardInterrupt here too)."""
        self._close_live_log()  # a session that never reached its end
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if self._crashed and not self._summary_written and reporter is not None:
            # pytest's terminal summary was skipped by the exception: the run's is not (a
            # terminal that is gone leaves the rest of pytest's unconfiguring to go on).
            with contextlib.suppress(OSError):
                self.pytest_terminal_summary(reporter)
        if self._session is None or not (self.summaries or self._stopped):
            return
        errored = {nodeid for nodeid in self.hard_failures if nodeid in self.results}
        failed = set(self.hard_failures) - errored
        line = gate_line(
            self.summaries,
            self.settings.threshold,
            self._crash_status if self._crashed else int(self._session.exitstatus),
            stopped=self._stopped,
            errored=len(errored),
            failed=len(failed),
            require_uplift=self.settings.require_uplift,
            fail_on_regression=self.settings.fail_on_regression,
            run_errors=self._run_errors,
            agreement=self._agreement_failed,
            crashed=self._crashed,
        )
        self.terminal.write_last_line(line)


def _status_of_uncaught(error: BaseException) -> int:
    """The exit status the interpreter gives when ``error`` is not caught: a
    ``KeyboardInterrupt`` ends it by SIGINT (130 to a shell), a ``SystemExit`` with its
    code, anything else with 1."""
    if isinstance(error, KeyboardInterrupt):
        return 128 + signal.SIGINT
    if isinstance(error, SystemExit):
        code = error.code
        return code & 0xFF if isinstance(code, int) else 0 if code is None else 1
    return 1
