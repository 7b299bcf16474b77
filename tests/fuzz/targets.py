"""Loading the fuzz targets (fuzz/*.py, not a package) by path, as the fuzzer runs them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

FUZZ_DIR = Path(__file__).resolve().parents[2] / "fuzz"


def load_target(name: str) -> ModuleType:
    """Import ``fuzz/<name>.py`` as the module ``name``."""
    spec = importlib.util.spec_from_file_location(name, FUZZ_DIR / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
