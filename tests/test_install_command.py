"""Every install hint names the clone gpuperf was installed from (PEP 610's direct_url.json), since gpuperf is not on
the package index; where that is unknown, the README's words."""

from __future__ import annotations

import json
from importlib import metadata
from types import SimpleNamespace

import pytest

from gpuperf.install import command


def _installed(monkeypatch: pytest.MonkeyPatch, direct_url: dict[str, object] | None) -> None:
    text = json.dumps(direct_url) if direct_url is not None else None
    monkeypatch.setattr(metadata, "distribution", lambda name: SimpleNamespace(read_text=lambda file: text))


@pytest.mark.parametrize(("direct_url", "expected"), [
    ({"url": "file:///home/me/gpuperf", "dir_info": {"editable": True}}, "pip install -e '/home/me/gpuperf[plot]'"),
    ({"url": "file:///opt/my%20tools/gpuperf", "dir_info": {}}, "pip install '/opt/my tools/gpuperf[plot]'"),
    ({"url": "file:///tmp/dist/gpuperf-0.1.0-py3-none-any.whl", "archive_info": {}},
     "pip install '<your clone of the gpuperf repository>[plot]'"),
    (None, "pip install '<your clone of the gpuperf repository>[plot]'"),
])
def test_the_hint_names_the_clone_it_was_installed_from(monkeypatch: pytest.MonkeyPatch,
                                                         direct_url: dict[str, object] | None, expected: str) -> None:
    _installed(monkeypatch, direct_url)
    assert command.install_command("plot") == expected


def test_not_installed_at_all_is_the_readme_s_words(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> None:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", missing)
    assert command.install_command() == "pip install '<your clone of the gpuperf repository>'"
    assert command.upgrade_command() == "git pull in its clone, then pip install '<your clone of the gpuperf repository>'"
