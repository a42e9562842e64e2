"""The version-refusal check every framework adapter's tests share (tests/test_fw_base.py in the
main environment, tests/fwenvs/test_fw_<name>.py in the frameworks' own): importing an adapter
while its framework reports a version outside the adapter's range fails with the message a
user reads (memlane.integrations._base.require)."""

from __future__ import annotations

import importlib
import importlib.metadata
import sys

import pytest

from memlane.integrations._base import UnsupportedFramework, require


def assert_refused(
    monkeypatch: pytest.MonkeyPatch,
    module: str,
    *,
    dist: str,
    version: str,
    low: str,
    high: str,
    extra: str,
) -> None:
    """Import ``module`` (an adapter, e.g. ``memlane.integrations.crewai``) afresh while
    ``importlib.metadata.version(dist)`` answers ``version`` and check that it raises
    :class:`UnsupportedFramework` word for word: the version found, the range ``>=low,<high``
    and ``pip install 'memlane[extra]'``. Then the version really installed, if any, passes
    the same range (the refusal is the version's, not a range nothing meets). The adapter's
    module in ``sys.modules`` and ``importlib.metadata.version`` are restored afterwards."""
    real = importlib.metadata.version
    supported = f"{dist} >={low},<{high}"
    with monkeypatch.context() as patch:
        patch.setattr(
            importlib.metadata, "version", lambda name: version if name == dist else real(name)
        )
        patch.delitem(sys.modules, module, raising=False)
        with pytest.raises(UnsupportedFramework) as refused:
            importlib.import_module(module)
    assert str(refused.value) == (
        f"{dist} {version} is not supported: memlane's adapter needs {supported}; "
        f"pip install 'memlane[{extra}]' (supported: {supported})"
    )
    try:
        installed = real(dist)
    except importlib.metadata.PackageNotFoundError:
        return  # the main environment's test of an adapter whose framework is not installed
    assert require(dist, low, high, extra) == installed
