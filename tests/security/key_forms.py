"""The forms a server could echo a secret in, and the leak check over them (computed here, not
with the redactor's own code, so a gap in the redactor is not hidden by the same gap here)."""

from __future__ import annotations

import base64
import json
import urllib.parse

#: A key with characters that every encoding changes: ``+``, ``/``, ``=`` and ``%``.
SPECIAL_KEY = "sk+Ab/Cd=Ef%2Fgh%25Ij+Kl/Mn=="
#: A piece of one of a secret's forms this long left in a text is a leak.
PIECE = 12


def forms(secret: str) -> dict[str, str]:
    """Every form a server could echo ``secret`` in, by name."""
    escaped = json.dumps(secret)[1:-1]
    return {
        "raw": secret,
        "url-quoted": urllib.parse.quote(secret, safe=""),
        "url-quoted-keep-slash": urllib.parse.quote(secret),
        "url-quoted-plus": urllib.parse.quote_plus(secret),
        "json-escaped": escaped,
        "json-escaped-slash": escaped.replace("/", "\\/"),
        "base64": base64.b64encode(secret.encode()).decode(),
        "urlsafe-base64": base64.urlsafe_b64encode(secret.encode()).decode(),
        "basic-auth": base64.b64encode(f"user:{secret}".encode()).decode(),
    }


def leaks(secret: str, text: str) -> list[str]:
    """The 12-character pieces of any form of ``secret`` found in ``text``."""
    found = []
    for name, form in forms(secret).items():
        core = form.rstrip("=")  # base64 padding does not depend on the secret
        for i in range(len(core) - PIECE + 1):
            if core[i : i + PIECE] in text:
                found.append(f"{name} piece {core[i : i + PIECE]!r}")
    return found
