"""The wheel's package list: every layer installs under the codnn namespace, and no package
folder of the repository is left out of it (a forgotten one would install without error
and fail at the first import on a user's machine); the editable install is one that
static tools follow."""
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _setuptools():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_folder_is_installed_under_codnn():
    config = _setuptools()
    folders = {name: ROOT / path for name, path in config["package-dir"].items()}
    assert set(folders) == {"codnn", "codnn.golden", "codnn.hw", "codnn.sim", "codnn.synth"}
    found = set()
    for name, folder in folders.items():
        for init in folder.rglob("__init__.py"):
            relative = init.parent.relative_to(folder).parts
            found.add(".".join((name, *relative)))
    listed = set(config["packages"])
    assert found - listed == set(), "package folders missing from pyproject's packages"
    assert all(name.startswith("codnn") for name in listed)


def _folder(config, name):
    """The repository folder that holds package ``name``, after the longest entry of
    pyproject's package-dir that it lies under."""
    root = max((key for key in config["package-dir"]
                if name == key or name.startswith(f"{key}.")), key=len)
    return ROOT / config["package-dir"][root] / Path(*name[len(root):].split(".")[1:])


def test_package_data_exists():
    config = _setuptools()
    for name, patterns in config["package-data"].items():
        for pattern in patterns:
            assert list(_folder(config, name).glob(pattern)), f"{name}: nothing matches {pattern}"


def test_every_package_resolves_as_static_tools_resolve_it():
    """Through the folders on ``sys.path`` alone, without an import hook, as pyright, mypy
    and jedi look: ``make setup``'s editable install (setuptools' strict mode) puts a tree
    of links on the path; the default editable install of a package whose folders are
    renamed is an import hook, and fails here. The first folder that holds each package
    must be the repository's (no folder named codnn shadows the install); a package of data
    files alone (``codnn.sim.primitives``) is looked up by its first file."""
    config = _setuptools()
    for name in config["packages"]:
        source = _folder(config, name)
        file = source / "__init__.py"
        file = file if file.exists() else min(p for p in source.iterdir() if p.is_file())
        found = [path for entry in sys.path
                 if (path := Path(entry or ".", *name.split("."), file.name)).is_file()]
        assert found, f"{name}: no folder on sys.path holds it"
        assert found[0].resolve() == file, (name, found[0])
