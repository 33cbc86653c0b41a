"""Scoring shared by every method of the evaluation: functions extracted with `ast`, and the
state of a function in a prompt (whole, signature, name only, absent), decided on the prompt's
text so that our prompt and the static retrievers' prompts are judged by one rule.

Plain Python 3.9+ standard library: `python3 eval/test_scoring.py` tests it.
"""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass, field

WHOLE, SIGNATURE, NAME, ABSENT = "whole", "signature", "name", "absent"
# Not whole, but the function's block shows every line the fix changed (a prompt that shows
# the code that ran, its other statements elided): scored beside "whole", never as it.
FIX_SHOWN = "fix shown"
LETTER = {WHOLE: "W", FIX_SHOWN: "L", SIGNATURE: "S", NAME: "N", ABSENT: "-"}


@dataclass
class Func:
    """One function or method of a source file, with its whole text (decorators included)."""

    qualname: str
    file: str  # absolute path
    rel: str  # path relative to site-packages (or the input directory)
    line: int  # the `def` line
    start: int  # first line (decorators included)
    end: int
    code: str  # the source lines start..end, as in the file
    header: str  # the `def` line(s) up to the body
    norm_code: str = field(default="", repr=False)
    norm_header: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        self.norm_code = norm(self.code)
        self.norm_header = norm(self.header)


def norm(text: str) -> str:
    """Lines stripped of surrounding white space, blank lines dropped: a function printed
    dedented, re-indented or with other blank-line spacing still matches its file text."""
    return "\n".join(s for s in (line.strip() for line in text.splitlines()) if s)


def functions_of(path: str, rel: str, text: str | None = None) -> list[Func]:
    """Every function and method of a Python file (functions nested in a function are part of
    their parent's text and not listed on their own). Unparsable files give nothing."""
    if text is None:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            return []
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    lines = text.splitlines()
    out: list[Func] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                end = node.end_lineno or node.lineno
                first_body = node.body[0].lineno if node.body else node.lineno
                header_end = max(node.lineno, first_body - 1)
                header_lines = [
                    ln for ln in lines[node.lineno - 1 : header_end] if not ln.strip().startswith("#")
                ]
                out.append(
                    Func(
                        qualname=prefix + node.name,
                        file=path,
                        rel=rel,
                        line=node.lineno,
                        start=start,
                        end=end,
                        code="\n".join(lines[start - 1 : end]),
                        header="\n".join(header_lines),
                    )
                )
            elif isinstance(node, (ast.If, ast.Try)):
                # Conditional definitions at module or class level (`if TYPE_CHECKING:`, `try:`).
                for part in ("body", "orelse", "finalbody"):
                    visit(getattr(node, part, []) or [], prefix)
                for h in getattr(node, "handlers", []) or []:
                    visit(h.body, prefix)

    visit(tree.body, "")
    return out


def fix_lines(buggy: str, fixed: str) -> list[str]:
    """The lines of a function's buggy text that its fixed text changed, stripped: those the fix
    removed or replaced, and where it only inserted, the nearest code line before the insertion
    (where the missing code goes). Blank and comment lines are left out; each line once."""
    a = buggy.splitlines()
    sm = difflib.SequenceMatcher(None, [x.strip() for x in a], [x.strip() for x in fixed.splitlines()], autojunk=False)

    def code(i: int) -> str:
        t = a[i].strip()
        return "" if t.startswith("#") else t

    out: list[str] = []
    for tag, i1, i2, _, _ in sm.get_opcodes():
        if tag == "equal":
            continue
        if i2 > i1:
            picked = [code(i) for i in range(i1, i2)]
        else:
            before = [code(i) for i in range(i1 - 1, -1, -1)]
            picked = [next((t for t in before if t), "")]
        out.extend(t for t in picked if t and t not in out)
    return out


def name_pattern(qualname: str) -> re.Pattern[str]:
    """The qualified name as a whole word (`Table._render`, `render_csv`)."""
    return re.compile(r"(?<![\w.])" + re.escape(qualname) + r"(?!\w)")


class Prompt:
    """A prompt's text prepared for scoring."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.norm = "\n" + norm(text) + "\n"

    def has_whole(self, f: Func) -> bool:
        return bool(f.norm_code) and ("\n" + f.norm_code + "\n") in self.norm

    def block(self, qualname: str) -> list[str] | None:
        """The stripped lines of the source block headed by the function's name (`#### \`name\``
        or `### \`name\``), up to its closing fence; None when the prompt has no such block."""
        lines = self.text.splitlines()
        head = re.compile(r"^#{3,4} `" + re.escape(qualname) + "`")
        at = next((i for i, ln in enumerate(lines) if head.match(ln)), None)
        if at is None:
            return None
        opened = next((i for i in range(at + 1, len(lines)) if lines[i].startswith("```")), None)
        if opened is None:
            return None
        body: list[str] = []
        for ln in lines[opened + 1 :]:
            if ln.startswith("```"):
                break
            body.append(ln.strip())
        return body

    def state(self, f: Func, fix: list[str] | None = None) -> str:
        """Whole, or else with `fix` (the fix's lines, `fix_lines`) all in its block: FIX_SHOWN."""
        if self.has_whole(f):
            return WHOLE
        block = self.block(f.qualname) if fix else None
        if block is not None and all(t in block for t in fix or []):
            return FIX_SHOWN
        named = name_pattern(f.qualname).search(self.text) is not None
        if f.norm_header and ("\n" + f.norm_header + "\n") in self.norm and named:
            return SIGNATURE
        if named:
            return NAME
        return ABSENT


# Words that say nothing about code; dropped from questions and documents for BM25.
STOP = set(
    """a an the is are was were be been being how what where which who why when does do did
    of in to and or for with on at by as from it its this that these those i my me we our you
    your can could should would will shall may might there here into than then so if not no
    yes all any some each""".split()
)


def terms(text: str) -> list[str]:
    """Lower-case terms: identifiers split at `_` and camelCase, plus the whole identifier."""
    out: list[str] = []
    for ident in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text):
        parts = re.findall(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+", ident)
        low = ident.lower().strip("_")
        if len(parts) > 1 and low and low not in STOP:
            out.append(low)
        for p in parts:
            p = p.lower()
            if len(p) > 1 and p not in STOP:
                out.append(p)
    return out


class BM25:
    """Okapi BM25 (k1 = 1.5, b = 0.75, the non-negative idf of Lucene)."""

    def __init__(self, docs: list[list[str]], k1: float = 1.5, b: float = 0.75) -> None:
        import math

        self.k1, self.b = k1, b
        self.tf: list[dict[str, int]] = []
        df: dict[str, int] = {}
        for d in docs:
            tf: dict[str, int] = {}
            for t in d:
                tf[t] = tf.get(t, 0) + 1
            self.tf.append(tf)
            for t in tf:
                df[t] = df.get(t, 0) + 1
        self.len = [len(d) for d in docs]
        self.avg = (sum(self.len) / len(docs)) if docs else 1.0
        n = len(docs)
        self.idf = {t: math.log((n - c + 0.5) / (c + 0.5) + 1.0) for t, c in df.items()}

    def scores(self, query: list[str]) -> list[float]:
        out = []
        q = [t for t in dict.fromkeys(query) if t in self.idf]
        for tf, ln in zip(self.tf, self.len):
            s = 0.0
            norm_len = self.k1 * (1 - self.b + self.b * ln / (self.avg or 1.0))
            for t in q:
                f = tf.get(t)
                if f:
                    s += self.idf[t] * f * (self.k1 + 1) / (f + norm_len)
            out.append(s)
        return out

    def rank(self, query: list[str]) -> list[int]:
        s = self.scores(query)
        return sorted(range(len(s)), key=lambda i: (-s[i], i))


def pack(order: list[int], sizes: list[int], room: int) -> list[int]:
    """Greedy top-k: take items in rank order while they fit in `room` tokens; an item too big
    for what is left is skipped and smaller ones after it may still go in."""
    taken, used = [], 0
    for i in order:
        if used + sizes[i] <= room:
            taken.append(i)
            used += sizes[i]
    return taken
