"""Reading reports back as their readers do: an HTML page as a browser's tokenizer reads it,
Markdown as a CommonMark renderer with GFM tables reads it."""

from __future__ import annotations

from dataclasses import dataclass
from html.parser import HTMLParser

from markdown_it import MarkdownIt
from markdown_it.token import Token

# --- an HTML page ------------------------------------------------------------------------------


@dataclass(eq=False)
class Element:
    tag: str
    attrs: dict[str, str]
    parent: Element | None
    text: str = ""  # every text inside it, descendants' included

    def within(self, ancestor: Element) -> bool:
        node = self.parent
        while node is not None:
            if node is ancestor:
                return True
            node = node.parent
        return False


class Page(HTMLParser):
    """A page parsed as a browser's tokenizer reads it: every element with its attributes,
    its parent and the text inside it (character references decoded)."""

    _VOID = frozenset({"meta", "img", "br", "hr", "input", "link"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self._open: list[Element] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        parent = self._open[-1] if self._open else None
        element = Element(tag, {name: value or "" for name, value in attrs}, parent)
        self.elements.append(element)
        if tag not in self._VOID:
            self._open.append(element)

    def handle_endtag(self, tag: str) -> None:
        for index in range(len(self._open) - 1, -1, -1):
            if self._open[index].tag == tag:
                del self._open[index:]
                return

    def handle_data(self, data: str) -> None:
        for element in self._open:
            element.text += data

    def all(self, tag: str, **attrs: str) -> list[Element]:
        return [
            e
            for e in self.elements
            if e.tag == tag and all(e.attrs.get(k) == v for k, v in attrs.items())
        ]

    def by_class(self, name: str, within: Element | None = None) -> list[Element]:
        return [
            e
            for e in self.elements
            if name in e.attrs.get("class", "").split() and (within is None or e.within(within))
        ]

    def scenario(self, name: str) -> Element:
        """The scenario block whose name is ``name``."""
        [found] = [
            e.parent.parent
            for e in self.by_class("name")
            if e.text == name and e.parent is not None and e.parent.parent is not None
        ]
        assert found.tag == "details"
        return found

    @property
    def text(self) -> str:
        return self.all("body")[0].text


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    page.close()
    return page


# --- a Markdown document ---------------------------------------------------------------------

PARSER = MarkdownIt("commonmark").enable("table")


def inline_text(token: Token) -> str:
    """What an inline token reads as: its text, a ``<br>`` as a line break."""
    parts = []
    for child in token.children or ():
        if child.type == "html_inline" and child.content == "<br>":
            parts.append("\n")
        elif child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("strong_open", "strong_close", "softbreak"):
            parts.append("" if child.type != "softbreak" else "\n")
        else:
            raise AssertionError(f"unexpected inline {child.type}: {child!r}")
    return "".join(parts)


def tables(text: str) -> list[list[list[str]]]:
    """Every table of the document, as rows of cell texts (the header row first)."""
    found: list[list[list[str]]] = []
    row: list[str] | None = None
    for token in PARSER.parse(text):
        if token.type == "table_open":
            found.append([])
        elif token.type == "tr_open":
            row = []
        elif token.type == "tr_close" and row is not None:
            found[-1].append(row)
        elif token.type == "inline" and row is not None:
            row.append(inline_text(token))
        elif token.type == "table_close":
            row = None
    return found


def html_blocks(text: str) -> list[str]:
    return [t.content.strip() for t in PARSER.parse(text) if t.type == "html_block"]
