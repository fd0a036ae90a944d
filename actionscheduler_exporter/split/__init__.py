"""The exporter's sites split among processes (`processes` in the configuration): the
process that serves HTTP reads one part of the sites, each helper process another, and
joins their families into one answer, so that a large fleet's rounds use more than one
core."""
