"""memlane inside agent frameworks: one module per framework, each behind its own extra
(docs/frameworks.md). Importing this package imports no framework; each adapter module checks
the installed framework's version when it is imported (:func:`memlane.integrations._base.require`).
"""

from memlane.integrations._base import Memlane, Scope, TurnView, UnsupportedFramework, connect

__all__ = ["Memlane", "Scope", "TurnView", "UnsupportedFramework", "connect"]
