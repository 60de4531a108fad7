#!/usr/bin/env bash
# Checks docs/seeds.md, the tables that map each seed's functions, flags and documented
# behaviours to memarea's calls and their tests, so that the tables cannot name what does not
# exist. Fails naming each offender:
#
#   (a) Every table whose first header cell is "seed" has the five columns seed | memarea |
#       status | tested in | notes, and every row has five cells.
#   (b) Every test reference anywhere in the file, `FILE::NAME` in backticks, names a test that
#       FILE defines: a GoogleTest `Suite.Name` (TEST, TEST_F, TEST_P or TYPED_TEST(Suite,
#       Name)) in a .cpp file, a C function defined in a .c file and called there (the test
#       programs of tests/aml/ run their checks as functions called from main; `FILE::main` for
#       a program whose checks are all in main), or a Python test
#       function (def NAME) in a .py file. FILE is relative to the repository's root.
#   (c) Every "tested in" cell names at least one test, or says "not yet" (no test, or no call
#       yet) or "n/a" (nothing to test: a disclaimer of the vendor's page); an "n/a" row says
#       why in its notes.
#   (d) In the memarea column, code in backticks after a label is declared where the label says:
#       "C:" and "AML:" names (memarea_* and aml_* functions, types and variables; MEMAREA_* and
#       AML_* macros and enumerators) in include/'s C headers, comments left out; "C++:" names
#       (the last name of a qualified name, and each namespace or class before it) in
#       include/memarea/*.hpp, comments left out; "Python:" names (memarea.NAME..., the last
#       one) as a def, a class or an assignment in python/memarea/.
#   (e) In the status column, each status in backticks is a status memarea declares: NAME,
#       MEMAREA_ERROR_NAME or MEMAREA_NAME for the C API's, an AML_* code (a leading '-'
#       allowed) for the AML layer's.
#
# With a second argument, a directory holding the seed pages (one text file each), it also
# checks that every vendor name the pages use (hip*, cu*, CU_*, CUDA_ERROR_*, AML_*, aml_*)
# appears somewhere in docs/seeds.md: scripts/check-seed-tables.sh [ROOT [SEEDS_DIR]].
# scripts/check-structure.sh runs it without one.
set -euo pipefail

root=${1:-"$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"}
seeds=${2:-}
cd "$root"

exec python3 - "$seeds" <<'PY'
import glob
import os
import re
import sys

seeds_dir = sys.argv[1]
DOC = "docs/seeds.md"
COLUMNS = ["seed", "memarea", "status", "tested in", "notes"]
failures = []


def fail(where, what):
    failures.append(f"{where}: {what}")


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def strip_c_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def strip_py_comments(text):
    return re.sub(r"#[^\n]*", " ", text)


c_headers = sorted(glob.glob("include/**/*.h", recursive=True))
cxx_headers = sorted(glob.glob("include/memarea/*.hpp"))
c_text = "\n".join(strip_c_comments(read(p)) for p in c_headers)
cxx_text = "\n".join(strip_c_comments(read(p)) for p in cxx_headers)
py_text = "\n".join(strip_py_comments(read(p)) for p in sorted(glob.glob("python/memarea/*.py")))

if not os.path.isfile(DOC):
    print(f"check-seed-tables: {DOC} is missing", file=sys.stderr)
    sys.exit(1)
doc = read(DOC)
lines = doc.split("\n")

# --- (b) test references, anywhere in the file ------------------------------------------------
REF = re.compile(r"`([\w./-]+\.(cpp|c|py))::([\w.]+)`")
file_cache = {}


def test_exists(path, kind, name):
    """'' when FILE defines test NAME, else why not."""
    if not os.path.isfile(path):
        return f"{path} does not exist"
    if path not in file_cache:
        text = read(path)
        file_cache[path] = strip_py_comments(text) if kind == "py" else strip_c_comments(text)
    text = file_cache[path]
    if kind == "cpp":
        if name.count(".") != 1:
            return f"{name}: a GoogleTest is named Suite.Name"
        suite, test = name.split(".")
        pattern = (r"\b(?:TEST|TEST_F|TEST_P|TYPED_TEST)\s*\(\s*" + re.escape(suite) +
                   r"\s*,\s*" + re.escape(test) + r"\s*\)")
        return "" if re.search(pattern, text) else f"{path} defines no test {name}"
    if kind == "c":
        if not re.search(r"\b" + re.escape(name) + r"\s*\([^;{)]*\)\s*\{", text):
            return f"{path} defines no function {name}"
        if name != "main" and len(re.findall(r"\b" + re.escape(name) + r"\s*\(", text)) < 2:
            return f"{path} defines {name} but never calls it"
        return ""
    if not re.search(r"^\s*def\s+" + re.escape(name) + r"\s*\(", text, flags=re.M):
        return f"{path} defines no test function {name}"
    return ""


for number, line in enumerate(lines, 1):
    for m in REF.finditer(line):
        why = test_exists(m.group(1), m.group(2), m.group(3))
        if why:
            fail(f"{DOC}:{number}", f"`{m.group(1)}::{m.group(3)}`: {why}")


# --- the tables --------------------------------------------------------------------------------
def cells(line):
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    return [c.strip() for c in re.split(r"(?<!\\)\|", body)]


def spans(text):
    return re.findall(r"`([^`]+)`", text)


def c_declared(name, call):
    if name.isupper() or re.match(r"^[A-Z][A-Z0-9_]*$", name):
        return bool(re.search(r"#\s*define\s+" + re.escape(name) + r"\b", c_text) or
                    re.search(r"\b" + re.escape(name) + r"\s*(=[^=]|,|\})", c_text))
    if call:
        return bool(re.search(r"\b" + re.escape(name) + r"\s*\(", c_text))
    return bool(re.search(r"\b" + re.escape(name) + r"\b", c_text))


def check_c(where, span):
    for m in re.finditer(r"\b((?:memarea|aml)_[a-z0-9_]+|(?:MEMAREA|AML)_[A-Z0-9_]+)\b(\s*\()?",
                         span):
        if not c_declared(m.group(1), bool(m.group(2))):
            kind = "function" if m.group(2) else "name"
            fail(where, f"C {kind} {m.group(1)} (`{span}`) is not declared in include/'s headers")


def check_cxx(where, span):
    m = re.match(r"^((?:[A-Za-z_]\w*::)*)([A-Za-z_]\w*)(\s*\()?", span)
    if not m:
        return
    scopes = [s for s in m.group(1).split("::") if s and s != "memarea"]
    for s in scopes:
        if not re.search(r"\b(?:namespace\s+(?:memarea::)?|class\s+|struct\s+|enum\s+class\s+)" +
                         re.escape(s) + r"\b", cxx_text):
            fail(where, f"C++ scope {s} (`{span}`) is not declared in include/memarea/*.hpp")
    name = m.group(2)
    if m.group(3):
        ok = re.search(r"\b" + re.escape(name) + r"\s*\(", cxx_text)
    else:
        ok = re.search(r"\b" + re.escape(name) + r"\b", cxx_text)
    if not ok:
        fail(where, f"C++ name {name} (`{span}`) is not declared in include/memarea/*.hpp")


def check_python(where, span):
    m = re.match(r"^memarea((?:\.[A-Za-z_]\w*)+)", span)
    if not m:
        fail(where, f"Python name `{span}` does not start with memarea.")
        return
    name = m.group(1).split(".")[-1]
    if not re.search(r"^\s*(?:def\s+|class\s+)" + re.escape(name) + r"\b|^\s*" + re.escape(name) +
                     r"\s*=|^\s*from\s+\.\s+import\s+" + re.escape(name) + r"\b",
                     py_text, flags=re.M):
        fail(where, f"Python name {name} (`{span}`) is not defined in python/memarea/")


LABEL = re.compile(r"(?<![\w+])(C\+\+|C|AML|Python):")


def check_memarea_cell(where, cell):
    marks = list(LABEL.finditer(cell))
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(cell)
        for span in spans(cell[mark.end():end]):
            span = span.strip()
            if mark.group(1) in ("C", "AML"):
                check_c(where, span)
            elif mark.group(1) == "C++":
                check_cxx(where, span)
            else:
                check_python(where, span)


def check_status_cell(where, cell):
    for span in spans(cell):
        name = span.strip().lstrip("-")
        if not re.match(r"^[A-Z][A-Z0-9_]*$", name):
            continue
        if not any(c_declared(n, False) for n in (name, "MEMAREA_ERROR_" + name, "MEMAREA_" + name)):
            fail(where, f"status {span} is neither memarea's (MEMAREA_ERROR_{name}) nor AML's")


tables = 0
rows = 0
i = 0
while i < len(lines):
    if not lines[i].lstrip().startswith("|"):
        i += 1
        continue
    start = i
    while i < len(lines) and lines[i].lstrip().startswith("|"):
        i += 1
    block = lines[start:i]
    header = cells(block[0])
    if not header or header[0].lower() != "seed":
        continue
    tables += 1
    # (a)
    if [h.lower() for h in header] != COLUMNS:
        fail(f"{DOC}:{start + 1}", f"a seed table's columns are {' | '.join(COLUMNS)}, not "
             f"{' | '.join(header)}")
        continue
    for offset, line in enumerate(block[2:], 2):
        number = start + offset + 1
        where = f"{DOC}:{number}"
        row = cells(line)
        rows += 1
        if len(row) != len(COLUMNS):
            fail(where, f"{len(row)} cells, not {len(COLUMNS)} (escape a | inside a cell as \\|)")
            continue
        seed, memarea, status, tested, notes = row
        if not seed:
            fail(where, "the seed cell is empty")
        # (c)
        if not REF.search(tested):
            low = tested.lower()
            if low.startswith("n/a"):
                if not notes:
                    fail(where, "an n/a row says why in its notes")
            elif not low.startswith("not yet"):
                fail(where, "the tested-in cell names no test (`FILE::NAME`) and does not say "
                     "\"not yet\" or \"n/a\"")
        # (d), (e)
        check_memarea_cell(where, memarea)
        check_status_cell(where, status)

if tables == 0:
    fail(DOC, "holds no seed table (a table whose first column is \"seed\")")

# --- completeness against the seed pages, when given ------------------------------------------
if seeds_dir:
    vendor = re.compile(r"\b(hip[A-Z]\w*|cu[A-Z]\w*|CU_[A-Z0-9_]+|CUDA_ERROR_[A-Z0-9_]+|"
                        r"AML_[A-Z0-9_]+|aml_[a-z0-9_]+|USE_PEER_NON_UNIFIED)\b")
    pages = sorted(glob.glob(os.path.join(seeds_dir, "*")))
    if not pages:
        fail(seeds_dir, "holds no seed page")
    for page in pages:
        for name in sorted(set(vendor.findall(read(page)))):
            if not re.search(r"\b" + re.escape(name) + r"\b", doc):
                fail(DOC, f"does not name {name}, which {os.path.basename(page)} uses")

if failures:
    for f in failures:
        print(f"check-seed-tables: {f}", file=sys.stderr)
    print(f"check-seed-tables: FAILED (rules: scripts/check-seed-tables.sh's header)",
          file=sys.stderr)
    sys.exit(1)
print(f"check-seed-tables: ok ({tables} tables, {rows} rows)")
PY
