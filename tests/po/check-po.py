#!/usr/bin/env python3
"""Checks the translations (po/LINGUAS) against the sources.

usage: check-po.py SOURCE_ROOT [XGETTEXT_ARG...]

For each language: msgfmt --check passes (formats, headers); every entry is
translated (none fuzzy, none empty; every plural form); Plural-Forms has the
language's number of forms; every printf conversion of a msgid is in its
translation, as many times (positions like %2$s may reorder them); and the
msgids are exactly those xgettext finds in po/POTFILES.in today (run afresh
with meson's glib preset and the arguments po/meson.build passes), so a new
or changed string fails until the .po files are updated (ninja tern-update-po)
and translated."""
import os
import re
import subprocess
import sys
import tempfile

# meson's i18n.gettext(preset: 'glib') (mesonbuild/modules/i18n.py).
GLIB_PRESET = [
    '--from-code=UTF-8', '--add-comments',
    '--keyword=_', '--keyword=N_', '--keyword=C_:1c,2', '--keyword=NC_:1c,2',
    '--keyword=g_dcgettext:2', '--keyword=g_dngettext:2,3', '--keyword=g_dpgettext2:2c,3',
    '--flag=N_:1:pass-c-format', '--flag=C_:2:pass-c-format', '--flag=NC_:2:pass-c-format',
    '--flag=g_dngettext:2:pass-c-format', '--flag=g_strdup_printf:1:c-format',
    '--flag=g_string_printf:2:c-format', '--flag=g_string_append_printf:2:c-format',
    '--flag=g_error_new:3:c-format', '--flag=g_set_error:4:c-format',
    '--flag=g_markup_printf_escaped:1:c-format', '--flag=g_log:3:c-format',
    '--flag=g_print:1:c-format', '--flag=g_printerr:1:c-format', '--flag=g_printf:1:c-format',
    '--flag=g_fprintf:2:c-format', '--flag=g_sprintf:2:c-format', '--flag=g_snprintf:3:c-format',
]
NPLURALS = {'de': 2, 'fr': 2, 'es': 2, 'zh_CN': 1}
CONVERSION = re.compile(r"%(?:(\d+)\$)?[-+ #0']*(?:\d+|\*)?(?:\.(?:\d+|\*))?"
                        r"(?:hh|h|ll|l|L|q|j|z|t|<PRI\w+>)?([diouxXeEfFgGaAcsp%]|<PRI\w+>)")


def unquote(parts):
    s = ''.join(parts)
    return re.sub(r'\\(.)', lambda m: {'n': '\n', 't': '\t', 'r': '\r'}.get(m.group(1), m.group(1)), s)


def parse_po(path):
    """Entries as dicts: ctx, id, id_plural, strs (list), flags (set), obsolete."""
    entries = []
    cur = None
    key = None
    with open(path, encoding='utf-8') as f:
        lines = f.read().split('\n')
    for line in lines + ['']:
        obsolete = line.startswith('#~')
        if obsolete:
            line = line[2:].lstrip()
        if not line.strip():
            if cur is not None and 'id' in cur:
                entries.append(cur)
            cur, key = None, None
            continue
        if cur is None:
            cur = {'flags': set(), 'strs': {}, 'obsolete': False, 'parts': {}}
        cur['obsolete'] |= obsolete
        if line.startswith('#,'):
            cur['flags'] |= {x.strip() for x in line[2:].split(',')}
            continue
        if line.startswith('#'):
            continue
        m = re.match(r'(msgctxt|msgid_plural|msgid|msgstr(?:\[(\d+)\])?)\s+(".*")$', line)
        if m:
            key = m.group(1)
            cur['parts'][key] = [m.group(3)[1:-1]]
        elif line.startswith('"') and key:
            cur['parts'][key].append(line[1:-1])
        else:
            raise SystemExit(f'{path}: cannot read line: {line!r}')
        parts = cur['parts']
        cur['ctx'] = unquote(parts['msgctxt']) if 'msgctxt' in parts else None
        if 'msgid' in parts:
            cur['id'] = unquote(parts['msgid'])
        cur['id_plural'] = unquote(parts['msgid_plural']) if 'msgid_plural' in parts else None
        cur['strs'] = [unquote(v) for k, v in sorted(parts.items()) if k.startswith('msgstr')]
    return entries


def conversions(s, is_c_format):
    if not is_c_format:
        return None
    return sorted(m.group(2) if m.group(2) != '%' else '%%' for m in CONVERSION.finditer(s)
                  if m.group(2) != '%')


def main():
    root = sys.argv[1]
    extra = sys.argv[2:]
    po = os.path.join(root, 'po')
    with open(os.path.join(po, 'LINGUAS'), encoding='utf-8') as f:
        langs = [w for l in f if not l.startswith('#') for w in l.split()]
    failures = []
    if not langs:
        failures.append('po/LINGUAS lists no language')
    with open(os.path.join(po, 'POTFILES.in'), encoding='utf-8') as f:
        sources = [l.strip() for l in f if l.strip() and not l.startswith('#')]
    with tempfile.TemporaryDirectory() as tmp:
        pot = os.path.join(tmp, 'tern.pot')
        subprocess.run(['xgettext', *GLIB_PRESET, *extra, '--package-name=tern', '-D', root,
                        '-o', pot, *sources], check=True)
        want = {(e['ctx'], e['id']): e for e in parse_po(pot) if e['id']}
        for lang in langs:
            path = os.path.join(po, lang + '.po')
            if not os.path.exists(path):
                failures.append(f'{lang}: po/{lang}.po is missing')
                continue
            r = subprocess.run(['msgfmt', '--check', '--statistics', '-o', os.devnull, path],
                               capture_output=True, text=True)
            if r.returncode != 0:
                failures.append(f'{lang}: msgfmt --check:\n{r.stderr}')
            stats = r.stderr.strip()
            if 'fuzzy' in stats or 'untranslated' in stats:
                failures.append(f'{lang}: {stats}')
            entries = parse_po(path)
            header = next((e for e in entries if e['id'] == ''), None)
            m = re.search(r'nplurals=(\d+)', header['strs'][0] if header else '')
            if not m or int(m.group(1)) != NPLURALS.get(lang, int(m.group(1)) if m else -1):
                failures.append(f'{lang}: Plural-Forms missing or not nplurals={NPLURALS.get(lang)}')
            have = {}
            for e in entries:
                if e['obsolete'] or e['id'] == '':
                    continue
                have[(e['ctx'], e['id'])] = e
                where = f'{lang}: {e["id"][:60]!r}'
                if 'fuzzy' in e['flags']:
                    failures.append(f'{where}: fuzzy')
                if not e['strs'] or any(s == '' for s in e['strs']):
                    failures.append(f'{where}: not translated')
                    continue
                c_format = 'c-format' in e['flags']
                ids = [e['id']] if e['id_plural'] is None else [e['id'], e['id_plural']]
                want_conv = conversions(e['id'], c_format)
                # A plural form takes the conversions of the singular or of the
                # plural (a language with one form follows the plural).
                allowed = [conversions(x, c_format) for x in ids]
                for i, s in enumerate(e['strs']):
                    got = conversions(s, c_format)
                    if got not in allowed:
                        failures.append(f'{where}: conversions {got} not {want_conv}')
                    for id_ in ids[:1]:
                        if id_.startswith('\n') != s.startswith('\n') or \
                           id_.endswith('\n') != s.endswith('\n'):
                            failures.append(f'{where}: leading/trailing newlines differ')
            missing = [k for k in want if k not in have]
            stale = [k for k in have if k not in want]
            for k in missing:
                failures.append(f'{lang}: msgid not in po/{lang}.po (update it): {k[1][:70]!r}')
            for k in stale:
                failures.append(f'{lang}: msgid no longer in the sources: {k[1][:70]!r}')
            print(f'{lang}: {stats}; {len(missing)} missing, {len(stale)} stale')
    for f in failures:
        print('FAIL:', f)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
