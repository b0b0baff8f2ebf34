#!/usr/bin/env python3
"""Fails when a function in the given C++ files or folders is longer than --max lines.

A function over 80 lines is one a reader cannot hold at once (issue 16, item 5, for the examples;
issue 49, item 3, for the rest), so ctest runs this over the whole source tree (test
function_length), CUDA files included.

A function is counted from the first line of its signature (a template line included) to its
closing brace. It is found by a brace-matching scan, with comments, string and character
literals and preprocessor lines blanked first: a `{` opens a function body when what precedes it
ends like a parameter list (`...)`, optionally with const, noexcept, override, a trailing return
type or a constructor's initialisers) or a lambda capture (`[&]`), and the name before that
parameter list is not if, for, while, switch or catch. Lambdas count as functions of their own, and
within the function that holds them. No compiler is needed, so it runs in every build.

usage: check-function-length.py [--max N] [--allow FILE]... PATH...
  A folder stands for its .h, .hpp, .cpp, .cc, .cu and .cuh files, below it at any depth, leaving
  out hidden folders (.git, .venv) and build trees (a folder holding a CMakeCache.txt): generated
  sources are not ours to split. An --allow file's long functions are listed but do not fail the
  check; an --allow file with none over the limit, or not among the files checked, fails it, so
  that the list is emptied as soon as its files are split.
"""

import argparse
import os
import re
import sys

CONTROL = {"if", "for", "while", "switch", "catch", "constexpr", "return", "sizeof", "decltype", "alignof"}
QUALIFIERS = r"(?:\s*(?:const|volatile|noexcept(?:\s*\([^()]*\))?|override|final|mutable|&&|&))*"
TRAILING = r"(?:\s*->\s*[\w:<>,\s*&]+)?"
ENDS_LIKE_PARAMS = re.compile(r"\)" + QUALIFIERS + TRAILING + r"\s*$")
ENDS_LIKE_CAPTURE = re.compile(r"\]\s*(?:mutable)?" + TRAILING + r"\s*$")
ATTRIBUTE_WITH_ARGS = re.compile(r"\b(?:__launch_bounds__|__attribute__|alignas)\s*\((?:[^()]|\([^()]*\))*\)")
ACCESS = re.compile(r"^\s*(?:public|private|protected)\s*:")


def blank(text):
    """The text with comments, literals and preprocessor lines replaced by spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c == "#":
            # A preprocessor line, with its continuations.
            while i < n and not (text[i] == "\n" and text[i - 1] != "\\"):
                out.append("\n" if text[i] == "\n" else " ")
                i += 1
            continue
        if c == "/" and text.startswith("//", i):
            while i < n and text[i] != "\n":
                out.append(" ")
                i += 1
            continue
        if c == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.extend("\n" if ch == "\n" else " " for ch in text[i:end])
            i = end
            continue
        raw = re.match(r'R"([^(\s]*)\(', text[i:i + 20]) if c == "R" else None
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = text.find(")" + raw.group(1) + '"', i)
            end = n if end < 0 else end + len(raw.group(1)) + 2
            out.extend("\n" if ch == "\n" else " " for ch in text[i:end])
            i = end
            continue
        if c in "\"'":
            # A digit separator (1'000) is not a character literal.
            if c == "'" and i > 0 and text[i - 1].isalnum() and i + 1 < n and text[i + 1].isalnum():
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.extend(" " for _ in text[i:j + 1])
            i = j + 1
            continue
        if c == "\n":
            at_line_start = True
        elif not c.isspace():
            at_line_start = False
        out.append(c)
        i += 1
    return "".join(out)


def name_before_params(head):
    """The name of what `head` declares: the identifier before its first parenthesis ("]" for a
    lambda), so that a constructor is named, not its last member initialiser. Attributes with
    arguments before the name (a kernel's __launch_bounds__(256)) are not the name."""
    head = ATTRIBUTE_WITH_ARGS.sub(" ", head)
    k = head.find("(")
    m = re.search(r"([\w~]+|\])\s*(?:<[^<>]*>)?\s*$", head[:k]) if k >= 0 else None
    return m.group(1) if m else ""


def functions(text):
    """(name, first line, last line) of every function body in `text` (already blanked)."""
    found = []
    stack = []  # per open brace: (function name or None, first line, the parentheses open outside it)
    head_start = 0
    line_of = [0] * (len(text) + 1)
    line = 1
    for k, ch in enumerate(text):
        line_of[k] = line
        if ch == "\n":
            line += 1
    parens = 0  # open parentheses since the innermost open brace (a for's `;` is not a statement's end)
    for k, ch in enumerate(text):
        if ch == "(":
            parens += 1
        elif ch == ")":
            parens -= 1
        elif ch == "{":
            head = text[head_start:k]
            access = ACCESS.match(head)
            if access:
                head_start += access.end()
                head = text[head_start:k]
            name = None
            if ENDS_LIKE_PARAMS.search(head):
                name = name_before_params(head.rstrip())
                if name in CONTROL:
                    name = None
                elif name == "]":
                    name = "lambda"
            elif ENDS_LIKE_CAPTURE.search(head):
                name = "lambda"
            first = head_start + (len(head) - len(head.lstrip()))
            stack.append((name, line_of[first], parens))
            parens = 0
            head_start = k + 1
        elif ch == "}":
            name = None
            if stack:
                name, first, parens = stack.pop()
                if name is not None:
                    found.append((name, first, line_of[k]))
            # Braces inside parentheses that are no body (a default argument's `= {}`) belong to
            # the head around them.
            if name is not None or parens == 0:
                head_start = k + 1
        elif ch == ";" and parens == 0:
            head_start = k + 1
    return found


SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh")


def sources(paths):
    for p in paths:
        if not os.path.isdir(p):
            yield p
            continue
        for root, dirs, files in os.walk(p):
            # A build tree holds generated sources (protobuf's, CMake's probes); hidden folders hold
            # the repository's and the virtual environment's files. Neither is source of ours.
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and
                             not os.path.exists(os.path.join(root, d, "CMakeCache.txt")))
            for f in sorted(files):
                if f.endswith(SOURCE_SUFFIXES):
                    yield os.path.join(root, f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max", type=int, default=80, help="the most lines a function may have (default 80)")
    parser.add_argument("--allow", action="append", default=[], metavar="FILE",
                        help="a file whose long functions are listed but allowed (its owner is splitting them)")
    parser.add_argument("paths", nargs="+")
    args = parser.parse_args()
    allowed = {os.path.realpath(a): 0 for a in args.allow}  # file -> its functions over the limit
    seen = set()
    too_long, files, count = 0, 0, 0
    for path in sources(args.paths):
        try:
            with open(path, encoding="utf-8") as f:
                text = blank(f.read())
        except OSError as e:
            print(f"check-function-length: cannot read {path}: {e.strerror}", file=sys.stderr)
            return 2
        files += 1
        real = os.path.realpath(path)
        seen.add(real)
        for name, first, last in functions(text):
            count += 1
            lines = last - first + 1
            if lines <= args.max:
                continue
            if real in allowed:
                allowed[real] += 1
                print(f"{path}:{first}: {name} is {lines} lines (allowed for now: --allow {path})")
            else:
                print(f"{path}:{first}: {name} is {lines} lines (at most {args.max})", file=sys.stderr)
                too_long += 1
    stale = 0
    for real, over in allowed.items():
        if real not in seen:
            print(f"check-function-length: --allow {real} is not among the files checked", file=sys.stderr)
            stale += 1
        elif over == 0:
            print(f"check-function-length: --allow {real} has no function over {args.max} lines any more: "
                  "take it off the allow-list", file=sys.stderr)
            stale += 1
    print(f"function length: {files} files, {count} functions, {too_long} over {args.max} lines"
          + (f", {sum(allowed.values())} more allowed in {len(allowed)} files" if allowed else ""))
    return 1 if too_long or stale or files == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
