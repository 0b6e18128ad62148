#!/usr/bin/env python3
"""Renders extra conversations with Python Jinja2 as transformers does, for chat's tests.

The public goldens (../shared/golden/chat) cover four or five conversations per
template. This adds conversations that reach more of each template: JSON
schemas of every shape the gpt-oss template prints, thinking before tool calls,
Qwen3's <think> splitting, Unicode whitespace under |trim, null content beside
tool calls, several tool calls. The environment is the one the goldens
README describes (transformers' _cached_compile_jinja_template):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
extensions=[loopcontrols]), tojson = json.dumps(ensure_ascii=False, ...),
raise_exception, strftime_now on the fixed clock 2026-11-24 12:00:00.

Run from chat/: python3 testdata/gen_extra.py > testdata/extra_cases.json
(jinja2 3.1.6, the goldens' version).
"""
import datetime
import json
import os
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

GOLDEN = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "golden", "chat")
CLOCK = datetime.datetime(2026, 11, 24, 12, 0, 0)


class TemplateError(Exception):
    pass


def render(template, messages, tools, add_generation_prompt, special_tokens, extra):
    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return CLOCK.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    compiled = env.from_string(template)
    return compiled.render(messages=messages, tools=tools, documents=None,
                           add_generation_prompt=add_generation_prompt, **special_tokens, **extra)


GPT_OSS_TOOLS = [
    {"type": "function", "function": {"name": "search", "description": "Search the web", "parameters": {
        "type": "object", "properties": {
            "q": {"type": "string", "description": "query"},
            "mode": {"type": "string", "enum": ["fast", "deep"], "default": "fast"},
            "tags": {"type": "array", "items": {"type": "string"}, "nullable": True},
            "ids": {"type": "array", "items": {"type": "integer"}},
            "flags": {"type": "array", "items": {"type": "boolean"}},
            "scores": {"type": "array", "items": {"type": "number"}},
            "anything": {"type": "array"},
            "points": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x"]}},
            "blobs": {"type": "array", "items": {"type": "object"}},
            "pairs": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}},
            "either": {"type": ["string", "number"]},
            "single": {"type": ["boolean"]},
            "choice": {"oneOf": [{"type": "string", "description": "a name"}, {"type": "integer", "default": 3}], "default": "x"},
            "objs": {"oneOf": [{"type": "object"}, {"type": "string"}]},
            "nested": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "object", "properties": {"c": {"type": "boolean"}}}}, "required": ["a"]},
            "plain": {"type": "object"},
            "maybe": {"type": "string", "nullable": True},
            "limit": {"type": "integer", "default": 10},
            "ratio": {"type": "number", "default": 0.25},
            "nothing": {"type": "string", "default": None},
            "unknown": {},
        }, "required": ["q"]}}},
    {"type": "function", "function": {"name": "now", "description": "The time", "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "function": {"name": "noparams", "description": "No parameters at all"}},
]

WEATHER = [{"type": "function", "function": {"name": "get_weather", "description": "Get the weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]

# (name, templates it is for (None = all), messages, tools, extra variables)
CONVERSATIONS = [
    ("unicode-whitespace", None, [
        {"role": "system", "content": "\u00a0 Be kind.\u2028\x1c "},
        {"role": "user", "content": " \u3000Hello\u00a0there\u2029\n"},
    ], None, {}),
    ("assistant-last-with-spaces", None, [
        {"role": "user", "content": "Say hi"},
        {"role": "assistant", "content": "  hi  "},
    ], None, {}),
    ("think-in-content", None, [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "<think>\nAdd them.\n</think>\n\n4"},
        {"role": "user", "content": "3+3?"},
        {"role": "assistant", "content": "<think>\nAgain.\n</think>\n\n6"},
    ], None, {}),
    ("reasoning-content-field", ["qwen3"], [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello", "reasoning_content": "greet\n"},
        {"role": "user", "content": "bye"},
    ], None, {"enable_thinking": False}),
    ("two-tool-calls", ["qwen2.5-instruct", "qwen3"], [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call00001", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
            {"id": "call00002", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
        {"role": "tool", "tool_call_id": "call00001", "name": "get_weather", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call00002", "name": "get_weather", "content": "rain"},
        {"role": "assistant", "content": "Sunny in Paris, rain in Rome."},
    ], WEATHER, {}),
    ("gpt-oss-schemas-and-call-with-content", ["gpt-oss"], [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": "find cats"},
        {"role": "assistant", "content": "I should search.", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "search", "arguments": {"q": "cats", "limit": 2.0}}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "many cats"},
        {"role": "assistant", "content": "There are many cats."},
        {"role": "user", "content": "thanks"},
    ], GPT_OSS_TOOLS, {}),
    ("gpt-oss-thinking-kept-before-call", ["gpt-oss"], [
        {"role": "user", "content": "time?"},
        {"role": "assistant", "thinking": "Call now.", "tool_calls": [{"function": {"name": "now", "arguments": {}, "content_type": "<|constrain|>json"}}]},
        {"role": "tool", "content": "{\"t\": 1}"},
    ], GPT_OSS_TOOLS, {"reasoning_effort": "high", "model_identity": "You are a test model."}),
    ("gpt-oss-builtin-tools", ["gpt-oss"], [
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "ignored later system message"},
        {"role": "assistant", "thinking": "greet", "content": "hello"},
    ], None, {"builtin_tools": ["browser", "python"], "reasoning_effort": "low"}),
    ("gpt-oss-python-only", ["gpt-oss"], [
        {"role": "user", "content": "run code"},
    ], WEATHER, {"builtin_tools": ["python"]}),
    ("gpt-oss-markup-in-content", ["gpt-oss"], [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "<|channel|>final<|message|>hello"},
    ], None, {}),
    ("gpt-oss-orphan-tool-result", ["gpt-oss"], [
        {"role": "user", "content": "hi"},
        {"role": "tool", "content": "x"},
    ], None, {}),
]


def main():
    out = {"about": __doc__.strip().splitlines()[0], "generator": "chat/testdata/gen_extra.py, jinja2 " + jinja2.__version__,
           "clock": CLOCK.isoformat(), "files": []}
    for fname in sorted(os.listdir(GOLDEN)):
        if not fname.endswith(".json") or fname == "harmony-parse.json":
            continue
        golden = json.load(open(os.path.join(GOLDEN, fname)))
        model = fname[:-5]
        cases = []
        for name, only, messages, tools, extra in CONVERSATIONS:
            if only is not None and model not in only:
                continue
            for agp in (True, False):
                case = {"name": name, "add_generation_prompt": agp, "messages": messages, "tools": tools,
                        "extra_kwargs": extra, "expected": None, "error": None, "python_error": None}
                try:
                    case["expected"] = render(golden["chat_template"], messages, tools, agp, golden["special_tokens"], extra)
                except TemplateError as e:
                    case["error"] = str(e)
                except Exception as e:  # the template fails in Python itself (TypeError, UndefinedError)
                    case["python_error"] = "%s: %s" % (type(e).__name__, e)
                cases.append(case)
        out["files"].append({"golden": fname, "cases": cases})
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
