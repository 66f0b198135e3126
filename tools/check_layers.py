#!/usr/bin/env python3
"""The layering check: every #include in src/ and calib/ against the layer
diagram of docs/ARCHITECTURE.md §1.

    python3 tools/check_layers.py [ROOT]

The diagram is the one source of the layer order: the first fenced block under
"## 1. Layers". A line that starts with a folder (`src/NAME` or `calib`) puts
that folder on the current layer; a line holding only `|` starts the next
layer down; indented lines are descriptions. Layers are listed top to bottom.

Rules, for each `#include "DIR/FILE"` whose DIR is a folder of the diagram:
  - down only: DIR is the including file's own folder or on a lower layer
    (not a peer on the same layer, not a layer above);
  - private headers stay home: `*_internal.h` only from its own folder;
  - no circles: the folders' include graph has no cycle (implied by the first
    rule; reported on its own so a table that allowed peers would still catch
    one).
Every folder of src/ that holds C sources must be in the diagram. Each
violation is printed as `file:line: rule` and the exit status is 1.
"""
import os
import re
import sys

DOC = os.path.join("docs", "ARCHITECTURE.md")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
FOLDER_LINE = re.compile(r"^(src/[A-Za-z0-9_]+|calib)/?(\s|$)")


def read_layers(root):
    """The diagram's layers, top first: a list of lists of folder names."""
    path = os.path.join(root, DOC)
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError as e:
        sys.exit(f"check_layers: cannot read {DOC}: {e.strerror}")
    try:
        start = lines.index("## 1. Layers")
        fence = next(i for i in range(start, len(lines)) if lines[i].startswith("```"))
    except (ValueError, StopIteration):
        sys.exit(f"check_layers: {DOC} has no '## 1. Layers' section with a fenced diagram")
    layers = [[]]
    for line in lines[fence + 1:]:
        if line.startswith("```"):
            break
        if line.strip() == "|":
            layers.append([])
            continue
        m = FOLDER_LINE.match(line)
        if m:
            layers[-1].append(m.group(1).split("/")[-1])
    layers = [layer for layer in layers if layer]
    if not layers:
        sys.exit(f"check_layers: the diagram of {DOC} names no folders")
    return layers


def source_files(root):
    """(folder name, path relative to root) of every .c and .h under src/ and calib/."""
    for top in ("src", "calib"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    rel = os.path.relpath(os.path.join(dirpath, f), root)
                    parts = rel.split(os.sep)
                    folder = parts[0] if top == "calib" else parts[1] if len(parts) > 2 else None
                    if folder:
                        yield folder, rel


def find_cycle(edges):
    """One cycle of the folder graph as a list of folders, or None."""
    state = {}

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if not state.get(nxt):
                found = visit(nxt, stack)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if not state.get(node):
            found = visit(node, [])
            if found:
                return found
    return None


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    layers = read_layers(root)
    rank = {folder: i for i, layer in enumerate(layers) for folder in layer}
    errors = []
    edges = {}      # folder -> {included folder: first "file:line"}
    seen_folders = set()
    for folder, rel in source_files(root):
        seen_folders.add(folder)
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m or "/" not in m.group(1):
                    continue
                target = m.group(1).split("/")[0]
                if target not in rank or target == folder:
                    continue
                where = f"{rel}:{n}"
                edges.setdefault(folder, {}).setdefault(target, where)
                if folder not in rank:
                    continue
                header = m.group(1)
                if os.path.basename(header).endswith("_internal.h"):
                    errors.append(f'{where}: includes "{header}", a private header of {target}/ '
                                  f"(*_internal.h is for its own folder only)")
                if rank[target] < rank[folder]:
                    errors.append(f'{where}: includes "{header}": {folder} may not include {target}, '
                                  f"a layer above it ({DOC} §1)")
                elif rank[target] == rank[folder]:
                    errors.append(f'{where}: includes "{header}": {folder} may not include {target}, '
                                  f"a peer on its own layer ({DOC} §1)")
    for folder in sorted(seen_folders - set(rank)):
        errors.append(f"src/{folder}: a folder of sources that the layer diagram of {DOC} §1 does not name")
    graph = {a: set(b) for a, b in edges.items()}
    cycle = find_cycle(graph)
    if cycle:
        hops = ", ".join(f"{a} -> {b} at {edges[a][b]}" for a, b in zip(cycle, cycle[1:]))
        errors.append(f"folders include each other in a circle: {' -> '.join(cycle)} ({hops})")
    for e in errors:
        print(e)
    n_files = sum(1 for _ in source_files(root))
    if errors:
        print(f"check_layers: {len(errors)} violation(s) of the layer diagram in {n_files} files")
        return 1
    print(f"check_layers: {n_files} files, {len(rank)} folders on {len(layers)} layers: every include goes down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
