"""The viewer's pages over the run logs under one folder (a Starlette application).

Pages (every one a plain URL, so any view can be linked to):

- ``/``: the runs (run logs and results JSON files), filtered (``q``: text in the log,
  skills or models; ``gate``; ``kind``: ``run log`` or ``results JSON``) and sorted
  (``sort``: ``finished``, ``score``, ``errored``; ``order``: ``asc``/``desc``), and the
  matrix of skills by models over the newest runs;
- ``/run/LOG``: a run's skills and scenarios, from the HTML report's own view of a run,
  ``RUN_ROWS`` scenarios a page (``page``);
  ``/api/run/LOG`` says what the page shows changed, for the page to refresh itself while the
  log grows, and, for a run in progress (its live log), where its run log is once it ended;
- ``/trial/LOG?skill=&scenario=&arm=&trial=``: one trial, with the report's parts (prompt,
  transcript, workspace diff, checks) and a form per judged criterion for a human verdict;
- ``/compare?a=LOG&b=LOG``: two runs side by side (``?a=LOG&arms=1``: a run's baseline arm
  against its own arm), a page of scenarios at a time (``page``);
- ``/disagreements``: the criteria whose human verdicts most often differ from the judge's.

The pages that read logs are plain functions, which Starlette runs in its thread pool: reading
a large log never holds up the event loop, nor the polls of a run page meanwhile. Every value
goes through the HTML report's escaping (:func:`~pytest_openkata.providers.
reporters.html.template_environment`); the model's text is shown as text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from pytest_openkata.core.runlog import LoggedRun, RunLogError
from pytest_openkata.core.verdict_labels import LabelsError, VerdictLabel
from pytest_openkata.providers.reporters.html import (
    ArmView,
    PageView,
    TrialView,
    page_view,
    template_environment,
)
from pytest_openkata.viewer.compare import compare_arms, compare_runs, with_answers
from pytest_openkata.viewer.disagreements import disagreements
from pytest_openkata.viewer.guard import Guard, GuardedApp
from pytest_openkata.viewer.labels import labels_file, read_run_labels, write_label
from pytest_openkata.viewer.runs import (
    RESULTS_JSON,
    RUN_LOG,
    LogFiles,
    RunRow,
    is_logged_run,
    is_run_log,
    log_order,
    matrix,
)

__all__ = ["make_app"]

_FORM_LIMIT = 64 * 1024  # a label's form: its note and a few names
SORTS = {
    "finished": lambda row: (row.finished_at, log_order(row.log)),
    "score": lambda row: (row.score if row.score is not None else -1.0, row.finished_at),
    "errored": lambda row: (row.errored, row.finished_at),
}


def run_url(log: str) -> str:
    return "/run/" + quote(log)


def trial_url(log: str, skill: str, scenario: str, arm: str, trial: int) -> str:
    query = urlencode({"skill": skill, "scenario": scenario, "arm": arm, "trial": trial})
    return f"/trial/{quote(log)}?{query}"


@dataclass(frozen=True)
class Viewer:
    """The state of one viewer: its logs and the rules of its requests."""

    logs: LogFiles
    guard: Guard
    # The page view of each run read whole, for as long as the logs keep that run.
    pages: dict[int, tuple[LoggedRun, PageView]] = field(default_factory=dict)

    def page(self, log: str, *, traces: bool = True) -> tuple[LoggedRun, PageView]:
        """The run of ``log`` (whole, or without its answers) and the HTML report's view of
        it, made once per run read."""
        run = self.logs.run(log, traces=traces)
        known = self.pages.get(id(run))
        if known is not None and known[0] is run:
            return known
        view = page_view(run, source=log)
        kept = {id(r) for r in self.logs.kept_runs()}
        for key in [key for key in self.pages if key not in kept]:
            del self.pages[key]
        self.pages[id(run)] = (run, view)
        return run, view

    def render(self, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        environment = template_environment("pytest_openkata.viewer")
        text = environment.get_template(template).render(
            run_url=run_url, trial_url=trial_url, **values
        )
        return HTMLResponse(text, status_code=status)

    def problem(self, message: str, status: int = 404) -> HTMLResponse:
        return self.render("view_problem.html.j2", status, title="Not shown", message=message)

    def labels_of(self, log: str) -> list[VerdictLabel]:
        """The labels of ``log`` ([] when none): :class:`RunLogError` for no such log."""
        path = self.logs.path_of(log)
        if path is None:
            raise RunLogError(f"{log}: no such run log under the viewer's folder")
        return read_run_labels(path)


def _filtered(rows: list[RunRow], query: Mapping[str, str]) -> list[RunRow]:
    text = query.get("q", "").strip().lower()
    gate, kind = query.get("gate", ""), query.get("kind", "")
    if kind:
        rows = [row for row in rows if row.kind == kind]
    if text:
        rows = [
            row
            for row in rows
            if text in " ".join((row.log, *row.skills, row.agent_model, row.judge_model)).lower()
        ]
    if gate:
        rows = [row for row in rows if row.gate == gate]
    sort = SORTS.get(query.get("sort", ""), SORTS["finished"])
    return sorted(rows, key=sort, reverse=query.get("order", "desc") != "asc")


def runs_page(request: Request) -> Response:
    viewer: Viewer = request.app.state.viewer
    rows = viewer.logs.rows()
    query = dict(request.query_params)
    return viewer.render(
        "view_runs.html.j2",
        title="Runs",
        rows=_filtered(rows, query),
        total=len(rows),
        matrix=matrix([row for row in rows if not row.problem]),
        query=query,
        sorts=list(SORTS),
        kinds=[RUN_LOG, RESULTS_JSON],
    )


def _log_of(request: Request) -> str:
    return str(request.path_params["log"])


def _page_number(query: Mapping[str, str]) -> int:
    try:
        return max(1, int(query.get("page", "1")))
    except ValueError:
        return 1


RUN_ROWS = 1000  # the scenarios a run's page shows


@dataclass(frozen=True)
class Window:
    """The scenarios of a run a page shows: each skill with its scenarios on the page."""

    skills: list[tuple[Any, list[Any]]]
    number: int
    pages: int
    total: int
    first_row: int

    @property
    def shown(self) -> int:
        return sum(len(scenarios) for _skill, scenarios in self.skills)


def run_window(page: PageView, number: int, rows: int = RUN_ROWS) -> Window:
    """Page ``number`` (from 1; past the last: the last) of the scenarios of ``page``, in the
    order of its skills, ``rows`` a page: a skill with scenarios on two pages is on both."""
    total = sum(len(skill.scenarios) for skill in page.skills)
    pages = max(1, -(-total // rows))
    number = min(max(number, 1), pages)
    start, end = (number - 1) * rows, number * rows
    shown: list[tuple[Any, list[Any]]] = []
    seen = 0
    for skill in page.skills:
        count = len(skill.scenarios)
        low, high = max(start - seen, 0), min(end - seen, count)
        if low < high:
            shown.append((skill, list(skill.scenarios[low:high])))
        seen += count
    return Window(shown, number, pages, total, start + 1)


def run_page(request: Request) -> Response:
    viewer: Viewer = request.app.state.viewer
    log = _log_of(request)
    try:
        run, page = viewer.page(log, traces=False)  # an overview: no answer is shown
    except RunLogError as exc:
        return viewer.problem(str(exc))
    state = viewer.logs.row(log).state  # a live log's: running or interrupted
    window = run_window(page, _page_number(request.query_params))
    return viewer.render(
        "view_run.html.j2",
        title=log,
        log=log,
        page=page,
        run=run,
        state=state,
        window=window.skills,
        shown_rows=window.shown,
        total=window.total,
        first_row=window.first_row,
        page_number=window.number,
        pages=window.pages,
        page_link=lambda n: f"{run_url(log)}?{urlencode({'page': n})}",
    )


def run_state(request: Request) -> Response:
    """What the run page shows changed when this does: the log's size and time, its trials,
    whether its run still runs; once a live log is gone, the page of the run log that took its
    place (``moved``: the runs list while there is none)."""
    viewer: Viewer = request.app.state.viewer
    log = _log_of(request)
    path = viewer.logs.path_of(log)
    if path is None:
        if is_logged_run(log) and not is_run_log(log):  # a live log: its run ended
            final = viewer.logs.successor(log)
            return JSONResponse({"moved": "/" if final is None else run_url(final)})
        return JSONResponse({"error": f"{log}: no such run log"}, status_code=404)
    row = viewer.logs.row(log)
    try:
        size, mtime = viewer.logs.stamp(path)
    except FileNotFoundError:  # gone while it was read: a live log whose run just ended
        if is_logged_run(log) and not is_run_log(log):
            final = viewer.logs.successor(log)
            return JSONResponse({"moved": "/" if final is None else run_url(final)})
        return JSONResponse({"error": f"{log}: no such run log"}, status_code=404)
    return JSONResponse(
        {
            "stamp": f"{size}-{mtime}-{row.state}",
            "trials": row.trials,
            "complete": row.complete,
            "state": row.state,
        }
    )


@dataclass(frozen=True)
class TrialPlace:
    """A trial of a run, found by the names the URL gives."""

    log: str
    skill: str
    scenario: str
    arm: str
    index: int
    arm_view: ArmView
    view: TrialView
    task: str


def _find_trial(viewer: Viewer, log: str, query: Mapping[str, str]) -> TrialPlace:
    """The trial the query names, read from its scenario's lines of the log only."""
    skill, scenario, arm = query.get("skill", ""), query.get("scenario", ""), query.get("arm", "")
    try:
        index = int(query.get("trial", "1"))
    except ValueError:
        raise RunLogError(f"{log}: trial must be a number, not {query.get('trial')!r}") from None
    page = page_view(viewer.logs.scenario_run(log, skill, scenario), source=log)
    for skill_view in page.skills:
        for scenario_view in skill_view.scenarios:
            result = scenario_view.own.result
            if result.skill_dir != skill or result.name != scenario:
                continue
            arms = [scenario_view.own]
            if scenario_view.baseline is not None:
                arms.append(scenario_view.baseline)
            for arm_view in arms:
                if arm_view.result.arm != arm:
                    continue
                for view in arm_view.trials:
                    if view.trial.index == index:
                        return TrialPlace(
                            log, skill, scenario, arm, index, arm_view, view, result.task
                        )
    raise RunLogError(
        f"{log}: no trial {index} of {skill}::{scenario}" + (f" (arm {arm})" if arm else "")
    )


def trial_page(request: Request) -> Response:
    viewer: Viewer = request.app.state.viewer
    log = _log_of(request)
    try:
        place = _find_trial(viewer, log, dict(request.query_params))
    except RunLogError as exc:
        return viewer.problem(str(exc))
    labels_problem = ""
    labels: list[VerdictLabel] = []
    try:
        if is_run_log(log):  # judge agreement pairs labels with a run log's trials
            labels = viewer.labels_of(log)
    except (RunLogError, LabelsError) as exc:  # the trial is still shown, with why
        labels_problem = str(exc)
    mine = {
        label.criterion_index: label
        for label in labels
        if label.key[:4] == (place.skill, place.scenario, place.arm, place.index)
    }
    return viewer.render(
        "view_trial.html.j2",
        title=f"{place.scenario}, trial {place.index}",
        place=place,
        labels=mine,
        labels_problem=labels_problem,
        labelled=is_run_log(log),
        form_key=viewer.guard.form_key,
    )


async def post_label(request: Request) -> Response:
    viewer: Viewer = request.app.state.viewer
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > _FORM_LIMIT:
            return viewer.problem("The label's form is too large.", 413)
    form = dict(parse_qsl(body.decode("utf-8", errors="replace"), keep_blank_values=True))
    if not viewer.guard.form_allowed(request, form):
        return viewer.problem("This form did not come from the viewer's own page.", 403)
    log = form.get("log", "")
    if not is_run_log(log):
        return viewer.problem(f"{log}: human verdicts are given on run logs only", 400)
    try:
        place = _find_trial(viewer, log, form)
        criteria = place.view.trial.criteria or []
        position = int(form.get("criterion", ""))
        if not 0 <= position < len(criteria):
            raise ValueError(position)
    except RunLogError as exc:
        return viewer.problem(str(exc))
    except ValueError:
        return viewer.problem(
            f"{log}: criterion {form.get('criterion')!r} is not one of the trial's"
        )
    judged = form.get("judge", "")
    if judged not in ("right", "wrong"):
        return viewer.problem(f"judge must be 'right' or 'wrong', not {judged!r}", 400)
    criterion = criteria[position]
    if criterion.kind != "judge":
        return viewer.problem(f"{log}: criterion {position} is a check, not the judge's", 400)
    label = VerdictLabel(
        line=0,
        skill_dir=place.skill,
        scenario=place.scenario,
        arm=place.arm,
        trial=place.index,
        criterion_index=position,
        criterion=criterion.name,
        passed=criterion.passed == (judged == "right"),
        reviewer=form.get("reviewer", "").strip()[:200],
        note=form.get("note", "").strip()[:4000],
    )
    path = viewer.logs.path_of(log)
    if path is None:
        return viewer.problem(f"{log}: no such run log")
    try:
        write_label(path, label)
    except LabelsError as exc:  # a labels file that cannot be read is not written over
        return viewer.problem(str(exc), 409)
    target = trial_url(log, place.skill, place.scenario, place.arm, place.index)
    return RedirectResponse(f"{target}#criterion-{position}", status_code=303)


COMPARE_ROWS = 200  # the scenarios a comparison's page shows, with their answers


def compare_page(request: Request) -> Response:
    """Two runs (``a`` and ``b``), or the baseline arm of run ``a`` against its own arm
    (``arms=1``), ``COMPARE_ROWS`` scenarios a page (``page``). Both runs are read without
    their answers; the answers of the scenarios shown come from their lines alone."""
    viewer: Viewer = request.app.state.viewer
    query = dict(request.query_params)
    first, second = query.get("a", ""), query.get("b", "")
    arms = query.get("arms") == "1"
    try:
        before = viewer.logs.run(first, traces=False)
        if arms:
            pairs = compare_arms(before)
            if not pairs:
                return viewer.problem(f"{first}: the run has no baseline arm to compare with")
            labels = ("baseline arm", "with the skill")
        else:
            pairs = compare_runs(before, viewer.logs.run(second, traces=False))
            labels = ("A", "B")
        pages = max(1, -(-len(pairs) // COMPARE_ROWS))
        number = min(_page_number(query), pages)
        shown = pairs[(number - 1) * COMPARE_ROWS : number * COMPARE_ROWS]
        keys = {(pair.skill_dir, pair.scenario) for pair in shown}
        whole_before = viewer.logs.scenarios_run(first, keys).results
        if arms:
            own = [r for r in whole_before if r.baseline is not None]
            shown = with_answers(shown, [r.baseline for r in own if r.baseline], own)
        else:
            shown = with_answers(
                shown, whole_before, viewer.logs.scenarios_run(second, keys).results
            )
    except RunLogError as exc:
        return viewer.problem(f"Choose two runs to compare: {exc}")
    link = {key: value for key, value in query.items() if key in ("a", "b", "arms")}
    return viewer.render(
        "view_compare.html.j2",
        title="Compare runs",
        a=first,
        b=second,
        arms=arms,
        labels=labels,
        pairs=shown,
        total=len(pairs),
        first_row=(number - 1) * COMPARE_ROWS + 1,
        page_number=number,
        pages=pages,
        page_link=lambda n: "/compare?" + urlencode({**link, "page": n}),
    )


def _judged(viewer: Viewer) -> tuple[list[tuple[VerdictLabel, bool]], list[str]]:
    """Every label under the folder with the judge's verdict of its criterion, and the
    problems of labels files that cannot be read or labels that name no trial of their run."""
    judged: list[tuple[VerdictLabel, bool]] = []
    problems: list[str] = []
    for log in viewer.logs.logs():
        path = viewer.logs.path_of(log)
        if path is None or not labels_file(path).is_file():
            continue
        try:
            labels = read_run_labels(path)
            run = viewer.logs.run(log, traces=False)
        except LabelsError as exc:  # its message names the file, not its folder
            problems.append(f"{PurePosixPath(log).parent}/{exc}")
            continue
        except RunLogError as exc:
            problems.append(str(exc))
            continue
        verdicts = {
            (*logged.arm_key, logged.trial.index, position): criterion.passed
            for logged in run.trials
            for position, criterion in enumerate(logged.trial.criteria or ())
        }
        for label in labels:
            passed = verdicts.get(label.key)
            if passed is None:
                problems.append(f"{labels_file(path).name}: line {label.line}: no such criterion")
            else:
                judged.append((label, passed))
    return judged, problems


def disagreements_page(request: Request) -> Response:
    viewer: Viewer = request.app.state.viewer
    judged, problems = _judged(viewer)
    return viewer.render(
        "view_disagreements.html.j2",
        title="Human and judge disagreements",
        rows=disagreements(judged),
        labelled=len(judged),
        problems=problems,
    )


def static_file(request: Request) -> Response:
    name = str(request.path_params["name"])
    kinds = {"viewer.css": "text/css", "viewer.js": "text/javascript"}
    if name not in kinds:
        return Response("not found", status_code=404, media_type="text/plain")
    environment = template_environment("pytest_openkata.viewer")
    text = environment.get_template(f"{name}.j2").render()
    return Response(text, media_type=kinds[name])


def make_app(folder: Path, guard: Guard) -> GuardedApp:
    """The viewer of the run logs under ``folder``, behind ``guard``."""
    app = Starlette(
        routes=[
            Route("/", runs_page),
            Route("/run/{log:path}", run_page),
            Route("/api/run/{log:path}", run_state),
            Route("/trial/{log:path}", trial_page),
            Route("/label", post_label, methods=["POST"]),
            Route("/compare", compare_page),
            Route("/disagreements", disagreements_page),
            Route("/static/{name}", static_file),
        ]
    )
    app.state.viewer = Viewer(LogFiles(folder), guard)
    return GuardedApp(app, guard)
