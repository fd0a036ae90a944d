"""A scrape: the time budget, the rounds it joins or starts, databases discovered."""
