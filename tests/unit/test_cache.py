"""The result cache: keys, folder digests, modes, corrupt entries, atomic concurrent writes."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from multiprocessing.synchronize import Event
from pathlib import Path
from types import MappingProxyType

import pytest

import pytest_openkata.infra.cache as cache_module
from pytest_openkata.infra.cache import CACHE_MODES, ResultCache, cache_key, folder_digest

KEY = cache_key("agent", {"prompt": "hello"})
OTHER_KEY = cache_key("agent", {"prompt": "goodbye"})

CONCURRENT_WORKERS = 8
WRITES_PER_WORKER = 50
PADDING = 8 * 1024  # large enough that a non-atomic write would be seen half done


def concurrent_value(worker: int, attempt: int) -> dict[str, object]:
    """The value worker ``worker`` writes on its ``attempt``th write."""
    return {"worker": worker, "attempt": attempt, "padding": f"{worker}:{attempt}:" * PADDING}


def write_repeatedly(root: str, key: str, worker: int, start: Event) -> None:
    """Process worker: write the same key many times, exiting non-zero on any write error."""
    start.wait()
    cache = ResultCache(Path(root))
    for attempt in range(WRITES_PER_WORKER):
        cache.put("agent", key, concurrent_value(worker, attempt))
    raise SystemExit(0 if cache.write_errors == 0 and cache.writes == WRITES_PER_WORKER else 1)


def entry_files(root: Path) -> list[Path]:
    return sorted(path for path in root.rglob("*") if path.is_file())


def write_entry(cache: ResultCache, kind: str, key: str, content: bytes) -> Path:
    path = cache.path_for(kind, key)
    assert path is not None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


# --- cache_key ---------------------------------------------------------------------------


def test_key_is_sha256_hex() -> None:
    assert len(KEY) == 64
    assert set(KEY) <= set("0123456789abcdef")


def test_key_is_stable_across_dict_orderings() -> None:
    first = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "trial": 0}
    second = OrderedDict(
        [("trial", 0), ("messages", [{"content": "hi", "role": "user"}]), ("model", "m")]
    )
    assert cache_key("agent", first) == cache_key("agent", second)
    assert cache_key("agent", first) == cache_key("agent", MappingProxyType(dict(first)))
    assert cache_key("agent", first) == cache_key("agent", json.loads(json.dumps(first)))


def test_key_matches_the_documented_canonical_encoding() -> None:
    material = {"prompt": "héllo", "trial": 1, "vote": None}
    document = {
        "kind": "judge",
        "plugin_version": cache_module.__version__,
        "material": material,
    }
    text = json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert cache_key("judge", material) == hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize(
    "changed",
    [
        {"model": "other-model"},
        {"prompt": "Hello"},
        {"prompt": "hello "},
        {"trial": 1},
        {"trial": 0.5},
        {"vote": 0},
        {"vote": False},
        {"vote": "None"},
        {"inputs": "0" * 64},
        {"messages": ["b", "a"]},
        {"extra": None},
    ],
)
def test_any_field_change_changes_the_key(changed: dict[str, object]) -> None:
    base: dict[str, object] = {
        "model": "m",
        "prompt": "hello",
        "trial": 0,
        "vote": None,
        "inputs": "f" * 64,
        "messages": ["a", "b"],
    }
    assert cache_key("agent", base) != cache_key("agent", base | changed)


def test_kind_is_part_of_the_key() -> None:
    assert cache_key("agent", {"x": 1}) != cache_key("judge", {"x": 1})


def test_plugin_version_is_part_of_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    before = cache_key("agent", {"x": 1})
    monkeypatch.setattr(cache_module, "__version__", "999.0.0")
    after = cache_key("agent", {"x": 1})
    assert before != after
    monkeypatch.undo()
    assert cache_key("agent", {"x": 1}) == before


@pytest.mark.parametrize(
    "material",
    [
        {"path": Path("x")},
        {"data": b"bytes"},
        {"items": {1, 2}},
        {"nested": [{"ok": 1}, object()]},
        {"mapping": {1: "int key"}},
        {"nan": float("nan")},
        {"inf": float("inf")},
    ],
)
def test_non_json_material_is_a_type_error(material: dict[str, object]) -> None:
    with pytest.raises(TypeError):
        cache_key("agent", material)


def test_material_must_be_a_mapping() -> None:
    with pytest.raises(TypeError):
        cache_key("agent", ["not", "a", "mapping"])  # type: ignore[arg-type]


# --- ResultCache: round trip and modes ---------------------------------------------------


def test_round_trip(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path)
    value = {"answer": "héllo ✓", "score": 0.75, "ok": True, "tags": ["a", None], "n": {"x": 1}}
    cache.put("agent", KEY, value)
    assert cache.get("agent", KEY) == value
    assert cache.get("judge", KEY) is None  # kinds are separate
    assert cache.get("agent", OTHER_KEY) is None
    assert (cache.hits, cache.misses, cache.writes, cache.write_errors) == (1, 2, 1, 0)


def test_layout_and_entry_file(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path)
    cache.put("judge-vote", KEY, {"verdict": "pass"})
    path = tmp_path / "judge-vote" / KEY[:2] / f"{KEY}.json"
    assert cache.path_for("judge-vote", KEY) == path
    assert entry_files(tmp_path) == [path]
    assert json.loads(path.read_text()) == {"format": 1, "key": KEY, "value": {"verdict": "pass"}}


def test_put_replaces_an_entry(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path)
    cache.put("agent", KEY, {"n": 1})
    cache.put("agent", KEY, {"n": 2})
    assert cache.get("agent", KEY) == {"n": 2}
    assert len(entry_files(tmp_path)) == 1  # no temporary files left behind


def test_get_returns_a_fresh_copy(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path)
    cache.put("agent", KEY, {"items": [1]})
    first = cache.get("agent", KEY)
    assert first is not None
    first["items"].append(2)
    assert cache.get("agent", KEY) == {"items": [1]}


def test_mode_on_reads_what_another_cache_wrote(tmp_path: Path) -> None:
    ResultCache(tmp_path, "on").put("agent", KEY, {"n": 1})
    reader = ResultCache(tmp_path, "on")
    assert reader.enabled
    assert reader.mode == "on"
    assert reader.root == tmp_path
    assert reader.get("agent", KEY) == {"n": 1}


def test_mode_off_neither_reads_nor_writes(tmp_path: Path) -> None:
    ResultCache(tmp_path).put("agent", KEY, {"n": 1})
    cache = ResultCache(tmp_path, "off")
    assert not cache.enabled
    assert cache.mode == "off"
    assert cache.get("agent", KEY) is None
    cache.put("agent", OTHER_KEY, {"n": 2})
    assert ResultCache(tmp_path).get("agent", OTHER_KEY) is None
    assert len(entry_files(tmp_path)) == 1
    assert (cache.hits, cache.misses, cache.writes, cache.write_errors) == (0, 0, 0, 0)


def test_mode_refresh_never_reads_but_writes(tmp_path: Path) -> None:
    ResultCache(tmp_path).put("agent", KEY, {"n": "old"})
    cache = ResultCache(tmp_path, "refresh")
    assert cache.enabled
    assert cache.get("agent", KEY) is None
    cache.put("agent", KEY, {"n": "new"})
    assert cache.get("agent", KEY) is None  # not even what it wrote itself
    assert ResultCache(tmp_path).get("agent", KEY) == {"n": "new"}
    assert cache.writes == 1


def test_no_root_disables_the_cache(tmp_path: Path) -> None:
    cache = ResultCache(None)
    assert not cache.enabled
    assert cache.root is None
    assert cache.mode == "on"
    cache.put("agent", KEY, {"n": 1})
    assert cache.get("agent", KEY) is None
    assert cache.path_for("agent", KEY) is None
    assert (cache.hits, cache.misses, cache.writes, cache.write_errors) == (0, 0, 0, 0)


def test_modes_are_exactly_on_off_refresh() -> None:
    assert CACHE_MODES == ("on", "off", "refresh")


@pytest.mark.parametrize("mode", ["", "ON", "read", "none", "Off"])
def test_unknown_mode_is_rejected(tmp_path: Path, mode: str) -> None:
    with pytest.raises(ValueError, match="mode"):
        ResultCache(tmp_path, mode)


# --- ResultCache: addresses --------------------------------------------------------------


@pytest.mark.parametrize(
    "kind", ["", "Agent", "1agent", "-agent", "_agent", "a/b", "../x", "a.b", "agent ", "é"]
)
def test_bad_kind_is_rejected(tmp_path: Path, kind: str) -> None:
    cache = ResultCache(tmp_path)
    with pytest.raises(ValueError, match="kind"):
        cache.get(kind, KEY)
    with pytest.raises(ValueError, match="kind"):
        cache.put(kind, KEY, {"n": 1})
    assert entry_files(tmp_path) == []


@pytest.mark.parametrize(
    "key",
    ["", KEY[:-1], KEY + "0", KEY.upper(), "g" * 64, "../" + KEY[3:], KEY[:-1] + "\n"],
)
def test_bad_key_is_rejected(tmp_path: Path, key: str) -> None:
    cache = ResultCache(tmp_path)
    with pytest.raises(ValueError, match="key"):
        cache.get("agent", key)
    with pytest.raises(ValueError, match="key"):
        cache.put("agent", key, {"n": 1})
    assert entry_files(tmp_path) == []


def test_good_kinds_are_accepted(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path)
    for kind in ("a", "agent", "judge_vote", "judge-vote", "x9"):
        cache.put(kind, KEY, {"kind": kind})
        assert cache.get(kind, KEY) == {"kind": kind}


def test_value_must_be_a_json_dict(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path)
    with pytest.raises(TypeError):
        cache.put("agent", KEY, ["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        cache.put("agent", KEY, {"path": Path("x")})
    assert entry_files(tmp_path) == []


# --- ResultCache: corrupt and foreign entries --------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{",
        b'{"format": 1, "key": "',
        b"\xff\xfe\x00garbage",
        b"null",
        b"[]",
        b'"text"',
        b"[" * 100_000,
        b'{"key": "KEY", "value": {"n": 1}}',
        b'{"format": 2, "key": "KEY", "value": {"n": 1}}',
        b'{"format": "1", "key": "KEY", "value": {"n": 1}}',
        b'{"format": true, "key": "KEY", "value": {"n": 1}}',
        b'{"format": 1, "key": "OTHER", "value": {"n": 1}}',
        b'{"format": 1, "value": {"n": 1}}',
        b'{"format": 1, "key": "KEY"}',
        b'{"format": 1, "key": "KEY", "value": [1]}',
        b'{"format": 1, "key": "KEY", "value": "text"}',
    ],
)
def test_corrupt_or_foreign_entry_is_a_miss(tmp_path: Path, content: bytes) -> None:
    cache = ResultCache(tmp_path)
    content = content.replace(b"OTHER", OTHER_KEY.encode()).replace(b"KEY", KEY.encode())
    write_entry(cache, "agent", KEY, content)
    assert cache.get("agent", KEY) is None
    assert (cache.hits, cache.misses) == (0, 1)


def test_truncated_entry_is_a_miss(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path)
    cache.put("agent", KEY, {"answer": "x" * 1000})
    path = cache.path_for("agent", KEY)
    assert path is not None
    whole = path.read_bytes()
    for length in (0, 1, len(whole) // 2, len(whole) - 1):
        path.write_bytes(whole[:length])
        assert cache.get("agent", KEY) is None
    path.write_bytes(whole)
    assert cache.get("agent", KEY) == {"answer": "x" * 1000}


def test_entry_copied_under_another_key_is_a_miss(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path)
    cache.put("agent", KEY, {"n": 1})
    source = cache.path_for("agent", KEY)
    assert source is not None
    write_entry(cache, "agent", OTHER_KEY, source.read_bytes())
    assert cache.get("agent", OTHER_KEY) is None


def test_folder_in_place_of_an_entry_is_a_miss(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path)
    path = cache.path_for("agent", KEY)
    assert path is not None
    path.mkdir(parents=True)
    assert cache.get("agent", KEY) is None
    cache.put("agent", KEY, {"n": 1})  # cannot replace a folder: counted, not raised
    assert cache.write_errors == 1


def test_a_corrupt_entry_is_replaced_by_the_next_put(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path)
    write_entry(cache, "agent", KEY, b"{not json")
    assert cache.get("agent", KEY) is None
    cache.put("agent", KEY, {"n": 1})
    assert cache.get("agent", KEY) == {"n": 1}


# --- ResultCache: write failures ---------------------------------------------------------


def test_unwritable_root_counts_write_errors(tmp_path: Path) -> None:
    blocker = tmp_path / "regular-file"
    blocker.write_text("not a folder")
    cache = ResultCache(blocker / "cache")
    cache.put("agent", KEY, {"n": 1})
    cache.put("judge", KEY, {"n": 2})
    assert cache.write_errors == 2
    assert cache.writes == 0
    assert cache.get("agent", KEY) is None
    assert cache.misses == 1
    assert blocker.read_text() == "not a folder"


def test_failed_replace_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = ResultCache(tmp_path)
    cache.put("agent", KEY, {"n": "old"})

    def refuse(source: object, target: object) -> None:
        raise PermissionError("refused")

    monkeypatch.setattr(cache_module.os, "replace", refuse)
    cache.put("agent", KEY, {"n": "new"})
    monkeypatch.undo()
    assert cache.write_errors == 1
    assert cache.writes == 1
    assert len(entry_files(tmp_path)) == 1
    assert cache.get("agent", KEY) == {"n": "old"}


# --- ResultCache: concurrency ------------------------------------------------------------


def test_concurrent_threads_count_every_write(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path)
    keys = [cache_key("agent", {"n": n}) for n in range(4)]

    def work(worker: int) -> None:
        for attempt in range(50):
            key = keys[attempt % len(keys)]
            cache.put("agent", key, {"worker": worker, "attempt": attempt})
            cache.get("agent", key)

    threads = [threading.Thread(target=work, args=(worker,)) for worker in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert cache.writes == 400
    assert cache.write_errors == 0
    assert cache.hits + cache.misses == 400
    assert cache.hits == 400  # an entry, once written, is always readable
    assert len(entry_files(tmp_path)) == len(keys)


def test_concurrent_processes_never_expose_a_partial_entry(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    workers = [
        context.Process(target=write_repeatedly, args=(str(tmp_path), KEY, worker, start))
        for worker in range(CONCURRENT_WORKERS)
    ]
    for worker in workers:
        worker.start()
    cache = ResultCache(tmp_path)
    path = cache.path_for("agent", KEY)
    assert path is not None
    written = {
        (worker, attempt)
        for worker in range(CONCURRENT_WORKERS)
        for attempt in range(WRITES_PER_WORKER)
    }
    seen: set[tuple[int, int]] = set()
    reads = 0
    try:
        start.set()
        while any(worker.is_alive() for worker in workers) or reads < 10:
            reads += 1
            value = cache.get("agent", KEY)
            if value is None:
                # Once an entry exists it is only ever replaced, never removed or half written.
                assert not seen
                continue
            pair = (value["worker"], value["attempt"])
            assert pair in written
            assert value == concurrent_value(*pair)
            seen.add(pair)
            # The raw file, read outside the cache, is always a complete entry too.
            assert json.loads(path.read_bytes())["key"] == KEY
    finally:
        for worker in workers:
            worker.join(timeout=120)
    assert [worker.exitcode for worker in workers] == [0] * CONCURRENT_WORKERS
    final = cache.get("agent", KEY)
    assert final is not None
    assert final == concurrent_value(final["worker"], final["attempt"])
    assert final["attempt"] == WRITES_PER_WORKER - 1  # the last write of some worker wins
    assert entry_files(tmp_path) == [path]  # no temporary file left behind


# --- folder_digest -----------------------------------------------------------------------


def build_tree(root: Path) -> Path:
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "empty").mkdir()
    (root / "README.md").write_text("# readme\n")
    (root / "src" / "pkg" / "mod.py").write_text("print('hi')\n")
    (root / "src" / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "src" / "run.sh").chmod(0o755)
    (root / "src" / "data.bin").write_bytes(bytes(range(256)) * 10)
    (root / "link").symlink_to("src/run.sh")
    return root


def test_same_tree_gives_the_same_digest(tmp_path: Path) -> None:
    first = build_tree(tmp_path / "one")
    second = build_tree(tmp_path / "two")
    digest = folder_digest(first)
    assert len(digest) == 64
    assert set(digest) <= set("0123456789abcdef")
    assert folder_digest(first) == digest
    assert folder_digest(second) == digest


def test_creation_order_does_not_matter(tmp_path: Path) -> None:
    first = tmp_path / "one"
    second = tmp_path / "two"
    for folder, names in ((first, "abcdef"), (second, "fedcba")):
        folder.mkdir()
        for name in names:
            (folder / name).write_text(name)
    assert folder_digest(first) == folder_digest(second)


def test_missing_folder_is_an_empty_tree(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert folder_digest(tmp_path / "missing") == folder_digest(empty)
    assert folder_digest(tmp_path / "missing" / "deeper") == folder_digest(empty)
    (empty / "file").write_text("")
    assert folder_digest(tmp_path / "missing") != folder_digest(empty)


def change_content(root: Path) -> None:
    (root / "src" / "pkg" / "mod.py").write_text("print('ho')\n")


def change_executable_bit(root: Path) -> None:
    (root / "src" / "run.sh").chmod(0o644)


def make_readme_executable(root: Path) -> None:
    (root / "README.md").chmod(0o744)


def rename_file(root: Path) -> None:
    (root / "README.md").rename(root / "README.txt")


def move_file_to_another_folder(root: Path) -> None:
    (root / "README.md").rename(root / "empty" / "README.md")


def retarget_symlink(root: Path) -> None:
    (root / "link").unlink()
    (root / "link").symlink_to("src/data.bin")


def replace_symlink_by_its_target_copy(root: Path) -> None:
    (root / "link").unlink()
    (root / "link").write_text("#!/bin/sh\necho hi\n")


def add_empty_folder(root: Path) -> None:
    (root / "empty" / "inner").mkdir()


def remove_empty_folder(root: Path) -> None:
    (root / "empty").rmdir()


def add_empty_file(root: Path) -> None:
    (root / "empty" / ".keep").write_text("")


def change_last_byte(root: Path) -> None:
    data = bytearray((root / "src" / "data.bin").read_bytes())
    data[-1] ^= 1
    (root / "src" / "data.bin").write_bytes(bytes(data))


def replace_empty_folder_by_empty_file(root: Path) -> None:
    (root / "empty").rmdir()
    (root / "empty").write_text("")


@pytest.mark.parametrize(
    "change",
    [
        change_content,
        change_executable_bit,
        make_readme_executable,
        rename_file,
        move_file_to_another_folder,
        retarget_symlink,
        replace_symlink_by_its_target_copy,
        add_empty_folder,
        remove_empty_folder,
        add_empty_file,
        change_last_byte,
        replace_empty_folder_by_empty_file,
    ],
)
def test_any_change_changes_the_digest(tmp_path: Path, change: Callable[[Path], None]) -> None:
    root = build_tree(tmp_path / "tree")
    before = folder_digest(root)
    change(root)
    assert folder_digest(root) != before


def test_group_and_other_permissions_do_not_count(tmp_path: Path) -> None:
    root = build_tree(tmp_path / "tree")
    before = folder_digest(root)
    (root / "README.md").chmod(0o600)
    (root / "src" / "run.sh").chmod(0o700)
    assert folder_digest(root) == before


def test_fields_are_delimited(tmp_path: Path) -> None:
    trees = {
        "name-content": {"ab": "c"},
        "name-content-split": {"a": "bc"},
        "two-files": {"a": "b", "c": ""},
        "one-file": {"a": "bc\x00"},
        "empty-name-content": {"abc": ""},
    }
    digests = set()
    for name, files in trees.items():
        folder = tmp_path / name
        folder.mkdir()
        for file_name, content in files.items():
            (folder / file_name).write_text(content)
        digests.add(folder_digest(folder))
    assert len(digests) == len(trees)


def test_file_and_symlink_with_same_text_differ(tmp_path: Path) -> None:
    as_file = tmp_path / "file"
    as_link = tmp_path / "link"
    as_file.mkdir()
    as_link.mkdir()
    (as_file / "x").write_text("target")
    (as_link / "x").symlink_to("target")
    assert folder_digest(as_file) != folder_digest(as_link)


def test_symlinks_out_of_the_folder_are_not_followed(tmp_path: Path) -> None:
    outside_file = tmp_path / "outside.txt"
    outside_dir = tmp_path / "outside"
    outside_file.write_text("secret one")
    outside_dir.mkdir()
    root = build_tree(tmp_path / "tree")
    (root / "to-file").symlink_to(outside_file)
    (root / "to-dir").symlink_to(outside_dir)
    (root / "dangling").symlink_to(tmp_path / "nowhere")
    before = folder_digest(root)
    outside_file.write_text("secret two, longer")
    (outside_dir / "new.txt").write_text("new")
    (outside_dir / "sub").mkdir()
    assert folder_digest(root) == before
    outside_file.unlink()
    assert folder_digest(root) == before


def test_symlink_loop_is_not_followed(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    (root / "self").symlink_to(".")
    (root / "up").symlink_to("..")
    first = folder_digest(root)
    (tmp_path / "sibling.txt").write_text("changes nothing")
    assert folder_digest(root) == first


def test_many_small_files(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    for index in range(3000):
        folder = root / f"d{index % 30:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{index:04d}.txt").write_text(f"file {index}\n")
    before = folder_digest(root)
    assert folder_digest(root) == before
    (root / "d17" / "f1517.txt").write_text("file 1517!\n")
    assert folder_digest(root) != before


def test_large_file_change_past_the_first_chunk(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    big = root / "big.bin"
    data = bytearray(3 * 1024 * 1024 + 7)
    big.write_bytes(bytes(data))
    before = folder_digest(root)
    data[-1] = 1
    big.write_bytes(bytes(data))
    assert folder_digest(root) != before


def test_non_utf8_file_names(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    name = os.fsdecode(b"caf\xe9.txt")
    try:
        (root / name).write_text("x")
    except (OSError, UnicodeEncodeError):
        pytest.skip("the file system does not take non-UTF-8 names")
    before = folder_digest(root)
    (root / name).rename(root / "cafe.txt")
    assert folder_digest(root) != before
