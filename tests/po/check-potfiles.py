#!/usr/bin/env python3
"""Fails when a source file with translatable strings is missing from
po/POTFILES.in (and not deliberately left out in po/POTFILES.skip), or when
POTFILES.in names a file that does not exist.

Translatable: C sources and headers with _( N_( C_( NC_( ngettext(
g_dngettext( g_dgettext( g_dpgettext2( (comments aside), engine sources with
tn_fail(..., "format", ...) or TN_N_("text") (the engine's messages, docs/TRANSLATING.md),
GtkBuilder files with translatable="yes", desktop and AppStream templates
(*.desktop.in, *.metainfo.xml.in) and GSettings schemas with a summary or a
description."""
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..', '..')
DIRS = ['app', 'cli', 'data', 'engine', 'imageio', 'manager', 'server', 'ui']

GETTEXT_CALL = re.compile(r'(?<![\w.>])(_|N_|C_|NC_|ngettext|g_dngettext|g_dgettext|g_dpgettext2)\s*\(\s*["A-Z]')
TN_FAIL = re.compile(r'\b(tn_fail\s*\([^;"]*|TN_N_\s*\(\s*)"')
COMMENT = re.compile(r'/\*.*?\*/|//[^\n]*', re.S)
STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')


def listed(name):
    path = os.path.join(root, 'po', name)
    if not os.path.exists(path):
        return []
    with open(path, encoding='utf-8') as f:
        return [l.strip() for l in f if l.strip() and not l.lstrip().startswith('#')]


def translatable(rel, text):
    if rel.endswith(('.c', '.h')):
        # Comments and the insides of string literals hold no calls.
        code = STRING.sub('""', COMMENT.sub(' ', text))
        if GETTEXT_CALL.search(code):
            return True
        return rel.startswith('engine/') and TN_FAIL.search(code) is not None
    if rel.endswith('.ui'):
        return 'translatable="yes"' in text
    if rel.endswith(('.desktop.in', '.metainfo.xml.in')):
        return True
    if rel.endswith('.gschema.xml'):
        return '<summary' in text or '<description' in text
    return False


def main():
    potfiles = listed('POTFILES.in')
    skip = set(listed('POTFILES.skip'))
    failures = []
    seen = set()
    for rel in potfiles:
        if rel in seen:
            failures.append(f'po/POTFILES.in lists {rel} twice')
        seen.add(rel)
        if not os.path.isfile(os.path.join(root, rel)):
            failures.append(f'po/POTFILES.in lists {rel}, which does not exist')
        if rel in skip:
            failures.append(f'{rel} is in both po/POTFILES.in and po/POTFILES.skip')
    found = []
    for d in DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, d)):
            dirnames.sort()
            for name in sorted(filenames):
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root).replace(os.sep, '/')
                try:
                    with open(path, encoding='utf-8') as f:
                        text = f.read()
                except (UnicodeDecodeError, OSError):
                    continue
                if translatable(rel, text):
                    found.append(rel)
                    if rel not in seen and rel not in skip:
                        failures.append(f'{rel} has translatable strings but is not in po/POTFILES.in '
                                        '(add it, or to po/POTFILES.skip with the reason)')
    for f in failures:
        print('FAIL:', f)
    print(f'{len(found)} files with translatable strings, {len(potfiles)} in POTFILES.in, '
          f'{len(skip)} skipped; {len(failures)} problems')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
