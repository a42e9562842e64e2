"""Coding-assistant hooks: ``memlane hook <event>`` for Claude Code and Gemini CLI.

- :mod:`memlane.hooks.run`: the hook process (reads the client's JSON on stdin, injects, resets,
  prints the ``hookSpecificOutput`` JSON; never fails loudly);
- :mod:`memlane.hooks.config`: the ``[hooks]`` settings, read without pydantic;
- :mod:`memlane.hooks.backend`: the thin HTTP client of ``memlane serve``, and the engine
  in-process when no server answers;
- :mod:`memlane.hooks.transcript`: the last messages of the client's transcript;
- :mod:`memlane.hooks.install`: merging memlane's entries into the clients' settings files and
  the Claude Code plugin.

The hook's fast path (server running) imports only the standard library and these modules:
no Typer, no engine, no numpy, and not even :mod:`json`, :mod:`re`, :mod:`socket` or
:mod:`threading` (:mod:`memlane._fastjson`, :mod:`_socket` and :mod:`_thread` do their work
without the milliseconds of imports behind them). ``tests/test_hooks_light.py`` checks it in
a fresh interpreter.
"""
