#!/usr/bin/env python3
"""Writes tests/engine/gptoss-tool-records.h: conversations with tool calls
and tool results, and what jinja2 renders for each from llama.cpp's
models/templates/openai-gpt-oss-120b.jinja (gpt-oss's harmony format), which
test-chat.c compares Tern's gpt-oss renderer with, byte for byte; and
conversations the template raises on, which Tern must refuse.

The environment is transformers' (ImmutableSandboxedEnvironment with
trim_blocks and lstrip_blocks, its tojson filter: json.dumps with
ensure_ascii=False and the keys in their order, as llama.cpp's own tojson
writes them too; strftime_now giving Tern's fixed date 2025-08-05). The
messages are what llama.cpp's server hands this template for an OpenAI
request: a tool call's arguments parsed from their JSON text into objects
(func_args_not_string), a null content as "" (requires_non_null_content), an
answer's reasoning_content as "thinking" (the content of a message with tool
calls erased then). Tern carries an answer's reasoning in its content, as the
session streams it: "<think>X</think>Y" is reasoning X, content Y.

Usage (jinja2 from Debian's python3-jinja2, or pip's):
  tools/gptoss-tool-records.py LLAMA_CPP_DIR > tests/engine/gptoss-tool-records.h
"""
import sys

import jinja2

from chat_records import (A, S, T, U, Emitter, c_string, call, environment, load, msg, odd_tools,
                          openai_calls, openai_tools, tool, weather_tools)

root = sys.argv[1]
template = environment().from_string(load(root, "openai-gpt-oss-120b.jinja"))


weather = [
    msg(S, "You are a weather bot."),
    msg(U, "Weather in Paris?"),
    msg(A, None, [call("get_weather", '{"city": "Paris", "units": "metric"}', "c1")]),
    msg(T, '{"temp": 21, "sky": "clear"}', tool_call_id="c1"),
]
answered = weather + [
    msg(A, "Paris: 21 C and clear."),
    msg(U, "Thanks! And Oslo?"),
]
with_content = [
    msg(U, "Check it."),
    msg(A, "Let me check.", [call("check", '{"q": 1}', "k")]),
    msg(T, "r", tool_call_id="k"),
]
content_answered = with_content + [msg(A, "It is fine."), msg(U, "ok")]
blank_content = [
    msg(U, "Check it."),
    msg(A, "  ", [call("check", '{"q": 1}', "k")]),
    msg(T, "r", tool_call_id="k"),
]
thought_call = [
    msg(U, "Think, then call."),
    msg(A, "<think>I need the tool.</think>", [call("check", "{}", "k")]),
    msg(T, "done", tool_call_id="k"),
]
thought_call_text = [
    msg(U, "Think, then call."),
    msg(A, "<think>I need the tool.</think>Calling it now.", [call("check", "{}", "k")]),
    msg(T, "done", tool_call_id="k"),
    msg(A, "<think>It is done.</think>Done."),
]
thought_text_call = [
    msg(U, "Think, say, call."),
    msg(A, "<think>I need the tool.</think>One moment.", [call("check", '{"a": [1]}', "k")]),
]
several = [
    msg(S, "Use tools."),
    msg(U, "Weather in Paris and Tokyo?"),
    msg(A, "", [call("get_weather", '{"city": "Paris"}', "c1"),
                call("get_time", '{"city":"Tokyo"}', "c2")]),
    msg(T, "21 C", tool_call_id="c1"),
    msg(T, "09:00", tool_call_id="c2"),
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
odd_args = ('{"s": "say \\"hi\\"\\n\\ttab \\\\ back / <b>&\'x\'", '
            '"uni": "h\\u00e9llo \\u65e5\\u672c \\ud83d\\ude00 \u00e9t\u00e9", '
            '"ctl": "\\u0001\\u001f\\u007f\\b\\f\\r", "nul": "a\\u0000b", '
            '"n": 42, "neg": -7, "zero": -0, "negf": -0.0, '
            '"big": 12345678901234567890123, "f": 2.5, "tenth": 0.1, "exp": 1e20, '
            '"tiny": 1.5e-7, "one": 1.0, "e16": 1E16, "e15": 1e15, "small": 0.0001, '
            '"smaller": 0.00001, "nf": -2.50e3, "huge": 1e400, "t": true, "no": false, '
            '"nil": null, "arr": [1, "two", [3.0], {"k": "v"}, []], '
            '"obj": {"b": 1, "A": 2, "a": 3, "_": 4, "Z": {"y": [true, null]}}, '
            '"empty": {}, "Apple": 1, "apple": 2, "dup": 1, "dup": 2, '
            '"k\\"ey\\n": "v", "\u00c9clair": 1}')
odd_arguments = [
    msg(U, "Odd arguments."),
    msg(A, None, [call("zoo", odd_args, "z")]),
    msg(T, "ok", tool_call_id="z"),
]
non_objects = [
    msg(U, "Non-object arguments."),
    msg(A, None, [call("raw", '"city=Paris"', "r1")]),
    msg(T, "x", tool_call_id="r1"),
    msg(A, None, [call("list", " [1, 2,\n 3] ", "r2")]),
    msg(T, "y", tool_call_id="r2"),
    msg(A, None, [call("none", "null", "r3")]),
    msg(T, "z", tool_call_id="r3"),
]
odd_results = [
    msg(U, "Odd results."),
    msg(A, None, [call("fetch", "{}", "f")]),
    msg(T, "", tool_call_id="f"),
    msg(T, 'line 1\nline 2\t"quoted" \\ back\r\n \u00e9\u65e5 \U0001F600 \x01\x7f <b>',
        tool_call_id="f"),
    msg(T, '{"json": [1, 2]}', tool_call_id="f"),
]
result_after_user = [
    msg(U, "Go."),
    msg(A, None, [call("go", "{}", "g")]),
    msg(U, "Wait, here is the result."),
    msg(T, "late", tool_call_id="g"),
]
odd_names = [
    msg(U, "Odd names."),
    msg(A, "", [call("ns.do-it_2", '{"a": []}', "n1")]),
    msg(T, "r", tool_call_id="n1"),
]
empty_think_call = [
    msg(U, "Call."),
    msg(A, "<think></think>Calling.", [call("f", "{}", "a"), call("g", None, "b")]),
    msg(T, "r", tool_call_id="b"),
]
answer_last = [
    msg(U, "Hi"),
    msg(A, "<think>Greet back.</think>Hello!"),
]

# Schemas for render_typescript_type's branches: arrays of each simple
# type, of objects, of arrays, without items, nullable, of a type list; a
# type list of one and of several (numbers and null among them, printed
# with str()); oneOf (variants with descriptions and defaults, objects among
# them: has_object_variants never takes, set inside a loop); string enums
# (numbers, booleans and null printed with str()), nullable strings; nested
# objects (required as a list, a substring test on a string, keys of an
# object), objects without properties; unknown types; defaults (tojson,
# a string beside an enum or a oneOf); descriptions with quotes, unicode,
# newlines; a property that is not an object; a key given twice; an inner
# type over 50 characters; "object | object".
oss_schema = (
    '{"type": "object", "properties": {'
    '"s": {"type": "string", "description": "A \\"quoted\\" <b>\\n\\u00e9t\\u00e9 \\ud83d\\ude00"}, '
    '"ns": {"type": "string", "nullable": true, "default": "x\\"y"}, '
    '"en": {"type": "string", "enum": ["a", "b\\"c", 1, 2.5, true, null, "\\u65e5"], '
    '"default": "a"}, '
    '"n": {"type": "integer", "default": 3, "minimum": 0}, '
    '"f": {"type": "number", "default": 1.0}, '
    '"b": {"type": "boolean", "default": false, "description": ""}, '
    '"as": {"type": "array", "items": {"type": "string"}, "nullable": 1}, '
    '"an": {"type": "array", "items": {"type": "number"}}, '
    '"ai": {"type": "array", "items": {"type": "integer"}, "default": [1, 2]}, '
    '"ab": {"type": "array", "items": {"type": "boolean"}}, '
    '"ao": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}, '
    '"required": ["k"]}}, '
    '"aa": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}}, '
    '"anone": {"type": "array"}, "anull": {"type": "array", "items": {}, "nullable": true}, '
    '"along": {"type": "array", "items": {"type": "object", "properties": {'
    '"first_member": {"type": "string"}, "second_member": {"type": "number"}}}}, '
    '"aoo": {"type": "array", "items": {"type": ["object", "object"]}}, '
    '"alist": {"type": "array", "items": {"type": ["string", "null"]}}, '
    '"tl": {"type": ["string", "number", null, 1, 2.5]}, "t1": {"type": ["integer"]}, '
    '"t0": {"type": [], "description": "empty type list"}, '
    '"one": {"oneOf": [{"type": "string", "description": "s", "default": "q"}, '
    '{"type": "number", "default": 3}, {"type": "object"}, {"type": "object", '
    '"properties": {"z": {"type": "boolean"}}}], "default": "dd"}, '
    '"one1": {"oneOf": [{"type": "integer"}], "description": "single"}, '
    '"obj": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "object", '
    '"properties": {"z": {"type": "string"}, "zz": {"type": "integer"}}, "required": "zzz"}}, '
    '"required": ["x"]}, '
    '"objk": {"type": "object", "properties": {"p": {}, "q": 1}, "required": {"q": 1}}, '
    '"bare_obj": {"type": "object", "properties": {}}, "obj0": {"type": "object"}, '
    '"weird": {"type": "Array"}, "nul": {"type": "null"}, "z": {}, "lst": [1], "str": "x", '
    '"anyof": {"anyOf": [{"type": "string"}]}, '
    '"dflt": {"default": {"a": [1, "\\u00e9", null], "b": 1e400}}, '
    '"dup": {"type": "string"}, "dup": {"type": "number", "description": "last wins"}}, '
    '"required": ["s", "n", "as", "dup", "zzz"]}')
oss_tools = [
    tool("branches", "Every branch of render_typescript_type.", oss_schema),
    tool("no_props", "An object without properties.", '{"type": "object", "properties": {}}'),
    tool("req_str", "required as a string.",
         '{"type": "object", "properties": {"ab": {"type": "string"}, "abc": {"type": "string"},'
         ' "": {"type": "number"}}, "required": "xabx"}'),
]
described_odd = [t for t in odd_tools if t["description"] is not None]

# name, messages, add_generation_prompt[, tools]
cases = [
    ("result_pending", weather, True),
    ("result_pending_nogen", weather, False),
    ("answered", answered, True),
    ("with_content", with_content, True),
    ("content_answered", content_answered, True),
    ("blank_content", blank_content, True),
    ("thought_call", thought_call, True),
    ("thought_call_text", thought_call_text, False),
    ("thought_text_call", thought_text_call, True),
    ("several_calls", several, True),
    ("call_last", call_last, True),
    ("call_last_nogen", call_last, False),
    ("two_rounds", two_rounds, True),
    ("two_rounds_nogen", two_rounds, False),
    ("odd_arguments", odd_arguments, True),
    ("non_objects", non_objects, True),
    ("odd_results", odd_results, True),
    ("result_after_user", result_after_user, True),
    ("odd_names", odd_names, True),
    ("answer_last_nogen", answer_last, False),
    ("empty_think_call", empty_think_call, True),
    ("tools_plain", [msg(U, "Weather in Paris?")], True, weather_tools),
    ("tools_system", [msg(S, "You are a weather bot."), msg(U, "Weather?")], True, weather_tools),
    ("tools_empty_system", [msg(S, ""), msg(U, "Weather?")], True, weather_tools),
    ("tools_called", weather, True, weather_tools),
    ("tools_odd", [msg(U, "Odd schemas.")], True, described_odd),
    ("tools_branches", [msg(S, "Sys."), msg(U, "Branches.")], True, oss_tools),
]

# Tool lists the template raises on: Tern refuses them (name, tools).
tool_refusals = [
    ("no_description", [tool("f", None, '{"type": "object"}')]),
    ("props_list", [tool("f", "D", '{"type": "object", "properties": [1]}')]),
    ("param_desc_number", [tool("f", "D", '{"properties": {"a": {"description": 5}}}')]),
    ("enum_default_number", [tool("f", "D",
                                  '{"properties": {"a": {"type": "string", "enum": ["x"], '
                                  '"default": 1}}}')]),
    ("oneof_default_null", [tool("f", "D",
                                 '{"properties": {"a": {"oneOf": [{"type": "string"}], '
                                 '"default": null}}}')]),
    ("required_number", [tool("f", "D", '{"properties": {"a": {}}, "required": 5}')]),
    ("variant_desc_list", [tool("f", "D",
                                '{"properties": {"a": {"oneOf": [{"description": ["x"]}]}}}')]),
    ("nested_required_true", [tool("f", "D",
                                   '{"properties": {"a": {"type": "object", "properties": '
                                   '{"b": {}}, "required": true}}}')]),
]

# What the template raises on: Tern refuses these (name, messages).
refusals = [
    ("orphan_result", [msg(U, "U"), msg(T, "R", tool_call_id="a")]),
    ("result_after_answer", [msg(U, "U"), msg(A, None, [call("f", "{}", "a")]),
                             msg(T, "R", tool_call_id="a"), msg(A, "A"),
                             msg(T, "R2", tool_call_id="a")]),
    ("channel_in_content", [msg(U, "U"),
                            msg(A, "<|channel|>final<|message|>Hi"), msg(U, "U2")]),
    ("channel_in_thinking", [msg(U, "U"),
                             msg(A, "<think><|channel|>analysis<|message|>x</think>Hi"),
                             msg(U, "U2")]),
    ("channel_beside_call", [msg(U, "U"),
                             msg(A, "<|channel|>analysis<|message|>x",
                                 [call("f", "{}", "a")])]),
    ("no_arguments", [msg(U, "U"), msg(A, None, [call("f", None, "a")])]),
]


def split_think(content):
    """Tern's "<think>X</think>Y" as (reasoning X or None, content Y)."""
    if content is None or "</think>" not in content:
        return None, content
    at = content.rfind("</think>")
    x, y = content[:at], content[at + len("</think>"):]
    if x.startswith("<think>"):
        x = x[len("<think>"):]
    return (x or None), y


def openai(messages):
    """The messages as llama.cpp gives them to the template."""
    out = []
    for m in messages:
        o = {"role": m["role"]}
        reasoning, content = split_think(m["content"])
        o["content"] = content if content is not None else ""
        if m["calls"]:
            o["tool_calls"] = openai_calls(m)
        if reasoning is not None and m["role"] == A:
            o["thinking"] = reasoning
            if m["calls"]:
                del o["content"]
        if m["tool_call_id"] is not None:
            o["tool_call_id"] = m["tool_call_id"]
        if m["name"] is not None:
            o["name"] = m["name"]
        out.append(o)
    return out


def render(messages, gen, tools=()):
    kwargs = {"tools": openai_tools(tools)} if tools else {}
    return template.render(messages=openai(messages), add_generation_prompt=gen, **kwargs)


print("/* Generated by tools/gptoss-tool-records.py from llama.cpp's")
print(" * models/templates/openai-gpt-oss-120b.jinja (jinja2 %s): do not edit;" %
      jinja2.__version__)
print(" * run the script again instead. */")
print()
print("typedef struct oss_record {")
print("    const char *name;")
print("    bool generation_prompt;")
print("    const tn_chat_message *msgs;")
print("    size_t n;")
print("    const char *want; /* NULL: the template raises */")
print("    const tn_chat_tool *tools;")
print("    size_t n_tools;")
print("} oss_record;")
print()
emit = Emitter("oss")
tool_arrays = {}
for name, messages, gen, *tools in cases:
    emit.messages(name, messages)
    tool_arrays[name] = emit.tools(name, tools[0] if tools else [])
for name, messages in refusals:
    emit.messages(name, messages)
refusal_user = [msg(U, "U")]
emit.messages("refusal_user", refusal_user)
for name, tools in tool_refusals:
    tool_arrays[name] = emit.tools(name, tools)
print()
print("static const oss_record oss_records[] = {")
for name, messages, gen, *tools in cases:
    tools = tools[0] if tools else []
    want = render(messages, gen, tools)
    print("    {%s, %s, oss_%s, %d,\n     %s,\n     %s, %d}," %
          (c_string(name), "true" if gen else "false", emit.messages(name, messages), len(messages),
           c_string(want).replace("\n    ", "\n     "), tool_arrays[name], len(tools)))
for name, messages in refusals:
    try:
        render(messages, True)
    except Exception as e:  # noqa: BLE001 (TemplateError, or TypeError from tojson)
        print("%s: %s: %s" % (name, type(e).__name__, e), file=sys.stderr)
    else:
        sys.exit("%s: the template renders it, expected it to raise" % name)
    print("    {%s, true, oss_%s, %d, NULL, NULL, 0}," % (c_string(name), name, len(messages)))
for name, tools in tool_refusals:
    try:
        render(refusal_user, True, tools)
    except Exception as e:  # noqa: BLE001 (TemplateError, TypeError, UndefinedError)
        print("%s: %s: %s" % (name, type(e).__name__, e), file=sys.stderr)
    else:
        sys.exit("%s: the template renders it, expected it to raise" % name)
    print("    {%s, true, oss_refusal_user, 1, NULL, %s, %d}," %
          (c_string(name), tool_arrays[name], len(tools)))
print("};")
