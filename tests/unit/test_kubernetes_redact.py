"""What the Kubernetes client lets through of the API's and an exec plugin's text
(issue 36, item 7 (d)): the gist stays, tokens and control characters do not."""

from __future__ import annotations

import pytest

from actionscheduler_exporter.kubernetes.redact import LIMIT, REDACTED, printable, sanitize

FORBIDDEN = (
    'pods is forbidden: User "system:serviceaccount:shop:exporter" cannot list resource '
    '"pods" in API group "" in the namespace "shop"'
)


def test_the_apis_own_words_stay() -> None:
    assert sanitize(FORBIDDEN) == FORBIDDEN
    assert sanitize('deployments.apps "shop-worker" not found') == (
        'deployments.apps "shop-worker" not found'
    )


@pytest.mark.parametrize(
    "token",
    [
        "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.c2lnbmF0dXJl",  # a service-account JWT
        "k8s-aws-v1.aHR0cHM6Ly9zdHMuYW1hem9uYXdzLmNvbS8_QWN0aW9uPUdldENhbGxlcklkZW50aXR5",
        "ya29.a0AfB_byC8xkYz3Qm9vPq1LrTn5WsXhJdKgEfUiOpAsDfGhJkLzXcVbNm",  # Google OAuth
    ],
)
def test_tokens_are_withheld(token: str) -> None:
    said = sanitize(f"invalid token {token} for user exporter")
    assert said == f"invalid token {REDACTED} for user exporter"


def test_an_authorization_value_and_a_known_secret_are_withheld() -> None:
    assert sanitize("got Authorization: Bearer abcdefgh123") == (
        f"got Authorization: Bearer {REDACTED}"
    )
    assert sanitize("token-1 is wrong", ["token-1"]) == f"{REDACTED} is wrong"


def test_control_characters_cannot_forge_a_line() -> None:
    said = sanitize("denied\n\x1b[31mlevel=info msg=forged\u202e")
    assert "\n" not in said and "\x1b" not in said and "\u202e" not in said
    assert said.startswith("denied [31mlevel=info")
    assert printable("hint\r\nsecond") == "hint second"


def test_long_text_is_cut_and_a_token_split_by_the_cut_is_not_left_in_part() -> None:
    assert len(sanitize("word " * 1000)) == LIMIT
    # 4,000 characters that shrink to one [redacted], then a token cut at 4,096.
    text = "x" * 4000 + " " * 76 + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6"
    assert "A1b2" not in sanitize(text)
