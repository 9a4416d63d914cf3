"""The DSN of the PostgreSQL backend: parsed once, shown without its password, and its secrets
handed to whoever redacts them.

psycopg (the ``postgres`` extra) is imported on first use, so ``trio_agent.persistence`` imports
without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, final

import attrs

from ._errors import PersistenceError

if TYPE_CHECKING:
    import types

__all__ = ["DEFAULT_APPLICATION_NAME", "PostgresDsn", "import_psycopg"]

#: The ``application_name`` of trio-agent's connections when the DSN names none.
DEFAULT_APPLICATION_NAME = "trio-agent"

#: Connection parameters whose values are secrets.
_SECRET_KEYS = ("password", "sslpassword")


def import_psycopg() -> types.ModuleType:
    """``psycopg``, or a clear error naming the extra that installs it."""
    try:
        import psycopg
        import psycopg_pool  # noqa: F401  (the backend needs both)
    except ImportError as exc:
        raise PersistenceError(
            f"the PostgreSQL backend needs psycopg 3 and psycopg-pool ({exc}); install them with "
            "pip install 'trio-agent[postgres]'"
        ) from None
    return psycopg


@final
@attrs.frozen(repr=False, eq=False)
class PostgresDsn:
    """A parsed PostgreSQL DSN (a ``postgresql://`` URL or ``key=value`` pairs).

    ``conninfo`` is what psycopg connects with (it holds the password: never show it);
    ``display`` names the server and database without it, for messages and ``repr``.
    """

    conninfo: str
    display: str
    application_name: str
    #: The secret values in the DSN (its password), for :meth:`scrub` and for redactors.
    secrets: tuple[str, ...]

    def __repr__(self) -> str:
        return f"PostgresDsn({self.display!r})"

    @classmethod
    def parse(cls, dsn: str) -> PostgresDsn:
        """Parse ``dsn``; a DSN without ``application_name`` gets ``trio-agent``.

        Raises:
            PersistenceError: the DSN is not a string or cannot be parsed (the message never
                quotes it: it may hold a password), or psycopg is not installed.
        """
        if not isinstance(dsn, str) or not dsn.strip():
            raise PersistenceError(
                "the PostgreSQL DSN must be a non-empty string such as "
                "postgresql://user:password@host:5432/dbname"
            )
        import_psycopg()
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        try:
            params: dict[str, Any] = conninfo_to_dict(dsn)
        except Exception:
            # libpq quotes the offending part of the string, which may be the password.
            raise PersistenceError(
                "cannot parse the PostgreSQL DSN; expected a URL "
                "postgresql://user:password@host:5432/dbname or key=value pairs "
                "(host=... dbname=... user=...); special characters in a URL's password must be "
                "percent-encoded"
            ) from None
        name = str(params.get("application_name") or DEFAULT_APPLICATION_NAME)
        params["application_name"] = name
        secrets = tuple(str(params[key]) for key in _SECRET_KEYS if params.get(key))
        user = params.get("user")
        host = params.get("host") or params.get("hostaddr") or "localhost"
        port = params.get("port")
        where = f"{user}@{host}" if user else str(host)
        display = f"postgresql://{where}{f':{port}' if port else ''}/{params.get('dbname') or ''}"
        return cls(make_conninfo("", **params), display, name, secrets)

    def scrub(self, text: str) -> str:
        """``text`` with every secret of this DSN replaced by ``***`` (for error messages that
        quote a driver's text). Secrets under four characters are left alone, as everywhere in
        trio-agent: they would mask ordinary words."""
        for secret in self.secrets:
            if len(secret) >= 4:
                text = text.replace(secret, "***")
        return text
