#!/usr/bin/env python3
"""Tool calls and tool results through the OpenAI API (tern-cli serve, real
HTTP), for a model whose chat template is Gemma 4's:

  - an agent's second request (the assistant's tool_calls with content null,
    then role "tool" messages with tool_call_id) is rendered as the template
    renders it: its prompt_tokens equal those of the raw prompt that jinja2
    renders from google-gemma-4-31B-it.jinja (tests/engine/gemma4-tool-records.h,
    tools/gemma4-tool-records.py), sent to /v1/completions; the same with the
    final answer and a new question after the results;
  - arguments sent as an object render as the same arguments sent as text;
  - the request's tools render as the recorded jinja2 render with tools=
    (read from tests/engine/gemma4-tool-records.h), and a schema the
    declaration cannot show is a 400;
  - hostile shapes (tool_calls not an array, a call without a function name,
    arguments that are not JSON, ids that are not strings, a result that
    follows no call...) are a 400 that names the field.

The model is a random-weight one with the Gemma 3 vocabulary (the test
vocabularies have no Gemma 4 one); its tokenizer_config.json's template is a
stand-in that Tern recognises as Gemma 4 (it has "<|turn>")."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

checks = serverlib.Checks()
check = checks.check
vocab_dir = os.path.dirname(serverlib.real_vocab("gemma3"))

tmp = serverlib.workdir("serve-tools")
g4 = os.path.join(tmp, "vocab-g4")
os.makedirs(g4, exist_ok=True)
link = os.path.join(g4, "tokenizer.json")
if not os.path.exists(link):
    os.symlink(os.path.join(vocab_dir, "tokenizer.json"), link)
with open(os.path.join(vocab_dir, "tokenizer_config.json"), encoding="utf-8") as f:
    config = json.load(f)
config["chat_template"] = "{{ bos_token }}{#- a stand-in for Gemma 4's: '<|turn>' -#}"
with open(os.path.join(g4, "tokenizer_config.json"), "w", encoding="utf-8") as f:
    json.dump(config, f)
model = serverlib.make_model(tmp, name="g4tools", vocab=link, arch="gemma3")

# What jinja2 renders from the template (thinking off), without <bos>.
PENDING = (
    '<|turn>system\nYou are a weather bot.<turn|>\n<|turn>user\nWeather in Paris and Tokyo?'
    '<turn|>\n<|turn>model\n<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,units:<|"|>'
    'metric<|"|>}<tool_call|><|tool_call>call:get_weather{city:<|"|>Tokyo<|"|>}<tool_call|>'
    '<|tool_response>response:get_weather{value:<|"|>{"temp": 21, "sky": "clear"}<|"|>}'
    '<tool_response|><|tool_response>response:get_weather{value:<|"|> 18 C, rain <|"|>}'
    '<tool_response|>')
ANSWERED = (
    PENDING + 'Paris: 21 C and clear; Tokyo: 18 C with rain.<turn|>\n<|turn>user\n'
    'Thanks! And Oslo?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>')


def calls(paris_args='{"city": "Paris", "units": "metric"}'):
    return [{"id": "c1", "type": "function",
             "function": {"name": "get_weather", "arguments": paris_args}},
            {"id": "c2", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city":"Tokyo"}'}}]


def agent(tool_calls=None, extra=()):
    return [{"role": "system", "content": "You are a weather bot."},
            {"role": "user", "content": "Weather in Paris and Tokyo?"},
            {"role": "assistant", "content": None,
             "tool_calls": calls() if tool_calls is None else tool_calls},
            {"role": "tool", "tool_call_id": "c1", "content": '{"temp": 21, "sky": "clear"}'},
            {"role": "tool", "tool_call_id": "c2", "content": " 18 C, rain "}] + list(extra)


srv = serverlib.Server(tmp, "tools", model, ["-c", "2048"])


def chat(messages):
    return srv.post("/v1/chat/completions", {"model": "g4tools", "messages": messages,
                                             "max_tokens": 1, "tern": {"thinking": False}})


def prompt_tokens(doc):
    return doc["usage"]["prompt_tokens"] if doc and "usage" in doc else None


def raw_tokens(text):
    st, _, doc, raw = srv.post("/v1/completions", {"model": "g4tools", "prompt": text,
                                                   "max_tokens": 1})
    return prompt_tokens(doc) if st == 200 else "status %s: %s" % (st, raw[:200])


for name, messages, want in (
        ("results pending", agent(), PENDING),
        ("answered", agent(extra=[{"role": "assistant",
                                   "content": "Paris: 21 C and clear; Tokyo: 18 C with rain."},
                                  {"role": "user", "content": "Thanks! And Oslo?"}]), ANSWERED)):
    st, _, doc, raw = chat(messages)
    want_n = raw_tokens(want)
    check(st == 200 and prompt_tokens(doc) == want_n and isinstance(want_n, int),
          "%s: the chat prompt is the template's (%s tokens, the rendered text %s; %s)" %
          (name, prompt_tokens(doc), want_n, raw[:300]))

# Tool definitions too (the request's tools, their schemas' own text): the
# prompt of the recorded jinja2 render with tools=.
records = serverlib.tool_records(os.path.join(serverlib.env("TERN_SOURCE_ROOT"), "tests",
                                              "engine", "gemma4-tool-records.h"), "g4")
tools, want = records.get("tools_called", ([], ""))
body = json.dumps({"model": "g4tools", "messages": agent(), "max_tokens": 1,
                   "tern": {"thinking": False}})
st, _, doc, raw = srv.post("/v1/chat/completions",
                           (body[:-1] + ', "tools": ' + serverlib.tools_json(tools) + "}").encode())
want_n = raw_tokens(want)
check(len(tools) == 2 and st == 200 and isinstance(want_n, int) and
      prompt_tokens(doc) == want_n and want_n != raw_tokens(PENDING),
      "with tools: the chat prompt is the template's (%s tokens, the rendered text %s; %s)" %
      (prompt_tokens(doc), want_n, raw[:300]))
# A schema the declaration cannot show: a 400 that says so.
st, _, doc, raw = srv.post("/v1/chat/completions", {
    "model": "g4tools", "messages": agent(), "max_tokens": 1,
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": {"x": 1}}}}}}]})
check(st == 400 and b"gemma4: tool 0 (f)" in raw, "an unrenderable schema: 400 (%s: %s)" %
      (st, raw[:300]))

# Arguments as an object: the same prompt.
as_object = calls()
as_object[0]["function"]["arguments"] = {"units": "metric", "city": "Paris"}
st, _, doc, raw = chat(agent(as_object))
check(st == 200 and prompt_tokens(doc) == raw_tokens(PENDING),
      "arguments as an object render as the same text (%s)" % raw[:300])
# A different result really changes the prompt (the count is not blind).
other = agent()
other[3]["content"] = "a much longer result than the one before, with many more words in it"
st, _, doc, raw = chat(other)
check(st == 200 and prompt_tokens(doc) != raw_tokens(PENDING),
      "another result gives another prompt (%s)" % raw[:300])


def refused(what, messages, field):
    st, _, doc, raw = chat(messages)
    err = (doc or {}).get("error") or {}
    check(st == 400 and field in (err.get("message") or ""),
          "%s: 400 naming %s (%s: %s)" % (what, field, st, raw[:300]))


def with_call(**change):
    c = calls()
    c[0].update(change)
    return agent(c)


def with_function(**change):
    c = calls()
    c[0]["function"].update(change)
    for k, v in change.items():
        if v is None:
            del c[0]["function"][k]
    return agent(c)


msgs = agent()
msgs[2]["tool_calls"] = {"id": "c1"}
refused("tool_calls an object", msgs, "messages[2].tool_calls")
msgs = agent()
msgs[2]["tool_calls"] = ["call"]
refused("a call that is a string", msgs, "messages[2].tool_calls[0]")
refused("a call without function", with_call(function=None), "messages[2].tool_calls[0].function")
refused("a call of another type", with_call(type="retrieval"), "type 'function'")
refused("a call whose type is a number", with_call(type=7), "messages[2].tool_calls[0].type")
refused("an id that is a number", with_call(id=12), "messages[2].tool_calls[0].id")
refused("no function name", with_function(name=None), "tool_calls[0].function.name")
refused("a name that is a list", with_function(name=["f"]), "tool_calls[0].function.name")
refused("arguments that are not JSON", with_function(arguments="{city: Paris"),
        "tool_calls[0].function.arguments")
# JSON text nested past any limit inside the arguments string (the body's
# own depth check does not look inside strings): a 400, not a crash.
refused("arguments nested 300,000 deep", with_function(arguments="[" * 300000 + "]" * 300000),
        "tool_calls[0].function.arguments")
refused("arguments nested 129 deep", with_function(arguments="[" * 129 + "]" * 129),
        "tool_calls[0].function.arguments")
# Values inside the arguments strings (the body's own count does not look
# inside strings either): json-glib spends ~100 bytes on each, and one
# "[0,0,...]" of 450,000 raised the server's peak by 95 MB for 3 s. All of a
# request's arguments together get what one body does.
refused("arguments of 250,000 values", with_function(arguments="[" + "0," * 249999 + "0]"),
        "more than 200000 JSON values")
c = calls()
for call in c[:2]:
    call["function"]["arguments"] = "[" + "0," * 109999 + "0]"
refused("two calls' arguments of 110,000 values each", agent(c), "more than 200000 JSON values")
st, _, doc, raw = chat(with_function(arguments="[" + "0," * 99999 + "0]"))
check(b"JSON values" not in raw, "arguments of 100,000 values are fine (%s: %s)" % (st, raw[:300]))
# C's escapes in the arguments' JSON: json-glib took them (bytes that are no
# UTF-8 into the prompt).
refused("arguments with an octal escape", with_function(arguments='{"city": "Par\\151s"}'),
        "tool_calls[0].function.arguments")
refused("arguments that are a number", with_function(arguments=5),
        "tool_calls[0].function.arguments")
msgs = agent()
msgs[3]["tool_call_id"] = 1
refused("a tool_call_id that is a number", msgs, "messages[3].tool_call_id")
msgs = agent()
msgs[4]["name"] = {"x": 1}
refused("a tool name that is an object", msgs, "messages[4].name")
msgs = agent()
msgs[1]["tool_calls"] = calls()
refused("tool calls on a user message", msgs, "only assistant messages")
refused("a result that follows no call",
        [{"role": "user", "content": "Hi"},
         {"role": "tool", "tool_call_id": "c1", "content": "r"}], "tool")
refused("a result that names no function",
        [{"role": "user", "content": "Hi"},
         {"role": "assistant", "content": None, "tool_calls": calls()},
         {"role": "tool", "tool_call_id": "nope", "content": "r"}], "tool_call_id")
# The server is still answering.
st, _, doc, raw = chat(agent())
check(st == 200, "after the refusals the same request is still answered (%s)" % raw[:200])
srv.stop()

# gpt-oss: the same vocabulary with a stand-in template that Tern
# recognises as harmony's; the request's tools render as the recorded
# jinja2 render of openai-gpt-oss-120b.jinja (tests/engine/gptoss-tool-records.h),
# and tool lists the template raises on are a 400 that says why.
oss = os.path.join(tmp, "vocab-oss")
os.makedirs(oss, exist_ok=True)
link = os.path.join(oss, "tokenizer.json")
if not os.path.exists(link):
    os.symlink(os.path.join(vocab_dir, "tokenizer.json"), link)
config["chat_template"] = "{#- a stand-in for gpt-oss's: '<|start|>', '<|channel|>' -#}"
with open(os.path.join(oss, "tokenizer_config.json"), "w", encoding="utf-8") as f:
    json.dump(config, f)
srv = serverlib.Server(tmp, "osstools", serverlib.make_model(tmp, name="osstools", vocab=link,
                                                             arch="gemma3"), ["-c", "2048"])
oss_records = serverlib.tool_records(os.path.join(serverlib.env("TERN_SOURCE_ROOT"), "tests",
                                                  "engine", "gptoss-tool-records.h"), "oss")
oss_agent = [{"role": "system", "content": "You are a weather bot."},
             {"role": "user", "content": "Weather in Paris?"},
             {"role": "assistant", "content": None, "tool_calls": [
                 {"id": "c1", "type": "function", "function": {
                     "name": "get_weather", "arguments": '{"city": "Paris", "units": "metric"}'}}]},
             {"role": "tool", "tool_call_id": "c1", "content": '{"temp": 21, "sky": "clear"}'}]
for name, messages in (("tools_called", oss_agent),
                       ("tools_branches", [{"role": "system", "content": "Sys."},
                                           {"role": "user", "content": "Branches."}])):
    tools, want = oss_records.get(name, ([], ""))
    body = json.dumps({"model": "osstools", "messages": messages, "max_tokens": 1})
    st, _, doc, raw = srv.post("/v1/chat/completions",
                               (body[:-1] + ', "tools": ' + serverlib.tools_json(tools) +
                                "}").encode())
    rs, _, rdoc, rraw = srv.post("/v1/completions", {"model": "osstools", "prompt": want,
                                                     "max_tokens": 1})
    want_n = prompt_tokens(rdoc) if rs == 200 else None
    # /v1/completions puts the (Gemma 3) vocabulary's BOS first; gpt-oss's
    # chat prompt has none.
    check(len(tools) > 0 and st == 200 and isinstance(want_n, int) and
          prompt_tokens(doc) == want_n - 1,
          "gpt-oss %s: the chat prompt is the template's (%s tokens, the rendered text %s; %s)" %
          (name, prompt_tokens(doc), want_n, raw[:300]))
for what, fn, says in (
        ("no description", {"name": "f", "parameters": {"type": "object"}}, b"no description"),
        ("a description that is a number",
         {"name": "f", "description": "D", "parameters": {"properties": {"a": {
             "description": 5}}}}, b"not a string"),
        ("required a number", {"name": "f", "description": "D", "parameters": {
            "properties": {"a": {}}, "required": 5}}, b"required is a number")):
    st, _, doc, raw = srv.post("/v1/chat/completions", {
        "model": "osstools", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1,
        "tools": [{"type": "function", "function": fn}]})
    check(st == 400 and b"gpt-oss: tool 0 (f)" in raw and says in raw,
          "gpt-oss, %s: 400 (%s: %s)" % (what, st, raw[:300]))
st, _, doc, raw = srv.post("/v1/chat/completions", {
    "model": "osstools", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1})
check(st == 200, "gpt-oss: after the refusals a request is still answered (%s)" % raw[:200])
srv.stop()
checks.finish()
