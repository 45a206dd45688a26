"""The README's layout table holds for every import: a layer imports only the codnn layers
its row allows (``golden`` none, ``hw`` golden, ``sim`` golden and hw, ``synth`` hw), and
the row names what the rule here says."""

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The codnn layers each layer may import besides itself (README, "Layout"; ``codnn``,
#: ``tests`` and ``benchmarks`` may import everything), and modules allowed one by one.
ALLOWED = {"golden": set(), "hw": {"golden"}, "sim": {"golden", "hw"}, "synth": {"hw"}}
EXCEPTIONS = {"sim": {"codnn.synth.tools"}}


def _codnn_imports(path):
    """(line, module) of each absolute import of a ``codnn`` module in ``path``."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module]
        else:
            continue
        for name in names:
            if name == "codnn" or name.startswith("codnn."):
                yield node.lineno, name


def violations(layer, allowed, exceptions=frozenset()):
    """``file:line module`` of each import in ``layer``'s folder its row does not allow."""
    found = []
    for path in sorted((ROOT / layer).rglob("*.py")):
        for line, name in _codnn_imports(path):
            target = name.split(".")[1] if "." in name else "codnn"
            if target != layer and target not in allowed and name not in exceptions:
                found.append(f"{path.relative_to(ROOT)}:{line} {name}")
    return found


@pytest.mark.parametrize("layer", list(ALLOWED))
def test_a_layer_imports_only_what_the_readme_allows(layer):
    assert violations(layer, ALLOWED[layer], EXCEPTIONS.get(layer, set())) == []


def test_the_readme_rows_name_the_same_rules():
    rows = {m.group(1): m.group(2) for m in re.finditer(
        r"^\| `(\w+)/` \(`codnn(?:\.\w+)?`\) \|.*\| ([^|]*) \|$",
        (ROOT / "README.md").read_text(), re.M)}
    assert set(ALLOWED) <= set(rows)
    for layer, allowed in ALLOWED.items():
        assert all(other in rows[layer] for other in allowed), (layer, rows[layer])
        assert all(name in rows[layer] for name in EXCEPTIONS.get(layer, ())), layer


def test_the_check_finds_a_forbidden_import(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "golden").mkdir()
    (tmp_path / "golden" / "bad.py").write_text("import numpy\nfrom codnn.hw import x\n")
    assert violations("golden", ALLOWED["golden"]) == ["golden/bad.py:2 codnn.hw"]


#: hw's packages (README, "Layout"), bottom to top: the codnn.hw packages each may import
#: besides itself. The engines' packages stand on ``common``; the network engine wraps
#: the systolic array; the board tops (``soc``) wrap engines; the proofs wrap anything.
HW_ALLOWED = {"common": set(), "nic": {"common"}, "systolic": {"common"}, "tq": {"common"},
              "bfp": {"common"}, "network": {"common", "systolic"},
              "soc": {"common", "nic", "systolic", "tq", "network"},
              "formal": {"common", "nic", "systolic", "tq", "bfp", "network", "soc"}}


def hw_violations(package, allowed):
    """``file:line module`` of each import in ``hw/package`` of another hw package its
    row does not allow."""
    found = []
    for path in sorted((ROOT / "hw" / package).rglob("*.py")):
        for line, name in _codnn_imports(path):
            parts = name.split(".")
            if parts[:2] == ["codnn", "hw"] and len(parts) > 2 \
                    and parts[2] not in allowed | {package}:
                found.append(f"{path.relative_to(ROOT)}:{line} {name}")
    return found


def test_every_hw_package_is_in_the_table():
    assert {p.name for p in (ROOT / "hw").iterdir()
            if (p / "__init__.py").exists()} == set(HW_ALLOWED)


@pytest.mark.parametrize("package", list(HW_ALLOWED))
def test_a_hw_package_imports_only_the_ones_below_it(package):
    assert hw_violations(package, HW_ALLOWED[package]) == []


def test_the_hw_check_finds_an_engine_importing_a_board_top(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "hw" / "nic").mkdir(parents=True)
    (tmp_path / "hw" / "nic" / "bump.py").write_text(
        "from codnn.hw.nic.mac import MacRx\nfrom codnn.hw.soc.uart import UartTx\n")
    assert hw_violations("nic", HW_ALLOWED["nic"]) == ["hw/nic/bump.py:2 codnn.hw.soc.uart"]


#: The longest a function or method may be, in lines (its decorators aside).
MOST_LINES = 100


def long_functions(folders, most=MOST_LINES):
    """``file:line name (lines)`` of each function in ``folders`` longer than ``most``."""
    found = []
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > most:
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} "
                                     f"({lines})")
    return found


def test_no_function_outside_the_tests_is_longer_than_a_screenful():
    assert long_functions(("app", "golden", "hw", "sim", "synth", "benchmarks")) == []
    # The check finds one: every function of this file at one line.
    assert "tests/test_layers.py" in " ".join(long_functions(("tests",), most=1))
