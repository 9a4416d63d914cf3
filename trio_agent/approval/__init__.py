"""The approval policy: which tool calls need a yes (``tools.approval`` in the config).

:class:`ApprovalPolicy` is a ``tools/pre-execute`` listener answering ``Allow()``, ``Deny`` or
``Ask(reason)``; the registry then asks the ``approval`` service. See docs/approvals.md.
"""

from __future__ import annotations

from ._policy import EFFECTFUL_BUILTINS as EFFECTFUL_BUILTINS
from ._policy import ApprovalPolicy as ApprovalPolicy

__all__ = ["EFFECTFUL_BUILTINS", "ApprovalPolicy"]
