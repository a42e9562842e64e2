"""``memlane serve``: the HTTP API (``/v1``) and the operator's web pages, over one engine.

Imported only by the ``serve`` command (``import memlane`` never loads FastAPI). Build the app
with :func:`memlane.server.app.create_app`; see docs/server.md.
"""
