#!/usr/bin/env python3
"""The command examples of README.md and docs/ (their code blocks' `ltctl ...` and
`ltrun ...` lines) against the parsers of the built ltctl and ltrun: each must
be a command line they take, so that the docs never show one they refuse (a
`ltctl drain REASON` where only `--reason` works).

    doc_examples_test.py SOURCE_DIR LTCTL LTRUN

ltctl runs each example against a socket that does not exist: an example it
takes gets as far as connecting ("cannot reach ltd"), one it refuses says why
first. ltrun checks each with --check-args (parse, then exit). Lines that show
a syntax rather than a command ("[options]", "...", "<...>") are left out.
"""

import glob
import os
import re
import shlex
import subprocess
import sys

NOWHERE = "/nonexistent/ltd-doc-examples.sock"


def examples(path):
    """(line number, words) of each ltctl/ltrun command in the file's code blocks."""
    out = []
    in_code = False
    pending = ""
    start = 0
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.lstrip().startswith("```"):
                in_code = not in_code
                pending = ""
                continue
            if not in_code:
                continue
            text = line.rstrip("\n")
            if pending:
                text = pending + " " + text.strip()
            else:
                start = number
            if text.endswith("\\"):
                pending = text[:-1]
                continue
            pending = ""
            text = re.sub(r"(^|\s)#.*$", "", text).strip()  # a comment
            text = re.sub(r"^\$\s+", "", text)  # a prompt
            for segment in re.split(r"\|\||&&|;|\|", text):
                try:
                    words = shlex.split(segment)
                except ValueError:
                    continue
                while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
                    words = words[1:]  # VAR=value before the command
                if not words or os.path.basename(words[0]) not in ("ltctl", "ltrun"):
                    continue
                if any(w in ("...", "…") or w.startswith(("[", "<")) or w.endswith(("]", ">"))
                       or "..." in w for w in words):
                    continue  # a syntax, not a command
                out.append((start, words))
    return out


def refusal(words, ltctl, ltrun):
    """None when the parser takes the command line; else what it said."""
    if os.path.basename(words[0]) == "ltctl":
        # Never a real ltd: an example's own --socket is pointed nowhere too.
        args = list(words[1:])
        for i, w in enumerate(args):
            if i > 0 and args[i - 1] == "--socket":
                args[i] = NOWHERE
            elif w.startswith("--socket="):
                args[i] = "--socket=" + NOWHERE
        r = subprocess.run([ltctl, "--socket", NOWHERE] + args, capture_output=True, text=True,
                           timeout=30, stdin=subprocess.DEVNULL, env=dict(os.environ, LTD_SOCKET=NOWHERE))
        if r.returncode == 0 or "cannot reach ltd at " + NOWHERE in r.stderr:
            return None
        return r.stderr.strip() or "exit code %d" % r.returncode
    r = subprocess.run([ltrun, "--check-args"] + words[1:], capture_output=True, text=True,
                       timeout=30, stdin=subprocess.DEVNULL)
    return None if r.returncode == 0 else (r.stderr.strip() or "exit code %d" % r.returncode)


def main():
    source, ltctl, ltrun = sys.argv[1:4]
    files = [os.path.join(source, "README.md")] + sorted(glob.glob(os.path.join(source, "docs", "*.md")))
    files += sorted(glob.glob(os.path.join(source, "docs", "man", "*.md")))
    checked, bad = 0, []
    for path in files:
        for number, words in examples(path):
            checked += 1
            why = refusal(words, ltctl, ltrun)
            if why is not None:
                bad.append("%s:%d: `%s`: %s" % (os.path.relpath(path, source), number,
                                                  " ".join(words), why))
    for line in bad:
        print("FAIL: " + line)
    print("%d example(s) checked, %d refused" % (checked, len(bad)))
    if checked == 0:
        print("FAIL: no example found: the extractor is broken")
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
