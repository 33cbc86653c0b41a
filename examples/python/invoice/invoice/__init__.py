"""A small invoicing library: prices from a catalogue, line totals with a bulk discount."""
