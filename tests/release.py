"""Release checks over every distribution of packages/ (``nox -s release`` runs them on a wheelhouse).

    python tests/release.py check                   # versions, inter-package pins, CHANGELOG entries
    python tests/release.py readme WHEELHOUSE       # each README `pip install --find-links wheelhouse ...`
                                                    # command in a fresh venv, then a conversion
    python tests/release.py upgrade WHEELHOUSE      # each README wheelhouse command over jax2onnx 0.17.1
                                                    # from the index: import, convert, versions, uninstall

Each exits 1 naming every problem. ``check`` is also run by the default test session
(tests/test_release.py), without building anything.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile
import tomllib

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
README = os.path.join(ROOT, "README.md")
#: The newest jax2onnx published before the monorepo; the meta package must sort above it.
LAST_PUBLISHED = "0.17.1"
META = "jax2onnx"


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", v)[:3])


def distributions() -> dict[str, dict]:
    """distribution name -> {folder, version, requirements (dependencies and extras)}."""
    out = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "packages", "*", "pyproject.toml"))):
        folder = os.path.dirname(path)
        with open(path, "rb") as f:
            data = tomllib.load(f)
        project = data["project"]
        version_file = os.path.join(folder, data["tool"]["hatch"]["version"]["path"])
        with open(version_file, encoding="utf-8") as f:
            version = re.search(r'__version__\s*=\s*"([^"]+)"', f.read()).group(1)
        reqs = [(None, r) for r in project.get("dependencies", [])]
        reqs += [(extra, r) for extra, items in project.get("optional-dependencies", {}).items() for r in items]
        out[project["name"]] = {"folder": folder, "version": version, "requirements": reqs}
    return out


def check_metadata(dists: dict[str, dict] | None = None) -> tuple[list[str], list[str]]:
    """(problems, missing): pins between siblings that exclude the sibling's version, CHANGELOGs
    without the version's entry, a meta package not above 0.17; ``missing`` names siblings a pin
    refers to that packages/ does not hold (yet): a release cannot ship a pin to an unbuilt pack."""
    from packaging.requirements import Requirement

    dists = dists if dists is not None else distributions()
    problems: list[str] = []
    missing: list[str] = []
    for name, info in dists.items():
        changelog = os.path.join(info["folder"], "CHANGELOG.md")
        with open(changelog, encoding="utf-8") as f:
            if f"## [{info['version']}]" not in f.read():
                problems.append(f"{os.path.relpath(changelog, ROOT)} has no '## [{info['version']}]' entry for {name} {info['version']}")
        for extra, text in info["requirements"]:
            req = Requirement(text)
            if not req.name.startswith("jax2onnx") or req.name == name:
                continue  # a third-party dependency, or an extra naming its own distribution's extras
            where = f"{name}{f'[{extra}]' if extra else ''} requires {text!r}"
            sibling = dists.get(req.name)
            if sibling is None:
                missing.append(f"{where}, but packages/ has no {req.name}")
            elif not req.specifier.contains(sibling["version"], prereleases=True):
                problems.append(f"{where}, which excludes {req.name} {sibling['version']} from this repository")
    # The version scheme (packages/core/CHANGELOG.md): every distribution continues the published
    # jax2onnx line (core's version is `jax2onnx.__version__`), and all share one minor version.
    for name, info in dists.items():
        if _version_tuple(info["version"]) <= _version_tuple(LAST_PUBLISHED):
            why = "for `pip install -U jax2onnx`" if name == META else "(a 0.17 user reads it as a downgrade)"
            problems.append(f"{name} {info['version']} must be above the published {META} {LAST_PUBLISHED} {why}")
    lines = {name: _version_tuple(info["version"])[:2] for name, info in dists.items()}
    if len(set(lines.values())) > 1:
        shown = ", ".join(f"{name} {dists[name]['version']}" for name in sorted(lines))
        problems.append(f"every distribution shares one minor version (the version scheme), but: {shown}")
    return problems, missing


def readme_commands() -> list[list[str]]:
    """The README's ``pip install --find-links wheelhouse ...`` commands, as argument lists after ``pip``."""
    with open(README, encoding="utf-8") as f:
        text = f.read()
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        m = re.match(r"^(?:\S*python3? -m )?pip install ((?:-U |--upgrade )?--find-links wheelhouse .+)$", line)
        if m:
            out.append(["install", *shlex.split(m.group(1))])
    return out


#: What each README install must do once installed: import the API, convert an NNX layer, and run the CLI.
SMOKE = """
import jax2onnx, onnx
from flax import nnx
from jax2onnx import allclose, to_onnx
model = to_onnx(nnx.Linear(4, 2, rngs=nnx.Rngs(0)), [("B", 4)])
onnx.checker.check_model(model, full_check=True)
assert [n.op_type for n in model.graph.node] == ["Gemm"], model.graph.node
assert tuple(int(p) for p in jax2onnx.__version__.split(".")[:2]) > (0, 17), jax2onnx.__version__
print("converted with jax2onnx-core", jax2onnx.__version__, "from", jax2onnx.__file__)
"""


def _venv(where: str) -> str:
    subprocess.run([sys.executable, "-m", "venv", where], check=True)
    python = os.path.join(where, "bin", "python")
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--upgrade", "pip"], check=True)
    return python


def _pip(python: str, *args: str, cwd: str | None = None) -> None:
    print("$ pip", " ".join(args), flush=True)
    subprocess.run([python, "-m", "pip", *args], check=True, cwd=cwd)


def _run(python: str, code: str, cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-c", code], capture_output=True, text=True, cwd=cwd)


def readme(wheelhouse: str) -> list[str]:
    """Run each README install command (its ``wheelhouse`` is this one) in a fresh venv, then SMOKE."""
    problems = []
    commands = readme_commands()
    if not commands:
        return ["README.md shows no `pip install --find-links wheelhouse ...` command"]
    parent = os.path.dirname(os.path.abspath(wheelhouse))
    for args in commands:
        with tempfile.TemporaryDirectory(prefix="jax2onnx-readme-") as tmp:
            python = _venv(os.path.join(tmp, "venv"))
            _pip(python, *args, "--quiet", cwd=parent)  # relative `wheelhouse`, as the README says
            done = _run(python, SMOKE, tmp)
            print(done.stdout.strip())
            cli = subprocess.run([os.path.join(tmp, "venv", "bin", "jax2onnx"), "--version"], capture_output=True, text=True)
            if done.returncode != 0 or cli.returncode != 0:
                problems.append(f"pip {' '.join(args)}: {(done.stderr or cli.stderr).strip().splitlines()[-1:]}")
    return problems


def _install_published(tmp: str) -> tuple[str, str | None]:
    """A fresh venv holding jax2onnx 0.17.1 from the index: (python, problem or None)."""
    python = _venv(os.path.join(tmp, "venv"))
    _pip(python, "install", "--quiet", f"jax2onnx=={LAST_PUBLISHED}")
    old = _run(python, "import importlib.metadata as m, jax2onnx; print(m.version('jax2onnx')); jax2onnx.to_onnx", tmp)
    if old.returncode != 0 or old.stdout.strip() != LAST_PUBLISHED:
        return python, f"jax2onnx {LAST_PUBLISHED} did not install from the index: {old.stderr.strip()[-300:]}"
    return python, None


def _versions_listed(tmp: str, expected: dict[str, str]) -> list[str]:
    """`jax2onnx --version` names core and each installed pack with the wheelhouse's versions."""
    cli = subprocess.run([os.path.join(tmp, "venv", "bin", "jax2onnx"), "--version"], capture_output=True, text=True)
    print(cli.stdout.strip())
    missing = [f"{name} {version}" for name, version in expected.items() if f"{name} {version}" not in cli.stdout]
    return [f"`jax2onnx --version` does not list {', '.join(missing)}: {(cli.stdout + cli.stderr).strip()[-300:]}"] if missing else []


def upgrade(wheelhouse: str) -> list[str]:
    """Each README ``pip install ... --find-links wheelhouse ...`` command run as written over an
    installed jax2onnx 0.17.1 (so an upgrade, not a fresh install): import, convert, the version
    above 0.17, `jax2onnx --version` listing what was installed. Then, after the `jax2onnx` one:
    `pip uninstall jax2onnx` (the converter stays: core owns the folder) -> uninstall the rest
    (jax2onnx cleanly absent). Then the other order: core installed beside 0.17.1, 0.17.1 removed."""
    problems = []
    wheelhouse = os.path.abspath(wheelhouse)
    parent = os.path.dirname(wheelhouse)
    versions = {name: info["version"] for name, info in distributions().items()}
    packs = ["jax2onnx-core", "jax2onnx-lax", "jax2onnx-jnp", "jax2onnx-nnx"]
    commands = readme_commands()
    if ["install", "-U", "--find-links", "wheelhouse", META] not in commands:
        problems.append(f"README.md shows no `pip install -U --find-links wheelhouse {META}` (the upgrade of a 0.17 install)")
    for args in commands:
        with tempfile.TemporaryDirectory(prefix="jax2onnx-upgrade-") as tmp:
            python, problem = _install_published(tmp)
            if problem:
                return [*problems, problem]
            _pip(python, *args, "--quiet", cwd=parent)  # as the README says it, relative `wheelhouse`
            done = _run(python, SMOKE, tmp)
            print(done.stdout.strip())
            if done.returncode != 0:
                problems.append(f"after `pip {' '.join(args)}` over {LAST_PUBLISHED}: {done.stderr.strip()[-400:]}")
                continue
            named = [a for a in args[1:] if not a.startswith("-") and a != "wheelhouse"]
            expected = {d: versions[d] for d in packs if META in named or d in named or d == "jax2onnx-core"}
            problems += _versions_listed(tmp, expected)
            if named != [META]:
                continue
            report = subprocess.run([os.path.join(tmp, "venv", "bin", "jax2onnx"), "packs"], capture_output=True, text=True)
            if report.returncode != 0:  # e.g. 0.17.1 left installed beside core, or a pack that does not load
                problems.append(f"`jax2onnx packs` after `pip {' '.join(args)}` over {LAST_PUBLISHED}: rc {report.returncode} "
                                f"{(report.stdout + report.stderr).strip()[-400:]}")
            _pip(python, "uninstall", "--quiet", "-y", META)
            done = _run(python, SMOKE, tmp)
            if done.returncode != 0:
                problems.append(f"after `pip uninstall jax2onnx` (core still installed): {done.stderr.strip()[-400:]}")
            _pip(python, "uninstall", "--quiet", "-y", *packs)
            gone = _run(python, "import jax2onnx", tmp)
            if "ModuleNotFoundError: No module named 'jax2onnx'" not in gone.stderr:
                problems.append(f"after uninstalling every jax2onnx distribution, `import jax2onnx` did not fail cleanly: "
                                f"rc {gone.returncode} {gone.stderr.strip()[-300:]}")
            # Core first, then 0.17.1 installed beside it and uninstalled (its RECORD lists jax2onnx/__init__.py).
            _pip(python, "install", "--quiet", "--find-links", wheelhouse, *packs)
            _pip(python, "install", "--quiet", "--no-deps", f"jax2onnx=={LAST_PUBLISHED}")
            _pip(python, "uninstall", "--quiet", "-y", META)
            done = _run(python, SMOKE, tmp)
            if done.returncode != 0:
                problems.append(f"core + {LAST_PUBLISHED} installed, {LAST_PUBLISHED} uninstalled: {done.stderr.strip()[-400:]}")
    return problems


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "check"
    if command == "check":
        problems, missing = check_metadata()
        problems += missing
    elif command == "readme":
        problems = readme(argv[1])
    elif command == "upgrade":
        problems = upgrade(argv[1])
    else:
        print(__doc__)
        return 2
    for p in problems:
        print(f"release: {p}", file=sys.stderr)
    if not problems:
        print(f"release {command}: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
