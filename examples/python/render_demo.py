#!/usr/bin/env python3
"""A tiny document renderer that re-enters its dispatcher for nested children, the shape of
rich's Console.render, a visitor or an interpreter loop: render() -> render_table() ->
render() for each cell. Usage: python3 render_demo.py
"""

BORDER = "|"


class Paragraph:
    def __init__(self, text):
        self.text = text


class Table:
    def __init__(self, rows):
        self.rows = rows


class Document:
    def __init__(self, children):
        self.children = children


def render(node):
    """Dispatch on the node's type."""
    if isinstance(node, Document):
        return render_document(node)
    if isinstance(node, Table):
        return render_table(node)
    return render_paragraph(node)


def render_document(doc):
    return "\n".join(render(child) for child in doc.children)


def render_paragraph(p):
    return p.text.strip()


def render_table(table):
    lines = []
    for row in table.rows:
        cells = [render(cell) for cell in row]
        lines.append(draw_row(cells))
    return "\n".join(lines)


def draw_row(cells):
    return BORDER + BORDER.join(f" {c} " for c in cells) + BORDER


def main():
    doc = Document(
        [
            Paragraph("Fruit stock "),
            Table([[Paragraph("apple"), Paragraph("3")], [Paragraph("pear"), Paragraph("12")]]),
        ]
    )
    print(render(doc))


if __name__ == "__main__":
    main()
