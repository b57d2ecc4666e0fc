"""What `pip install krust-broker` puts on a user's machine."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_wheel_installs_the_spark_data_source_beside_krust() -> None:
    source = {p.name for p in (REPO / "spark" / "purelib" / "pyspark_krust").glob("*.py")}
    installed = importlib.metadata.files("krust-broker") or []
    shipped = {f.name for f in installed if f.parts[0] == "pyspark_krust" and f.suffix == ".py"}
    assert source and shipped == source

    # Spark's lookup imports top-level pyspark_* modules from an interpreter that has only the
    # installed packages: no PYTHONPATH, not run from the repository.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    found = subprocess.run(
        [sys.executable, "-c", "import pyspark_krust; print(pyspark_krust.DefaultSource.name())"],
        cwd="/",
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert found.stdout.strip() == "krust"
