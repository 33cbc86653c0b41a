"""Unit tests of the evaluation's scoring: `python3 eval/test_scoring.py` (standard library only)."""

import sys
import textwrap
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scoring import ABSENT, BM25, NAME, SIGNATURE, WHOLE, Prompt, functions_of, pack, terms  # noqa: E402

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


if __name__ == "__main__":
    unittest.main()
