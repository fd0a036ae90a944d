"""Producers of a round's samples, all behind one contract (`source.Source`)."""
