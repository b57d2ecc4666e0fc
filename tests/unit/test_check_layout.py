"""scripts/check_layout.py: the cycle finder, and how it reads Rust module paths."""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check_layout.py"


@pytest.fixture(scope="module")
def layout() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_layout", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_an_acyclic_graph_has_no_cycle(layout: ModuleType) -> None:
    graph = {
        "network": {"handlers"},
        "handlers": {"replica", "partition"},
        "replica": {"partition"},
    }
    assert layout.find_cycles(graph) == []


def test_a_two_module_circle_is_found(layout: ModuleType) -> None:
    assert layout.find_cycles({"a": {"b"}, "b": {"a"}}) == [["a", "b", "a"]]


def test_a_module_importing_itself_is_a_cycle(layout: ModuleType) -> None:
    assert layout.find_cycles({"a": {"a"}}) == [["a", "a"]]


def test_a_long_circle_is_found_and_its_path_is_real(layout: ModuleType) -> None:
    graph = {
        "partition": {"alter_partition", "metrics"},
        "alter_partition": {"partition"},
        "metrics": {"replica_manager"},
        "replica_manager": {"metadata_log"},
        "metadata_log": {"settings"},
        "settings": {"partition"},
        "leaf": set(),
        "top": {"partition", "leaf"},
    }
    (cycle,) = layout.find_cycles(graph)
    assert cycle[0] == cycle[-1]
    assert all(after in graph[before] for before, after in itertools.pairwise(cycle))
    assert "leaf" not in cycle and "top" not in cycle


def test_each_separate_circle_is_reported(layout: ModuleType) -> None:
    graph = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"a", "c"}}
    cycles = layout.find_cycles(graph)
    assert [sorted(set(cycle)) for cycle in cycles] == [["a", "b"], ["c", "d", "e"]]


def test_a_deep_chain_does_not_hit_the_recursion_limit(layout: ModuleType) -> None:
    size = sys.getrecursionlimit() * 2
    graph = {str(n): {str(n + 1)} for n in range(size)}
    assert layout.find_cycles(graph) == []
    graph[str(size)] = {"0"}
    (cycle,) = layout.find_cycles(graph)
    assert len(cycle) == size + 2


def test_rust_paths_make_edges_between_top_level_modules_and_siblings(
    layout: ModuleType, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    (src / "partition").mkdir(parents=True)
    (src / "lib.rs").write_text("pub mod partition;\npub mod replica;\n")
    (src / "partition" / "mod.rs").write_text("mod isolation;\nmod replication;\n")
    (src / "partition" / "replication.rs").write_text(
        "use super::isolation::Read;\n"
        "// crate::replica in a comment is no edge\n"
        'const S: &str = "crate::replica";\n'
        "#[cfg(test)]\nmod tests {\n    use crate::replica::Fetcher;\n}\n"
    )
    (src / "partition" / "isolation.rs").write_text("use super::super::replica;\n")
    (src / "replica.rs").write_text("use crate::{clock::now, partition::{Partition, Role}};\n")
    (src / "clock.rs").write_text("")
    graphs = layout.crate_graphs(src)
    assert graphs[()] == {"partition": {"replica"}, "replica": {"clock", "partition"}}
    assert graphs[("partition",)] == {"replication": {"isolation"}}
    assert layout.find_cycles(graphs[()]) == [["partition", "replica", "partition"]]


def _package(root: Path, files: dict[str, str]) -> Path:
    package = root / "pkg"
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return package


def test_a_python_circle_between_packages_is_found(layout: ModuleType, tmp_path: Path) -> None:
    package = _package(
        tmp_path,
        {
            "__init__.py": "",
            "low/__init__.py": "",
            "low/a.py": "def f() -> None:\n    from pkg.high import b\n",
            "high/__init__.py": "",
            "high/b.py": "from pkg.low.a import f\n",
        },
    )
    assert layout.python_offences(package) == ["pkg: import circle high -> low -> high"]


def test_type_checking_imports_and_downward_imports_are_no_circle(
    layout: ModuleType, tmp_path: Path
) -> None:
    package = _package(
        tmp_path,
        {
            "__init__.py": "",
            "low/__init__.py": "",
            "low/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from pkg.high.b import B\n",
            "high/__init__.py": "",
            "high/b.py": "from ..low import a\nclass B: ...\n",
        },
    )
    assert layout.python_offences(package) == []


def test_more_than_five_top_level_modules_is_an_offence(layout: ModuleType, tmp_path: Path) -> None:
    package = _package(tmp_path, {"__init__.py": "", **{f"m{i}.py": "" for i in range(6)}})
    assert layout.python_offences(package) == [
        "pkg: 6 top-level modules (at most 5): m0.py, m1.py, m2.py, m3.py, m4.py, m5.py"
    ]
