"""Issue 63: the ten longest product functions and the product code's lines (every .py outside
tests/, bench/, experiments/, docs/). Run from a checkout: python experiments/refactor_63/longest.py"""
import ast, subprocess, sys
files = [f for f in subprocess.run(["git", "ls-files", "*.py"], capture_output=True, text=True).stdout.split()
         if not f.startswith(("tests/", "bench/", "experiments/", "docs/"))]
extra = [f for f in sys.argv[1:] if f not in files]
rows = []
for f in files + extra:
    try:
        tree = ast.parse(open(f).read())
    except FileNotFoundError:
        continue
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            rows.append((node.end_lineno - node.lineno + 1, f"{f}:{node.name}"))
rows.sort(reverse=True)
for n, name in rows[:12]:
    print(n, name)
total = sum(len(open(f).read().splitlines()) for f in files + extra)
print("product lines:", total, "files", len(files + extra))
