"""Exact totals over the actions table, counted in bounded chunks (the heavy tier)."""
