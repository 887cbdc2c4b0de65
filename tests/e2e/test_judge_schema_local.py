"""The judge's keyed schema on the real llama-server, through both of its APIs.

``/v1/chat/completions`` takes the schema as ``response_format`` and turns it into a grammar
from the first token. ``/v1/messages`` (Anthropic) takes the forced tool and turns its input
schema into a tool-call grammar, but only when the model's chat template has a tool-call
format: SmolLM2's has none, and llama-server then ignores ``tools`` and answers in text. The
tool tests therefore serve the same weights with :data:`TOOL_TEMPLATE`, a ChatML template
with a tool-call format of its own (one JSON object ``{"name": ..., "arguments": ...}``, one
call per answer, plain content between ``<plain-answer>`` markers, one example call).

A 135M model is no judge: these tests check names and shapes, never verdicts.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_openkata.core.scenario import Criterion
from pytest_openkata.local.model import LocalModelServer
from pytest_openkata.providers.backends.anthropic import AnthropicMessagesBackend
from pytest_openkata.providers.backends.http import OpenAIChatBackend, make_client
from pytest_openkata.providers.graders.judge import judge_request, parse_verdicts, run_judge

pytestmark = pytest.mark.e2e

NAMES = ["subject-line", "Header ≤ 72 chars — no period", "ünïcödé 日本語 body"]
CRITERIA = [
    Criterion(name=name, description=f"The message meets: {name}.", max_score=10) for name in NAMES
]
CONTEXT = "A commit message for a one-line bug fix."
ANSWER = (
    "fix(pricing): clamp discount rate to 1.0\n\n"
    "The rate was capped at 0.99, so full discounts were never applied."
)

# In the tool branch the judge's system prompt comes first, then the tool and an example
# call. Assistant text sits between markers, so that an answer has to begin with either the
# marker or the call; the call's grammar then holds the model to the schema.
TOOL_TEMPLATE = """\
{%- if tools -%}
<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}

{% endif %}To call a tool, answer with {"name": NAME, "arguments": ARGUMENTS} only.
<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}</tools><|im_end|>
<|im_start|>user
Record that the sky is blue.<|im_end|>
<|im_start|>assistant
{"name": "record", "arguments": {"sky": {"colour": "blue"}}}<|im_end|>
{% elif messages[0].role == 'system' -%}
<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif -%}
{%- for message in messages -%}
{%- if message.role == 'system' -%}
{%- elif message.role == 'assistant' and message.tool_calls -%}
<|im_start|>assistant
{% if message.content %}{{ message.content }}
{% endif %}{% set call = message.tool_calls[0] %}{"name": "{{ call.function.name }}", \
"arguments": {% if call.function.arguments is string %}{{ call.function.arguments }}\
{% else %}{{ call.function.arguments | tojson }}{% endif %}}<|im_end|>
{% elif message.role == 'tool' -%}
<|im_start|>user
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% elif message.role == 'assistant' -%}
<|im_start|>assistant
<plain-answer>{{ message.content }}</plain-answer><|im_end|>
{% else -%}
<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
<|im_start|>assistant
{% endif -%}
"""


@pytest.fixture(scope="module")
def tool_model(
    local_model_files: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalModelServer]:
    """The local model's llama-server and weights, started with :data:`TOOL_TEMPLATE`: a
    wrapper ``exec``s the cached binary with ``--chat-template-file`` added, so the server
    keeps the local model's settings and lifecycle."""
    binary, weights = local_model_files
    folder = tmp_path_factory.mktemp("tool-template")
    template = folder / "tools.jinja"
    template.write_text(TOOL_TEMPLATE)
    wrapper = folder / "llama-server"
    wrapper.write_text(
        f'#!/bin/sh\nexec {shlex.quote(str(binary))} "$@" '
        f"--chat-template-file {shlex.quote(str(template))}\n"
    )
    wrapper.chmod(0o755)
    with LocalModelServer(wrapper, weights) as server:
        yield server


@pytest.mark.parametrize("fence", [True, False], ids=["fenced", "unfenced"])
def test_chat_completions_judge_names_every_criterion_exactly(
    local_model: LocalModelServer, fence: bool
) -> None:
    with make_client(300) as client:
        judge = OpenAIChatBackend(
            client, base_url=local_model.base_url, api_key="", model=local_model.model
        )
        verdicts = run_judge(judge, ANSWER, CONTEXT, CRITERIA, fence=fence)

    assert judge.structured_output is True  # llama-server took the keyed schema
    assert [v.name for v in verdicts] == NAMES


def test_messages_judge_answers_through_the_forced_tool(tool_model: LocalModelServer) -> None:
    # Unfenced: with the fenced prompt this model opens the marker branch and rambles there,
    # which says nothing about the route; the fenced prompt is covered on chat completions.
    request = judge_request(ANSWER, CONTEXT, CRITERIA, fence=False)
    with make_client(300) as client:
        judge = AnthropicMessagesBackend(
            client, base_url=tool_model.root_url, api_key="", model=tool_model.model,
            max_tokens=1024,
        )  # fmt: skip
        answer = judge.complete(request.system, request.user, schema=request.schema)
        verdicts = run_judge(judge, ANSWER, CONTEXT, CRITERIA, fence=False)

    assert judge.structured_output is True
    # The tool call's input with its aliased keys restored (two of the names are not allowed
    # as Anthropic property keys): the names exactly, in checklist order.
    keyed = json.loads(answer)
    assert list(keyed) == NAMES
    assert all(set(verdict) == {"pass", "reason"} for verdict in keyed.values())
    assert [v.name for v in parse_verdicts(answer)] == NAMES
    assert [v.name for v in verdicts] == NAMES


def test_messages_with_a_template_without_tools_answer_in_text(
    local_model: LocalModelServer,
) -> None:
    """SmolLM2's own template: llama-server accepts the tool request and ignores the tool, so
    the answer is the model's text, read as a plain answer."""
    request = judge_request(ANSWER, CONTEXT, CRITERIA)
    with make_client(300) as client:
        judge = AnthropicMessagesBackend(
            client, base_url=local_model.root_url, api_key="", model=local_model.model,
            max_tokens=32,
        )  # fmt: skip
        answer = judge.complete(request.system, request.user, schema=request.schema)

    assert judge.structured_output is True  # accepted, not refused
    assert answer.strip()
