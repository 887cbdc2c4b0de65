"""The viewer's parts, most without a server: the list of runs read without traces, logs found only
under the folder, a log being written read up to its last finished line, labels appended and
written as judge agreement reads them (a criterion labelled again replaced, a bad
line named), two runs compared, disagreements
ranked, a
run's arms compared, the matrix of skills by models."""

from __future__ import annotations

import html
import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from pytest_openkata.core.results_json import ReportConfig, build_report, render_report
from pytest_openkata.core.runlog import RunInfo, RunLogError, log_lines, parse_run_log
from pytest_openkata.core.verdict_labels import LabelsError, VerdictLabel, read_labels
from pytest_openkata.viewer.app import Viewer, make_app
from pytest_openkata.viewer.command import allowed_hosts, is_loopback
from pytest_openkata.viewer.command import main as view_main
from pytest_openkata.viewer.compare import compare_arms, compare_runs
from pytest_openkata.viewer.disagreements import disagreements
from pytest_openkata.viewer.guard import Guard, GuardedApp
from pytest_openkata.viewer.labels import labels_file, read_run_labels, write_label
from pytest_openkata.viewer.runs import LogFiles, RunRow, finished_lines, matrix
from tests.support.results import ROOT, SETTINGS, judged, logged, scenario
from tests.support.viewer_server import serving, serving_app

ANSWER = "the agent's long answer"


def _log_text(*results: object, finished_at: str = "2026-12-01T10:00:00Z") -> str:
    info = RunInfo(finished_at, threshold=80, settings=SETTINGS)
    return log_lines(info, results, ROOT)  # type: ignore[arg-type]


def test_a_log_read_without_traces_keeps_scores_verdicts_and_timings_but_no_answer() -> None:
    text = _log_text(scenario("a", [judged("c", 2, False, "why")], output=ANSWER, seconds=3.5))
    whole, light = parse_run_log(text), parse_run_log(text, traces=False)
    assert ANSWER in text
    [trial] = light.results[0].trials
    assert trial.trace is not None
    assert (trial.trace.output, trial.trace.seconds, trial.agent_output) == ("", 3.5, None)
    assert whole.results[0].trials[0].trace.output == ANSWER  # type: ignore[union-attr]
    assert light.results[0].criteria == whole.results[0].criteria
    assert light.results[0].percentage == whole.results[0].percentage == 0.0


def test_the_logs_of_a_folder_are_listed_newest_first_and_only_they_can_be_named(
    tmp_path: Path,
) -> None:
    runs = tmp_path / "project" / ".openkata" / "runs"
    runs.mkdir(parents=True)
    (runs / "20261201T100000Z.jsonl").write_text(_log_text(scenario("a")))
    (runs / "20261202T100000Z.jsonl").write_text(
        _log_text(scenario("a", [judged("c", 1, False)]), finished_at="2026-12-02T10:00:00Z")
    )
    (runs / "20261202T100000Z-2.jsonl").write_text(_log_text(scenario("a")))
    (runs / "notes.jsonl").write_text("{}\n")
    (tmp_path / "20261203T100000Z.jsonl").write_text("outside\n")
    files = LogFiles(tmp_path / "project")

    assert files.logs() == [
        ".openkata/runs/20261202T100000Z-2.jsonl",  # the second log of that second
        ".openkata/runs/20261202T100000Z.jsonl",
        ".openkata/runs/20261201T100000Z.jsonl",
    ]
    _, newer, older = files.rows()
    assert (newer.gate, newer.score, newer.scenarios) == ("fail", 0.0, 1)
    assert (older.gate, older.score, older.finished_at) == ("pass", 100.0, "2026-12-01T10:00:00Z")
    assert newer.agent_model == "gpt-4o"
    assert files.path_of("../20261203T100000Z.jsonl") is None
    assert files.path_of(".openkata/runs/notes.jsonl") is None
    assert files.path_of(str(runs / "20261201T100000Z.jsonl")) is None  # absolute


def test_an_unreadable_log_is_a_row_naming_the_log_and_line(tmp_path: Path) -> None:
    (tmp_path / "20261201T100000Z.jsonl").write_text('{"record": "run"}\nnot json\n')
    [row] = LogFiles(tmp_path).rows()
    assert row.problem == "20261201T100000Z.jsonl: line 2: not JSON: Expecting value"


def test_a_log_being_written_is_read_up_to_its_last_finished_line(tmp_path: Path) -> None:
    text = _log_text(scenario("a"), scenario("b"))
    cut = text[: text.rindex("\n", 0, len(text) - 1) + 20]  # the last record half written
    assert finished_lines(cut) == text[: text.rindex("\n", 0, len(text) - 1) + 1]
    (tmp_path / "20261201T100000Z.jsonl").write_text(cut)
    files = LogFiles(tmp_path)
    assert [r.name for r in files.run("20261201T100000Z.jsonl").results] == ["a"]
    (tmp_path / "20261201T100000Z.jsonl").write_text(text)
    assert [r.name for r in files.run("20261201T100000Z.jsonl").results] == ["a", "b"]
    assert files.row("20261201T100000Z.jsonl").scenarios == 2


def _label(passed: bool, note: str = "", criterion: int = 0, trial: int = 1) -> VerdictLabel:
    return VerdictLabel(
        line=0,
        skill_dir="skills/s",
        scenario="a",
        arm="",
        trial=trial,
        criterion_index=criterion,
        criterion="c",
        passed=passed,
        reviewer="ana",
        note=note,
    )


def test_a_label_given_again_replaces_the_first_and_the_file_reads_as_agreement_reads_it(
    tmp_path: Path,
) -> None:
    log = tmp_path / "20261201T100000Z.jsonl"
    assert labels_file(log) == tmp_path / "20261201T100000Z.labels.jsonl"
    assert read_run_labels(log) == []
    write_label(log, _label(False, "first \u2028 thought"))
    write_label(log, _label(True, criterion=1))
    write_label(log, _label(True, "on second thought"))
    text = labels_file(log).read_text()
    assert len(text.split("\n")) == 3  # two lines and the end
    assert [(x.criterion_index, x.passed, x.note) for x in read_labels(labels_file(log))] == [
        (1, True, ""),
        (0, True, "on second thought"),
    ]
    assert [p.name for p in tmp_path.iterdir()] == ["20261201T100000Z.labels.jsonl"]


def test_a_labels_file_that_cannot_be_read_is_an_error_naming_it_and_the_line(
    tmp_path: Path,
) -> None:
    log = tmp_path / "20261201T100000Z.jsonl"
    write_label(log, _label(True))
    with labels_file(log).open("a") as labels:
        labels.write('{"verdict": "maybe"}\n')
    with pytest.raises(LabelsError, match=r"^20261201T100000Z\.labels\.jsonl: line 2: "):
        read_run_labels(log)
    with pytest.raises(LabelsError):  # nothing written over a file that cannot be read
        write_label(log, _label(False))
    assert labels_file(log).read_text().endswith('"maybe"}\n')


def test_two_runs_compared_show_flips_deltas_and_both_answers() -> None:
    before = logged(
        [
            scenario("a", [judged("x", 1, True), judged("y", 1, False)], output="old"),
            scenario("gone"),
        ]
    )
    after = logged([scenario("a", [judged("x", 1, True), judged("y", 1, True)], output="new")])
    pair, gone = compare_runs(before, after)
    assert (pair.scenario, pair.delta, pair.flips) == ("a", 50.0, 1)
    assert [(f.name, f.before, f.after, f.flipped) for f in pair.criteria] == [
        ("x", True, True, False),
        ("y", False, True, True),
    ]
    assert (pair.before_answer, pair.after_answer) == ("old", "new")
    assert (gone.scenario, gone.after, gone.delta) == ("gone", None, None)


def test_disagreements_rank_the_criteria_the_judge_was_most_often_wrong_on() -> None:
    other = replace(_label(False), criterion="d")
    ranked = disagreements(
        [
            (_label(True, "it was there"), False),  # the judge failed it: wrong
            (replace(_label(True), trial=2), True),  # agrees
            (other, False),
            (replace(other, trial=2, note="missing"), True),
            (replace(other, trial=3, note="missing too"), True),
        ]
    )
    assert [(d.criterion, d.disagreed, d.labelled, d.notes) for d in ranked] == [
        ("d", 2, 3, ("missing", "missing too")),
        ("c", 1, 2, ("it was there",)),
    ]


def test_a_runs_baseline_arm_is_compared_with_its_own_arm() -> None:
    own = scenario("a", [judged("x", 1, True)], output="with the skill")
    baseline = scenario("a", [judged("x", 1, False)], arm="without-skill", output="without")
    run = logged([replace(own, baseline=baseline), scenario("b")])
    [pair] = compare_arms(run)
    assert (pair.scenario, pair.delta, pair.flips) == ("a", 100.0, 1)
    assert (pair.before_answer, pair.after_answer) == ("without", "with the skill")


def test_the_matrix_holds_each_skill_and_model_of_the_newest_run() -> None:
    def row(log: str, model: str, *scores: tuple[str, float, str]) -> RunRow:
        return RunRow(log=log, agent_model=model, skill_scores=scores)

    newest_first = [
        row("3", "m1", ("s", 90.0, "pass")),
        row("2", "m2", ("s", 40.0, "fail"), ("t", 70.0, "fail")),
        row("1", "m1", ("s", 10.0, "fail"), ("t", 100.0, "pass")),
    ]
    found = matrix(newest_first)
    assert (found.skills, found.models) == (["s", "t"], ["m1", "m2"])
    assert {key: (r.log, score) for key, (r, score, _) in found.cells.items()} == {
        ("s", "m1"): ("3", 90.0),
        ("s", "m2"): ("2", 40.0),
        ("t", "m2"): ("2", 70.0),
        ("t", "m1"): ("1", 100.0),
    }


def test_a_trial_is_read_from_its_scenarios_lines_only(tmp_path: Path) -> None:
    own = scenario("b", [judged("x", 1, True)], output="with the skill")
    baseline = scenario("b", [judged("x", 1, False)], arm="without-skill", output="without")
    text = _log_text(scenario("a", output=ANSWER), replace(own, baseline=baseline))
    (tmp_path / "20261201T100000Z.jsonl").write_text(text)
    files = LogFiles(tmp_path)

    run = files.scenario_run("20261201T100000Z.jsonl", "skills/s", "b")
    assert [(t.scenario["scenario"], t.scenario["arm"]) for t in run.trials] == [
        ("b", ""),
        ("b", "without-skill"),
    ]
    assert [t.trial.trace.output for t in run.trials] == ["with the skill", "without"]  # type: ignore[union-attr]
    with pytest.raises(RunLogError, match=r"^20261201T100000Z\.jsonl: no scenario skills/s::c$"):
        files.scenario_run("20261201T100000Z.jsonl", "skills/s", "c")


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.9", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("192.168.1.20", False),
        ("viewer.example", False),
    ],
)
def test_only_loopback_addresses_go_without_a_token(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
    hosts = allowed_hosts(host, 8765)
    if loopback:
        assert {"127.0.0.1:8765", "localhost:8765", "[::1]:8765"} <= hosts
    else:
        assert hosts == frozenset()  # any name: the token guards it


def test_a_log_with_raw_line_separators_in_its_answers_is_read_line_by_line(
    tmp_path: Path,
) -> None:
    answer = "one\u2028two\u2029three\x85four"
    text = _log_text(scenario("a", output=answer), scenario("b"))
    raw = text.replace("\\u2028", "\u2028").replace("\\u2029", "\u2029").replace("\\u0085", "\x85")
    assert "\u2028" in raw  # as another tool, or an older version, may have written it
    (tmp_path / "20261201T100000Z.jsonl").write_text(raw, encoding="utf-8")
    files = LogFiles(tmp_path)
    assert files.row("20261201T100000Z.jsonl").scenarios == 2
    run = files.scenario_run("20261201T100000Z.jsonl", "skills/s", "a")
    assert run.trials[0].trial.trace.output == answer  # type: ignore[union-attr]


def test_results_json_files_are_found_beside_the_logs_in_time_order_and_a_bad_one_named(
    tmp_path: Path,
) -> None:
    results = tmp_path / "skills" / "s" / "evals" / "results" / "m"
    results.mkdir(parents=True)
    (results / "2026-12-01T100001.json").write_text('{"skill": 3}')
    (results / "results-latest.json").write_text("{}")  # not named as a report is
    (tmp_path / "2026-12-01T100002.json").write_text("{}")  # not in a results folder
    (tmp_path / "20261201T100000Z.jsonl").write_text(_log_text(scenario("a")))
    files = LogFiles(tmp_path)
    assert files.logs() == [
        "skills/s/evals/results/m/2026-12-01T100001.json",
        "20261201T100000Z.jsonl",
    ]
    bad, log = files.rows()
    assert bad.kind == "results JSON"
    assert bad.problem.startswith(
        "skills/s/evals/results/m/2026-12-01T100001.json: not a results JSON: skill: "
    )
    assert (log.kind, log.scenarios) == ("run log", 1)


def _results_json(**changes: object) -> str:
    report = build_report(
        skill="s",
        skill_version="1",
        timestamp=datetime(2026, 12, 1, 10, 0, 1, tzinfo=UTC),
        config=ReportConfig(backend="http", agent_model="m", judge_model="m"),
        threshold=80,
        results=[scenario("a")],
        overall=100.0,
        passed=True,
    )
    data = json.loads(render_report(report))
    data.update(changes)
    return json.dumps(data)


def test_malformed_files_are_their_rows_problem_and_their_pages_say_why(tmp_path: Path) -> None:
    good = _log_text(scenario("a"))
    results = tmp_path / "skills" / "s" / "evals" / "results" / "m"
    results.mkdir(parents=True)
    (results / "2026-12-01T100001.json").write_text(_results_json(manifest={"plugin_version": 5}))
    (tmp_path / "20261201T100002Z.jsonl").write_text(good + "[" * 100_000 + "\n")
    head, rest = good.split("\n", 1)
    overflowing = head.replace('"threshold": 80', '"threshold": 1' + "0" * 400)
    assert overflowing != head
    (tmp_path / "20261201T100003Z.jsonl").write_text(overflowing + "\n" + rest)
    record = json.loads(rest.split("\n")[0])
    record["trace"] = {"answers": [1]}
    (tmp_path / "20261201T100004Z.jsonl").write_text(head + "\n" + json.dumps(record) + "\n")
    with serving(tmp_path) as base, httpx.Client(base_url=base) as client:
        listing = client.get("/")
        assert listing.status_code == 200
        rows = {row.log: row.problem for row in LogFiles(tmp_path).rows()}
        assert rows == {
            "20261201T100004Z.jsonl": "",  # its overview holds no answers: only its trial is bad
            "20261201T100003Z.jsonl": "20261201T100003Z.jsonl: line 1: "
            "threshold must be a percentage from 0 to 100",
            "20261201T100002Z.jsonl": "20261201T100002Z.jsonl: line 3: not JSON: nested too deeply",
            "skills/s/evals/results/m/2026-12-01T100001.json": "skills/s/evals/results/m/"
            "2026-12-01T100001.json: manifest.plugin_version: must be a string",
        }
        for log, problem in rows.items():
            if problem:
                assert html.escape(problem, quote=False) in listing.text
                page = client.get(f"/run/{log}")
                assert (page.status_code, problem in html.unescape(page.text)) == (404, True)
        trial = client.get(
            "/trial/20261201T100004Z.jsonl",
            params={"skill": "skills/s", "scenario": "a", "trial": 1},
        )
        assert trial.status_code == 404
        assert "20261201T100004Z.jsonl: line 2: not a trial record" in html.unescape(trial.text)


def test_a_live_log_gone_between_finding_and_reading_it_answers_as_moved(tmp_path: Path) -> None:
    live = tmp_path / "20261201T100000Z.0123abcd-1.live.jsonl"
    live.write_text(_log_text(scenario("a")))

    class Vanishing(LogFiles):
        """Logs whose live log ends its run just after it is found."""

        def path_of(self, log: str) -> Path | None:
            path = super().path_of(log)
            if path is not None:
                path.unlink()
            return path

    def vanishing_viewer(port: int) -> GuardedApp:
        guard = Guard(allowed_hosts("127.0.0.1", port), "", "key", port)
        app = make_app(tmp_path, guard)
        app.app.state.viewer = Viewer(Vanishing(tmp_path), guard)  # type: ignore[attr-defined]
        return app

    with serving_app(vanishing_viewer) as base:
        answer = httpx.get(f"{base}/api/run/{live.name}")
    assert answer.status_code == 200
    assert answer.json() == {"moved": "/"}


@pytest.mark.parametrize("port", ["70000", "-1"])
def test_a_port_out_of_range_is_a_usage_error(
    port: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert view_main([str(tmp_path), "--port", port]) == 2
    error = capsys.readouterr().err
    assert "usage:" in error
    assert "0 to 65535" in error
    assert "Traceback" not in error


def test_a_gone_live_log_is_followed_to_the_run_log_that_names_it_and_no_other(
    tmp_path: Path,
) -> None:
    live = "20261201T100000Z.0123abcd-1.live.jsonl"
    other_live = "20261201T100000Z.0123abcd-2.live.jsonl"

    def final(name: str, live_log: str, model: str = "gpt-4o") -> None:
        info = RunInfo("2026-12-01T10:05:00Z", settings={**SETTINGS, "model": model})
        text = log_lines(replace(info, live_log=live_log), [scenario("a")], ROOT)
        (tmp_path / name).write_text(text)

    (tmp_path / live).write_text(_log_text(scenario("a")))
    files = LogFiles(tmp_path)
    assert files.row(live).agent_model == "gpt-4o"  # the live run, as the viewer last read it
    (tmp_path / live).unlink()
    final("20261201T100100Z.jsonl", other_live)  # the same models, another run's
    assert files.successor(live) is None  # not yet written: no other run's log instead
    final("20261201T100200Z.jsonl", live, model="other")  # the models differ: still ours
    assert files.successor(live) == "20261201T100200Z.jsonl"
    assert files.run("20261201T100200Z.jsonl").info.live_log == live

    older = tmp_path / "older"
    older.mkdir()
    (older / "20261201T100100Z.jsonl").write_text(_log_text(scenario("a")))  # names none
    assert LogFiles(older).successor(live) == "20261201T100100Z.jsonl"


def test_a_token_goes_to_a_cookie_named_by_the_port_and_back_to_a_page_of_the_same_origin(
    tmp_path: Path,
) -> None:
    with serving(tmp_path, token="the-token") as base, httpx.Client(base_url=base) as client:
        port = int(base.rsplit(":", 1)[1])
        first = client.get("/?token=the-token&q=x")
        assert (first.status_code, first.headers["location"]) == (303, "/?q=x")
        assert first.cookies.get(f"openkata_view_token_{port}") == "the-token"
        for path in ("//evil.example/", "/\\evil.example/"):
            answer = client.get(f"{base}{path}?token=the-token")
            location = answer.headers["location"]
            assert answer.status_code == 303
            assert location.startswith("/")
            assert location[1] not in "/\\"  # "//x" or "/\\x" would be another site
            assert location.endswith("evil.example/")  # this viewer's path of that name
        # Another viewer's cookie is not this one's.
        for cookie_port, status in ((port + 1, 403), (port, 200)):
            cookies = {f"openkata_view_token_{cookie_port}": "the-token"}
            with httpx.Client(base_url=base, cookies=cookies) as fresh:
                assert fresh.get("/").status_code == status


def test_a_labels_file_linked_out_of_its_logs_folder_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "secret.jsonl"
    outside.write_text('{"not": "a label"}\n')
    runs = tmp_path / "runs"
    runs.mkdir()
    log = runs / "20261201T100000Z.jsonl"
    log.write_text(_log_text(scenario("a")))
    labels_file(log).symlink_to(outside)
    with pytest.raises(LabelsError, match="a link out of its run log's folder is not read"):
        read_run_labels(log)
    with pytest.raises(LabelsError):
        write_label(log, _label(True))
    assert outside.read_text() == '{"not": "a label"}\n'
