"""Helpers the tests share: real servers, waiting, the truth from raw rows."""
