"""Size and prose of the checkout this script lives in: how the house reads to its next maintainer.

    python tools/analysis/house_stats.py [--root DIR] [--no-duplicates]

Prints the library lines per top-level package of ``beit_mm`` (physical lines of ``*.py``), the modules over 400 and
over 500 lines, the docstring + comment share of library lines (docstring lines: every line of a module, class or
function docstring, found by ``ast``; comment lines: lines whose first non-blank character is ``#``; the lines that
carry a trailing comment are printed beside), the functions whose docstring has more lines than their code (the
non-blank lines from ``def`` to the end that are neither docstring nor comment), the config
comment share (non-blank lines of ``configs/**.py`` that carry a ``#`` comment, full-line or trailing, found by
``tokenize``), the test lines (``tests/**.py``) and the pair count of the ``duplicates`` command on PATH.
"""
from __future__ import annotations

import argparse
import ast
import io
import os
import os.path as osp
import re
import shutil
import subprocess
import tokenize

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
DOC_OWNERS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def python_files(folder: str) -> list[str]:
    """Paths of the ``*.py`` files below ``folder``, sorted."""
    found = []
    for parent, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith('.') and d != '__pycache__')
        found.extend(osp.join(parent, f) for f in sorted(files) if f.endswith('.py'))
    return found


def _docstring_node(node: ast.AST) -> ast.Constant | None:
    body = getattr(node, 'body', None)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[0].value
    return None


def prose_lines(source: str) -> tuple[set[int], set[int], set[int], int]:
    """Line numbers (1-based) of docstrings, full-line comments and trailing comments, and the count of functions
    whose docstring outgrows their code."""
    tree = ast.parse(source)
    lines = source.splitlines()
    comments = {i for i, line in enumerate(lines, 1) if line.lstrip().startswith('#')}
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    trailing = {tok.start[0] for tok in tokens if tok.type == tokenize.COMMENT} - comments
    docs, wordy = set(), 0
    for node in ast.walk(tree):
        if not isinstance(node, DOC_OWNERS) or (doc := _docstring_node(node)) is None:
            continue
        span = set(range(doc.lineno, doc.end_lineno + 1))
        docs |= span
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            code = {i for i in range(node.lineno, node.end_lineno + 1)
                    if lines[i - 1].strip() and i not in comments and i not in span}
            wordy += len(span) > len(code)
    return docs, comments, trailing - docs, wordy


def library_stats(root: str) -> dict:
    """Lines per top-level package, per module, and the prose counts of ``root/beit_mm``."""
    package_root = osp.join(root, 'beit_mm')
    packages, modules = {}, {}
    total = doc_total = comment_total = trailing_total = wordy_total = 0
    for path in python_files(package_root):
        source = open(path, encoding='utf-8').read()
        count = len(source.splitlines())
        rel = osp.relpath(path, root)
        parts = osp.relpath(path, package_root).split(os.sep)
        package = parts[0] if len(parts) > 1 else '(top level)'
        packages[package] = packages.get(package, 0) + count
        modules[rel] = count
        docs, comments, trailing, wordy = prose_lines(source)
        total += count
        doc_total += len(docs)
        comment_total += len(comments - docs)
        trailing_total += len(trailing)
        wordy_total += wordy
    return dict(packages=packages, modules=modules, total=total, docstring=doc_total, comment=comment_total,
                trailing=trailing_total, wordy=wordy_total)


def config_comment_share(root: str) -> tuple[int, int]:
    """(lines carrying a ``#`` comment, non-blank lines) over ``root/configs/**.py``."""
    commented = nonblank = 0
    for path in python_files(osp.join(root, 'configs')):
        source = open(path, encoding='utf-8').read()
        nonblank += sum(1 for line in source.splitlines() if line.strip())
        tokens = tokenize.generate_tokens(io.StringIO(source).readline)
        commented += len({tok.start[0] for tok in tokens if tok.type == tokenize.COMMENT})
    return commented, nonblank


def count_lines(folder: str) -> tuple[int, int]:
    """(files, physical lines) of the ``*.py`` files below ``folder``."""
    files = python_files(folder)
    return len(files), sum(len(open(p, encoding='utf-8').read().splitlines()) for p in files)


def duplicate_pairs(root: str) -> str:
    """The pair count that ``duplicates`` reports for ``root``, or why there is none."""
    command = shutil.which('duplicates')
    if command is None:
        return 'duplicates: not on PATH'
    out = subprocess.run([command, '--repo', root], capture_output=True, text=True, cwd=root).stdout
    first = out.splitlines()[0] if out.strip() else ''
    match = re.match(r'(\d+) pairs', first)
    if match:
        return f'duplicates: {match[1]} pairs ({first})'
    return f'duplicates: 0 pairs ({first})' if first.startswith('no duplicates') else f'duplicates: ? ({first!r})'


def _share(part: int, whole: int) -> str:
    return f'{100 * part / max(whole, 1):.1f}%'


def report(root: str, duplicates: bool = True) -> str:
    """The whole report for the checkout at ``root`` as text."""
    lib = library_stats(root)
    out = [f'library lines ({len(lib["modules"])} modules):']
    width = max(len(p) for p in lib['packages'])
    for package, count in sorted(lib['packages'].items(), key=lambda kv: -kv[1]):
        out.append(f'  {package:<{width}}  {count:>6}')
    out.append(f'  {"total":<{width}}  {lib["total"]:>6}')
    for limit in (400, 500):
        big = sorted(((n, m) for m, n in lib['modules'].items() if n > limit), reverse=True)
        out.append(f'modules over {limit} lines: {len(big)}')
        out.extend(f'  {n:>5}  {m}' for n, m in big)
    prose = lib['docstring'] + lib['comment']
    out.append(f'docstring + comment lines: {prose} of {lib["total"]} = {_share(prose, lib["total"])} '
               f'(docstrings {lib["docstring"]}, comments {lib["comment"]}); with the {lib["trailing"]} lines that '
               f'carry a trailing comment {_share(prose + lib["trailing"], lib["total"])}')
    out.append(f'functions with a docstring longer than their code: {lib["wordy"]}')
    commented, nonblank = config_comment_share(root)
    out.append(f'config lines with a comment: {commented} of {nonblank} non-blank = {_share(commented, nonblank)}')
    files, lines = count_lines(osp.join(root, 'tests'))
    out.append(f'test lines: {lines} ({files} files; {lines / max(lib["total"], 1):.2f}x the library)')
    if duplicates:
        out.append(duplicate_pairs(root))
    return '\n'.join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description='size and prose of a beit_mm checkout')
    parser.add_argument('--root', default=ROOT, help='checkout to measure (default: the one holding this script)')
    parser.add_argument('--no-duplicates', action='store_true', help='skip the duplicates pair count')
    args = parser.parse_args()
    print(report(osp.abspath(args.root), duplicates=not args.no_duplicates))


if __name__ == '__main__':
    main()
