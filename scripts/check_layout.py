#!/usr/bin/env python3
"""Check the house's layout rules (issue 28): no `#[path]` under crates/, no import circle in
any crate or in python/krust, and at most five top-level modules in python/krust.

An import circle is looked for at two granularities in every crate under crates/: between the
crate's top-level modules, and between the sibling modules of each folder. An edge A -> B means a
file inside module A names a path into module B (`crate::b::...`, a `use crate::{...}` group, or a
`super::` path that climbs out of A). python/krust is read the same way: between the siblings of
each package (its modules and subpackages), an edge for every `import` of krust, function-local
ones included; imports under `if TYPE_CHECKING:` are left out, as they never run (a seam names the
type of what plugs into it that way). Prints every offence and exits 1, else prints one OK line.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CRATES = ROOT / "crates"
PACKAGE = ROOT / "python" / "krust"
# Besides __init__.py: the package face stays short, everything else lives in a package.
MAX_TOP_LEVEL_MODULES = 5

Graph = Mapping[str, Iterable[str]]
ModulePath = tuple[str, ...]


def find_cycles(graph: Graph) -> list[list[str]]:
    """Return one cycle (a list of nodes, first node repeated at the end) per circle in `graph`.

    A circle is a strongly connected component with more than one node, or a node with an edge to
    itself. Nodes that appear only as edge targets are allowed. The result is sorted, so the output
    is stable.
    """
    nodes = sorted({*graph, *(target for targets in graph.values() for target in targets)})
    edges = {node: sorted(set(graph.get(node, ()))) for node in nodes}
    cycles = [_cycle_through(component, edges) for component in _components(nodes, edges)]
    return sorted(cycle for cycle in cycles if cycle)


def _components(nodes: list[str], edges: dict[str, list[str]]) -> Iterator[list[str]]:
    """Yield the strongly connected components of the graph (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    for start in nodes:
        if start in index:
            continue
        work: list[tuple[str, int]] = [(start, 0)]
        while work:
            node, position = work.pop()
            if position == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            successors = edges[node]
            if position < len(successors):
                work.append((node, position + 1))
                successor = successors[position]
                if successor not in index:
                    work.append((successor, 0))
                elif successor in on_stack:
                    low[node] = min(low[node], index[successor])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                yield sorted(component)


def _cycle_through(component: list[str], edges: dict[str, list[str]]) -> list[str]:
    """Return a cycle inside `component` starting at its first node, or [] if there is none."""
    start = component[0]
    if len(component) == 1:
        return [start, start] if start in edges[start] else []
    members = set(component)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for successor in edges[node]:
                if successor == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if successor in members and successor not in came_from:
                    came_from[successor] = node
                    following.append(successor)
        frontier = following
    return []


@dataclass(frozen=True)
class Reference:
    """A file of module `source` names a path starting at module path `target`."""

    source: ModulePath
    target: ModulePath


_TOKEN = re.compile(
    r"""
    (?P<comment>//[^\n]*|/\*.*?\*/)
    | (?P<string>b?r(?P<hashes>\#*)".*?"(?P=hashes)|b?"(?:\\.|[^"\\])*")
    | (?P<char>b?'(?:\\(?:u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^'\\])')
    | (?P<lifetime>'[A-Za-z_]\w*)
    | (?P<path>::)
    | (?P<ident>[A-Za-z_]\w*)
    | (?P<punct>[{}();,*])
    | (?P<other>\S)
    """,
    re.VERBOSE | re.DOTALL,
)


def _tokens(text: str) -> list[str]:
    """Split Rust source into the tokens that matter for paths; comments and literals drop out."""
    kept = ("path", "ident", "punct", "other")
    return [match.group(0) for match in _TOKEN.finditer(text) if match.lastgroup in kept]


def module_of(file: Path, src: Path) -> ModulePath:
    """The module path of a source file inside a crate's `src/` (the crate root is `()`)."""
    parts = list(file.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts.pop()
    return tuple(parts)


def references(file: Path, src: Path) -> tuple[list[Reference], set[ModulePath]]:
    """Every `crate::` and `super::` path in `file`, resolved to an absolute module path.

    Code under `#[cfg(test)]` modules is left out: tests sit above every layer. The second result
    holds the `#[cfg(test)] mod x;` files this one declares, whose code is left out as well.
    """
    tokens = _tokens(file.read_text(encoding="utf-8"))
    file_module = module_of(file, src)
    scopes: list[tuple[int, str, bool]] = []  # (depth where an inline `mod x {` opened, x, test)
    depth = 0
    found: list[Reference] = []
    test_files: set[ModulePath] = set()
    position = 0
    while position < len(tokens):
        token = tokens[position]
        in_test = any(test for _, _, test in scopes)
        if token == "{":
            depth += 1
        elif token == "}":
            depth -= 1
            if scopes and scopes[-1][0] == depth:
                scopes.pop()
        elif token == "mod" and position + 2 < len(tokens) and tokens[position + 2] in ("{", ";"):
            name, test = tokens[position + 1], in_test or _under_cfg_test(tokens, position)
            if tokens[position + 2] == "{":
                scopes.append((depth, name, test))
            elif test:
                test_files.add(file_module + tuple(scope[1] for scope in scopes) + (name,))
        elif token in ("crate", "super") and _is_path_start(tokens, position):
            here = file_module + tuple(name for _, name, _ in scopes)
            base, position = _path_base(tokens, position, here)
            if base is not None and not in_test:
                found.extend(Reference(here, base + tail) for tail in _tails(tokens, position))
            continue
        position += 1
    return found, test_files


def _under_cfg_test(tokens: list[str], position: int) -> bool:
    """Whether the item whose keyword is at `position` carries `#[cfg(test)]`."""
    index = position - 1
    while index >= 0 and tokens[index] in ("pub", "(", "crate", "super", "in", ")"):
        index -= 1
    while index >= 0 and tokens[index] == "]":
        start = index
        while start >= 1 and not (tokens[start] == "[" and tokens[start - 1] == "#"):
            start -= 1
        if tokens[start + 1 : index] == ["cfg", "(", "test", ")"]:
            return True
        index = start - 2
    return False


def _is_path_start(tokens: list[str], position: int) -> bool:
    follows = position + 1 < len(tokens) and tokens[position + 1] == "::"
    preceded = position > 0 and tokens[position - 1] == "::"
    return follows and not preceded


def _path_base(tokens: list[str], position: int, here: ModulePath) -> tuple[ModulePath | None, int]:
    """Resolve `crate::` / `super::super::` at `position`; return the base and the next token."""
    if tokens[position] == "crate":
        return (), position + 2
    base = list(here)
    while (
        position + 1 < len(tokens) and tokens[position] == "super" and tokens[position + 1] == "::"
    ):
        if not base:
            return None, position + 2
        base.pop()
        position += 2
    return tuple(base), position


def _tails(tokens: list[str], position: int) -> list[ModulePath]:
    """The first one or two names after a path base; a `{...}` group yields one tail per item."""
    if position >= len(tokens):
        return []
    if tokens[position] != "{":
        return [_names(tokens, position)]
    tails: list[ModulePath] = []
    nesting = 0
    expect_item = True
    for token_index in range(position, len(tokens)):
        token = tokens[token_index]
        if token == "{":
            nesting += 1
            expect_item = nesting == 1
        elif token == "}":
            nesting -= 1
            if nesting == 0:
                break
        elif token == "," and nesting == 1:
            expect_item = True
        elif expect_item and nesting == 1 and token not in ("self", "*"):
            tails.append(_names(tokens, token_index))
            expect_item = False
        else:
            expect_item = False
    return tails


def _names(tokens: list[str], position: int) -> ModulePath:
    names: list[str] = []
    while position < len(tokens) and re.fullmatch(r"[A-Za-z_]\w*", tokens[position]):
        names.append(tokens[position])
        if position + 1 >= len(tokens) or tokens[position + 1] != "::" or len(names) == 2:
            break
        position += 2
    return tuple(names)


def crate_graphs(src: Path) -> dict[ModulePath, dict[str, set[str]]]:
    """The module graph of each folder of a crate, keyed by the folder's module path.

    The key `()` is the crate's top level. Only modules that are files or folders are nodes; a
    reference to an item of the folder's own `mod.rs` is not an edge between siblings.
    """
    files = sorted(src.rglob("*.rs"))
    modules = {module_of(file, src) for file in files}
    scanned = {file: references(file, src) for file in files}
    test_modules = {module for _, tests in scanned.values() for module in tests}
    graphs: dict[ModulePath, dict[str, set[str]]] = {}
    for file, (found, _) in scanned.items():
        module = module_of(file, src)
        if any(module[: len(test)] == test for test in test_modules):
            continue
        for reference in found:
            source, target = reference.source, reference.target
            common = 0
            while common < min(len(source), len(target)) and source[common] == target[common]:
                common += 1
            if common >= len(source) or common >= len(target):
                continue
            folder = source[:common]
            if (*folder, source[common]) not in modules:
                continue
            if (*folder, target[common]) not in modules:
                continue
            graph = graphs.setdefault(folder, {})
            graph.setdefault(source[common], set()).add(target[common])
    return graphs


def path_attribute_offences(crates: Path) -> list[str]:
    """Every `#[path` attribute under `crates`: a folder with a `mod.rs` says it honestly."""
    offences: list[str] = []
    for file in sorted(crates.rglob("*.rs")):
        for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"#\s*\[\s*path\b", line):
                offences.append(f"{file.relative_to(ROOT)}:{number}: #[path] splices a file in")
    return offences


def rust_cycle_offences(crates: Path) -> list[str]:
    """One line per import circle, per crate and per folder."""
    offences: list[str] = []
    for src in sorted(crates.glob("*/src")):
        crate = src.parent.name
        for folder, graph in sorted(crate_graphs(src).items()):
            where = crate + ("::" + "::".join(folder) if folder else "")
            for cycle in find_cycles(graph):
                offences.append(f"{where}: import circle {' -> '.join(cycle)}")
    return offences


def python_module_of(file: Path, package: Path) -> ModulePath:
    """The dotted module path of a file of `package`, as a tuple (`krust.a.b` is `("krust", "a",
    "b")`; a package is its `__init__.py`)."""
    parts = file.relative_to(package.parent).with_suffix("").parts
    return parts[:-1] if parts[-1] == "__init__" else parts


def python_imports(file: Path, package: Path, modules: set[ModulePath]) -> set[ModulePath]:
    """The modules of `package` that `file` imports when it runs (TYPE_CHECKING blocks left out);
    `from a import b` counts as importing `a.b` when that is a module, else `a`."""
    here = python_module_of(file, package)
    parent = here if file.name == "__init__.py" else here[:-1]
    root = package.name

    def resolve(dotted: str) -> ModulePath | None:
        parts = tuple(dotted.split("."))
        while parts and parts not in modules:
            parts = parts[:-1]
        return parts or None

    found: set[ModulePath] = set()
    pending: list[ast.AST] = [ast.parse(file.read_text(encoding="utf-8"))]
    while pending:
        node = pending.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                pending.extend(child.orelse)
                continue
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = parent[: len(parent) - child.level + 1] if child.level else ()
                module = ".".join((*base, *(child.module.split(".") if child.module else ())))
                names = [f"{module}.{alias.name}" for alias in child.names]
            else:
                pending.append(child)
                continue
            for name in names:
                target = resolve(name) if name.split(".")[0] == root else None
                if target is not None:
                    found.add(target)
    return found


def python_graphs(package: Path) -> dict[ModulePath, dict[str, set[str]]]:
    """Per package of `package` (itself included): its children's import graph."""
    files = {python_module_of(file, package): file for file in sorted(package.rglob("*.py"))}
    modules = set(files)
    graphs: dict[ModulePath, dict[str, set[str]]] = {
        module: {} for module, file in files.items() if file.name == "__init__.py"
    }
    for module, file in files.items():
        for target in python_imports(file, package, modules):
            for folder, graph in graphs.items():
                depth = len(folder)
                inside = module[:depth] == folder and target[:depth] == folder
                if inside and len(module) > depth and len(target) > depth:
                    source, sink = module[depth], target[depth]
                    if source != sink:
                        graph.setdefault(source, set()).add(sink)
    return graphs


def python_offences(package: Path) -> list[str]:
    """Import circles between the siblings of each package, and too many top-level modules."""
    offences: list[str] = []
    for folder, graph in sorted(python_graphs(package).items()):
        for cycle in find_cycles(graph):
            offences.append(f"{'.'.join(folder)}: import circle {' -> '.join(cycle)}")
    top_level = sorted(f.name for f in package.glob("*.py") if f.name != "__init__.py")
    if len(top_level) > MAX_TOP_LEVEL_MODULES:
        offences.append(
            f"{package.name}: {len(top_level)} top-level modules (at most "
            f"{MAX_TOP_LEVEL_MODULES}): {', '.join(top_level)}"
        )
    return offences


def main() -> int:
    offences = (
        path_attribute_offences(CRATES) + rust_cycle_offences(CRATES) + python_offences(PACKAGE)
    )
    for offence in offences:
        print(offence)
    if offences:
        return 1
    print(
        "layout OK: no #[path] in crates/, no import circle in any crate or in python/krust, "
        f"at most {MAX_TOP_LEVEL_MODULES} top-level modules in python/krust"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
