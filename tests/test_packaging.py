"""pyproject.toml keeps to the packaging metadata setuptools will go on building.

setuptools deprecated the TOML-table form of ``project.license`` and stops building it after
2027-02-18; the SPDX string (PEP 639) replaces it and needs setuptools 77 or later. A wheel
built from this file then carries ``License-Expression``. These checks read the file only, so
they stay fast and need no build.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def _pyproject() -> dict:
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))


def test_license_is_an_spdx_string_not_a_table() -> None:
    project = _pyproject()["project"]
    assert project["license"] == "Apache-2.0"
    # PEP 639: a license expression rules out License :: classifiers
    assert not [c for c in project.get("classifiers", []) if c.startswith("License ::")]


def test_build_requires_a_setuptools_that_reads_spdx_licenses() -> None:
    requires = _pyproject()["build-system"]["requires"]
    (setuptools,) = [r for r in requires if re.match(r"setuptools\b", r)]
    floor = re.search(r">=\s*(\d+)", setuptools)
    assert floor is not None, setuptools
    assert int(floor.group(1)) >= 77, setuptools
