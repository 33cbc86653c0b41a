#!/usr/bin/env python3
"""Greeting-card printer: the example of `slice diff` and the other views (docs/views.md).

Usage: python3 views_demo.py [--emoji] TEXT
       python3 views_demo.py [--emoji] --file PATH

Prints TEXT (or the text of the file PATH) in a box. `--emoji` turns `:smile:`, `:heart:` and
`:star:` into emoji. That works for TEXT given as an argument but not for text read from a
file: `render_file` does not pass the option on. This is the planted "works here, fails there"
difference that `slice diff` finds:

    trace run -o arg.d  -- python3 views_demo.py --emoji "hello :smile:"
    trace run -o file.d -- python3 views_demo.py --emoji --file card.txt
    slice diff arg.d file.d

Deterministic, no imports besides `sys`, no comprehensions or generators, so every call of a
function of this file is one call event (the end-to-end tests count them).
"""

import sys

EMOJI = {"smile": "\U0001F604", "heart": "\u2764", "star": "\u2B50"}


def replace_code(word):
    if len(word) > 2 and word.startswith(":") and word.endswith(":"):
        return EMOJI.get(word[1:-1], word)
    return word


def emojize(text):
    out = []
    for word in text.split(" "):
        out.append(replace_code(word))
    return " ".join(out)


def border(width):
    return "+" + "-" * (width + 2) + "+"


def frame(text):
    line = border(len(text))
    return "\n".join([line, "| " + text + " |", line])


def decorate(text, emoji):
    if emoji:
        text = emojize(text)
    return frame(text)


def read_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read().strip()


def render_file(path, emoji):
    # The bug: `emoji` is not passed on, so files never get their codes replaced.
    return frame(read_text(path))


def parse_args(args):
    opts = {"emoji": False, "file": None, "text": ""}
    i = 0
    while i < len(args):
        if args[i] == "--emoji":
            opts["emoji"] = True
        elif args[i] == "--file" and i + 1 < len(args):
            i += 1
            opts["file"] = args[i]
        else:
            opts["text"] = args[i]
        i += 1
    return opts


def main(argv):
    opts = parse_args(argv[1:])
    if opts["file"]:
        card = render_file(opts["file"], opts["emoji"])
    else:
        card = decorate(opts["text"], opts["emoji"])
    print(card)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
