"""The distribution is published as ``trio-agentcore`` (``agentcore`` on PyPI is another
project); the import name stays ``agentcore``, and every install hint names the distribution."""

from __future__ import annotations

import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest

from agentcore import ConfigError
from agentcore._codecs.bedrock import load_botocore

ROOT = Path(__file__).resolve().parents[1]
DISTRIBUTION = "trio-agentcore"
HINT = re.compile(r"pip install '?([A-Za-z0-9_.-]+)\[")


def test_the_project_is_named_trio_agentcore() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION


def test_the_installed_distribution_is_trio_agentcore_and_provides_agentcore() -> None:
    distribution = importlib.metadata.distribution(DISTRIBUTION)
    assert distribution.metadata["Name"] == DISTRIBUTION
    assert DISTRIBUTION in importlib.metadata.packages_distributions()["agentcore"]
    scripts = [e for e in distribution.entry_points if e.group == "console_scripts"]
    assert [e.name for e in scripts] == ["agentcore"]


def test_a_missing_extra_names_the_distribution_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "botocore", None)  # an import of it fails
    with pytest.raises(ConfigError, match=r"pip install 'trio-agentcore\[bedrock\]'"):
        load_botocore()


def test_every_install_hint_names_the_distribution() -> None:
    paths = [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    paths += [*(ROOT / "src" / "agentcore").rglob("*.py"), *(ROOT / "examples").glob("*.py")]
    named = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in paths
        for name in HINT.findall(path.read_text())
    }
    assert len(named) >= 10
    assert {entry for entry in named if not entry.endswith(f": {DISTRIBUTION}")} == set()
