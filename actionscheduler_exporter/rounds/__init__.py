"""Scrape rounds: one bounded round of queries per site, shared by concurrent scrapes."""
