"""The wheel's package list: every layer installs under the codnn namespace, and no package
folder of the repository is left out of it (a forgotten one would install without error
and fail at the first import on a user's machine)."""
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


def test_package_data_exists():
    config = _setuptools()
    for name, patterns in config["package-data"].items():
        layer, *sub = name.split(".")[1:]
        folder = ROOT / config["package-dir"][f"codnn.{layer}"] / Path(*sub)
        for pattern in patterns:
            assert list(folder.glob(pattern)), f"{name}: nothing matches {pattern}"
