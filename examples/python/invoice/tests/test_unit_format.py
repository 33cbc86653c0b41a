import unittest

from invoice.totals import format_cents, line_total


class FormatTest(unittest.TestCase):
    def setUp(self):
        self.lamp = line_total("lamp", 1)

    def test_lamp(self):
        self.assertEqual(format_cents(self.lamp), "30.50")

    def test_bulk_lamps(self):
        self.assertEqual(format_cents(line_total("lamp", 10)), "274.50")
