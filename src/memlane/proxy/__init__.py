"""``memlane proxy``: memory for any OpenAI- or Anthropic-compatible client by changing its base
URL (docs/proxy.md). :mod:`.settings` (``[proxy]``, imported by :mod:`memlane.config`: nothing
else is imported here), :mod:`.app` (the ASGI app: routing, limits, forwarding), :mod:`.forward`
(the upstream call with httpx), :mod:`.memory` (the turn model over one request), and one module
per API style: :mod:`.openai_chat`, :mod:`.openai_responses`, :mod:`.anthropic`."""
