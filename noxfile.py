"""Test matrix across packs and JAX/Flax versions.

    nox -s tests            # default: every pack's tests, newest JAX/Flax (what CI runs)
    nox -s tests_core       # core alone (no pack installed), plus the minimal-install checks
    nox -s tests_lax tests_jnp tests_nnx tests_examples
    nox -s keras            # the Keras pack and Keras 3's model.export(format="onnx") (JAX backend)
    nox -s keras_apps       # slow: Keras ResNet50, MobileNetV3Small, EfficientNetB0 exported and compared
    nox -s matrix           # the full suite on the oldest and newest supported JAX/Flax
    nox -s lint demo bench coverage_docs
    nox -s fuzz stress      # long differential fuzzing; 8 threads x 20 rounds of concurrent exports
    nox -s build            # sdists + wheels, twine check, each wheel smoke-tested alone in a fresh venv
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True

PYTHON = "3.11"
ROOT = os.path.dirname(os.path.abspath(__file__))
CORE = "./packages/core"
PACKS = {
    "lax": ["./packages/plugins-lax"],
    "jnp": ["./packages/plugins-lax", "./packages/plugins-jnp"],
    "nnx": ["./packages/plugins-lax", "./packages/plugins-jnp", "./packages/plugins-nnx"],
    "examples": ["./packages/plugins-lax", "./packages/plugins-jnp", "./packages/plugins-nnx", "./packages/examples"],
    "keras": ["./packages/plugins-lax", "./packages/plugins-jnp", "./packages/plugins-keras"],
}
TEST_DIRS = {
    "core": ["packages/core/tests"],
    "lax": ["packages/plugins-lax/tests"],
    "jnp": ["packages/plugins-jnp/tests"],
    "nnx": ["packages/plugins-nnx/tests"],
    "examples": ["packages/examples/tests"],
    "keras": ["packages/plugins-keras/tests"],
}
#: Keras (a 3 s install, its tests about a minute) is part of the default session; the JAX/Flax
#: matrix leaves it out (Keras pins its own JAX support, tested here with the newest JAX only).
ALL_PACKAGES = [CORE, *PACKS["examples"], "./packages/plugins-keras"]
ALL_TESTS = [d for dirs in TEST_DIRS.values() for d in dirs] + ["tests"]
MATRIX_PACKAGES = [CORE, *PACKS["examples"]]
MATRIX_TESTS = [d for pack, dirs in TEST_DIRS.items() if pack != "keras" for d in dirs] + ["tests"]
#: (jax, flax): the seed's versions and the newest on Python 3.11.
MATRIX = [("0.6.2", "0.10.6"), ("0.10.2", "0.12.8")]
#: onnxruntime is an optional extra of core (jax2onnx-core[runtime]); every test session verifies with it.
TEST_TOOLS = ["pytest>=8", "pytest-xdist>=3", "onnxruntime>=1.22", "hypothesis>=6.100"]
REPORT = os.path.join(ROOT, "docs", "test-results.json")


def _pytest(session: nox.Session, paths: list[str], *extra: str) -> None:
    workers = os.environ.get("JAX2ONNX_TEST_WORKERS", "auto" if (os.cpu_count() or 1) > 1 else "0")
    session.run("python", "-m", "pytest", "-q", "-n", workers, "-p", "no:cacheprovider", *extra, *paths, *session.posargs)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Every pack's tests in one environment with the newest JAX/Flax; writes the coverage results."""
    session.install(*TEST_TOOLS, *ALL_PACKAGES)
    session.env["KERAS_BACKEND"] = "jax"
    if os.path.exists(REPORT):
        os.remove(REPORT)
    _pytest(session, ALL_TESTS, f"--jax2onnx-report={REPORT}")


@nox.session(python=PYTHON)
def tests_core(session: nox.Session) -> None:
    """Core alone: no pack installed, its own tests use test-only packs."""
    session.install(*TEST_TOOLS, CORE)
    _pytest(session, TEST_DIRS["core"])


@nox.session(python=PYTHON)
@nox.parametrize("pack", ["lax", "jnp", "nnx", "examples", "keras"])
def tests_pack(session: nox.Session, pack: str) -> None:
    """One pack with just the packs it depends on."""
    session.install(*TEST_TOOLS, CORE, *PACKS[pack])
    session.env["KERAS_BACKEND"] = "jax"
    _pytest(session, TEST_DIRS[pack])


@nox.session(python=PYTHON)
def fuzz(session: nox.Session) -> None:
    """Long differential fuzzing: random JAX programs vs their exports (the default session runs
    a short derandomized profile). JAX2ONNX_FUZZ_EXAMPLES sets the count (default here 2000)."""
    session.install(*TEST_TOOLS, *ALL_PACKAGES)
    session.env["JAX2ONNX_FUZZ_LONG"] = "1"
    session.env["JAX2ONNX_FUZZ_EXAMPLES"] = os.environ.get("JAX2ONNX_FUZZ_EXAMPLES", "2000")
    # If onnxruntime itself crashes on a program (a signal, no report), this log's last line names it.
    session.env["JAX2ONNX_FUZZ_LOG"] = log = os.path.join(session.create_tmp(), "fuzz_programs.log")
    session.log(f"programs are logged to {log}")
    session.run("python", "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "tests/test_fuzz.py", *session.posargs)


@nox.session(python=PYTHON)
def stress(session: nox.Session) -> None:
    """Thread-safety under load: 8 threads x 20 rounds of mixed exports (the default session runs 2)."""
    session.install(*TEST_TOOLS, *ALL_PACKAGES)
    session.env["JAX2ONNX_STRESS_ROUNDS"] = os.environ.get("JAX2ONNX_STRESS_ROUNDS", "20")
    session.run("python", "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "tests/test_threads.py", *session.posargs)


@nox.session(python=PYTHON)
def keras(session: nox.Session) -> None:
    """Keras 3 on the JAX backend: the Keras pack's testcases and model.export(format="onnx")."""
    session.install(*TEST_TOOLS, CORE, *PACKS["keras"])
    session.env["KERAS_BACKEND"] = "jax"
    session.run("python", "-c", "import keras; print('keras', keras.__version__, keras.backend.backend())")
    _pytest(session, TEST_DIRS["keras"])


@nox.session(python=PYTHON)
def keras_apps(session: nox.Session) -> None:
    """Keras applications with random weights through model.export(format="onnx") (minutes: not in `tests`)."""
    session.install(*TEST_TOOLS, CORE, *PACKS["keras"])
    session.env["KERAS_BACKEND"] = "jax"
    _pytest(session, ["packages/plugins-keras/tests_apps"])


@nox.session(python=PYTHON)
@nox.parametrize(("jax", "flax"), MATRIX, ids=[f"jax{j}-flax{f}" for j, f in MATRIX])
def matrix(session: nox.Session, jax: str, flax: str) -> None:
    """The full suite against each supported JAX/Flax pair."""
    session.install(*TEST_TOOLS, *MATRIX_PACKAGES, f"jax=={jax}", f"jaxlib=={jax}", f"flax=={flax}")
    session.run("python", "-c", "import jax, flax; print('jax', jax.__version__, 'flax', flax.__version__)")
    _pytest(session, MATRIX_TESTS)


@nox.session(python=PYTHON)
def minimal(session: nox.Session) -> None:
    """`pip install jax2onnx-core jax2onnx-nnx` is a working install (locally: core + nnx and what it pulls)."""
    session.install(CORE, "./packages/plugins-lax", "./packages/plugins-jnp", "./packages/plugins-nnx", "onnxruntime>=1.22")
    session.run("python", "tests/smoke_minimal_install.py")


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")


@nox.session(python=PYTHON)
def demo(session: nox.Session) -> None:
    """The README's main job: convert and verify the quickstart model."""
    session.install(*ALL_PACKAGES)
    session.run("python", "-m", "jax2onnx_examples.quickstart", os.path.join(ROOT, "quickstart_mlp.onnx"))


@nox.session(python=PYTHON)
def coverage_docs(session: nox.Session) -> None:
    """Render the coverage tables from the last `nox -s tests` results into docs/coverage.md."""
    session.install(*ALL_PACKAGES)
    session.run("jax2onnx", "coverage", "--results", REPORT, "--output", os.path.join(ROOT, "docs", "coverage.md"))


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Side-by-side benchmark against the peer (jax2onnx 0.17.1, in its own venv)."""
    session.install(*ALL_PACKAGES)
    session.run("python", "bench/compare_peer.py", *session.posargs)


@nox.session(python=PYTHON)
def bench_stream(session: nox.Session) -> None:
    """An 8 GB-parameter model exported from abstract weights + a safetensors file: the exporting
    process's peak RSS, and the model checked in onnxruntime against JAX layer by layer."""
    session.install(CORE + "[runtime]", "./packages/plugins-lax")
    session.run("python", "bench/stream_big.py", *(session.posargs or ["--gb", "8"]))


def _distributions() -> dict[str, str]:
    """distribution name -> folder, for `build`: every packages/*/pyproject.toml (a new pack is
    built, checked and smoke-tested without being listed here)."""
    import tomllib

    out = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "packages", "*", "pyproject.toml"))):
        with open(path, "rb") as f:
            out[tomllib.load(f)["project"]["name"]] = "./" + os.path.relpath(os.path.dirname(path), ROOT)
    return out


@nox.session(python=PYTHON)
def build(session: nox.Session) -> None:
    """Every sdist and wheel into dist/, `twine check --strict`, then each wheel alone in a fresh
    venv with only its declared dependencies (siblings from dist/) and a smoke conversion."""
    dist = os.path.join(ROOT, "dist")
    shutil.rmtree(dist, ignore_errors=True)
    session.install("twine>=5")
    distributions = _distributions()
    for folder in distributions.values():
        # uv builds the sdist first and the wheel from it, so a file missing from the sdist fails here.
        session.run("uv", "build", "--quiet", "--out-dir", dist, folder, external=True)
    session.run("twine", "check", "--strict", *sorted(glob.glob(os.path.join(dist, "*"))))
    python = session.run("python", "-c", "import sys; print(sys.executable)", silent=True).strip()
    for name in distributions:
        (wheel,) = glob.glob(os.path.join(dist, f"{name.replace('-', '_')}-*.whl"))
        with tempfile.TemporaryDirectory(prefix=f"{name}-") as venv:
            session.run("uv", "venv", "--quiet", "--python", python, venv, external=True)
            vpython = os.path.join(venv, "bin", "python")
            session.run("uv", "pip", "install", "--quiet", "--python", vpython, "--find-links", dist, wheel, external=True)
            session.run(vpython, os.path.join(ROOT, "tests", "smoke_wheel.py"), name, external=True,
                        env={"PATH": os.path.join(venv, "bin") + os.pathsep + os.environ.get("PATH", "")})
