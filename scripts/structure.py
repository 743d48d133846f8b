#!/usr/bin/env python3
"""Fails when a source file or a function is too long to read at once.

usage: scripts/structure.py [--max-file 500] [--max-fn 60] DIR…

For every `.rs` file under the DIRs that is not a test (`tests/`,
`benches/`, `*tests.rs`), the code before its `#[cfg(test)]` module:
at most --max-file lines, and each `fn` body (signature to closing
brace) at most --max-fn lines. Prints each offender with its length;
exit status 1 if there is any.
"""
import argparse, os, re, sys

FN = re.compile(r'^\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+(\w+)')


def code_lines(text):
    """The lines before the test module, with strings and comments blanked
    (so braces inside them do not count)."""
    text = text.split('\n#[cfg(test)]')[0]
    out = []
    in_block = False
    for line in text.split('\n'):
        s = line
        if in_block:
            if '*/' in s:
                s = s[s.index('*/') + 2:]
                in_block = False
            else:
                out.append(('', line))
                continue
        s = re.sub(r'"(?:\\.|[^"\\])*"', '""', s)
        s = re.sub(r"'(?:\\.|[^'\\])'", "''", s)
        s = s.split('//')[0]
        if '/*' in s:
            in_block = '*/' not in s[s.index('/*'):]
            s = s[:s.index('/*')]
        out.append((s, line))
    return out


def long_fns(lines, limit):
    for i, (code, _) in enumerate(lines):
        m = FN.match(code)
        if not m:
            continue
        depth, opened = 0, False
        for j in range(i, len(lines)):
            c = lines[j][0]
            if not opened and ';' in c and '{' not in c:
                break  # a declaration without a body
            depth += c.count('{') - c.count('}')
            opened = opened or '{' in c
            if opened and depth <= 0:
                if j - i + 1 > limit:
                    yield m.group(1), i + 1, j - i + 1
                break


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--max-file', type=int, default=500)
    ap.add_argument('--max-fn', type=int, default=60)
    ap.add_argument('dirs', nargs='+')
    a = ap.parse_args()
    bad = 0
    for root in a.dirs:
        for dp, _, fns in os.walk(root):
            if re.search(r'/(tests|benches)(/|$)', dp):
                continue
            for fn in sorted(fns):
                if not fn.endswith('.rs') or fn.endswith('tests.rs'):
                    continue
                p = os.path.join(dp, fn)
                lines = code_lines(open(p).read())
                if len(lines) > a.max_file:
                    print(f'{p}: {len(lines)} lines (at most {a.max_file})')
                    bad += 1
                for name, at, n in long_fns(lines, a.max_fn):
                    print(f'{p}:{at}: fn {name} is {n} lines (at most {a.max_fn})')
                    bad += 1
    if bad:
        sys.exit(1)
    print(f'no file over {a.max_file} lines, no function over {a.max_fn}')


main()
