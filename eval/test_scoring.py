"""Unit tests of the evaluation's scoring: `python3 eval/test_scoring.py` (standard library only)."""

import sys
import textwrap
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scoring import ABSENT, BM25, FIX_SHOWN, NAME, SIGNATURE, WHOLE, Prompt, fix_lines, functions_of, pack, terms  # noqa: E402

SOURCE = textwrap.dedent(
    '''\
    import os

    class Table:
        def __init__(self, box=None):
            self.box = box

        @property
        def size(self):
            """The size."""
            return os.get_terminal_size()

        @size.setter
        def size(self, value):
            self._size = value

        def _render(
            self, console, options
        ) -> "RenderResult":
            # draw the lines
            for row in self.rows:

                yield row

    def render_csv(resource):
        def inner():
            return 1
        return Table(box="HEAVY")

    if True:
        def conditional():
            pass
    '''
)


class FunctionsOf(unittest.TestCase):
    def setUp(self):
        self.funcs = functions_of("/x/rich/table.py", "rich/table.py", SOURCE)
        self.by = {(f.qualname, f.line): f for f in self.funcs}

    def test_qualified_names_and_spans(self):
        names = [(f.qualname, f.line) for f in self.funcs]
        self.assertEqual(
            names,
            [
                ("Table.__init__", 4),
                ("Table.size", 8),
                ("Table.size", 13),
                ("Table._render", 16),
                ("render_csv", 24),
                ("conditional", 30),
            ],
        )
        size = self.by[("Table.size", 8)]
        self.assertEqual(size.start, 7, "decorators belong to the function")
        self.assertTrue(size.code.lstrip().startswith("@property"))
        render = self.by[("Table._render", 16)]
        self.assertEqual(render.header.split("\n")[-1].strip(), ') -> "RenderResult":')
        self.assertNotIn("draw the lines", render.header)


class States(unittest.TestCase):
    def setUp(self):
        self.funcs = {f.qualname: f for f in functions_of("/x/rich/table.py", "rich/table.py", SOURCE)}

    def test_whole_dedented_and_respaced_still_counts(self):
        f = self.funcs["Table._render"]
        shown = textwrap.dedent(f.code).replace("\n\n", "\n")
        p = Prompt(f"#### `Table._render`\n\n```python\n{shown}\n```\n")
        self.assertEqual(p.state(f), WHOLE)

    def test_a_missing_line_is_not_whole(self):
        f = self.funcs["Table._render"]
        cut = "\n".join(line for line in f.code.splitlines() if "yield" not in line)
        self.assertEqual(Prompt(f"Table._render\n{cut}").state(f), SIGNATURE)

    def test_elided_body_is_signature(self):
        f = self.funcs["Table._render"]
        p = Prompt(
            "#### `Table._render` (rich/table.py:16-22)\n```python\n    def _render(\n"
            '        self, console, options\n    ) -> "RenderResult":\n        ...  # body elided\n```\n'
        )
        self.assertEqual(p.state(f), SIGNATURE)

    def test_name_only_and_absent(self):
        f = self.funcs["Table._render"]
        self.assertEqual(Prompt("  Table._render  (rich/table.py:16) [name only]\n").state(f), NAME)
        self.assertEqual(Prompt("  MyTable._render  (x.py:1)\n  Table._render_x\n").state(f), ABSENT)

    def test_a_line_inside_another_line_is_not_a_match(self):
        f = self.funcs["Table.__init__"]
        p = Prompt("def __init__(self, box=None):\n    self.box = box_other\n")
        self.assertNotEqual(p.state(f), WHOLE)


class Retrieval(unittest.TestCase):
    def test_terms_split_identifiers_and_drop_filler(self):
        self.assertEqual(terms("How is get_terminal_size used?"), ["get_terminal_size", "get", "terminal", "size", "used"])
        self.assertEqual(terms("HtmlFormatter"), ["htmlformatter", "html", "formatter"])

    def test_bm25_ranks_the_matching_document_first(self):
        docs = [terms("def render_csv(resource): table"), terms("def parse_args(argv): options"), terms("terminal size width")]
        self.assertEqual(BM25(docs).rank(terms("terminal width"))[0], 2)
        self.assertEqual(BM25(docs).rank(terms("csv table"))[0], 0)

    def test_pack_takes_in_rank_order_and_skips_what_does_not_fit(self):
        self.assertEqual(pack([2, 0, 1, 3], [50, 30, 80, 10], 100), [2, 3])
        self.assertEqual(pack([0, 1], [10, 10], 5), [])



RUST = r"""
/// Docs with a { brace and a fn word.
pub struct Printer<'a, W: Write> { out: &'a mut W, f: fn(u8) -> bool }

impl<'a, W: Write> Printer<'a, W> {
    pub fn new(out: &'a mut W) -> Self {
        let s = "a } brace in a string";
        let c = '{';
        fn helper() {}
        Printer { out, f: |b| b > 0 }
    }
}

impl<W> fmt::Display for Printer<'_, W> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, r#"raw "}" string"#)
    }
}

trait Flag {
    fn name(&self) -> &'static str;
    fn doc(&self) -> &'static str {
        ""
    }
}

macro_rules! make { () => { fn made() {} } }

mod tests {
    fn t() {}
}
"""

C = """
/* a comment with { and a fake(x) { } */
static int
weird_style(int x);

static const char *entry_key(const struct entry *e) { return e->key; }

int main(int argc, char **argv) {
    if (argc) { return "}"[0]; }
    return 0;
}
"""


class NativeFunctions(unittest.TestCase):
    def test_rust_functions_are_named_as_rustc_names_them(self):
        import native

        fs = {f.qualname: f for f in native.rust_functions("/x/lib.rs", "x/src/lib.rs", RUST, ["hexyl"])}
        self.assertEqual(sorted(fs), ["hexyl::Flag::doc", "hexyl::Printer::fmt", "hexyl::Printer::new", "hexyl::tests::t"])
        new = fs["hexyl::Printer::new"]
        self.assertEqual((new.start, new.end), (6, 11))
        self.assertTrue(new.code.startswith("    pub fn new(") and new.code.endswith("    }"))
        self.assertEqual(new.header.strip(), "pub fn new(out: &'a mut W) -> Self {")
        self.assertEqual((fs["hexyl::Printer::fmt"].start, fs["hexyl::Printer::fmt"].end), (15, 17))

    def test_c_functions_start_at_their_name(self):
        import native

        fs = {f.qualname: f for f in native.c_functions("/x/a.c", "a.c", C)}
        self.assertEqual(sorted(fs), ["entry_key", "main"])
        self.assertEqual((fs["main"].start, fs["main"].end), (8, 11))
        self.assertEqual(fs["entry_key"].code, "static const char *entry_key(const struct entry *e) { return e->key; }")

    def test_fix_lines_are_the_changed_lines_or_the_line_before_an_insertion(self):
        buggy = "def f(x):\n    a = g(x)\n    # why\n\n    if a[-1] == m[0]:\n        return 1\n    return a\n"
        changed = buggy.replace("if a[-1] == m[0]:", "if m and a[-1] == m[0]:")
        self.assertEqual(fix_lines(buggy, changed), ["if a[-1] == m[0]:"])
        # Only inserted: the nearest code line before it (not the comment, not the blank).
        inserted = buggy.replace("\n    if a[-1]", "\n    check(a)\n    if a[-1]")
        self.assertEqual(fix_lines(buggy, inserted), ["a = g(x)"])
        # Re-indented lines are the same lines; nothing changed, nothing listed.
        self.assertEqual(fix_lines(buggy, buggy.replace("    ", "  ")), [])

    def test_a_block_showing_the_fix_lines_is_fix_shown_and_one_without_them_is_not(self):
        f = functions_of("/x/t.py", "t.py", SOURCE)
        render = next(x for x in f if x.qualname == "Table._render")
        ran = "#### `Table._render` (t.py:16-22)\n\n```python\n    def _render(\n        self, console, options\n    ) -> \"RenderResult\":\n        ...  # 3 lines not run\n```\n"
        p = Prompt(ran)
        self.assertEqual(p.state(render), SIGNATURE)
        self.assertEqual(p.state(render, ["for row in self.rows:"]), SIGNATURE)
        shown = ran.replace("...  # 3 lines not run", "for row in self.rows:\n            ...  # 1 line not run")
        self.assertEqual(Prompt(shown).state(render, ["for row in self.rows:"]), FIX_SHOWN)
        # The line shown under another function's heading does not count.
        other = shown.replace("#### `Table._render`", "#### `Table.other`")
        self.assertEqual(Prompt(other).state(render, ["for row in self.rows:"]), ABSENT)
        # Whole stays whole.
        whole = "#### `Table._render`\n\n```python\n" + render.code + "\n```\n"
        self.assertEqual(Prompt(whole).state(render, ["for row in self.rows:"]), WHOLE)


if __name__ == "__main__":
    unittest.main()
