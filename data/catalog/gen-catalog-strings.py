#!/usr/bin/env python3
"""Writes data/catalog/catalog-strings.h, the catalog's user-visible words as
N_() strings, so that xgettext (po/POTFILES.in) finds them: it cannot read
models.json itself. The header is checked in and compiled into nothing; the
app and tern-cli translate the catalog's English words when they show them
(tern_catalog_text), and the file on disk stays English (docs/TRANSLATING.md).

Translated: every family's and every tag's description, and the tag labels
that say more than a model's name ("Gemma 3 4B (vision)", "Gemma 4 E2B
flash, MTP speculation": a '(' or a ','). Names, sizes, package labels and
licence names are not.

usage: gen-catalog-strings.py [--check] MODELS_JSON HEADER
  without --check: writes HEADER;
  --check: exits 1, saying what to run, when HEADER is not what it would write."""
import json
import os
import sys


def c_string(s):
    out = []
    for ch in s:
        if ch in '"\\':
            out.append('\\' + ch)
        elif ch == '\n':
            out.append('\\n')
        elif ord(ch) < 0x20:
            out.append('\\%03o' % ord(ch))
        else:
            out.append(ch)
    return '"' + ''.join(out) + '"'


def comment_safe(s):
    # A tag or family id ends up in a comment: no "*/" may close it early.
    return s.replace('*/', '* /')


def label_has_words(label):
    return '(' in label or ',' in label


def entries(catalog):
    """(translator comment, English text) in the file's order, each text once."""
    seen = set()
    out = []

    def add(comment, text):
        if isinstance(text, str) and text.strip() and text not in seen:
            seen.add(text)
            out.append((comment, text))

    for family in catalog.get('families', []):
        fid = comment_safe(str(family.get('id', '')))
        add(f'the description of the model family {fid} (models.json); '
            'keep names, sizes and licence names as they are', family.get('description'))
        for tag in family.get('tags', []):
            name = comment_safe(str(tag.get('tag', '')))
            label = tag.get('label')
            if isinstance(label, str) and label_has_words(label):
                add(f'the name of the model {name} (models.json); translate only the words '
                    'after the model\'s name', label)
            add(f'the description of the model {name} (models.json); keep names, sizes, '
                'tags and licence names as they are', tag.get('description'))
    return out


def render(catalog):
    lines = [
        '/* Generated from data/catalog/models.json by data/catalog/gen-catalog-strings.py:',
        ' * do not edit. After changing the catalog\'s words, run',
        ' *   python3 data/catalog/gen-catalog-strings.py data/catalog/models.json data/catalog/catalog-strings.h',
        ' * and translate the new entries (docs/TRANSLATING.md). Only xgettext reads',
        ' * this file: the app and tern-cli look the words up when they show them. */',
        '',
        'static const char *const tern_catalog_strings[] = {',
    ]
    for comment, text in entries(catalog):
        lines.append(f'  /* Translators: {comment} */')
        lines.append(f'  N_({c_string(text)}),')
    lines.append('};')
    return '\n'.join(lines) + '\n'


def main(argv):
    check = '--check' in argv
    args = [a for a in argv if a != '--check']
    if len(args) != 2:
        print(__doc__.strip().split('\n\n')[-1], file=sys.stderr)
        return 2
    with open(args[0], encoding='utf-8') as f:
        text = render(json.load(f))
    if check:
        try:
            with open(args[1], encoding='utf-8') as f:
                current = f.read()
        except OSError as e:
            current = None
            print(f'{args[1]}: {e.strerror}', file=sys.stderr)
        header, catalog = os.path.normpath(args[1]), os.path.normpath(args[0])
        if current != text:
            print(f'FAIL: {header} is not what {catalog} gives: in the source tree, run\n'
                  '  python3 data/catalog/gen-catalog-strings.py data/catalog/models.json '
                  'data/catalog/catalog-strings.h\n'
                  'and translate its new entries in po/ (docs/TRANSLATING.md)', file=sys.stderr)
            return 1
        print(f'ok: {header} matches {catalog}')
        return 0
    with open(args[1], 'w', encoding='utf-8') as f:
        f.write(text)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
