#!/usr/bin/env python3
"""Tool definitions through the OpenAI API (tern-cli serve, real HTTP), for a
model with Qwen3's real chat template (the fetched Qwen3 vocabulary's):

  - a request's "tools" reach the template: the chat prompt has as many
    tokens as the raw prompt jinja2 renders for the same tools and messages
    (tests/engine/qwen3-tool-records.h, tools/qwen3-tool-records.py), sent
    to /v1/completions; the tools are read from that header and sent with
    their schemas' own text (key order, number spellings, a key given
    twice); the same for an agent's second request (tool_calls with content
    null, then the results);
  - tool_choice "auto" and "none" are taken, anything else is a 400;
  - hostile "tools" (wrong types, missing names, schemas that are not
    objects, too many tools, nesting past the body's limit) are a 400 naming
    the field, and a model whose template cannot show tools refuses them;
  - an answer that is not a call comes back as content with finish_reason
    "stop" or "length", streamed the same as not streamed (the stream holds
    back what could start a call, and gives it all back)."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

checks = serverlib.Checks()
check = checks.check
vocab = serverlib.real_vocab("qwen3")
RECORDS = os.path.join(serverlib.env("TERN_SOURCE_ROOT"), "tests", "engine",
                       "qwen3-tool-records.h")


records = serverlib.tool_records(RECORDS, "q3")
check(len(records) > 10 and len(records.get("server_tools", ([], ""))[0]) == 3 and
      len(records.get("called", ([], ""))[0]) == 2,
      "the records and their tools are read (%d)" % len(records))

tmp = serverlib.workdir("serve-tooldefs")
model = serverlib.make_model(tmp, name="q3tools", vocab=vocab)
srv = serverlib.Server(tmp, "tooldefs", model, ["-c", "2048"])


tools_json = serverlib.tools_json


def chat(messages, tools=None, extra=None, raw_tools=None):
    body = {"model": "q3tools", "messages": messages, "max_tokens": 1}
    body.update(extra or {})
    text = json.dumps(body)
    if raw_tools is not None:
        text = text[:-1] + ', "tools": ' + raw_tools + "}"
    elif tools is not None:
        text = text[:-1] + ', "tools": ' + tools_json(tools) + "}"
    return srv.post("/v1/chat/completions", text.encode())


def prompt_tokens(doc):
    return doc["usage"]["prompt_tokens"] if doc and "usage" in doc else None


def raw_tokens(text):
    st, _, doc, raw = srv.post("/v1/completions", {"model": "q3tools", "prompt": text,
                                                   "max_tokens": 1})
    return prompt_tokens(doc) if st == 200 else "status %s: %s" % (st, raw[:200])


SYSTEM = [{"role": "system", "content": "You are a weather bot."},
          {"role": "user", "content": "Weather in Paris?"}]
CALLED = [{"role": "system", "content": "You are a weather bot."},
          {"role": "user", "content": "Weather in Paris and Tokyo?"},
          {"role": "assistant", "content": None, "tool_calls": [
              {"id": "c1", "type": "function", "function": {
                  "name": "get_weather", "arguments": '{"city": "Paris", "units": "metric"}'}},
              {"id": "c2", "type": "function", "function": {
                  "name": "get_time", "arguments": '{"tz":"Asia/Tokyo"}'}}]},
          {"role": "tool", "tool_call_id": "c1", "content": '{"temp": 21, "sky": "clear"}'},
          {"role": "tool", "tool_call_id": "c2", "content": "09:00"}]

for name, messages in (("server_tools", SYSTEM), ("tools_system", SYSTEM), ("called", CALLED)):
    tools, want = records[name]
    st, _, doc, raw = chat(messages, tools)
    want_n = raw_tokens(want)
    check(st == 200 and isinstance(want_n, int) and prompt_tokens(doc) == want_n,
          "%s: the chat prompt is the template's (%s tokens, the rendered text %s; %s)" %
          (name, prompt_tokens(doc), want_n, raw[:300]))
    # Without the tools the prompt is another one (the count is not blind).
    st, _, doc, raw = chat(messages)
    check(st == 200 and prompt_tokens(doc) != want_n,
          "%s without tools: another prompt (%s)" % (name, raw[:300]))

tools, want = records["tools_system"]
want_n = raw_tokens(want)
for choice in ("auto", "none", None):
    st, _, doc, raw = chat(SYSTEM, tools, {"tool_choice": choice})
    check(st == 200 and prompt_tokens(doc) == want_n,
          "tool_choice %s: the same prompt (%s)" % (choice, raw[:300]))
# An empty list is no tools.
st, _, doc, raw = chat(SYSTEM, [])
check(st == 200 and prompt_tokens(doc) == raw_tokens(
    "<|im_start|>system\nYou are a weather bot.<|im_end|>\n<|im_start|>user\nWeather in Paris?"
    "<|im_end|>\n<|im_start|>assistant\n"), "tools [] renders no tools (%s)" % raw[:300])


def refused(what, field, raw_tools=None, extra=None, tools=None):
    st, _, doc, raw = chat(SYSTEM, tools, extra, raw_tools)
    err = (doc or {}).get("error") or {}
    msg = err.get("message") or ""
    check(st == 400 and field in msg,
          "%s: 400 naming %s (%s: %s)" % (what, field, st, raw[:300]))
    return err


W = '{"type": "function", "function": {"name": "f"}}'
for choice, what in (('"required"', "required"), ('{"type": "function", "function": '
                                                   '{"name": "f"}}', "a named function"),
                     ('"sometimes"', "another word"), ("5", "a number")):
    err = refused("tool_choice " + what, "tool_choice",
                  extra={"tool_choice": json.loads(choice)}, raw_tools="[" + W + "]")
    check(err.get("param") == "tool_choice", "tool_choice %s: param %s" % (what, err))
refused("tools an object", "tools must be an array", raw_tools=W)
refused("tools a string", "tools must be an array", raw_tools='"f"')
refused("a tool that is a string", "tools[0] must be an object", raw_tools='["f"]')
refused("a tool without type", "tools[0].type", raw_tools='[{"function": {"name": "f"}}]')
refused("a tool of another type", "tools[1].type",
        raw_tools='[' + W + ', {"type": "retrieval", "function": {"name": "f"}}]')
refused("a type that is a number", "tools[0].type",
        raw_tools='[{"type": 1, "function": {"name": "f"}}]')
refused("no function", "tools[0].function", raw_tools='[{"type": "function"}]')
refused("a function that is a list", "tools[0].function",
        raw_tools='[{"type": "function", "function": ["f"]}]')
refused("no name", "tools[0].function.name",
        raw_tools='[{"type": "function", "function": {"description": "d"}}]')
refused("an empty name", "tools[0].function.name",
        raw_tools='[{"type": "function", "function": {"name": ""}}]')
refused("a name that is a number", "tools[0].function.name",
        raw_tools='[{"type": "function", "function": {"name": 7}}]')
refused("a description that is an object", "tools[0].function.description",
        raw_tools='[{"type": "function", "function": {"name": "f", "description": {}}}]')
for params in ('"object"', "[]", "5", "true"):
    refused("parameters " + params, "tools[0].function.parameters",
            raw_tools='[{"type": "function", "function": {"name": "f", "parameters": %s}}]' %
            params)
refused("129 tools", "at most 128", raw_tools="[" + ", ".join([W] * 129) + "]")
deep = '{"a": ' * 130 + "1" + "}" * 130
st, _, doc, raw = chat(SYSTEM, raw_tools='[{"type": "function", "function": {"name": "f", '
                       '"parameters": %s}}]' % deep)
check(st == 400 and b"nested deeper" in raw, "a schema nested 130 deep: 400 (%s: %s)" %
      (st, raw[:200]))
st, _, doc, raw = chat(SYSTEM, raw_tools='[{"type": "function", "function": {"name": "f", '
                       '"parameters": {"n": 123456789012345678901234567890}}}]')
check(st == 400, "a schema with a number beyond 64 bits: 400 (%s: %s)" % (st, raw[:200]))
# A null parameters is none; 128 tools are taken.
st, _, doc, raw = chat(SYSTEM, raw_tools='[{"type": "function", "function": {"name": "f", '
                       '"parameters": null}}]')
check(st == 200, "parameters null: taken (%s)" % raw[:200])
st, _, doc, raw = chat(SYSTEM, raw_tools="[" + ", ".join([W] * 128) + "]")
check(st == 200, "128 tools: taken (%s)" % raw[:200])

# An answer that is not a call: content, streamed the same as not.
for extra in ({}, {"tern": {"thinking": False}}):
    body = {"max_tokens": 24, **extra}
    st, _, doc, raw = chat(SYSTEM, records["tools_system"][0], body)
    ok = st == 200
    choice = doc["choices"][0] if ok else {}
    check(ok and choice.get("finish_reason") in ("stop", "length") and
          "tool_calls" not in choice.get("message", {}) and
          isinstance(choice["message"].get("content"), str),
          "a plain answer with tools: content, no tool_calls (%s)" % raw[:300])
    st, _, _, sraw = chat(SYSTEM, records["tools_system"][0], {**body, "stream": True})
    events = [json.loads(e) for e in serverlib.sse_events(sraw) if e != "[DONE]"]
    content = "".join(e["choices"][0]["delta"].get("content") or "" for e in events
                      if e.get("choices"))
    reasoning = "".join(e["choices"][0]["delta"].get("reasoning_content") or ""
                        for e in events if e.get("choices"))
    finishes = [e["choices"][0].get("finish_reason") for e in events if e.get("choices")]
    check(st == 200 and ok and content == choice["message"]["content"] and
          reasoning == (choice["message"].get("reasoning_content") or "") and
          finishes[-1] == choice["finish_reason"],
          "the stream gives the same answer (%r / %r, %s)" %
          (content, choice.get("message", {}).get("content"), finishes[-1:]))

srv.stop()

# A template that cannot show tools refuses them rather than drop them.
plain_model = serverlib.make_model(tmp, name="plain")
srv = serverlib.Server(tmp, "plain", plain_model, ["-c", "512"])
st, _, doc, raw = srv.post("/v1/chat/completions", {
    "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1,
    "tools": [{"type": "function", "function": {"name": "f"}}]})
check(st == 400 and b"tool definitions" in raw, "a template without tools: 400 (%s: %s)" %
      (st, raw[:300]))
st, _, doc, raw = srv.post("/v1/chat/completions", {
    "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1, "tools": []})
check(st == 200, "... but an empty list is fine (%s)" % raw[:200])
srv.stop()
checks.finish()
