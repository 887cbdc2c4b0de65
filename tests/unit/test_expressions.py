"""``output_expression`` checks (waza's ``code`` assertions): the evaluator's names and
functions, what it refuses, its bounds, the events it maps the transcript onto, and the
checks that load and grade with it.

Every expression is evaluated for real by the evaluator; the transcripts are hand-built."""

from __future__ import annotations

import itertools
import json
import re
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import regex

from pytest_openkata.contracts.results import SCENARIO_ERROR
from pytest_openkata.contracts.transcripts import Step, Transcript, one_turn
from pytest_openkata.core.checks import Check, CheckError, Evidence, evaluate_check
from pytest_openkata.core.expressions import (
    ExpressionError,
    ExpressionInputs,
    evaluate,
    events_of,
    parse,
)
from pytest_openkata.core.scenario import ScenarioLoadError, load_checks

TRANSCRIPT = Transcript(
    "claude stream-json",
    steps=(
        Step.message("assistant", "Looking around."),
        Step.tool_call("Bash", '{"command": "pytest -q"}', result="3 passed", status="ok"),
        Step.tool_call("Read", '{"file_path": "gone.md"}', result="no such file", status="error"),
        Step.message("user", "Now say it."),
        Step.message("assistant", "The answer is 42."),
    ),
    seconds=2.5,
)
INPUTS = ExpressionInputs("The answer is 42.", events_of(TRANSCRIPT), 2500)


def holds(expression: str, inputs: ExpressionInputs = INPUTS, timeout: float = 10) -> bool:
    return evaluate(parse(expression), inputs, timeout=timeout)


def refused(expression: str, inputs: ExpressionInputs = INPUTS, timeout: float = 10) -> str:
    with pytest.raises(ExpressionError) as caught:
        holds(expression, inputs, timeout)
    return str(caught.value)


def refused_in_little_memory(expression: str, inputs: ExpressionInputs) -> str:
    """The refusal of ``expression``, made within 20 MB: what it refuses would take more."""
    tracemalloc.start()
    try:
        words = refused(expression, inputs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20_000_000
    return words


# --- the names and functions waza gives an assertion -------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("len(output) == 17", True),
        ("'answer' in output.lower() and output.endswith('42.')", True),
        ("outcome == {}", True),
        ("len(chat_events) == 5 and len(transcript) == 5", True),
        (
            "[e['role'] for e in chat_events][1:] == ['tool', 'tool', 'user', 'assistant']",
            True,
        ),
        ("[t['data']['name'] for t in tool_calls] == ['Bash', 'Read']", True),
        ("tool_calls[0]['content'] == '3 passed' and tool_calls[0]['type'] == 'tool_call'", True),
        ("'pytest' in tool_calls[0]['data']['arguments']", True),
        ("[e['data']['name'] for e in errors] == ['Read']", True),
        ("duration_ms == 2500", True),
        ("any(t['data']['status'] == 'error' for t in tool_calls)", True),
        ("all([str(1) == '1', int('2') == 2, float('0.5') == 0.5, bool(1) == True])", True),
        ("list(dict(a=1).keys()) == ['a'] and False", False),
        ("re.search(r'(\\d+)\\.$', output).group(1) == '42'", True),
        ("re.match('the', output, re.IGNORECASE) is not None", True),
        ("re.fullmatch('The.*', output, re.DOTALL | re.MULTILINE) is not None", True),
        ("re.findall('[0-9]', output) == ['4', '2']", True),
        ("re.sub('[0-9]+', 'N', output) == 'The answer is N.'", True),
        ("re.split(' ', output)[-1] == '42.'", True),
        ("len(tool_calls) > 5", False),
    ],
)
def test_an_expression_reads_the_names_waza_gives(expression: str, expected: bool) -> None:
    assert holds(expression) is expected


@pytest.mark.parametrize(("expression", "expected"), [("output", True), ("tool_calls[5:]", False)])
def test_a_result_that_is_not_a_bool_counts_by_its_truth(expression: str, expected: bool) -> None:
    assert holds(expression) is expected


@pytest.mark.parametrize(
    ("pattern", "replacement", "text", "count"),
    [
        ("x*", "-", "abxd", 0),
        (r"(\w+)@(\w+)", r"\2 at \1", "a@b c@d", 0),
        ("a", "b", "aaaa", 2),
        (r"\b", "|", "hi there", 0),
    ],
)
def test_re_sub_replaces_as_pythons_re_does(
    pattern: str, replacement: str, text: str, count: int
) -> None:
    inputs = ExpressionInputs(text)
    expected = re.sub(pattern, replacement, text, count=count)
    expression = f"re.sub({pattern!r}, {replacement!r}, output, {count}) == {expected!r}"
    assert holds(expression, inputs)


def test_the_events_map_each_step_onto_wazas_event_dicts() -> None:
    assert events_of(TRANSCRIPT)[:2] == (
        {
            "role": "assistant",
            "type": "message",
            "content": "Looking around.",
            "data": {"subagent": ""},
        },
        {
            "role": "tool",
            "type": "tool_call",
            "content": "3 passed",
            "data": {
                "name": "Bash",
                "arguments": '{"command": "pytest -q"}',
                "result": "3 passed",
                "status": "ok",
                "subagent": "",
            },
        },
    )
    assert events_of(None) == ()


# --- what it refuses -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("output.__class__", "__class__"),
        ("len.__self__", "__self__"),
        ("open('/etc/passwd')", "'open' is not a function it may call"),
        ("__import__('os')", "'__import__' is not a function it may call"),
        ("tuple(output)", "'tuple' is not a function it may call"),
        ("os", "'os' is not a name it may use"),
        ("re.compile('x')", "'.compile' access not allowed"),
        ("chat_events.append(1)", "'.append' access not allowed"),
        ("output.format(1)", "not available"),
        ("(x := 1)", "NamedExpr is not available"),
        ("lambda: 1", "Lambda"),
    ],
)
def test_a_name_function_or_attribute_outside_wazas_is_refused(expression: str, words: str) -> None:
    assert words in refused(expression)


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("1 / 0", "ZeroDivisionError"),
        ("tool_calls[9]", "IndexError"),
        ("chat_events[0]['nope']", "KeyError"),
        ("len(5)", "TypeError"),
        ("re.search('(', output)", "error"),
    ],
)
def test_an_expression_that_raises_is_an_error_naming_what_it_raised(
    expression: str, words: str
) -> None:
    assert words in refused(expression)


@pytest.mark.parametrize(
    "expression",
    [
        "10 ** 10 ** 10",
        "4000000 ** 4000000 > 0",
        "'a' * 10 ** 9",
        "[output] * 10 ** 9",
        "output.replace('', 'x' * 50000)",
        "'-'.join([output] * 90000)",
        "re.sub('', 'x' * 50000, output)",
        "output.center(10 ** 9)",
        "len([c for c in 'a' * 90000 for d in 'b' * 90000])",
        # Ways around the text bounds a review found: a width, % formatting, a list's text.
        "f'{output:>1500000000}' == ''",
        "'%1500000000s' % output == ''",
        "len(str(['a' * 100000] * 100000)) > 0",
        "len(f'{[output] * 100000}') > 0",
        # Whole numbers too large to divide quickly.
        "(2 ** 60000 * 2 ** 60000) // 3 ** 20000 > 0",
    ],
)
def test_work_past_the_bounds_is_an_error(expression: str) -> None:
    refused(expression)  # raises, and returns before the work is done


def test_numbers_formatting_and_the_events_text_stay_within_the_bounds() -> None:
    assert holds("10 % 3 == 1 and f'{len(output)}!' == '17!'")
    assert holds("'pytest' in str(tool_calls) and len(str(chat_events)) > len(output)")


def test_a_whole_expression_is_stopped_at_its_checks_time() -> None:
    # Each step is quick; the expression as a whole would take minutes.
    words = refused(
        "[len(re.findall('a', output)) for x in 'a' * 9999] != []",
        ExpressionInputs("a" * 100_000),
        timeout=0.5,
    )
    assert words == "it did not finish within 0.5 s"


MANY_GROUPS = "".join(f"(?P<g{n}>a?)" for n in range(40)) + "(b+)"


@pytest.mark.parametrize(
    ("pattern", "replacement", "text"),
    [
        (r"(?P<word>\w+)@(\w+)", r"\g<2>.\g<word>;\g<0>\n\\", "a@bc de@f"),
        (r"(a)(b)?", r"[\1\2\1]", "aab a"),
        (r"(?=(\w))", r"<\1>", "ab"),
        (MANY_GROUPS, r"\g<g3>\41\g<0>", "aab aaabb"),
        (r"x", "no references", "axbx"),
        # A reversed pattern finds its matches from the end.
        (r"(?r)a", "b", "xaxa"),
        (r"(?r)(a+)", r"[\1]", "aaxaa"),
        # A template naming a group the pattern has not, where nothing matches.
        (r"(x)", r"\2", "y"),
        ("(a)" * 400, r"\1-", "a" * 800),
    ],
)
def test_re_sub_with_group_references_replaces_as_the_regex_package_does(
    pattern: str, replacement: str, text: str
) -> None:
    expected = regex.sub(pattern, replacement, text)
    assert holds(
        f"re.sub({pattern!r}, {replacement!r}, output) == {expected!r}", ExpressionInputs(text)
    )


def test_a_long_group_named_once_is_replaced_whole() -> None:
    # Measured group by group, the replacement is as long as the output, within the bounds.
    long = ExpressionInputs("y" * 150_000 + "x")
    assert holds("re.sub('(.*)(x)', '\\\\2\\\\1', output) == 'x' + output[:-1]", long)


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        (r"(a)(b)?", "aab ab"),
        (r"(?=(\w\w))", "abcd"),
        (r"x*", "abxd"),
        (r"(x)|(y)", "axbyc"),
        (MANY_GROUPS, "aab aaabb"),
    ],
)
def test_re_findall_and_split_give_what_the_regex_package_gives(pattern: str, text: str) -> None:
    inputs = ExpressionInputs(text)
    assert holds(f"re.findall({pattern!r}, output) == {regex.findall(pattern, text)!r}", inputs)
    assert holds(f"re.split({pattern!r}, output) == {regex.split(pattern, text)!r}", inputs)
    assert holds(f"re.split({pattern!r}, output, 1) == {regex.split(pattern, text, 1)!r}", inputs)


@pytest.mark.parametrize(
    ("expression", "text"),
    [
        # A group in a lookahead matches to the end of the text at every place: the list of
        # what it matched would be the text's length squared over two.
        (r"len(re.findall('(?=(\\w+))', output)) > 0", "a" * 20_000),
        (r"len(re.split('(?=(\\w+))', output)) > 0", "a" * 20_000),
        # A replacement naming a long group a thousand times, once and over many groups.
        ("len(re.sub('(.+)', '\\\\1' * 2000, output)) > 0", "a" * 100_000),
        ("len(re.sub(" + repr(MANY_GROUPS) + ", '\\\\41' * 2000, output)) > 0", "b" * 100_000),
    ],
)
def test_a_list_or_replacement_past_the_bounds_is_refused_before_it_is_made(
    expression: str, text: str
) -> None:
    words = refused_in_little_memory(expression, ExpressionInputs(text))
    assert words.startswith("IterableTooLong: the result would have a length of")


def test_a_comprehension_whose_items_pass_the_bounds_is_refused_as_it_makes_them() -> None:
    # Two thousand copies of a long output would take 100 MB; the first few pass the bound.
    words = refused_in_little_memory(
        "len([output + 'x' for c in 'a' * 2000]) > 0", ExpressionInputs("y" * 50_000)
    )
    assert words.startswith("IterableTooLong: the items made would come to more")


def test_comprehensions_over_the_output_and_the_events_stay_within_the_bounds() -> None:
    lines = ExpressionInputs("ab\n" * 5000 + "x" * 90_000, events_of(TRANSCRIPT))
    assert holds("len([line.strip() for line in output.splitlines()]) == 5001", lines)
    assert holds("len({line: len(line) for line in output.splitlines()}) == 2", lines)
    assert holds("any(line == 'ab' for line in output.splitlines())", lines)
    assert holds("[e['role'] for e in chat_events][-1] == 'assistant'", lines)


@pytest.mark.parametrize(
    ("expression", "text"),
    [
        # The text of a list of matches or of a dict's views holds the texts they hold.
        ("len(str([re.search('.+', output)] * 3000)) > 0", "x" * 20_000),
        ("len(str([{output: 1}.keys()] * 3000)) > 0", "x" * 20_000),
        # A match of each group counts, though a group matched nothing.
        ("len(re.findall('x|' + '(a)' * 300, output)) > 0", "x" * 100_000),
        # A list of a long text's characters holds an object per character.
        ("len(list(output)) > 0", "\u4e2d" * 200_000),
    ],
)
def test_what_holds_more_than_it_shows_is_refused_before_it_is_made(
    expression: str, text: str
) -> None:
    assert "IterableTooLong" in refused_in_little_memory(expression, ExpressionInputs(text))


def test_matches_kept_in_a_comprehension_count_the_texts_they_keep_once_each() -> None:
    # Each match keeps the copy of the output it was found in: 100 MB if all were kept.
    copies = "len([re.match('', output.lower()) for c in output[:2000]]) == 2000"
    words = refused_in_little_memory(copies, ExpressionInputs("x" * 50_000))
    assert words.startswith("IterableTooLong: the items made would come to more")
    # Matches of the one output keep that one text.
    long = ExpressionInputs("x" * 120_000 + " needle haystack")
    assert holds("all(re.search(p, output) for p in ['needle', 'hay', 'x+'])", long)


def _nested(levels: int) -> str:
    """Tuples ten times as large, level by level, each holding the one below ten times:
    a thousand items by reference at three levels, a hundred million at eight."""
    names = [f"t{level}" for level in range(levels)]
    clauses = [f"for {names[0]} in [(0,0,0,0,0,0,0,0,0,0)]"] + [
        f"for {name} in [({','.join([below] * 10)})]" for below, name in itertools.pairwise(names)
    ]
    return f"[{names[-1]} in outcome {' '.join(clauses)}] != []"


def test_containers_are_counted_by_their_whole_tree_however_shared() -> None:
    # Hashing (here for "in") or comparing such tuples walks every item, shared or not.
    assert holds(_nested(3))
    assert refused(_nested(8)).startswith("IterableTooLong: the items made would come to more")


STARS = ", ".join(["*words"] * 100)
MANY_SPLITS = ", ".join(f"k{n}=output.split()" for n in range(40))
PIECES = "{output.upper()}" * 60


@pytest.mark.parametrize(
    ("expression", "text"),
    [
        # A replacement naming the whole match, over a pattern without groups.
        ("len(re.sub('.+', '\\\\g<0>' * 2000, output)) > 0", "x" * 50_000),
        # What a comprehension's items hold: a match in a tuple, a method of a copy, a view.
        ("len([(re.search('^', output + c),) for c in output[:3000]]) > 0", "x" * 50_000),
        ("len([(output + c).count for c in output[:3000]]) > 0", "x" * 50_000),
        ("len([((output + c).count,) for c in output[:3000]]) > 0", "x" * 50_000),
        ("len([{'a': output + c}.values() for c in output[:3000]]) > 0", "x" * 50_000),
        # Items written out, a text's characters or a list starred into a list, arguments.
        ("len([" + ", ".join(f"output + '{n}'" for n in range(9)) + "]) > 0", "x" * 100_000),
        ("[len([" + STARS + "]) for words in [output.split()]] != []", "a " * 100_000),
        ("bool(dict(" + MANY_SPLITS + "))", "\u00e9\u20ac " * 20_000),
        ("len(f'" + PIECES + "') > 0", "\U0001f600" * 100_000),
        ("len(output + output[:90000] + output[:90000]) > 0", "x" * 100_000),
        ("len([*output]) > 0", "\u4e2d" * 200_000),
        # A join or an f-string that doubles a text, again and again.
        ("len(''.join([output, output + 'a'])) > 0", "x" * 200_000),
        ("[len(y) for x in [output] for y in [f'{x}{x}{x}{x}']] != []", "x" * 100_000),
        # A list as long as its text, though its length is short, compared or counted.
        ("([output[:-1] + output[-1:]] * 100000).count(output) > 0", "x" * 50_000),
        ("[[1] * 100000] * 10000 == [[1] * 100000] * 10000", "x"),
    ],
)
def test_what_a_review_made_past_the_bounds_is_refused_before_it_is_made(
    expression: str, text: str
) -> None:
    words = refused_in_little_memory(expression, ExpressionInputs(text))
    assert words.startswith("IterableTooLong: ")


def test_an_f_strings_conversions_are_pythons() -> None:
    quoted = ExpressionInputs("hi\u00e9")
    assert holds("f'{output!r}' == \"'hi\u00e9'\" and f'{output!a}' == \"'hi\\\\xe9'\"", quoted)
    assert holds("(output, output.lower(), output.upper())[2] == output.upper()", quoted)


def test_a_number_read_from_a_long_text_is_refused() -> None:
    # Python bounds the digits it reads in base 10 only.
    words = refused("int(output, 16) > 0", ExpressionInputs("f" * 20_000))
    assert words == "NumberTooHigh: the number that text holds would be too large"
    assert holds("int(output, 16) == 255", ExpressionInputs("ff"))


@pytest.mark.parametrize(
    ("expression", "text"),
    [
        # Many pieces, each a word: the separators taken out are not counted in.
        (r"len(re.split('\\s+', output)) == 200001", "word " * 200_000),
        # The parts of a join are made already: the separators count, not the parts.
        ("'brown fox' in ' '.join(output.split())", "The quick brown fox jumps.\n" * 8000),
        # A long replacement is as long as what it was made of.
        ("re.sub('^', output, 'x') == output + 'x'", "y" * 200_000),
        # Joins and f-strings as long as the output.
        ("len(' '.join(output.split())) == 599999", "word " * 120_000),
        ("len('\\n'.join(output.splitlines())) == 299999", "a\n" * 150_000),
        ("len(f'{output}') == len(output)", "y" * 200_000),
    ],
)
def test_long_lists_and_texts_made_of_what_is_there_stay_within_the_bounds(
    expression: str, text: str
) -> None:
    assert holds(expression, ExpressionInputs(text))


def test_an_output_longer_than_the_bounds_is_still_read_whole() -> None:
    long = ExpressionInputs("x\x1b[2J\u202e" * 60_000 + "END")
    assert holds("output.lower().replace('x', 'y').endswith('end')", long)
    assert holds("re.sub('x', '', output).count('END') == 1", long)
    assert holds("len(' '.join([output, 'tail'])) == len(output) + 5", long)


def test_a_pattern_that_backtracks_without_end_is_stopped_after_its_time() -> None:
    words = refused(
        "re.search('^(a|aa)+$', output)",
        ExpressionInputs("a" * 80 + "b"),
        timeout=0.2,
    )
    assert "did not finish searching within 0.2 s" in words


@pytest.mark.parametrize(
    "expression",
    [
        "re.search('(?:(?:a{1000}){1000}){3}', output)",
        "re.findall('(?:a{1000,}){1000}', output)",
        "re.sub('(?:x{500}){500}', '', output) == ''",
        # A pattern made of the agent's output: its repeats are counted before it compiles.
        "re.match(output * 3, 'x')",
        # Verbose mode cannot hide a repeat behind a bracket in a comment.
        "re.search('(?x)(?: a{1000} # )\\n ){1000}', output)",
        "re.split('[ab]{1000000}', output, 0, 64)",
    ],
)
def test_a_pattern_that_would_take_too_much_to_compile_is_refused(expression: str) -> None:
    inputs = ExpressionInputs("(?:a{999}){999}")
    assert "would write out more than 100,000 items when it is compiled" in refused(
        expression, inputs
    )


def test_patterns_of_a_usual_size_compile_and_search() -> None:
    assert holds("re.search('[a-z]{2,50} is [0-9]{1,3}', output) is not None")
    assert holds(r"re.fullmatch(r'(?x) The \s answer [ ] is \s \d{2} [.]', output) is not None")


@pytest.mark.parametrize("text", ["len(output) >", "x = 1", "a; b", "import os", "\x00"])
def test_a_text_that_is_not_one_expression_is_refused_when_parsed(text: str) -> None:
    with pytest.raises(ExpressionError, match="not a Python expression"):
        parse(text)


# --- output_expression checks: loading and grading ------------------------------------------


def load(tmp_path: Path, items: list[dict[str, Any]]) -> tuple[Check, ...]:
    path = tmp_path / "checks.json"
    path.write_text(json.dumps(items))
    return load_checks(path, sandboxed=False)


def check(expression: str, timeout: float = 10) -> Check:
    return Check("shape: " + expression, "", 1, "output_expression", expression=expression,
                 timeout=timeout)  # fmt: skip


def test_an_expression_check_loads_with_its_expression_and_timeout(tmp_path: Path) -> None:
    (loaded,) = load(
        tmp_path,
        [{"name": "e", "type": "output_expression", "expression": "len(output) > 0",
          "timeout": 2.5, "max_score": 1}],
    )  # fmt: skip
    assert (loaded.type, loaded.expression, loaded.timeout) == (
        "output_expression",
        "len(output) > 0",
        2.5,
    )


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"expression": "len(output) >"}, "[0] ('e').expression: not a Python expression"),
        ({"expression": ""}, "[0] ('e').expression: must not be empty"),
        ({}, "[0] ('e').expression"),
        ({"expression": "True", "pattern": "x"}, "unknown key"),
    ],
)
def test_a_bad_expression_check_names_the_file_and_the_field(
    tmp_path: Path, fields: dict[str, Any], words: str
) -> None:
    with pytest.raises(ScenarioLoadError) as caught:
        load(tmp_path, [{"name": "e", "type": "output_expression", "max_score": 1, **fields}])
    assert "checks.json" in str(caught.value)
    assert words in str(caught.value)


def test_an_expression_check_passes_or_fails_with_its_expression() -> None:
    evidence = Evidence(output="The answer is 42.", transcript=TRANSCRIPT, agent="claude")

    passed = evaluate_check(check("'42' in output and duration_ms == 2500"), evidence)
    failed = evaluate_check(check("len(tool_calls) == 0"), evidence)

    assert (passed.passed, passed.score, passed.kind) == (True, 1, "check")
    assert "holds" in passed.reason
    assert (failed.passed, failed.score) == (False, 0)
    assert "does not hold" in failed.reason


def test_duration_is_zero_where_the_agent_did_not_report_it() -> None:
    evidence = Evidence(output="hi", transcript=one_turn("hi"))
    assert evaluate_check(check("duration_ms == 0 and len(chat_events) == 1"), evidence).passed


def test_an_expression_that_raises_errors_the_check_naming_it() -> None:
    with pytest.raises(CheckError) as caught:
        evaluate_check(check("1 / 0"), Evidence(output="x"))
    assert caught.value.kind == SCENARIO_ERROR
    assert "the expression '1 / 0' cannot be evaluated: it raised ZeroDivisionError" in str(
        caught.value
    )


@pytest.mark.parametrize("transcript", [None, one_turn("hi")])
def test_tool_calls_without_the_agents_events_are_an_error_as_for_trajectory_checks(
    transcript: Transcript | None,
) -> None:
    evidence = Evidence(output="hi", transcript=transcript, agent="codex")
    with pytest.raises(CheckError, match="codex gave no events to tell its tool calls"):
        evaluate_check(check("len(tool_calls) == 0"), evidence)


def test_events_without_a_transcript_are_an_error_but_the_output_alone_is_not() -> None:
    evidence = Evidence(output="hi", transcript=None, agent="codex")
    with pytest.raises(CheckError, match="codex gave no events"):
        evaluate_check(check("len(errors) == 0"), evidence)
    assert evaluate_check(check("output == 'hi'"), evidence).passed


def test_events_of_a_cut_transcript_are_an_error() -> None:
    cut = Transcript("claude stream-json", steps=TRANSCRIPT.steps, cut_steps=600)
    with pytest.raises(CheckError, match="left out 600 steps"):
        evaluate_check(check("len(chat_events) > 0"), Evidence(output="x", transcript=cut))
