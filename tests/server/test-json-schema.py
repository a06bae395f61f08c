#!/usr/bin/env python3
"""response_format json_schema (docs/SERVER.md, "Structured output").

- Greedy and sampled answers, streamed or not, chat (single-turn and a
  conversation) and completions: every answer that finishes ("stop") parses
  and is valid against the schema (a validator of the subset written here);
  enough of them finish.
- Speculation asked for: off for the request (no drafts), the answer the same.
- Pydantic's schemas (nested models in $defs, Optional[X] as anyOf, a list
  of a $ref'd model, a recursive tree, a union of two models told apart by
  a "kind" const, Union[int, float], Optional[Union[A, B]]) are taken and
  answered with valid JSON; a $ref outside the schema's $defs, a $ref
  cycle, anyOf branches that cannot be merged (objects that disagree on a
  key, arrays of different items) are 400s that say why; the 1 MiB bound holds for the
  schema as sent (at it: taken; one byte past: a 400).
- Every keyword outside the subset is a 400 naming response_format and the
  keyword; hostile schemas (deep nesting, 100,000 properties, a huge enum,
  wrong types, a top level that is no object) are 400s (or 413 for a body
  over the size bound), never a 500 or a hang; the server exits cleanly.

A tiny random-weight Qwen3-architecture model with the real Qwen3 vocabulary."""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

checks = serverlib.Checks()
check = checks.check
vocab = os.path.join(os.environ.get("TERN_VOCAB_DIR", ""), "qwen3", "tokenizer.json")
if not os.path.isfile(vocab):
    serverlib.cannot_run("no vocabulary at %s (tools/fetch-vocab.sh)" % vocab)

tmp = serverlib.workdir("json-schema")
model = serverlib.make_model(tmp, name="qwen3", vocab=vocab, arch="qwen3")
# A body over 1 MiB, for a schema of 1 MiB and one byte more.
srv = serverlib.Server(tmp, "json-schema", model, ["--max-body", str(4 << 20)])
MESSAGES = [{"role": "user", "content": "Write something."}]


def token_ids(text):
    r = subprocess.run([serverlib.env("TERN_CLI"), "tokenize", "-m", model, "--json", text],
                       capture_output=True, text=True)
    return [t["id"] if isinstance(t, dict) else t for t in json.loads(r.stdout or "[]")]


def rf_of(schema, **extra):
    js = {"name": "answer", "schema": schema, "strict": True}
    js.update(extra)
    return {"type": "json_schema", "json_schema": js}


def post(path="/v1/chat/completions", **extra):
    body = {"max_tokens": 1}
    if path.endswith("chat/completions"):
        body["messages"] = MESSAGES
    else:
        body["prompt"] = "Write something."
    body.update(extra)
    status, _, doc, raw = srv.post(path, body)
    return status, doc if isinstance(doc, dict) else {}, raw


def answer(stream=False, path="/v1/chat/completions", **extra):
    """status, text, finish_reason, raw"""
    body = {"stream": stream}
    body.update(extra)
    if path.endswith("chat/completions"):
        body.setdefault("messages", MESSAGES)
    else:
        body["prompt"] = "Write something."
    status, _, doc, raw = srv.post(path, body)
    if status != 200:
        return status, None, None, raw
    if stream:
        text, finish = "", None
        for e in serverlib.sse_events(raw):
            if e == "[DONE]":
                continue
            ch = json.loads(e)["choices"]
            if ch:
                d = ch[0].get("delta", {})
                text += (d.get("content") if "delta" in ch[0] else ch[0].get("text")) or ""
                finish = ch[0].get("finish_reason") or finish
        return status, text, finish, raw
    c = doc["choices"][0]
    text = c["message"].get("content") if "message" in c else c.get("text")
    return status, text or "", c["finish_reason"], raw


def valid(schema, v, root=None):
    """JSON Schema's meaning of the subset (additionalProperties false)."""
    root = schema if root is None else root
    if "$ref" in schema:
        ref = schema["$ref"]
        if ref == "#":
            return valid(root, v, root)
        table, name = ref[2:].split("/", 1)
        return valid(root[table][name.replace("~1", "/").replace("~0", "~")], v, root)
    if "anyOf" in schema:
        return any(valid(b, v, root) for b in schema["anyOf"])
    if "oneOf" in schema:
        return sum(valid(b, v, root) for b in schema["oneOf"]) == 1
    t = schema.get("type")
    if t is not None:
        kinds = t if isinstance(t, list) else [t]
        ok = False
        for k in kinds:
            ok |= {"object": isinstance(v, dict), "array": isinstance(v, list),
                   "string": isinstance(v, str), "null": v is None,
                   "boolean": isinstance(v, bool),
                   "number": isinstance(v, (int, float)) and not isinstance(v, bool),
                   "integer": (isinstance(v, int) and not isinstance(v, bool)) or
                              (isinstance(v, float) and v.is_integer())}[k]
        if not ok:
            return False

    def same(a, b):
        return type(a) is type(b) and a == b or (
            isinstance(a, (int, float)) and isinstance(b, (int, float)) and
            not isinstance(a, bool) and not isinstance(b, bool) and a == b)
    if "enum" in schema and not any(same(e, v) for e in schema["enum"]):
        return False
    if "const" in schema and not same(schema["const"], v):
        return False
    if isinstance(v, dict):
        props = schema.get("properties", {})
        if any(k not in props or not valid(props[k], x, root) for k, x in v.items()):
            return False
        if any(r not in v for r in schema.get("required", [])):
            return False
    if isinstance(v, list) and not all(valid(schema["items"], x, root) for x in v):
        return False
    return True


def pairs_unique(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("a key twice: %r" % keys)
    return dict(pairs)


SCHEMA = {
    "type": "object",
    "properties": {
        "ok": {"type": "boolean"},
        "n": {"type": "integer"},
        "color": {"enum": ["red", "green", "blue", None, 7]},
        "kind": {"const": "answer"},
        "inner": {"type": "object", "properties": {"x": {"type": ["null", "number"]},
                                                   "y": {"type": "boolean"}},
                  "required": ["x"], "additionalProperties": False},
        "words": {"type": "array", "items": {"enum": ["a", "b"]}},
        "name": {"type": "string"},
    },
    "required": ["ok", "n", "color", "kind", "inner"],
    "additionalProperties": False,
}
# The random model's strings run long: a bias towards '",' and '"}' (which
# close a string value) lets the name close.
closers = {str(i): 30 for i in token_ids('",') + token_ids('"}')}


def judge(what, status, text, finish, raw, schema=SCHEMA):
    if not check(status == 200 and text is not None, "%s: %s %r" % (what, status, raw[:300])):
        return 0
    if finish == "length":
        check(not text.strip() or text.lstrip().startswith("{"),
              "%s: cut short, the start of an object: %r" % (what, text))
        return 0
    check(finish == "stop", "%s: finish_reason %r" % (what, finish))
    try:
        doc = json.loads(text, object_pairs_hook=pairs_unique)
    except ValueError as e:
        check(False, "%s: not JSON (%s): %r" % (what, e, text))
        return 0
    return check(valid(schema, doc), "%s: valid against the schema: %r" % (what, text))


n_valid = 0
for temperature in [0, 1]:
    for seed in [1, 2, 3, 4]:
        for stream in [False, True]:
            what = "temperature %s seed %d%s" % (temperature, seed, " streamed" if stream else "")
            n_valid += judge(what, *answer(stream=stream, max_tokens=400,
                                           response_format=rf_of(SCHEMA),
                                           temperature=temperature, seed=seed,
                                           logit_bias=closers))
        if temperature == 0:
            break
check(n_valid >= 6, "%d answers were whole and valid" % n_valid)

# Conversation path and completions.
n_valid = judge("conversation", *answer(max_tokens=400, response_format=rf_of(SCHEMA),
                                        temperature=1, seed=7, logit_bias=closers,
                                        tern={"single_turn": False}))
n_valid += judge("completions", *answer(path="/v1/completions", max_tokens=400,
                                        response_format=rf_of(SCHEMA), temperature=1, seed=7,
                                        logit_bias=closers))
check(n_valid == 2, "the conversation and completions answers were whole and valid")

# Pydantic's model_json_schema() for nested models with Optional fields and
# a list of a $ref'd model, and for a recursive tree (its top level a $ref).
ORDER = {
    "$defs": {
        "Address": {"properties": {"city": {"title": "City", "type": "string"},
                                   "zip": {"anyOf": [{"type": "string"}, {"type": "null"}],
                                           "default": None, "title": "Zip"}},
                    "required": ["city", "zip"], "title": "Address", "type": "object",
                    "additionalProperties": False},
        "Item": {"properties": {"sku": {"title": "Sku", "type": "string"},
                                "qty": {"title": "Qty", "type": "integer"},
                                "note": {"anyOf": [{"type": "string"}, {"type": "null"}],
                                         "default": None, "title": "Note"}},
                 "required": ["sku", "qty", "note"], "title": "Item", "type": "object",
                 "additionalProperties": False},
    },
    "properties": {
        "id": {"title": "Id", "type": "integer"},
        "ship_to": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}], "default": None},
        "items": {"items": {"$ref": "#/$defs/Item"}, "title": "Items", "type": "array"},
        "paid": {"anyOf": [{"type": "boolean"}, {"type": "null"}], "title": "Paid"},
    },
    "required": ["id", "ship_to", "items", "paid"],
    "title": "Order", "type": "object", "additionalProperties": False,
}
TREE = {
    "$defs": {"Node": {"properties": {"label": {"title": "Label", "type": "string"},
                                      "children": {"items": {"$ref": "#/$defs/Node"},
                                                   "title": "Children", "type": "array"}},
                       "required": ["label", "children"], "title": "Node", "type": "object",
                       "additionalProperties": False}},
    "$ref": "#/$defs/Node",
}
# Pydantic's unions: Union[A, B] of two models told apart by a "kind"
# Literal (no discriminator=, which writes oneOf), Union[int, float], and
# Optional[Union[A, B]].
CAT = {"properties": {"kind": {"const": "cat", "title": "Kind", "type": "string"},
                      "lives": {"title": "Lives", "type": "integer"}},
       "required": ["kind", "lives"], "title": "Cat", "type": "object",
       "additionalProperties": False}
DOG = {"properties": {"kind": {"const": "dog", "title": "Kind", "type": "string"},
                      "name": {"title": "Name", "type": "string"}},
       "required": ["kind", "name"], "title": "Dog", "type": "object",
       "additionalProperties": False}
PET = {"$defs": {"Cat": CAT, "Dog": DOG},
       "properties": {"pet": {"anyOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}],
                              "title": "Pet"}},
       "required": ["pet"], "title": "Owner", "type": "object", "additionalProperties": False}
NUMBER = {"properties": {"x": {"anyOf": [{"type": "integer"}, {"type": "number"}],
                               "title": "X"}},
          "required": ["x"], "title": "M", "type": "object", "additionalProperties": False}
MAYBE_PET = {"$defs": {"Cat": CAT, "Dog": DOG},
             "properties": {"pet": {"anyOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"},
                                              {"type": "null"}],
                                    "default": None, "title": "Pet"}},
             "required": ["pet"], "title": "Owner", "type": "object",
             "additionalProperties": False}
# Field(discriminator="kind"): Pydantic writes oneOf and OpenAPI's
# discriminator, taken as the branches are told apart by "kind".
ONE_PET = {"$defs": {"Cat": CAT, "Dog": DOG},
           "properties": {"pet": {"discriminator": {"mapping": {"cat": "#/$defs/Cat",
                                                                "dog": "#/$defs/Dog"},
                                                    "propertyName": "kind"},
                                  "oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}],
                                  "title": "Pet"}},
           "required": ["pet"], "title": "Owner", "type": "object",
           "additionalProperties": False}
for label, schema in [("Pydantic order", ORDER), ("Pydantic tree", TREE),
                      ("Pydantic union told apart by a Literal", PET),
                      ("Pydantic discriminated union (oneOf)", ONE_PET),
                      ("Union[int, float]", NUMBER), ("Optional[Union[A, B]]", MAYBE_PET)]:
    n_valid = 0
    for seed in range(1, 7):
        for stream in (False, True):
            n_valid += judge("%s seed %d%s" % (label, seed, " streamed" if stream else ""),
                             *answer(stream=stream, max_tokens=600, response_format=rf_of(schema),
                                     temperature=1, seed=seed, logit_bias=closers),
                             schema=schema)
    check(n_valid >= 2, "%s: %d answers were whole and valid" % (label, n_valid))

# Lenient where harmless: no name, strict false (enforced all the same).
for label, rf in [("no name", {"type": "json_schema", "json_schema": {"schema": SCHEMA}}),
                  ("strict false", rf_of(SCHEMA, strict=False))]:
    judge(label, *answer(max_tokens=400, response_format=rf, logit_bias=closers))

# Speculation asked for: off (no drafts), the same answer.
a = answer(max_tokens=120, response_format=rf_of(SCHEMA), logit_bias=closers)
b = answer(max_tokens=120, response_format=rf_of(SCHEMA), logit_bias=closers,
           tern={"speculation": "lookup"})
check(a[0] == 200 and a[1] == b[1] and a[2] == b[2],
      "speculation asked for: the same answer: %r %r" % (a[1], b[1]))
status, doc, raw = post(max_tokens=40, response_format=rf_of(SCHEMA),
                        tern={"speculation": "lookup"})
drafted = doc.get("usage", {}).get("timings", {}).get("drafted_tokens")
check(status == 200 and drafted == 0, "no drafts with json_schema: %s %r" % (status, raw[:300]))

# --- refusals -------------------------------------------------------------------
def refused(label, rf, words=None, statuses=(400,)):
    status, doc, raw = post(response_format=rf)
    param = doc.get("error", {}).get("param")
    msg = doc.get("error", {}).get("message", "")
    ok = status in statuses and (status != 400 or param == "response_format")
    ok = ok and (words is None or status != 400 or words in msg)
    check(ok, "%s: %s naming response_format%s (got %s %r)"
          % (label, statuses, " and %r" % words if words else "", status, raw[:300]))


for kw, val in [("pattern", "^a"), ("format", "date"), ("minLength", 1), ("maxLength", 2),
                ("minimum", 0), ("maximum", 9), ("exclusiveMinimum", 0), ("multipleOf", 2),
                ("minItems", 1), ("maxItems", 3), ("uniqueItems", True),
                ("allOf", []), ("not", {}),
                ("patternProperties", {}), ("minProperties", 1),
                ("if", {}), ("prefixItems", [])]:
    schema = {"type": "object", "properties": {"a": {"type": "string", kw: val}},
              "required": ["a"], "additionalProperties": False}
    refused('"%s"' % kw, rf_of(schema), '"%s" is not supported' % kw)
    msg = post(response_format=rf_of(schema))[1].get("error", {}).get("message", "")
    check(msg.startswith("response_format json_schema: "), "the refusal says where: %r" % msg)

# anyOf and $ref outside what is enforced: 400s that say why.
A_NULL = {"type": "object", "properties": {"a": {"type": "null"}}}
for label, sub, words in [
        ("anyOf empty", {"anyOf": []}, '"anyOf" must be an array of 1 to 8'),
        ("anyOf of objects that disagree on a key",
         {"anyOf": [A_NULL, {"type": "object", "properties": {"a": {"type": "string"}}}]},
         'they differ at "a"'),
        ("anyOf of arrays of different items",
         {"anyOf": [{"type": "array", "items": A_NULL},
                    {"type": "array", "items": {"type": "null"}}]},
         'arrays of different "items"'),
        ("anyOf of integer and a fraction", {"anyOf": [{"type": "integer"}, {"enum": [1.5]}]},
         "meets a number with a fraction"),
        ("anyOf beside type", {"type": "string", "anyOf": [{"type": "string"}]},
         '"type" beside "anyOf"'),
        ("oneOf beside type", {"type": "string", "oneOf": []}, '"type" beside "oneOf"'),
        ("oneOf of overlapping branches", {"oneOf": [{"type": "number"}, {"type": "integer"}]},
         '"oneOf" branches 0 and 1 may both take one value'),
        ("$ref with a broken escape", {"$ref": "#/$defs/a%2"}, "not followed by two hex digits"),
        ("$ref to no definition", {"$ref": "#/$defs/a"}, "names no schema"),
        ("$ref into properties", {"$ref": "#/properties/b"}, "is not supported: only"),
        ("$ref elsewhere", {"$ref": "https://example.com/s.json"}, "is not supported: only"),
        ("$defs not at the top", {"type": "string", "$defs": {}}, "only at the schema's top"),
        ("a number description", {"type": "null", "description": 5},
         '"description" must be a string'),
        ("an array title", {"type": "null", "title": []}, '"title" must be a string')]:
    schema = {"type": "object", "properties": {"a": sub}, "required": ["a"],
              "additionalProperties": False}
    refused(label, rf_of(schema), words)
refused("a $ref cycle", rf_of({"type": "object", "$defs": {"A": {"$ref": "#/$defs/B"},
                                                            "B": {"$ref": "#/$defs/A"}},
                               "properties": {"a": {"$ref": "#/$defs/A"}}}),
        "leads back to itself")
refused("a recursion with no end", rf_of({"type": "object", "properties": {"a": {"$ref": "#"}},
                                          "required": ["a"]}), "no document within 16")

deep = {"type": "null"}
for _ in range(40):
    deep = {"type": "object", "properties": {"a": deep}, "required": ["a"]}
refused("nested 40 deep", rf_of(deep), "deeper")
many = {"type": "object", "properties": {"p%d" % i: {"type": "null"} for i in range(100000)}}
refused("100000 properties", rf_of(many), None, (400, 413))
many = {"type": "object", "properties": {"p%d" % i: {"type": "null"} for i in range(65)}}
refused("65 properties", rf_of(many), "at most 64 properties")
refused("an enum of 100000", rf_of({"type": "object", "properties": {
    "a": {"enum": list(range(100000))}}}), None, (400, 413))
refused("an enum of 2000", rf_of({"type": "object", "properties": {
    "a": {"enum": list(range(2000))}}}), "\"enum\" must be")
for label, schema in [("a string schema", "x"), ("a number schema", 5), ("an array schema", []),
                      ("a null schema", None), ("a string top level", {"type": "string"}),
                      ("an empty schema", {}), ("an unknown type", {"type": "float"}),
                      ("additionalProperties true", {"type": "object",
                                                     "additionalProperties": True}),
                      ("required not in properties", {"type": "object", "required": ["a"]}),
                      ("an array without items", {"type": "object", "properties": {
                          "a": {"type": "array"}}})]:
    refused(label, rf_of(schema))
for label, rf in [("no json_schema", {"type": "json_schema"}),
                  ("json_schema a string", {"type": "json_schema", "json_schema": "x"}),
                  ("no schema", {"type": "json_schema", "json_schema": {"name": "x"}}),
                  ("a number name", rf_of(SCHEMA, name=5)),
                  ("a string strict", rf_of(SCHEMA, strict="yes"))]:
    refused(label, rf)

# The schema reaches the engine as the client wrote it: a repeated key
# (json-glib keeps the last one) is refused, numbers keep their spelling.
def raw_answer(schema_text, stream=False):
    body = ('{"messages":%s,"max_tokens":60,"temperature":0,"stream":%s,"response_format":'
            '{"type":"json_schema","json_schema":{"name":"x","schema":%s}}}'
            % (json.dumps(MESSAGES), json.dumps(stream), schema_text))
    status, _, doc, raw = srv.post("/v1/chat/completions", body.encode())
    if status != 200 or not stream:
        c = (doc or {}).get("choices", [{}])[0] if isinstance(doc, dict) else {}
        return status, (c.get("message") or {}).get("content"), raw
    text = ""
    for e in serverlib.sse_events(raw):
        if e != "[DONE]":
            for ch in json.loads(e)["choices"]:
                text += ch.get("delta", {}).get("content") or ""
    return status, text, raw


for label, text, word in [
        ("a repeated property", '{"type":"object","properties":{"dup_prop":{"type":"string"},'
         '"dup_prop":{"type":"boolean"}},"required":["dup_prop"],"additionalProperties":false}',
         "dup_prop"),
        ("a repeated type", '{"type":"object","type":"object","properties":{}}', "type"),
        ("a repeated type inside", '{"type":"object","properties":{"a":{"type":"string",'
         '"type":"integer"}},"required":["a"]}', "type")]:
    status, _, raw = raw_answer(text)
    err = json.loads(raw).get("error", {}) if status == 400 else {}
    check(status == 400 and err.get("param") == "response_format"
          and '"%s"' % word in err.get("message", ""),
          "%s: 400 naming \"%s\" (got %s %r)" % (label, word, status, raw[:300]))
for stream in (False, True):
    for spelled in ("0.1", "1.10", "1e2", "-0", "1E+2"):
        status, text, raw = raw_answer('{"type":"object","properties":{"a":{"enum":[%s]}},'
                                       '"required":["a"],"additionalProperties":false}' % spelled,
                                       stream)
        check(status == 200 and text is not None and
              "".join(text.split()) == '{"a":%s}' % spelled,
              "enum [%s], stream %s: the answer spells it so (got %s %r)"
              % (spelled, stream, status, (text if text is not None else raw)[:300]))
# Under "integer", 1e2 and 1.0 are integers (JSON Schema: a number whose
# fraction is zero); they are written as the client spelled them.
for spelled in ("1e2", "1.0"):
    status, text, raw = raw_answer('{"type":"object","properties":{"a":{"type":"integer",'
                                   '"enum":[%s, 2.5]}},"required":["a"],'
                                   '"additionalProperties":false}' % spelled)
    check(status == 200 and text is not None and "".join(text.split()) == '{"a":%s}' % spelled,
          "integer enum [%s, 2.5]: %s as given (got %s %r)"
          % (spelled, spelled, status, (text if text is not None else raw)[:300]))

# The schema's size bound, on its text as sent: 1 MiB is taken, one byte
# more refused. The padding is whitespace inside the schema's object.
for size, taken in [(1 << 20, True), ((1 << 20) + 1, False)]:
    head, tail = '{"type":"object",', '"properties":{"a":{"type":"null"}},"required":["a"]}'
    text = head + " " * (size - len(head) - len(tail)) + tail
    status, content, raw = raw_answer(text)
    if taken:
        check(status == 200 and content is not None and
              "".join(content.split()) == '{"a":null}',
              "a schema of %d bytes is taken (got %s %r)" % (size, status, raw[:300]))
    else:
        err = json.loads(raw).get("error", {}) if status == 400 else {}
        check(status == 400 and err.get("param") == "response_format" and
              "is %d bytes; at most %d" % (size, 1 << 20) in err.get("message", ""),
              "a schema of %d bytes is a 400 (got %s %r)" % (size, status, raw[:300]))

# A stop string would cut the object short and still say "stop": refused
# before queuing, whichever member comes first; no stop ([] or null) is fine.
for rf in ({"type": "json_object"}, rf_of(SCHEMA)):
    for stream in (False, True):
        for stop in ([":"], ":", ["x", "}"]):
            for stop_first in (True, False):
                first, second = ('"stop":%s' % json.dumps(stop),
                                 '"response_format":%s' % json.dumps(rf))
                if not stop_first:
                    first, second = second, first
                body = ('{%s,"messages":%s,"max_tokens":4,"stream":%s,%s}'
                        % (first, json.dumps(MESSAGES), json.dumps(stream), second))
                status, _, doc, raw = srv.post("/v1/chat/completions", body.encode())
                err = (doc or {}).get("error", {}) if isinstance(doc, dict) else {}
                check(status == 400 and err.get("param") == "stop",
                      "%s, stream %s, stop %r %s: 400 naming stop (got %s %r)"
                      % (rf["type"], stream, stop, "first" if stop_first else "last", status,
                         raw[:300]))
        for stop in ([], None):
            status, text, finish, raw = answer(stream, response_format=rf, stop=stop,
                                               max_tokens=200, temperature=0)
            check(status == 200 and finish == "stop" and isinstance(json.loads(text), dict),
                  "%s, stream %s, stop %r: a whole object (got %s %r)"
                  % (rf["type"], stream, stop, status, raw[:300]))

check(srv.stop() == 0, "the server exits cleanly: " + srv.stderr()[-500:])
checks.finish()
