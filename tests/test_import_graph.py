"""Import graph of the repository's own Python files, and its circles (strongly connected parts).

Every `import` counts, wherever it stands (module top, function body, `if TYPE_CHECKING:`): a
circle that only a lazy import keeps from failing is still a circle to a reader.
Run `python tests/test_import_graph.py` to print the files per folder, the edge count, any circle
and the product's modules by floor (a module stands above every module it imports).
"""
from __future__ import annotations

import ast
import collections
import os
import sys
from typing import Dict, List, Set

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP = {".venv", ".git", "__pycache__", "logs", "figures", "saved_models", "profile_extracted"}


def python_files(root: str = ROOT) -> Dict[str, str]:
    """Dotted module name -> path, for every .py file of the repository (tests included)."""
    modules = {}
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if d not in SKIP and not d.startswith("."))
        for name in files:
            if name.endswith(".py"):
                relative = os.path.relpath(os.path.join(folder, name), root)[:-3].replace(os.sep, ".")
                modules[relative[:-len(".__init__")] if relative.endswith(".__init__") else relative] = (
                    os.path.join(folder, name))
    return modules


def imported_names(path: str, module: str, is_package: bool) -> List[tuple]:
    """The module names a file imports, each as alternatives to try in order (relative imports
    resolved; `from a import b` tries the submodule a.b before a)."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    package = module if is_package else module.rpartition(".")[0]
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                parts = parts[:len(parts) - (node.level - 1)]
                base = ".".join(p for p in parts + ([base] if base else []) if p)
            for alias in node.names:  # `from a import b`: the submodule a.b if there is one, else a
                names.append((f"{base}.{alias.name}", base) if base else (alias.name,))
            continue
    return [n if isinstance(n, tuple) else (n,) for n in names]


def graph(root: str = ROOT) -> Dict[str, Set[str]]:
    """module -> the repository modules it imports. A bare name resolves as Python resolves it
    for the file: from the repository root (pythonpath), else from the file's own folder (the
    folder of a script run by path is first on sys.path)."""
    modules = python_files(root)
    edges: Dict[str, Set[str]] = {}
    for module, path in modules.items():
        is_package = path.endswith("__init__.py")
        own_folder = module.rpartition(".")[0]
        targets = set()
        for alternatives in imported_names(path, module, is_package):
            tried = [c for name in alternatives for c in (name, f"{own_folder}.{name}" if own_folder else name)]
            for candidate in tried:
                if candidate in modules:
                    targets.add(candidate)
                    # importing a.b runs a/__init__ first, unless the importer lives inside a
                    parts = candidate.split(".")
                    for depth in range(1, len(parts)):
                        parent = ".".join(parts[:depth])
                        if parent in modules and not module.startswith(parent + ".") and module != parent:
                            targets.add(parent)
                    break
        targets.discard(module)
        edges[module] = targets
    return edges


def circles(edges: Dict[str, Set[str]]) -> List[List[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10000)
    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)


def floors(edges: Dict[str, Set[str]]) -> Dict[str, int]:
    """Each module's floor: 1 for one that imports no module of the repository, else one above the
    highest it imports (the graph has no circles). A call that goes on to a higher floor after
    returning from a lower one is a climb back up when a run's settings are followed through."""
    found: Dict[str, int] = {}

    def floor(module: str) -> int:
        if module not in found:
            found[module] = 1 + max((floor(target) for target in edges.get(module, ())), default=0)
        return found[module]

    for module in edges:
        floor(module)
    return found


def reached_from(edges: Dict[str, Set[str]], module: str) -> Set[str]:
    """Every repository module that importing `module` loads, directly or through others."""
    reached, todo = set(), [module]
    while todo:
        for target in edges[todo.pop()] - reached:
            reached.add(target)
            todo.append(target)
    return reached


def files_per_folder(root: str = ROOT) -> Dict[str, int]:
    counts: Dict[str, int] = collections.Counter()
    for module, path in python_files(root).items():
        folder = os.path.relpath(os.path.dirname(path), root)
        counts["(top)" if folder == "." else folder] += 1
    return dict(sorted(counts.items()))


def test_no_import_circles():
    assert circles(graph()) == []


def test_the_summary_and_the_deadline_plan_are_arithmetic_over_what_the_loop_recorded():
    """run_summary (a run's summary and its report) and deadline (a budget's plan) read numbers the
    loop recorded: they stand below the schemes and TensorFlow's measurements, and load without
    TensorFlow (a scheme is handed to `summarize`, not looked up)."""
    import subprocess
    edges = graph()
    below = ("schemes", "elastic_trainer.step_timing", "elastic_trainer.memory_stats", "train_step", "train")
    for module in ("elastic_trainer.run_summary", "elastic_trainer.deadline"):
        reached = reached_from(edges, module)
        assert not {m for m in reached if m.startswith(tuple(f"{name}." for name in below)) or m in below}, module
        code = f"import sys, {module}; print('tensorflow' in sys.modules)"
        loaded = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
        assert loaded.stdout.strip() == "False", module


def test_the_support_code_stands_below_the_entry_points_and_the_loop():
    """elastic_trainer/ is what main.py, profiler.py and train.py import: none of its modules imports
    them back (a circle would also fail above, but not an import of main or profiler alone)."""
    edges = graph()
    for module in (m for m in edges if m.startswith("elastic_trainer")):
        assert not reached_from(edges, module) & {"main", "profiler", "train"}, module


def test_tf_environment_loads_nothing_before_its_settings():
    """Entry points import elastic_trainer.tf_environment first; the package's __init__ and the module
    import nothing of the project, so nothing can load TensorFlow before its settings are made."""
    import subprocess
    edges = graph()
    assert edges["elastic_trainer"] == set() and edges["elastic_trainer.tf_environment"] == set()
    code = ("import sys, elastic_trainer.tf_environment; "
            "print(sorted(m for m in sys.modules if m.startswith('elastic_trainer')), 'tensorflow' in sys.modules)")
    loaded = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "['elastic_trainer', 'elastic_trainer.tf_environment'] False"


if __name__ == "__main__":
    root = sys.argv[1] if len(sys.argv) > 1 else ROOT
    edges = graph(root)
    print("python files per folder:", files_per_folder(root))
    print("edges:", sum(len(t) for t in edges.values()))
    for component in circles(edges):
        print("circle:", " <-> ".join(component))
    if not circles(edges):
        print("no circles")
        by_floor = collections.defaultdict(list)
        for module, level in floors(edges).items():
            if not module.startswith(("tests", "bench", "experiments", "scripts", "docs")):
                by_floor[level].append(module)
        for level in sorted(by_floor, reverse=True):
            print(f"floor {level}:", ", ".join(sorted(by_floor[level])))
