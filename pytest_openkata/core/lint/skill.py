"""The skill's rules: ``skill-md``, ``changelog``, ``scenarios`` and the skill's
``unreached-files``."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

from pytest_openkata.core.files import EXCLUDED, LEADS_OUT, SKILL_SOURCES, is_inside
from pytest_openkata.core.jsonfiles import (
    ScenarioLoadError,
)
from pytest_openkata.core.lint.context import front_matter, in_skill
from pytest_openkata.core.lint.findings import CHANGELOG_FILE, SKILL_FILE, Finding
from pytest_openkata.core.lint.jsonlines import read_text_or_none
from pytest_openkata.core.lint.markdown import code_spans, markdown_lines
from pytest_openkata.core.scenario import (
    SCENARIO_NAMES,
    discover_scenarios,
    unselected_scenarios,
)
from pytest_openkata.core.tile import TILE_FILE, is_tile_dir, load_tile, tile_files
from pytest_openkata.core.triggers import has_trigger_queries
from pytest_openkata.core.versions import (
    CLAUDE_PLUGIN_FILE,
    PLUGIN_FILE,
    VERSION_HEADING,
    read_skill_version,
)


def skill_md_rule(skill_dir: Path) -> list[Finding]:
    """SKILL.md is there, with front matter whose ``name`` is the folder's name and whose
    ``description`` is not empty."""
    if is_tile_dir(skill_dir):
        return _tile_json_rule(skill_dir)
    if not (skill_dir / SKILL_FILE).is_file():
        message = "missing: every skill needs a SKILL.md, the instructions the agent is given"
        return [Finding("skill-md", "error", SKILL_FILE, None, message)]
    if not in_skill(skill_dir / SKILL_FILE, skill_dir):
        return [Finding("skill-md", "error", SKILL_FILE, None, LEADS_OUT)]
    front = front_matter(skill_dir / SKILL_FILE)
    if front.data is None:
        return [Finding("skill-md", "error", SKILL_FILE, front.problem_line, str(front.problem))]
    findings = []
    name = front.data.get("name")
    if not isinstance(name, str) or not name.strip():
        message = f"the front matter has no name: add `name: {skill_dir.name}`"
        if name is not None and not isinstance(name, str):
            message = (
                f"the front matter's name must be text (got {name!r}): `name: {skill_dir.name}`"
            )
        findings.append(
            Finding("skill-md", "error", SKILL_FILE, front.lines.get("name", 1), message)
        )
    elif name.strip() != skill_dir.name:
        message = (
            f"the front matter's name {name.strip()!r} differs from the folder's name "
            f"{skill_dir.name!r}: make them the same"
        )
        findings.append(Finding("skill-md", "error", SKILL_FILE, front.lines.get("name"), message))
    description = front.data.get("description")
    if not isinstance(description, str) or not description.strip():
        message = (
            "the front matter has no description: add `description:` saying what the skill "
            "does and when to use it (agents choose skills by it)"
        )
        line = front.lines.get("description", 1)
        findings.append(Finding("skill-md", "error", SKILL_FILE, line, message))
    return findings


_WHY_VERSION = (
    "without one, reports carry an empty skill_version and the catalogue never counts them"
)


def _tile_json_rule(tile_dir: Path) -> list[Finding]:
    """A tile's ``tile.json`` loads as a run loads it: every listed path a file inside the
    tile (each scenario of the tile errors otherwise)."""
    try:
        load_tile(tile_dir)
    except ScenarioLoadError as exc:
        where = f"{exc.field}: " if exc.field else ""
        return [Finding("skill-md", "error", TILE_FILE, None, f"{where}{exc.message}")]
    return []


def changelog_rule(skill_dir: Path) -> list[Finding]:
    """The skill has a version: asked of CHANGELOG.md (a released version heading, by the
    reference's rule: the first ``## [x]`` that is not ``## [Unreleased]``) only where no
    manifest gives one (see :mod:`pytest_openkata.core.versions` for the order); a tile's
    version is tile.json's ``version``."""
    if is_tile_dir(skill_dir):
        if read_skill_version(skill_dir) or _tile_json_rule(skill_dir):
            return []
        message = f'tile.json has no "version": {_WHY_VERSION}'
        return [Finding("changelog", "warning", TILE_FILE, None, message)]
    path = skill_dir / CHANGELOG_FILE
    if read_skill_version(skill_dir):
        return []
    if not path.is_file():
        message = (
            "missing: add a CHANGELOG.md with a released version heading such as "
            f"`## [1.0.0] - 2026-01-01` (or a `version` in {PLUGIN_FILE}, {CLAUDE_PLUGIN_FILE} "
            f"or {TILE_FILE}, or "
            "`metadata.version` in SKILL.md's front matter); "
            f"{_WHY_VERSION}"
        )
        return [Finding("changelog", "error", CHANGELOG_FILE, None, message)]
    text = read_text_or_none(path) or ""
    empty = next(
        (
            number
            for number, line in enumerate(text.split("\n"), start=1)
            if (match := VERSION_HEADING.match(line)) and match.group(1) != "Unreleased"
        ),
        None,
    )
    if empty is not None:
        message = (
            f"the version heading `## []` is empty: put the released version in it; {_WHY_VERSION}"
        )
        return [Finding("changelog", "error", CHANGELOG_FILE, empty, message)]
    message = (
        "no released version heading (a `## [x]` line other than `## [Unreleased]`, e.g. "
        f"`## [1.0.0] - 2026-01-01`): add one when the skill is released; {_WHY_VERSION}"
    )
    return [Finding("changelog", "error", CHANGELOG_FILE, None, message)]


def scenarios_rule(skill_dir: Path, scenario_names: str = SCENARIO_NAMES) -> list[Finding]:
    """The skill has scenarios (those the ``scenario_names`` setting takes; a tile's skills'
    own too), another published format's evals or trigger queries: without any, nothing
    evaluates it."""
    if discover_scenarios(skill_dir / "evals", scenario_names) or _published_evals(skill_dir):
        return []
    if any(
        discover_scenarios(folder / "evals", scenario_names) for folder in _tile_skills(skill_dir)
    ):
        return []  # a tile evaluated through its skills' own evals
    if has_trigger_queries(skill_dir / "evals"):
        return []  # its trigger queries evaluate it
    others = unselected_scenarios(skill_dir / "evals", scenario_names)
    if others:
        names = ", ".join(entry.name for entry in others)
        message = (
            f"no evals/scenario-* folder, and a run leaves out {names} unless the "
            "scenario_names setting (eval_scenario_names) matches them, e.g. *"
        )
    else:
        message = (
            "no evals/scenario-* folder: nothing evaluates this skill; add one with a task.md "
            "and a criteria.json"
        )
    return [Finding("scenarios", "warning", "evals", None, message)]


def _tile_skills(folder: Path) -> list[Path]:
    """The folders of a tile's skills (none for a skill, or a tile that cannot be read)."""
    if not is_tile_dir(folder):
        return []
    try:
        tile = load_tile(folder)
    except ScenarioLoadError:
        return []
    return [skill_md.parent for _name, skill_md in tile.skills if skill_md.parent != folder]


def _published_evals(skill_dir: Path) -> bool:
    """Whether another published format (``evals/evals.json``, ``eval.yaml``) evaluates the
    skill: a run collects those too."""
    from pytest_openkata.core.formats import detect_formats

    return any(
        fmt.files for folder in (skill_dir, skill_dir / "evals") for fmt in detect_formats(folder)
    )


# A link's text may hold one level of brackets (an image: ``[![alt](a.png)](doc.md)``) and
# may wrap onto the next lines.
_LINK_TEXT = r"\[(?:[^\[\]\\]|\\.|\[(?:[^\[\]\\]|\\.)*\])*\]"


_LINK_DESTINATION = r"\(\s*(?P<dest><[^>]*>|[^\s()]+)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)"


_INLINE_LINK = re.compile(f"(?P<text>{_LINK_TEXT}){_LINK_DESTINATION}")


_HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)


_LINK_DEFINITION = re.compile(r"^ {0,3}\[(?!\^)(?:[^\]\\]|\\.)+\]:\s*(?P<dest><[^>]*>|\S+)")


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _links(text: str) -> Iterator[tuple[int, str]]:
    """The destinations of a Markdown text's links (inline ones, images included, and the
    definitions of reference-style ones, not footnotes), each with its line; not in code or
    in HTML comments."""
    lines = []
    for _number, line, fenced in markdown_lines(text):
        kept = "" if fenced else line
        for start, end, _content in reversed(code_spans(kept)):
            kept = kept[:start] + " " * (end - start) + kept[end:]
        lines.append(kept)
    prose = _HTML_COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), "\n".join(lines))
    starts = [0]
    for line in prose.split("\n")[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    found: list[tuple[int, int, str]] = []
    for number, line in enumerate(prose.split("\n"), start=1):
        definition = _LINK_DEFINITION.match(line)
        if definition is not None:
            found.append((starts[number - 1], number, definition.group("dest").strip("<>")))
    for match in _inline_links(prose):
        number = bisect.bisect_right(starts, match.start("dest"))
        found.append((match.start("dest"), number, match.group("dest").strip("<>")))
    for _position, number, destination in sorted(found):
        yield number, destination


def _inline_links(text: str, offset: int = 0) -> Iterator[re.Match[str]]:
    """The inline links of ``text`` and those inside their texts (an image in a link)."""
    for match in _INLINE_LINK.finditer(text, offset):
        yield match
        yield from _inline_links(text[: match.end("text") - 1], match.start("text") + 1)


def _link_path(destination: str) -> str | None:
    """The path inside the skill folder (posix, ``""`` for the folder) that a link
    destination leads to, or None for a URL, ``mailto:``, an anchor, an absolute path or a
    path leading out of the skill. Its ``#fragment`` and ``?query`` are left out."""
    if not destination or destination.startswith(("#", "/", "\\")):
        return None
    if _SCHEME.match(destination):
        return None
    path = unquote(re.split(r"[#?]", destination, maxsplit=1)[0])
    parts: list[str] = []
    for part in path.replace("\\", "/").split("/"):
        if part == "..":
            if not parts:
                return None
            parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts)


def _in_prompt(rel: str) -> bool:
    """Whether the prompt holds the skill's file or folder ``rel``: SKILL.md, and what lies
    under references/, scripts/ or assets/ (but the files the prompt leaves out)."""
    top, _, rest = rel.partition("/")
    if rel == SKILL_FILE:
        return True
    return top in SKILL_SOURCES and rest not in EXCLUDED.get(top, frozenset())


def unreached_skill_files(skill_dir: Path) -> list[Finding]:
    """Files and folders of the skill that SKILL.md links to and the prompt never holds, as
    warnings at the line of the first link to each: the agent is given SKILL.md and the files
    under references/, scripts/ and assets/ only, so it cannot follow such a link. Links to
    files that are not there, or that lead out of the skill, are left out."""
    if is_tile_dir(skill_dir):
        return _unreached_tile_files(skill_dir)
    text = read_text_or_none(skill_dir / SKILL_FILE)
    if text is None:
        return []
    root = skill_dir.resolve()
    findings = []
    seen: set[str] = set()
    for number, destination in _links(text):
        rel = _link_path(destination)
        if not rel or rel in seen or _in_prompt(rel):
            continue
        seen.add(rel)
        path = skill_dir / rel
        if not path.exists() or not is_inside(path, root):
            continue
        shown = rel + ("/" if path.is_dir() else "")
        fix = _unreached_fix(rel)
        message = f"SKILL.md links to {shown}, which never reaches the agent's prompt: {fix}"
        findings.append(Finding("unreached-files", "warning", SKILL_FILE, number, message))
    return findings


def _unreached_fix(rel: str) -> str:
    """What to do about a linked file the prompt never holds. An eval's file (under
    ``evals/``) is never to reach the agent: moving it into the prompt would hand the agent
    its own test, so the link is what goes."""
    top = rel.partition("/")[0]
    if top == "evals":
        return "it is an eval's file, which the agent must not see: remove the link"
    if top in SKILL_SOURCES:
        return "the prompt leaves it out: rename it (and update the link)"
    return "move it under references/ (and update the link)"


def _unreached_tile_files(tile_dir: Path) -> list[Finding]:
    """In a tile, the files each listed SKILL.md links to that are not in the tile's context
    (:func:`~pytest_openkata.core.tile.tile_files`), at the line of the first link to each."""
    try:
        tile = load_tile(tile_dir)
    except ScenarioLoadError:
        return []  # the skill-md rule reports it
    reached = {rel for rel, _path in tile_files(tile)}
    # A unit known by its evals and the skills below it has no tile.json to name files in.
    has_tile_json = (tile_dir / TILE_FILE).is_file()
    findings = []
    for _name, skill_md in tile.skills:
        shown = skill_md.relative_to(tile_dir).as_posix()
        folder = skill_md.parent.relative_to(tile_dir).as_posix()
        prefix = "" if folder == "." else f"{folder}/"
        seen: set[str] = set()
        for number, destination in _links(read_text_or_none(skill_md) or ""):
            if destination.startswith(("#", "/", "\\")) or _SCHEME.match(destination):
                continue
            rel = _link_path(prefix + destination)
            if not rel or rel in seen:
                continue
            seen.add(rel)
            path = tile_dir / rel
            if not path.exists() or not is_inside(path, tile_dir.resolve()):
                continue
            inside = path.is_dir() and any(r.startswith(f"{rel}/") for r in reached)
            if rel in reached or inside:
                continue
            fix = (
                "it is an eval's file, which the agent must not see: remove the link"
                if "evals" in PurePosixPath(rel).parts
                else "move it under the skill's references/, or name it in "
                'tile.json\'s "docs" or "steering" (and update the link)'
                if has_tile_json
                else "move it under the skill's references/ (and update the link)"
            )
            message = (
                f"{shown} links to {rel}{'/' if path.is_dir() else ''}, which never reaches "
                f"the agent's prompt: {fix}"
            )
            findings.append(Finding("unreached-files", "warning", shown, number, message))
    return findings
