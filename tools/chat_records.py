"""What the *-tool-records.py scripts share: jinja2 set up as transformers
sets it up, conversations and tool definitions described once and handed to
a template as llama.cpp's server hands them over, and the C spelling of all
of it for tests/engine/*-tool-records.h.

Not a script: tools/qwen3-tool-records.py, tools/gemma4-tool-records.py and
tools/gptoss-tool-records.py import it (Python puts tools/ on the path).
"""
import datetime
import json

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

S, U, A, T = "system", "user", "assistant", "tool"

# The date Tern puts where a template asks for today's (strftime_now).
DATE = datetime.date(2025, 8, 5)


def environment(transformers_tojson=True):
    """transformers' environment: ImmutableSandboxedEnvironment with
    trim_blocks and lstrip_blocks, loopcontrols, raise_exception, and (unless
    told otherwise) its tojson filter: json.dumps with ensure_ascii=False,
    the keys in their order, nothing HTML-escaped."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                       extensions=[jinja2.ext.loopcontrols])

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    if transformers_tojson:
        env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: DATE.strftime(fmt)
    return env


def load(root, name):
    with open("%s/models/templates/%s" % (root, name), encoding="utf-8") as f:
        return f.read()


def call(name, arguments, id=None):
    return {"id": id, "name": name, "arguments": arguments}


def msg(role, content=None, calls=None, tool_call_id=None, name=None):
    return {"role": role, "content": content, "calls": calls or [],
            "tool_call_id": tool_call_id, "name": name}


def tool(name, description=None, parameters=None):
    """A function declaration as tn_chat_tool holds it: the parameters as
    JSON text (None: not given)."""
    return {"name": name, "description": description, "parameters": parameters}


# Tool definitions the record scripts share: a plain pair, and odd schemas
# (nested objects and arrays, enums of mixed types, unicode, quotes, control
# characters, number spellings, a key given twice, a tool without
# description or parameters, an empty schema, an odd name, spacing).
weather_tool = tool("get_weather", "Get the current weather in a city.",
                    '{"type": "object", "properties": {"city": {"type": "string", '
                    '"description": "The city, e.g. Paris"}, "units": {"type": "string", '
                    '"enum": ["metric", "imperial"]}}, "required": ["city"]}')
time_tool = tool("get_time", "The local time.",
                 '{"type":"object","properties":{"tz":{"type":"string"}},"required":["tz"]}')
weather_tools = [weather_tool, time_tool]

odd_schema = ('{"type": "object", "properties": {'
              '"q": {"type": "string", "description": "say \\"hi\\"\\n\\ttab \\\\ back / '
              '<b>&\'x\' \\u00e9t\\u00e9 \\u65e5\\u672c \\ud83d\\ude00 \u00fcber"}, '
              '"nested": {"type": "object", "properties": {"deep": {"type": "object", '
              '"properties": {"deeper": {"type": "array", "items": {"type": "integer", '
              '"minimum": -0, "maximum": 12345678901234567890123}}}}}, '
              '"required": ["deep"], "additionalProperties": false}, '
              '"mode": {"enum": ["a", "B", "\\u00e7", 1, 2.5, null, true]}, '
              '"nums": {"type": "number", "default": 1.0, "multipleOf": 0.1, '
              '"exclusiveMaximum": 1e20, "minimum": -2.50e3, "tiny": 1.5e-7, "e16": 1E16, '
              '"huge": 1e400}, '
              '"ctl": {"type": "string", "pattern": "^\\\\d+\\u0001\\u001f\\u007f\\b\\f\\r$"}, '
              '"z": {}, "A": [], "dup": 1, "dup": {"type": "boolean"}, '
              '"any": {"anyOf": [{"type": "string"}, {"type": ["integer", "null"]}]}}, '
              '"required": ["q", "nested"], "$defs": {"x": {"type": "string"}}}')
odd_tools = [
    tool("zoo", "Every kind of schema: nested objects, enums, arrays, unicode, quotes.",
         odd_schema),
    tool("bare"),
    tool("no_params", "Takes nothing."),
    tool("empty_params", "", "{}"),
    tool("ns.do-it_2 \u00e9", 'A "quoted" <name>\n\tand lines.',
         ' {\n  "properties" : { "b" : {"type":"string"} , "a" : {"type" : "integer"} },\n'
         '  "type" : "object"\n} '),
]


def openai_tools(tools):
    """The request's "tools" as transformers gets them (apply_chat_template's
    tools=): {"type": "function", "function": {name, description,
    parameters}} in that order, the members not given left out, the schema
    parsed with its key order kept."""
    out = []
    for t in tools:
        fn = {"name": t["name"]}
        if t["description"] is not None:
            fn["description"] = t["description"]
        if t["parameters"] is not None:
            fn["parameters"] = json.loads(t["parameters"])
        out.append({"type": "function", "function": fn})
    return out


def openai_calls(m, parse_arguments=True):
    """An assistant message's tool_calls; the arguments parsed from their
    JSON text (llama.cpp's func_args_not_string) or kept as the string."""
    out = []
    for c in m["calls"]:
        fn = {"name": c["name"]}
        if c["arguments"] is not None:
            fn["arguments"] = json.loads(c["arguments"]) if parse_arguments else c["arguments"]
        tc = {"type": "function", "function": fn}
        if c["id"] is not None:
            tc["id"] = c["id"]
        out.append(tc)
    return out


def openai(messages, parse_arguments=True):
    """The messages as llama.cpp gives them to the template: a null content
    as "" (requires_non_null_content)."""
    out = []
    for m in messages:
        o = {"role": m["role"], "content": m["content"] if m["content"] is not None else ""}
        if m["calls"]:
            o["tool_calls"] = openai_calls(m, parse_arguments)
        if m["tool_call_id"] is not None:
            o["tool_call_id"] = m["tool_call_id"]
        if m["name"] is not None:
            o["name"] = m["name"]
        out.append(o)
    return out


def c_string(s):
    """A C string literal (split every line) for s's UTF-8 bytes."""
    out, col = ['"'], 0
    prev_hex = False
    for b in s.encode("utf-8", "surrogatepass"):
        ch = chr(b)
        if b >= 0x80 or (b < 0x20 and ch not in "\n\t") or b == 0x7f:
            piece = "\\x%02x" % b
            prev_hex = True
        else:
            piece = {"\n": "\\n", "\t": "\\t", '"': '\\"', "\\": "\\\\"}.get(ch, ch)
            if prev_hex and ch in "0123456789abcdefABCDEF":
                piece = '""' + piece
            prev_hex = False
        out.append(piece)
        col += len(piece)
        if col > 72 or ch == "\n":
            out.append('"\n    "')
            col = 0
            prev_hex = False
    out.append('"')
    return "".join(out).replace('\n    ""', "")


def c_opt(s):
    return "NULL" if s is None else c_string(s)


ROLES = {S: "TN_CHAT_ROLE_SYSTEM", U: "TN_CHAT_ROLE_USER", A: "TN_CHAT_ROLE_ASSISTANT",
         T: "TN_CHAT_ROLE_TOOL"}


class Emitter:
    """Prints each conversation's (and tool list's) C arrays once, named
    PREFIX_NAME after the first case that uses it."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.seen = {}
        self.seen_tools = {}

    def messages(self, name, messages):
        key = id(messages)
        if key in self.seen:
            return self.seen[key]
        self.seen[key] = name
        p = self.prefix
        for i, m in enumerate(messages):
            if m["calls"]:
                print("static const tn_chat_tool_call %s_%s_calls%d[] = {" % (p, name, i))
                for c in m["calls"]:
                    print("    {.id = %s, .name = %s,\n     .arguments = %s}," %
                          (c_opt(c["id"]), c_string(c["name"]), c_opt(c["arguments"])))
                print("};")
        print("static const tn_chat_message %s_%s[] = {" % (p, name))
        for i, m in enumerate(messages):
            fields = [".role = " + ROLES[m["role"]], ".content = " + c_opt(m["content"])]
            if m["calls"]:
                fields.append(".tool_calls = %s_%s_calls%d" % (p, name, i))
                fields.append(".n_tool_calls = %d" % len(m["calls"]))
            if m["tool_call_id"] is not None:
                fields.append(".tool_call_id = " + c_string(m["tool_call_id"]))
            if m["name"] is not None:
                fields.append(".name = " + c_string(m["name"]))
            print("    {" + ",\n     ".join(fields) + "},")
        print("};")
        return name

    def tools(self, name, tools):
        """The C array's name for a tool list ("NULL" for none)."""
        if not tools:
            return "NULL"
        key = id(tools)
        if key not in self.seen_tools:
            self.seen_tools[key] = "%s_%s_tools" % (self.prefix, name)
            print("static const tn_chat_tool %s[] = {" % self.seen_tools[key])
            for t in tools:
                print("    {.name = %s,\n     .description = %s,\n     .parameters = %s}," %
                      (c_string(t["name"]), c_opt(t["description"]), c_opt(t["parameters"])))
            print("};")
        return self.seen_tools[key]
