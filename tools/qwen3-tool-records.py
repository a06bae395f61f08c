#!/usr/bin/env python3
"""Writes tests/engine/qwen3-tool-records.h: conversations with tool
definitions, tool calls and tool results, and what jinja2 renders for each
from llama.cpp's models/templates/Qwen-Qwen3-0.6B.jinja (the template of the
Qwen3 vocabulary Tern fetches, byte for byte), which test-chat.c compares
Tern's Qwen3 renderer with, byte for byte.

The environment is transformers' (tools/chat_records.py): its tojson filter
writes each tool as json.dumps(ensure_ascii=False) with the keys in the
request's order. The tools are what an OpenAI request brings ({"type":
"function", "function": {name, description, parameters}}, the members not
given left out); the messages what an OpenAI request brings too: a call's
arguments as the JSON string the model wrote (the template prints a string
as it is), a null content as "".

Usage (jinja2 from Debian's python3-jinja2, or pip's):
  tools/qwen3-tool-records.py LLAMA_CPP_DIR > tests/engine/qwen3-tool-records.h
"""
import sys

import jinja2

from chat_records import (A, S, T, U, Emitter, c_string, call, environment, load, msg, odd_tools,
                          openai, openai_tools, tool, weather_tool, weather_tools)

root = sys.argv[1]
template = environment().from_string(load(root, "Qwen-Qwen3-0.6B.jinja"))

# What tests/server/test-tooldefs.py sends through the server (which refuses
# whole numbers beyond 64 bits anywhere in a body): its schema's own text,
# key order, number spellings and a key given twice reach the template.
server_tools = [
    weather_tool,
    tool("lookup", "Look up \"things\" — in <b>any</b> language: 日本\n",
         '{"type":"object","properties":{"z":{"type":"number","minimum":1.0,"maximum":1e20,'
         '"default":-0.50},"a":{"type":"array","items":{"enum":["x","\\u00e9",null,true,3]}},'
         '"nested":{"type":"object","properties":{"deep":{"type":"object","properties":{}}}},'
         '"dup":1,"dup":{"type":"string","pattern":"^\\\\d+\\t$"}},"required":["z"]}'),
    tool("bare"),
]

plain = [msg(U, "Weather in Paris?")]
with_system = [msg(S, "You are a weather bot."), msg(U, "Weather in Paris?")]
spaced_system = [msg(S, "\n  Be brief.  \n"), msg(U, "Hi")]
called = [
    msg(S, "You are a weather bot."),
    msg(U, "Weather in Paris and Tokyo?"),
    msg(A, None, [call("get_weather", '{"city": "Paris", "units": "metric"}', "c1"),
                  call("get_time", '{"tz":"Asia/Tokyo"}', "c2")]),
    msg(T, '{"temp": 21, "sky": "clear"}', tool_call_id="c1"),
    msg(T, "09:00", tool_call_id="c2"),
]
answered = called + [
    msg(A, "Paris: 21 C and clear; Tokyo: 09:00."),
    msg(U, "Thanks! And Oslo?"),
]
with_content = [
    msg(U, "Check it."),
    msg(A, "Let me check.", [call("check", '{"q": 1}', "k")]),
    msg(T, "r", tool_call_id="k"),
]
thought_call = [
    msg(U, "Think, then call."),
    msg(A, "<think>\nI need the tool.\n</think>\n\n", [call("check", "{}", "k")]),
    msg(T, "done", tool_call_id="k"),
]
thought_text_call = [
    msg(U, "Think, say, call."),
    msg(A, "<think>Hmm.</think>\n\nOne moment.", [call("check", '{"a": [1]}', "k")]),
    msg(T, "done", tool_call_id="k"),
    msg(A, "<think>It is done.</think>Done."),
]
odd_calls = [
    msg(U, "Odd calls."),
    msg(A, "\n", [call("raw", '"city=Paris"', "r1"), call("list", " [1, 2,\n 3] ", "r2"),
                  call("quote\"d <b>", '{"s": "<b> \\u00e9 \u65e5", "n": 1e400}',
                       "r3")]),
    msg(T, "x", tool_call_id="r1"),
    msg(U, "ok"),
]
call_last = [
    msg(S, "Use tools."),
    msg(U, "Check it."),
    msg(A, None, [call("check", '{"q": 1}', "k")]),
]
two_rounds = [
    msg(U, "Two steps."),
    msg(A, None, [call("step", '{"n": 1}', "s1")]),
    msg(T, "one", tool_call_id="s1"),
    msg(A, "Step two next.", [call("step", '{"n": 2}', "s2")]),
    msg(T, "two", tool_call_id="s2"),
    msg(A, "<think>Both done.</think>Done."),
]

# name, messages, tools, enable_thinking, add_generation_prompt
cases = [
    ("tools_plain", plain, weather_tools, True, True),
    ("tools_system", with_system, weather_tools, True, True),
    ("tools_nothink", with_system, weather_tools, False, True),
    ("tools_spaced_system", spaced_system, [weather_tool], True, True),
    ("tools_odd", with_system, odd_tools, True, True),
    ("tools_odd_plain", plain, odd_tools, False, True),
    ("server_tools", with_system, server_tools, True, True),
    ("called", called, weather_tools, True, True),
    ("called_notools", called, [], True, True),
    ("answered", answered, weather_tools, True, True),
    ("with_content", with_content, [], True, True),
    ("thought_call", thought_call, [tool("check")], True, True),
    ("thought_text_call", thought_text_call, [tool("check")], True, False),
    ("odd_calls", odd_calls, odd_tools, False, True),
    ("call_last", call_last, [tool("check", "Checks.", '{"type": "object"}')], True, True),
    ("call_last_nogen", call_last, [], True, False),
    ("two_rounds", two_rounds, [tool("step")], True, True),
    ("two_rounds_nogen", two_rounds, [], False, False),
]


def render(messages, tools, thinking, gen):
    kwargs = {}
    if tools:
        kwargs["tools"] = openai_tools(tools)
    return template.render(messages=openai(messages, parse_arguments=False),
                           add_generation_prompt=gen, enable_thinking=thinking, **kwargs)


print("/* Generated by tools/qwen3-tool-records.py from llama.cpp's")
print(" * models/templates/Qwen-Qwen3-0.6B.jinja (jinja2 %s): do not edit;" %
      jinja2.__version__)
print(" * run the script again instead. */")
print()
print("typedef struct q3_record {")
print("    const char *name;")
print("    bool thinking, generation_prompt;")
print("    const tn_chat_message *msgs;")
print("    size_t n;")
print("    const tn_chat_tool *tools;")
print("    size_t n_tools;")
print("    const char *want;")
print("} q3_record;")
print()
emit = Emitter("q3")
tool_arrays = {}
for name, messages, tools, thinking, gen in cases:
    emit.messages(name, messages)
    tool_arrays[name] = emit.tools(name, tools)
print()
print("static const q3_record q3_records[] = {")
for name, messages, tools, thinking, gen in cases:
    want = render(messages, tools, thinking, gen)
    print("    {%s, %s, %s, q3_%s, %d, %s, %d,\n     %s}," %
          (c_string(name), "true" if thinking else "false", "true" if gen else "false",
           emit.messages(name, messages), len(messages), tool_arrays[name], len(tools),
           c_string(want).replace("\n    ", "\n     ")))
print("};")
