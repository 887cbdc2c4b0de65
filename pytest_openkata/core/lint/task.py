"""The task's rules: ``task-names-skill``, ``referenced-inputs`` and ``task-states-answer``."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from pytest_openkata.core.lint.context import ScenarioFiles
from pytest_openkata.core.lint.criteria import NEGATION, criterion_check
from pytest_openkata.core.lint.findings import TASK_FILE, Finding, Severity
from pytest_openkata.core.lint.jsonlines import JsonNode
from pytest_openkata.core.lint.markdown import (
    code_spans,
    in_inputs,
    input_path,
    is_path_token,
    markdown_lines,
)


def task_names_skill_rule(scenario: ScenarioFiles) -> list[Finding]:
    """The task does not name the skill: a user states a problem, and a task that says which
    skill to use tests obedience, not whether the skill helps. Prose is an error; code and
    file names are a warning (they may be meant)."""
    if scenario.task is None:
        return []
    findings = []
    for mention in _mentions(scenario.task, scenario.skill_names):
        if _ONE_WORD.fullmatch(mention.name) and not mention.beside_skill:
            # A one-word name ("git", "illustrations") is also a word, or a folder, that a
            # task about its thing needs: only "the git skill" points at the skill.
            continue
        if mention.in_code:
            severity: Severity = "warning"
            message = (
                f"the task names the skill {mention.name!r} in code or a file name "
                f"({mention.token!r}): rename it in {scenario.task_words} unless the name is "
                "what the task is about"
            )
        else:
            severity = "error"
            message = (
                f"the task names the skill {mention.name!r}: describe the user's problem "
                f"instead in {scenario.task_words}, so that the eval shows whether the skill "
                "is found and helps"
            )
        findings.append(
            Finding("task-names-skill", severity, scenario.file(TASK_FILE), mention.line, message)
        )
    return findings


@dataclass(frozen=True)
class _Mention:
    name: str
    line: int
    token: str
    in_code: bool
    beside_skill: bool = False  # "the git skill", "skill `git`", "the obs tile"


_ONE_WORD = re.compile(r"[^\W_]+")

# An address holds names of hosts and repositories, not pointers to a skill:
# "http://otel-collector:4317", "https://github.com/acme/pdf-tools/raw/main/x.json".
_ADDRESS_TOKEN = re.compile(r"[a-z][a-z0-9+.-]*://|www\.", re.I)


_SKILL_AFTER = re.compile(r"[`'\"*_]*\s+(?:skills?|tiles?)\b", re.I)


_SKILL_BEFORE = re.compile(r"\b(?:skills?|tiles?)\s+[`'\"*_]*$", re.I)


def _mentions(text: str, names: Iterable[str]) -> Iterator[_Mention]:
    """Whole-word, case-insensitive mentions of any of ``names`` (not inside a longer word
    such as ``github-create-pr`` for ``create-pr``); in code when inside a code span or a
    fenced block, or when part of a path or file name."""
    patterns = [(n, re.compile(rf"(?<![\w-]){re.escape(n)}(?![\w-])", re.I)) for n in names]
    for number, line, fenced in markdown_lines(text):
        spans = [] if fenced else code_spans(line)
        taken: list[tuple[int, int]] = []
        for name, pattern in patterns:
            for match in pattern.finditer(line):
                if any(s < match.end() and match.start() < e for s, e in taken):
                    continue
                taken.append((match.start(), match.end()))
                token = _token_at(line, match.start(), match.end())
                if _ADDRESS_TOKEN.search(token):
                    continue
                in_span = any(s <= match.start() < e for s, e, _ in spans)
                in_code = fenced or in_span or is_path_token(token)
                beside = bool(
                    _SKILL_AFTER.match(line, match.end())
                    or _SKILL_BEFORE.search(line[: match.start()])
                )
                yield _Mention(name, number, token, in_code, beside)


def _token_at(line: str, start: int, end: int) -> str:
    """The whitespace-delimited word around ``line[start:end]``, without enclosing
    punctuation or a sentence's final full stop."""
    left = start
    while left > 0 and not line[left - 1].isspace():
        left -= 1
    right = end
    while right < len(line) and not line[right].isspace():
        right += 1
    punctuation = "`\"'()[]<>{},;:!?*"
    return line[left:right].lstrip(punctuation).rstrip(punctuation + ".")


def referenced_inputs_rule(scenario: ScenarioFiles) -> list[Finding]:
    """Paths the task shows in code spans as already there are in inputs/ (a leading
    ``inputs/`` names that folder itself). A span counts only when its sentence says the file
    is there (it is read, given, in a folder, touched, ...) and does not ask for it to be made
    (created, written, saved, named, ...): most paths in tasks are what the agent is to
    produce, and a warning for each of those would bury the ones that matter. A warning
    only."""
    if scenario.task is None or _STAND_INS.search(scenario.task):
        return []  # the agent is to make the files the task names (stand-ins for them)
    findings = []
    seen: set[str] = set()
    supplied = _supplied_paths(scenario.task)
    deliverables = False
    for number, line, fenced in markdown_lines(scenario.task):
        if fenced:
            continue
        if _HEADING.match(line):
            deliverables = _DELIVERABLES.search(line) is not None
        if deliverables:
            continue  # what the agent is to hand in, under a heading that says so
        for start, end, content in code_spans(line):
            path = input_path(content)
            if path is None or not _names_a_file(content):
                continue
            if path in seen or not _said_to_be_there(line, start, end):
                continue
            seen.add(path)
            if in_inputs(scenario.path, path) or _in_skill(scenario, path):
                continue
            if _given_by_task(path, supplied):
                continue
            findings.append(_missing_input(scenario, number, content))
    return findings


# A file the task holds itself: "=== FILE: app/models/user.rb ===" (Tessl's tasks hand their
# files over this way, to be extracted before the work).
_INLINE_FILE = re.compile(r"^\W*FILE:\s*`?([^\s`=]+)", re.I)
# A path a shell command in the task's code writes: `cat > a/b.yaml`, `curl -o x.txt URL`,
# `mkdir -p talk/images`, `touch x`, `tee x`.
# A redirection is a lone ``>`` or ``>>`` (not ``=>``, ``->``, ``>=``) whose target looks like
# a path, so that code such as ``retries > limit`` supplies nothing.
_WRITTEN = re.compile(
    r"(?:(?<![=<>-])>>?(?![=>])|(?<!\S)(?:-o|--output)(?:\s+|=))\s*[\"']?([^\s\"'<>|;&()]+)"
    r"|\b(?:mkdir(?:\s+-p)?|touch|tee(?:\s+-a)?)\s+([^<>|;&()]+)"
)


def _supplied_paths(task: str) -> list[str]:
    """The paths the task supplies itself: files it holds inline, and what the shell
    commands of its code blocks write or make."""
    paths: list[str] = []
    for _number, line, fenced in markdown_lines(task):
        inline = _INLINE_FILE.match(line)
        if inline is not None:
            paths.append(inline.group(1))
        if not fenced:
            continue
        for match in _WRITTEN.finditer(line):
            if match.group(1):
                if "/" in match.group(1) or "." in match.group(1):
                    paths.append(match.group(1))
            else:
                paths += [p for p in match.group(2).split() if not p.startswith("-")]
    return [_plain_path(p) for p in paths if _plain_path(p)]


def _plain_path(path: str) -> str:
    text = path.strip().replace("\\", "/")
    while text.startswith("./"):
        text = text[2:]
    return text.strip("/")


def _given_by_task(path: str, supplied: list[str]) -> bool:
    """Whether the task supplies ``path`` itself (:func:`_supplied_paths`): one of those
    paths, one that ends with it (``auth.rb`` for ``app/api/auth.rb``), or a folder on the
    way to one (``app/api/``, ``vault/`` for ``inputs/vault/profile.json``)."""
    wanted = _plain_path(path).split("/")
    if not wanted or wanted == [""]:
        return False
    for given in supplied:
        parts = given.split("/")
        for start in range(len(parts) - len(wanted) + 1):
            if parts[start : start + len(wanted)] == wanted:
                return True
    return False


# The extensions of files a task hands over; a dotted name with another ending is code
# (``input.action``) or a host (``api.example.com``), not a file.
_FILE_EXTENSIONS = frozenset(
    """md markdown txt text json jsonl ndjson yaml yml toml csv tsv xlsx py pyi ipynb js mjs cjs
    ts tsx jsx vue svelte sh bash zsh fish ps1 bat sql tf tfvars hcl go mod sum rs java kt kts
    scala rb php c h cc cpp hpp cs fs swift m mm dart lua pl r ex exs erl hs ml html htm css
    scss sass less xml xsd svg png jpg jpeg gif webp ico pdf docx pptx ini cfg conf config env
    properties lock log out diff patch rst adoc tex bib proto graphql gql gradle pom tmpl tpl
    j2 jinja mdx dockerfile containerfile makefile mk cmake nix zip tar gz tgz bz2 xz whl jar
    wasm bin dat db sqlite parquet avro pem crt key pub gitignore editorconfig""".split()  # noqa: SIM905
)
# An IPv4 address or CIDR block (``0.0.0.0/0``), or an IPv6 one (``::/0``, ``fe80::1``).
_ADDRESS = re.compile(
    r"\d{1,3}(?:\.\d{1,3}){3}(?:/\d{1,3})?|[0-9a-f]*:[0-9a-f:]*(?:/\d{1,3})?", re.I
)


def _names_a_file(span: str) -> bool:
    """Whether a code span can name a file or folder handed to the agent: not an address,
    not a host name leading a path (``api.example.com/v1``), and, without a ``/``, a name
    with a file's extension (``handler.py``, not ``input.action``)."""
    if _ADDRESS.fullmatch(span):
        return False
    first, _, rest = span.partition("/")
    if not rest:
        return span.endswith("/") or _extension(first) in _FILE_EXTENSIONS
    return "." not in first or first.startswith(".") or _extension(first) in _FILE_EXTENSIONS


def _extension(name: str) -> str:
    return name.rpartition(".")[2].lower() if "." in name else name.lower()


# What says a path is the agent's to make, and what says it is already there, in the words
# of its sentence before it.
_TO_BE_MADE = re.compile(
    r"\b(?:creat(?:e[sd]?|ing)|writ(?:e[sn]?|ing)|wrote|produc(?:e[sd]?|ing)|sav(?:e[sd]?|ing)"
    r"|generat(?:e[sd]?|ing)|outputs?|drafts?|named|called|renam(?:e[sd]?|ing)|scaffold"
    r"|emit|export|stor(?:e[sd]?|ing)|put|place|adds?|adding|new|make[s]?|build[s]?"
    r"|record[s]?|document(?:s|ing)?|should\s+become|turn(?:s|ed)?\s+into|maintain(?:s|ed|ing)?"
    r"|assum(?:e[sd]?|ing)|explain(?:s|ed|ing)?|describ(?:e[sd]?|ing)|summari[sz](?:e[sd]?|ing)"
    r"|report(?:s|ed|ing)?)\b",
    re.I,
)
_ALREADY_THERE = re.compile(
    r"\b(?:read[s]?|open[s]?|see|review|inspect|examine|look\s+at|check|given|provided"
    r"|attached|existing|exists?|included|current|contents?\s+of|located|touch(?:es)?"
    r"|contains?|there'?s|there\s+(?:is|are)|in|from|at|under|inside|ha[sd]|have|uses?"
    r"|following|edit|fix|update|modify|change)\b",
    re.I,
)
# ... or, right after it: "`specs/_current` points to ...", "`notes/` holds ...".
_THERE_AFTER = re.compile(
    r"\s*(?:file|folder|directory)?\s*(?:points?|ha[sd]|contains?|holds?|lists?|exists?)\b",
    re.I,
)
_SENTENCE_END = re.compile(r"[.!?]\s+(?=[A-Z(\[`*_])")
# An example of a name, not a file: "(`user-profile.ts`)", "such as `a.md`".
_EXAMPLE = re.compile(
    r"(?:\(|\b(?:e\.g\.|i\.e\.|such\s+as|for\s+(?:example|instance)|like))\s*$", re.I
)
_ABSENT = re.compile(r"\b(?:no|without|missing|absent)\s*$", re.I)
# "create minimal placeholder files for ...": the files the task names are the agent's to make.
_STAND_INS = re.compile(
    r"\bcreat(?:e|ing)\b[^.]*\b(?:placeholders?|representative|dummy|stubs?|fake|mock)\b", re.I
)


def _said_to_be_there(line: str, start: int, end: int) -> bool:
    """Whether the sentence holding the code span ``line[start:end]`` says that the path is
    there (before it, or right after it), and nothing before it asks for it to be made."""
    begins = [match.end() for match in _SENTENCE_END.finditer(line, 0, start)]
    before = _CODE_SPAN.sub(" ", line[begins[-1] if begins else 0 : start])
    if _TO_BE_MADE.search(before) is not None or _EXAMPLE.search(before) is not None:
        return False
    if _ABSENT.search(before) is not None:
        return False  # "No `thumbnail.png` exists yet": said not to be there
    return _ALREADY_THERE.search(before) is not None or _THERE_AFTER.match(line, end) is not None


_CODE_SPAN = re.compile(r"(`+).*?\1")
_DELIVERABLES = re.compile(
    r"\b(?:output|deliverables?|expected|produce|hand\s+in|results?)\b", re.I
)


def _in_skill(scenario: ScenarioFiles, path: str) -> bool:
    """A path of the skill's own files (``references/x.md``): the agent has the skill."""
    return (scenario.skill_dir / path).exists()


def _missing_input(scenario: ScenarioFiles, line: int, span: str) -> Finding:
    message = (
        f"the task refers to `{span}`, which is not in {scenario.inputs_words}: add it there "
        "if the agent should find it (ignore this if the task asks the agent to create it)"
    )
    return Finding("referenced-inputs", "warning", scenario.file(TASK_FILE), line, message)


_PLAIN_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")


_MIN_QUOTED = 4
# A file name's suffix alone (`.vue`, `*.tf`): the kind of file the task works on, its topic.
_FILE_SUFFIX = re.compile(r"\*?\.[A-Za-z0-9][\w-]*")


_HEADING = re.compile(r"^ {0,3}#{1,6}(?:\s|$)")


def _expected_values(scenario: ScenarioFiles, item: JsonNode) -> list[str]:
    """The values a criterion expects: the text of a mechanical ``contains`` criterion, and
    the quoted strings (double quotes or backticks) of its description of at least four
    characters that are neither a plain word (as "main" or "build": a word the task and the
    criterion share is mostly the thing both talk about), a file's path (a file the task
    names is where to work, not the answer) nor a file name's suffix."""
    values = []
    check = criterion_check(scenario, item)
    if check is not None and check[1].strip():
        values.append(" ".join(check[1].split()))
    description = item.scalar("description") if item.members is not None else None
    # A value the criterion forbids ("does not recommend `git push --force`") is no answer.
    if isinstance(description, str) and not NEGATION.search(description):
        quoted = [c for _, _, c in code_spans(description)]
        quoted += re.findall(r"\"([^\"]+)\"|“([^”]+)”", description)
        for value in quoted:
            text = value if isinstance(value, str) else "".join(value)
            if _is_subject(description, text):
                continue  # "`make lint` passes": what is checked, not the answer
            if _is_given_thing(description, text):
                continue  # "instead of the deprecated `x`", "the profile's `x` threshold"
            text = " ".join(text.split())
            if len(text) < _MIN_QUOTED or _PLAIN_WORD.fullmatch(text):
                continue
            if is_path_token(text) or input_path(text) is not None:
                continue
            if _FILE_SUFFIX.fullmatch(text):
                continue  # "finds the `.vue` files": the kind of file both talk about
            values.append(text)
    return list(dict.fromkeys(values))


_LEAD = re.compile(r"\s*(?:(?:the|a|an|running|calling|invoking)\s+)?[`\"“]", re.I)


def _is_subject(description: str, value: str) -> bool:
    """Whether ``value`` (quoted) is what a criterion's sentence is about, at its start ("`make
    lint` passes", "The `retry` flag is honoured"): a thing the task may name, not the
    answer it expects."""
    lead = _LEAD.match(description)
    return lead is not None and description[lead.end() :].startswith(value)


# Before a value: what the agent is to move away from ("instead of the deprecated `x`"), or
# an owner the value belongs to ("the profile's `x`"): the task's own material, no answer.
_REPLACED_BEFORE = re.compile(
    r"(?:\b(?:instead\s+of|rather\s+than|replac(?:e|es|ed|ing)|deprecated|legacy|old)"
    r"|\w['’]s)\s+(?:the\s+)?(?:deprecated\s+|legacy\s+|old\s+)?[`\"“]$",
    re.I,
)
# After "the `x`": the piece of the given code it names ("the `promo > base` branch").
_CODE_PART_AFTER = re.compile(
    r"[`\"”]\s+(?:branch|block|loop|condition|clause|line|method|function|class|module)\b",
    re.I,
)


def _is_given_thing(description: str, value: str) -> bool:
    """Whether the criterion speaks of ``value`` (quoted) as something the task gives: what
    the agent is to replace ("uses `a` instead of the deprecated `b`"), a part of an input
    ("the speaker profile's `rushed_closing` threshold") or of the given code ("the `x > y`
    branch"). A task that shows such a value hands over its material, not the answer."""
    for quote in ("`", '"', "“"):
        at = description.find(quote + value)
        if at < 0:
            continue
        end = at + len(quote) + len(value)
        if _REPLACED_BEFORE.search(description[: at + 1]):
            return True
        if re.search(r"\bthe\s+$", description[:at], re.I) and _CODE_PART_AFTER.match(
            description, end
        ):
            return True
    return False


def _task_prose(task: str) -> tuple[str, list[int], list[int]]:
    """task.md without its headings (a task's title names its topic), lowercased with its
    whitespace made single spaces, and where each kept line starts in it, with its number."""
    parts: list[str] = []
    starts: list[int] = []
    numbers: list[int] = []
    offset = 0
    for number, line, fenced in markdown_lines(task):
        if not fenced and _HEADING.match(line):
            continue
        words = " ".join(line.split()).lower()
        if not words:
            continue
        starts.append(offset)
        numbers.append(number)
        parts.append(words)
        offset += len(words) + 1
    return " ".join(parts), starts, numbers


# A value the task tells the agent to run or capture is how to do the work, not its answer:
# "capture `make test` to out.txt" when a criterion checks what `make test` does.
_TOLD_TO_RUN = re.compile(
    r"\b(?:run(?:ning)?|capture|execute|invoke|call|type|try|use|using)\b\W*$", re.I
)


def task_states_answer_rule(scenario: ScenarioFiles) -> list[Finding]:
    """The task does not state, word for word, a value a criterion expects (see
    :func:`_expected_values`): then the agent copies it, and the criterion measures reading,
    not the skill. Matched without regard to case or line breaks, as a whole word; a value the
    task tells the agent to run, capture or use is an instruction and not counted."""
    if scenario.task is None:
        return []
    prose, starts, numbers = _task_prose(scenario.task)
    findings = []
    for index, item in enumerate(scenario.checklist):
        name = item.scalar("name") if item.members is not None else None
        label = repr(name) if isinstance(name, str) and name else f"checklist[{index}]"
        for value in _expected_values(scenario, item):
            wanted = " ".join(value.split()).lower()
            before = r"(?<!\w)" if wanted[:1].isalnum() or wanted[:1] == "_" else ""
            after = r"(?!\w)" if wanted[-1:].isalnum() or wanted[-1:] == "_" else ""
            match = next(
                (
                    m
                    for m in re.finditer(before + re.escape(wanted) + after, prose)
                    if not _TOLD_TO_RUN.search(prose, max(0, m.start() - 40), m.start())
                ),
                None,
            )
            if match is None:
                continue
            line = numbers[bisect.bisect_right(starts, match.start()) - 1]
            message = (
                f"the task gives away what criterion {label} checks: it states {value!r}; "
                f"leave it out of {scenario.task_words} so that the agent has to find it (or "
                "let the criterion check something the agent must work out)"
            )
            findings.append(
                Finding("task-states-answer", "warning", scenario.file(TASK_FILE), line, message)
            )
    return findings
