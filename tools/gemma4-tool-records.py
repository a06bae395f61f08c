#!/usr/bin/env python3
"""Writes tests/engine/gemma4-tool-records.h: conversations with tool calls
and tool results, and what jinja2 renders for each from llama.cpp's
models/templates/google-gemma-4-31B-it.jinja (Google's current template),
which test-chat.c compares Tern's Gemma 4 renderer with, byte for byte.

The environment is transformers' (ImmutableSandboxedEnvironment with
trim_blocks and lstrip_blocks); the messages are what llama.cpp's server
hands the template for an OpenAI request: a tool call's arguments parsed from
their JSON text into objects (func_args_not_string), a null content as ""
(requires_non_null_content). The leading bos_token is cut off: Tern puts BOS
in as a token.

The -interleaved variant of the template is older: it has no code for
OpenAI's role "tool" messages (it shows them as "<|turn>tool" turns, and
llama.cpp rewrites them into Gemma's own tool_responses before rendering with
it). The script reports on stderr which cases it renders differently; Tern
follows the current file (docs/CHAT-TEMPLATES.md).

Usage (jinja2 from Debian's python3-jinja2, or pip's):
  tools/gemma4-tool-records.py LLAMA_CPP_DIR > tests/engine/gemma4-tool-records.h
"""
import sys

import jinja2

from chat_records import (A, S, T, U, Emitter, c_string, call, environment, load, msg, odd_tools,
                          openai, openai_tools, tool, weather_tools)

root = sys.argv[1]
env = environment(transformers_tojson=False)
plain = env.from_string(load(root, "google-gemma-4-31B-it.jinja"))
interleaved = env.from_string(load(root, "google-gemma-4-31B-it-interleaved.jinja"))


weather = [
    msg(S, "You are a weather bot."),
    msg(U, "Weather in Paris and Tokyo?"),
    msg(A, None, [call("get_weather", '{"city": "Paris", "units": "metric"}', "c1"),
                  call("get_weather", '{"city":"Tokyo"}', "c2")]),
    msg(T, '{"temp": 21, "sky": "clear"}', tool_call_id="c1"),
    msg(T, " 18 C, rain ", tool_call_id="c2"),
]
answered = weather + [
    msg(A, "Paris: 21 C and clear; Tokyo: 18 C with rain."),
    msg(U, "Thanks! And Oslo?"),
]
answered_thought = weather + [
    msg(A, "<|channel>thought\nSummarise both.<channel|>Paris: 21 C, Tokyo: 18 C."),
    msg(U, "And Oslo?"),
]
zoo_args = ('{"s": "say \\"hi\\"\\n\\ttab \\\\ back", "n": 42, "neg": -7, "zero": -0, '
            '"big": 12345678901234567890123, "f": 2.5, "tenth": 0.1, "exp": 1e20, '
            '"tiny": 1.5e-7, "one": 1.0, "e16": 1E16, "e15": 1e15, "small": 0.0001, '
            '"smaller": 0.00001, "nf": -2.50e3, "t": true, "no": false, "nil": null, '
            '"arr": [1, "two", [3.0], {"k": "v"}, []], '
            '"obj": {"b": 1, "A": 2, "a": 3, "_": 4, "Z": {"y": [true, null]}}, '
            '"empty": {}, "uni": "h\\u00e9llo \\u65e5\\u672c", "Apple": 1, "apple": 2, '
            '"dup": 1, "dup": 2, "\\u00c9clair": 1, "\\u00e9clat": 2, "z\\u00e8bre": 3}')
zoo = [
    msg(U, "Test every kind of value."),
    msg(A, "", [call("zoo", zoo_args, "z")]),
    msg(T, "ok", tool_call_id="z"),
]
linking = [
    msg(U, "Look up x, fetch k2."),
    msg(A, None, [call("lookup", '{"q":"x"}'), call("fetch", "{}", "k2")]),
    msg(T, "A1"),
    msg(T, "A2", tool_call_id="k2"),
    msg(T, "A3", tool_call_id="nope", name="manual"),
    msg(U, "next"),
]
with_content = [
    msg(U, "Check it."),
    msg(A, "Let me check.", [call("check", '{"q": 1}', "k")]),
    msg(T, "r", tool_call_id="k"),
    msg(U, "ok"),
]
blank_content = [
    msg(U, "Check it."),
    msg(A, "  ", [call("check", '{"q": 1}', "k")]),
    msg(T, "r", tool_call_id="k"),
    msg(U, "ok"),
]
no_results = [
    msg(U, "Check it."),
    msg(A, None, [call("check", '{"q": 1}', "k")]),
    msg(U, "Never mind."),
]
call_last = [
    msg(S, "Use tools."),
    msg(U, "Check it."),
    msg(A, None, [call("check", '{"q": 1}', "k")]),
]
odd_arguments = [
    msg(U, "Odd arguments."),
    msg(A, None, [call("raw", '"city=Paris"', "r1"), call("list", "[1, 2]", "r2"),
                  call("none", None, "r3")]),
    msg(T, "x", tool_call_id="r1"),
    msg(U, "ok"),
]
thought_call = [
    msg(U, "Think, then call."),
    msg(A, "<|channel>thought\nI need the tool.<channel|>", [call("check", "{}", "k")]),
    msg(T, "done", tool_call_id="k"),
]
two_rounds = [
    msg(U, "Two steps."),
    msg(A, None, [call("step", '{"n": 1}', "s1")]),
    msg(T, "one", tool_call_id="s1"),
    msg(A, None, [call("step", '{"n": 2}', "s2")]),
    msg(T, "two", tool_call_id="s2"),
    msg(A, "Done."),
]

# Schemas for the declaration macros' branches: string enums, array items
# (their properties, required, a type list, other members through
# format_argument, nulls skipped), nullable, objects with and without
# properties, required as a string (iterated by character), a type list
# (Python's str() of it, upper-cased), a description that is a number,
# standard keys as property names (skipped), a property that is not an
# object, a schema without a type (its brace left open, as the template
# leaves it), one without properties, an empty one.
macro_schema = (
    '{"type": "object", "properties": {'
    '"s": {"type": "string", "description": "A string.", "enum": ["a", "b\\"c", 1, null]}, '
    '"n": {"type": "integer", "description": 5, "minimum": 0}, '
    '"arr": {"type": "array", "description": "list", "items": {"type": "object", '
    '"properties": {"x": {"type": "number"}, "Y": {"type": "string", "nullable": true}}, '
    '"required": ["x"], "extra": [1, {"k": null, "A": 2.50}], "gone": null}}, '
    '"arr2": {"type": "array", "items": {"type": ["string", "null"]}}, '
    '"arr3": {"type": "Array", "items": {}}, '
    '"arr4": {"type": "array", "items": {"enum": ["x", true], "required": "ab"}}, '
    '"obj": {"type": "object", "properties": {"inner": {"type": "boolean", "nullable": true}}, '
    '"required": ["inner"]}, '
    '"bare_obj": {"type": "object", "additionalProperties": false, "description": ""}, '
    '"nul": {"type": ["string", "null"], "description": "maybe \u00e9"}, '
    '"Upper": {"type": "String", "enum": []}, '
    '"req_str": {"type": "object", "properties": {}, "required": "ab"}, '
    '"zz": true, "type": {"type": "string"}, "description": 1, '
    '"flag": {"type": "boolean", "nullable": false, "description": 0}, '
    '"dup": {"type": "string"}, "dup": {"type": "number", "nullable": 1}}, '
    '"required": ["s", "n"]}')
g4_tools = [
    tool("macros", "Every branch of the declaration macros.", macro_schema),
    tool("untyped", "No type at the top.", '{"properties": {"a": {"type": "string"}}}'),
    tool("required_only", None, '{"required": ["a", "b"], "type": "object"}'),
    tool("empty", "Empty schema.", "{}"),
    tool("no_props", "Object without properties.", '{"type": "object", "properties": {}}'),
]

# name, messages, enable_thinking, add_generation_prompt[, tools]
cases = [
    ("results_pending", weather, False, True),
    ("results_pending_think", weather, True, True),
    ("answered", answered, False, True),
    ("answered_think", answered_thought, True, True),
    ("value_zoo", zoo, False, True),
    ("linking", linking, False, True),
    ("with_content", with_content, False, True),
    ("blank_content", blank_content, False, True),
    ("no_results", no_results, False, True),
    ("call_last", call_last, False, True),
    ("call_last_think", call_last, True, True),
    ("odd_arguments", odd_arguments, False, True),
    ("thought_call", thought_call, True, True),
    ("two_rounds", two_rounds, False, True),
    ("two_rounds_nogen", two_rounds, True, False),
    ("tools_plain", [msg(U, "Weather in Paris?")], False, True, weather_tools),
    ("tools_system_think", [msg(S, " You are a weather bot. "), msg(U, "Weather?")], True, True,
     weather_tools),
    ("tools_odd", [msg(U, "Odd schemas.")], False, True, odd_tools),
    ("tools_macros", [msg(S, "Sys."), msg(U, "Macros.")], False, True, g4_tools),
    ("tools_called", weather, False, True, weather_tools),
]


def render(template, messages, thinking, gen, tools=()):
    kwargs = {"tools": openai_tools(tools)} if tools else {}
    text = template.render(messages=openai(messages), bos_token="<bos>",
                           add_generation_prompt=gen, enable_thinking=thinking, **kwargs)
    assert text.startswith("<bos>")
    return text[len("<bos>"):]


print("/* Generated by tools/gemma4-tool-records.py from llama.cpp's")
print(" * models/templates/google-gemma-4-31B-it.jinja (jinja2 %s): do not edit;" %
      jinja2.__version__)
print(" * run the script again instead. */")
print()
print("typedef struct g4_record {")
print("    const char *name;")
print("    bool thinking, generation_prompt;")
print("    const tn_chat_message *msgs;")
print("    size_t n;")
print("    const char *want;")
print("    const tn_chat_tool *tools;")
print("    size_t n_tools;")
print("} g4_record;")
print()
emit = Emitter("g4")
tool_arrays = {}
for name, messages, thinking, gen, *tools in cases:
    emit.messages(name, messages)
    tool_arrays[name] = emit.tools(name, tools[0] if tools else [])
print()
print("static const g4_record g4_records[] = {")
differ = []
for name, messages, thinking, gen, *tools in cases:
    tools = tools[0] if tools else []
    want = render(plain, messages, thinking, gen, tools)
    try:
        if render(interleaved, messages, thinking, gen, tools) != want:
            differ.append(name)
    except Exception as e:  # noqa: BLE001 (a template error is a difference too)
        differ.append("%s (%s)" % (name, e))
    arr = "g4_" + emit.messages(name, messages)
    print("    {%s, %s, %s, %s, %d,\n     %s,\n     %s, %d}," %
          (c_string(name), "true" if thinking else "false", "true" if gen else "false", arr,
           len(messages), c_string(want).replace("\n    ", "\n     "), tool_arrays[name],
           len(tools)))
print("};")
print("interleaved template renders differently: %s" % (", ".join(differ) or "none"),
      file=sys.stderr)
