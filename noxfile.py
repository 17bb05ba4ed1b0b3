"""Test matrix across packs and JAX/Flax versions.

    nox -s tests            # default: every pack's tests, newest JAX/Flax, testcases at opsets 23, 17, 13 (CI runs it)
    nox -s tests_core       # core alone (no pack installed), plus the minimal-install checks
    nox -s tests_lax tests_jnp tests_nnx tests_examples tests_linen tests_eqx
    nox -s keras            # the Keras pack and Keras 3's model.export(format="onnx") (JAX backend)
    nox -s keras_apps       # slow: Keras ResNet50, MobileNetV3Small, EfficientNetB0 exported and compared
    nox -s matrix           # the full suite in a floor cell (every declared minimum pinned) and a newest cell
    nox -s floors           # the floor cell on a subset covering every pack (what CI runs)
    nox -s opsets           # every testcase of every pack exported at opset 17 (LayerNormalization's)
    nox -s opsets_oldest    # every testcase of every pack exported at the oldest opset (13)
    nox -s web              # quickstart MLP, a CNN and a transformer layer in onnxruntime-web (wasm) under Node
    nox -s lint demo bench bench_targets bench_linalg bench_hf_families coverage_docs
    nox -s bench_llamacpp bench_int4_levels   # int4/int8 decode vs llama.cpp; by MatMulNBits accuracy level
    nox -s bench_7b         # a Llama-2-7B-shaped model streamed to an int4 genai folder (~30 min, 18 GB disk)
    nox -s docs             # the user guide (mkdocs build --strict) into site/
    nox -s fuzz stress      # long differential fuzzing; 8 threads x 20 rounds of concurrent exports
    nox -s build            # sdists + wheels, twine check, each wheel smoke-tested alone in a fresh venv;
                            # the plugin-pack template built, installed alone and its tests run
    nox -s release          # every wheel into wheelhouse/, versions/pins/CHANGELOGs checked, the README's
                            # `pip install --find-links wheelhouse ...` commands run, 0.17.1 upgraded from it
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
    "linen": ["./packages/plugins-lax", "./packages/plugins-jnp", "./packages/plugins-linen"],
    # diffrax: a test dependency of the eqx pack (its ODE-solve tests skip without it).
    "eqx": ["./packages/plugins-lax", "./packages/plugins-jnp", "./packages/plugins-eqx", "diffrax>=0.7"],
    # The LLM pack's tests run exported folders in onnxruntime-genai and compare with the models'
    # libraries (transformers' Flax classes, KerasHub, the examples pack's NNX Llama); each skips
    # with a reason when its library is absent.
    "llm": ["./packages/plugins-lax", "./packages/plugins-jnp", "./packages/plugins-nnx", "./packages/examples",
            "./packages/plugins-llm", "onnxruntime-genai>=0.18", "transformers>=4.57,<5", "keras-hub>=0.32"],
}
#: Google's `gemma` library (the LLM pack's gemma_lib front-end; its tests skip without it), installed
#: without its dependencies: they would downgrade protobuf (through kauldron) and add 132 packages
#: (tensorflow-datasets, grain, ...) that the model code never imports. These are what `gemma.gm`'s
#: transformers, sampler and tokenizer import beyond the "llm" pack's environment (TensorFlow comes
#: with keras-hub's tensorflow-text, jaxtyping with the eqx pack). gemma 4.x (Gemma 4) requires Python
#: >= 3.12 (its code and its new dependency `dialog` use the `type` statement): not on PYTHON's 3.11.
GEMMA_LIB = ["gemma==3.3.0", "kauldron==1.4.2", "clu", "lark", "typeguard", "einops", "immutabledict", "chex", "toolz",
             "ml-collections"]
TEST_DIRS = {
    "core": ["packages/core/tests"],
    "lax": ["packages/plugins-lax/tests"],
    "jnp": ["packages/plugins-jnp/tests"],
    "nnx": ["packages/plugins-nnx/tests"],
    "examples": ["packages/examples/tests"],
    "keras": ["packages/plugins-keras/tests"],
    "linen": ["packages/plugins-linen/tests"],
    "eqx": ["packages/plugins-eqx/tests"],
    "llm": ["packages/plugins-llm/tests"],
}
#: Keras (a 3 s install; its 193 tests took 5 min serially on the shared 2-core dev machine under
#: load ~10, split across the xdist workers here) is part of the default session; the JAX/Flax matrix
#: leaves it out (Keras pins its own JAX support, tested here with the newest JAX only).
#: Linen (flax is installed already) and Equinox with diffrax for its tests (equinox, jaxtyping,
#: wadler-lindig, diffrax, lineax, optimistix: a 4 s install) are part of it too.
ALL_PACKAGES = [CORE, *PACKS["examples"], "./packages/plugins-keras", "./packages/plugins-linen", *PACKS["eqx"][2:],
                *PACKS["llm"][4:]]
ALL_TESTS = [d for dirs in TEST_DIRS.values() for d in dirs] + ["tests"]
#: The default session's tests: all but the LLM pack's, which export and generate tiny models of every
#: family in onnxruntime-genai (~4 of the default session's 14 minutes on the 2-core machine once
#: every KerasHub family ran on both targets) and run in `tests_llm`; CI (.ci/run) runs both.
DEFAULT_TESTS = [d for d in ALL_TESTS if d not in TEST_DIRS["llm"]]
#: onnxruntime is an optional extra of core (jax2onnx-core[runtime]); every test session verifies with it.
#: sympy: onnxruntime.transformers' optimizer (the target="onnxruntime" tests) imports it; onnxruntime 1.31 does not install it.
#: pillow: transformers' ViTImageProcessor (the transformers.js image-classification folder test) reads images with it.
TEST_TOOLS = ["pytest>=8", "pytest-xdist>=3", "onnxruntime>=1.31", "hypothesis>=6.100", "sympy", "pillow"]
#: `opsets` runs every testcase at 17, the oldest opset with LayerNormalization (every fused
#: normalization native); `opsets_oldest` at the oldest to_onnx accepts (jax2onnx.ir.opsets.MIN_OPSET),
#: where legalize_opset13 rewrites the forms of 14-17.
FLOOR_OPSET = 17
OLDEST_OPSET = 13
#: `tests` exports every testcase variant at the default opset, 17 and 13 in one test: JAX's side of
#: the comparison, most of a variant's time, is computed once for the three (testing/runner.py's
#: Variant.more_opsets). `opsets`/`opsets_oldest` run one opset alone.
EVERY_OPSET = (f"--jax2onnx-opset=default,{FLOOR_OPSET},{OLDEST_OPSET}",)
#: Every pack's testcase file (the variant tests the --jax2onnx-opset option re-targets).
TESTCASE_FILES = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "packages", "*", "tests", "test_testcases.py")))
#: The components whose testcases the floor cell runs in CI: every pack, and the version-sensitive
#: seams (tracing internals in compat.py, control flow, fusions through marked calls, NNX/Linen
#: module state, conv layouts, attention, random streams, the examples' models).
FLOOR_TESTCASES = [
    "lax.add", "lax.sin", "lax.dot_general", "lax.conv", "lax.scan", "lax.while_loop", "lax.cond", "lax.reduce_max",
    "lax.scatter_add", "lax.cumsum", "lax.dynamic_slice", "jnp.mean", "jnp.where", "nn.gelu", "nn.softmax",
    "jax.random.split", "core.dim_as_value", "physics.parseval", "nnx.linear", "nnx.layer_norm", "nnx.conv",
    "nnx.multi_head_attention", "nnx.batch_norm", "nnx.embed", "nnx.rms_norm", "linen.dense", "linen.layer_norm",
    "linen.conv", "linen.multi_head_dot_product_attention", "linen.batch_norm", "keras.Conv",
    "keras.LayerNormalization", "keras.MultiHeadAttention", "MLP", "CNN", "TransformerBlock", "onnx_functions_000",
]
#: What `floors` runs: every test that is not a testcase variant, and the variants of FLOOR_TESTCASES
#: (test ids read "test_testcase[<component>::<variant>]").
FLOOR_SUBSET = "not test_testcase or " + " or ".join(f"[{name}::" for name in FLOOR_TESTCASES)
REPORT = os.path.join(ROOT, "docs", "test-results.json")
#: The plugin-pack template users copy (templates/plugin-pack): `tests` builds its wheel and installs
#: it as a third-party pack would be (entry point, package contents), then runs its tests; `build`
#: also tests it in a fresh venv with only its declared dependencies.
TEMPLATE = "./templates/plugin-pack"
TEMPLATE_DIST = "jax2onnx-mypack"
TEMPLATE_TESTS = "templates/plugin-pack/tests"


def _uv() -> list[str]:
    """uv as nox's own interpreter has it (`pip install nox uv` puts it there; its script folder
    need not be on PATH on a fresh machine), else from PATH."""
    import importlib.util
    import sys

    return [sys.executable, "-m", "uv"] if importlib.util.find_spec("uv") else ["uv"]


UV = _uv()


def _install_template(session: nox.Session) -> None:
    """Build the template pack's wheel (uv, as `build` does) and install it without dependencies
    (core and lax are installed already). Reinstalled every run: a reused venv would otherwise
    keep an older build of the same version."""
    out = os.path.join(session.create_tmp(), "template-wheel")
    shutil.rmtree(out, ignore_errors=True)
    # run_install: the wheel is part of the environment (`--install-only` builds and installs it too)
    session.run_install(*UV, "build", "--wheel", "--quiet", "--out-dir", out, TEMPLATE, external=True)
    (wheel,) = glob.glob(os.path.join(out, "*.whl"))
    reinstall = ["--reinstall-package", TEMPLATE_DIST] if session.venv_backend == "uv" else ["--force-reinstall"]
    session.install("--no-deps", *reinstall, wheel)


def _pytest(session: nox.Session, paths: list[str], *extra: str) -> None:
    workers = os.environ.get("JAX2ONNX_TEST_WORKERS", "auto" if (os.cpu_count() or 1) > 1 else "0")
    # --durations: the slowest tests of each session in CI's log, where keeping .ci/run within its time starts
    session.run("python", "-m", "pytest", "-q", "-n", workers, "-p", "no:cacheprovider", "--durations=15", *extra, *paths,
                *session.posargs)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Every pack's tests but the LLM pack's (``tests_llm``) in one environment with the newest JAX/Flax,
    every testcase at the default opset, 17 and 13 (what ``opsets`` and ``opsets_oldest`` run alone);
    writes the coverage results (default opset)."""
    session.install(*TEST_TOOLS, *ALL_PACKAGES)
    _install_template(session)
    session.env["KERAS_BACKEND"] = "jax"
    if os.path.exists(REPORT):
        os.remove(REPORT)
    _pytest(session, [*DEFAULT_TESTS, TEMPLATE_TESTS], f"--jax2onnx-report={REPORT}", *EVERY_OPSET)


@nox.session(python=PYTHON)
def tests_llm(session: nox.Session) -> None:
    """The LLM pack's tests in the default session's environment (every pack installed): each family's
    tiny model exported and generated in onnxruntime-genai against the library's own tokens."""
    session.install(*TEST_TOOLS, *ALL_PACKAGES)
    session.install("--no-deps", *GEMMA_LIB)
    session.env["KERAS_BACKEND"] = "jax"
    _pytest(session, TEST_DIRS["llm"])


@nox.session(python=PYTHON)
def tests_core(session: nox.Session) -> None:
    """Core alone: no pack installed, its own tests use test-only packs; no rich either (optional for
    core: the tests of what it prints skip without it and run in ``tests``, where flax brings it)."""
    session.install(*TEST_TOOLS, CORE)
    _pytest(session, TEST_DIRS["core"])


@nox.session(python=PYTHON)
@nox.parametrize("pack", ["lax", "jnp", "nnx", "examples", "keras", "linen", "eqx"])
def tests_pack(session: nox.Session, pack: str) -> None:
    """One pack with just the packs it depends on."""
    session.install(*TEST_TOOLS, CORE, *PACKS[pack])
    session.env["KERAS_BACKEND"] = "jax"
    _pytest(session, TEST_DIRS[pack])


@nox.session(python=PYTHON)
def fuzz(session: nox.Session) -> None:
    """Long differential fuzzing: random JAX programs vs their exports (the default session runs
    a short derandomized profile). JAX2ONNX_FUZZ_EXAMPLES sets the count (default here 2000).
    Then the full dtype sweep (tests/test_dtype_sweep.py: every function x dtype pair)."""
    session.install(*TEST_TOOLS, *ALL_PACKAGES)
    session.env["JAX2ONNX_FUZZ_LONG"] = "1"
    session.env["JAX2ONNX_FUZZ_EXAMPLES"] = os.environ.get("JAX2ONNX_FUZZ_EXAMPLES", "2000")
    # If onnxruntime itself crashes on a program (a signal, no report), this log's last line names it.
    session.env["JAX2ONNX_FUZZ_LOG"] = log = os.path.join(session.create_tmp(), "fuzz_programs.log")
    session.log(f"programs are logged to {log}")
    session.run("python", "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "tests/test_fuzz.py", *session.posargs)
    # every (function, dtype) pair of the dtype sweep, not the default session's quarter
    session.env["JAX2ONNX_DTYPE_SWEEP"] = "full"
    session.run("python", "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "tests/test_dtype_sweep.py")
    session.env["JAX2ONNX_DTYPE_SWEEP_OPSET"] = "17"  # the floor opset: older op versions, older kernels
    session.run("python", "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "tests/test_dtype_sweep.py")


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


def _floor_pins() -> list[str]:
    """Every third-party minimum declared in packages/*/pyproject.toml (dependencies and extras),
    pinned exactly: "onnx>=1.18" -> "onnx==1.18"; jaxlib at jax's floor. A floor added or raised in
    a pyproject is tested without editing this file."""
    import re
    import tomllib

    floors: dict[str, str] = {}
    for path in glob.glob(os.path.join(ROOT, "packages", "*", "pyproject.toml")):
        with open(path, "rb") as f:
            project = tomllib.load(f)["project"]
        reqs = list(project.get("dependencies", []))
        reqs += [r for extra in project.get("optional-dependencies", {}).values() for r in extra]
        for req in reqs:
            m = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*>=\s*([0-9][0-9.]*)\s*(,.*)?", req)
            if m is None or m.group(1).startswith("jax2onnx"):
                continue
            name, version = m.group(1).lower(), m.group(3)
            key = tuple(int(p) for p in version.split("."))
            if name not in floors or key > tuple(int(p) for p in floors[name].split(".")):
                floors[name] = version
    if "jax" in floors:
        floors.setdefault("jaxlib", floors["jax"])
    return [f"{name}=={version}" for name, version in sorted(floors.items())]


#: Every package of the repository (a new pack joins the matrix and `opsets` without an edit here).
EVERY_PACKAGE = sorted("./" + os.path.relpath(os.path.dirname(p), ROOT) for p in glob.glob(os.path.join(ROOT, "packages", "*", "pyproject.toml")))
VERSIONS = ("import importlib.metadata as m; print(', '.join(f'{d} {m.version(d)}' for d in "
            "('jax', 'jaxlib', 'flax', 'equinox', 'keras', 'onnx', 'onnx-ir', 'onnxruntime', 'numpy')))")


def _matrix_cell(session: nox.Session, cell: str, *pytest_args: str) -> None:
    pins = _floor_pins() if cell == "floor" else []
    session.install(*TEST_TOOLS, *EVERY_PACKAGE, *pins)
    session.env["KERAS_BACKEND"] = "jax"
    session.run("python", "-c", VERSIONS)
    _pytest(session, _every_test_dir(), *pytest_args)


def _every_test_dir() -> list[str]:
    """Every package's tests folder (those holding tests) and the root tests."""
    dirs = (os.path.relpath(os.path.dirname(p), ROOT) for p in glob.glob(os.path.join(ROOT, "packages", "*", "tests", "test_*.py")))
    return sorted(set(dirs)) + ["tests"]


@nox.session(python=PYTHON)
@nox.parametrize("cell", ["floor", "newest"])
def matrix(session: nox.Session, cell: str) -> None:
    """The full suite in two cells: "floor" pins every declared minimum (jax/jaxlib, flax, equinox,
    keras, onnx, onnx-ir, onnxruntime, numpy, pluggy: see _floor_pins), "newest" lets the resolver
    take the newest of each."""
    _matrix_cell(session, cell)


@nox.session(python=PYTHON)
def floors(session: nox.Session) -> None:
    """The floor cell on FLOOR_SUBSET: core's and the root tests in full, and testcases covering
    every pack (CI runs this; `nox -s "matrix(cell='floor')"` runs every testcase)."""
    _matrix_cell(session, "floor", "-k", FLOOR_SUBSET)


@nox.session(python=PYTHON)
def opsets(session: nox.Session) -> None:
    """Every testcase of every pack exported at the floor opset: onnx.checker full_check, onnxruntime
    and the JAX comparison, as the default session does at opset 23 (docs/opsets.md)."""
    session.install(*TEST_TOOLS, *EVERY_PACKAGE)
    session.env["KERAS_BACKEND"] = "jax"
    _pytest(session, TESTCASE_FILES, f"--jax2onnx-opset={FLOOR_OPSET}")


@nox.session(python=PYTHON)
def opsets_oldest(session: nox.Session) -> None:
    """Every testcase of every pack exported at the oldest opset (13), checked as in `opsets`; a
    testcase no form at 13 expresses declares min_opset and its variant checks the export's
    OpUnavailableError instead (docs/opsets.md lists them)."""
    session.install(*TEST_TOOLS, *EVERY_PACKAGE)
    session.env["KERAS_BACKEND"] = "jax"
    _pytest(session, TESTCASE_FILES, f"--jax2onnx-opset={OLDEST_OPSET}")


@nox.session(python=PYTHON)
def web(session: nox.Session) -> None:
    """onnxruntime-web, the wasm backend browsers run without WebGPU, under Node.js: the quickstart
    MLP, a CNN and a pre-LN transformer layer exported with export_mode="web" at opsets 23 and 17,
    compared with JAX (tests/web; the npm package pinned by tests/web/package-lock.json)."""
    session.install(CORE, *PACKS["nnx"])
    web_dir = os.path.join(ROOT, "tests", "web")
    session.run("npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--prefix", web_dir, external=True)
    session.run("python", os.path.join(web_dir, "check_web.py"))


@nox.session(python=PYTHON)
def minimal(session: nox.Session) -> None:
    """`pip install jax2onnx-core jax2onnx-nnx` is a working install (locally: core + nnx and what it pulls)."""
    session.install(CORE, "./packages/plugins-lax", "./packages/plugins-jnp", "./packages/plugins-nnx", "onnxruntime>=1.31")
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


#: The user guide's tools (only this session installs them).
DOCS_TOOLS = ["mkdocs>=1.6", "mkdocs-material>=9.5", "mkdocstrings[python]>=0.27", "ruff>=0.6"]


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """The user guide (docs/, mkdocs.yml) built with `mkdocs build --strict` into site/ (gitignored):
    a broken link, a missing snippet file or a docstring the API reference cannot render fails it.
    The guide's code blocks are run by tests/test_guide.py in the default session. The API
    reference reads core's and the LLM pack's source statically (mkdocstrings), so no package is installed here."""
    session.install(*DOCS_TOOLS)
    session.env["NO_MKDOCS_2_WARNING"] = "1"  # mkdocs-material's banner about its successor
    session.run("mkdocs", "build", "--strict", "--site-dir", os.path.join(ROOT, "site"))


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Side-by-side benchmark against the peer (jax2onnx 0.17.1, in its own venv)."""
    session.install(*ALL_PACKAGES)
    session.run("python", "bench/compare_peer.py", *session.posargs)


@nox.session(python=PYTHON)
def bench_rewrite_precheck(session: nox.Session) -> None:
    """The rewrite stage's pre-check (no start op: no shape inference, no rules): export CPU time with it
    and without it on a candidate-free MLP, a CNN as the control (bench/rewrite_precheck.py)."""
    session.install(CORE, *PACKS["nnx"])
    session.run("python", "bench/rewrite_precheck.py", *(session.posargs or ["--repeats", "15"]))


@nox.session(python=PYTHON)
def bench_targets(session: nox.Session) -> None:
    """Our exports per target= (generic, onnxruntime) against JAX-jit at 1 and 2 threads: the NNX stacks, the
    Hugging Face models (transformers), ViT-tiny, GPT-2 small, the BERT-base-sized encoder and the 300 M stack
    (bench/results/targets.md; on an idle machine: nox -s bench_targets -- --budget 10)."""
    session.install(*ALL_PACKAGES, "transformers>=4.57,<5")
    session.run("python", "bench/targets.py", *session.posargs)


@nox.session(python=PYTHON)
def bench_tensorrt(session: nox.Session) -> None:
    """On a machine with an NVIDIA GPU: target="tensorrt" exports as TensorRT engines and onnxruntime
    CUDA/TensorRT sessions against JAX-jit on the GPU (bench/tensorrt_bench.py; not yet run)."""
    session.install(*ALL_PACKAGES, "transformers>=4.57,<5", "tensorrt>=10,<11", "cuda-python>=12", "jax[cuda12]")
    # onnxruntime-gpu is the same `onnxruntime` module with the CUDA/TensorRT providers: replace the CPU one
    session.run("python", "-m", "pip", "uninstall", "-y", "onnxruntime")
    session.install("onnxruntime-gpu")
    session.run("python", "bench/tensorrt_bench.py", *session.posargs)


@nox.session(python=PYTHON)
def bench_hf_families(session: nox.Session) -> None:
    """Node counts across ~30 Hugging Face Flax families against the published jax2onnx 0.17.1 (in its
    own venv, ``-- --peer-python PATH``), symbolic batch; ``-- --static`` for batch 2. Also the ONNX
    Attention op against its decomposed graph in onnxruntime (bench/attention_op.py)."""
    session.install(*ALL_PACKAGES, "transformers>=4.57,<5")
    session.run("python", "bench/hf_families.py", *session.posargs)
    session.run("python", "bench/attention_op.py")


@nox.session(python=PYTHON)
def bench_stream(session: nox.Session) -> None:
    """An 8 GB-parameter model exported from abstract weights + a safetensors file: the exporting
    process's peak RSS, and the model checked in onnxruntime against JAX layer by layer."""
    session.install(CORE + "[runtime]", "./packages/plugins-lax")
    session.run("python", "bench/stream_big.py", *(session.posargs or ["--gb", "8"]))


@nox.session(python=PYTHON)
def bench_orbax(session: nox.Session) -> None:
    """A >= 1 B-parameter Orbax checkpoint (random weights, written first) exported through
    Weights(abstract, <folder>), read array by array: the exporting process's peak RSS (issue #34:
    at most the largest tensor + 1 GiB) and every kernel checked against the saved one."""
    session.install(CORE + "[runtime,orbax]", "./packages/plugins-lax")
    session.run("python", "bench/orbax_stream.py", *session.posargs)


@nox.session(python=PYTHON)
def bench_linalg(session: nox.Session) -> None:
    """Linear algebra in onnxruntime against JAX-jit, one thread each (bench/linalg_bench.py: latency
    and residuals; arguments go to it), then the accuracy over many matrices (bench/linalg_accuracy.py);
    then solve/inv/cholesky again under target="onnxruntime" (com.microsoft.Inverse: the jnp pack's
    regions, the lax pack's float32 cholesky by halving)."""
    session.install(CORE + "[runtime]", "./packages/plugins-lax", "./packages/plugins-jnp")
    session.run("python", "bench/linalg_bench.py", *(session.posargs or ["--sizes", "64,256"]))
    session.run("python", "bench/linalg_accuracy.py")
    ort_target = ["--sizes", "64,256", "--funcs", "solve,inv,cholesky", "--target", "onnxruntime"]
    session.run("python", "bench/linalg_bench.py", *ort_target, "--dtypes", "float32,float64")
    session.run("python", "bench/linalg_accuracy.py", *ort_target)


@nox.session(python=PYTHON)
def bench_precision(session: nox.Session) -> None:
    """float32/float16/bfloat16/int8/int4 side by side on GPT-2-small and ViT-B-sized random models:
    file size, onnxruntime CPU latency at 1 and 2 threads, accuracy (``-- --size smoke`` for tiny ones)."""
    session.install(*ALL_PACKAGES)
    session.run("python", "bench/precision_bench.py", "--json", "bench/results/precision.json", *session.posargs)


@nox.session(python=PYTHON)
def bench_llm(session: nox.Session) -> None:
    """onnxruntime-genai vs JAX-jit cached greedy generation on GPT-2 small (HF Flax, random weights;
    ``-- --model nnx-llama`` for the Llama-style NNX model): decode tokens/s and prefill latency at 1
    and 2 threads (``-- --size smoke`` for a tiny one; results in bench/results/llm.md)."""
    session.install(CORE + "[runtime]", *PACKS["llm"])  # transformers: the default model is HF's GPT-2
    session.run("python", "bench/llm_bench.py", *session.posargs)


@nox.session(python=PYTHON)
def bench_int4_levels(session: nox.Session) -> None:
    """int4 decode tok/s by MatMulNBits accuracy level (float32, int4 at 1, "auto", 4) on the NNX Llama
    at GPT-2-small size in onnxruntime-genai, 1 and 4 threads (``-- --size smoke`` for a tiny one;
    bench/int4_levels.py, results in bench/results/int4_levels.json). Not in CI."""
    session.install(CORE + "[runtime]", *PACKS["llm"][:5], "onnxruntime-genai>=0.18")
    session.run("python", "bench/int4_levels.py", *session.posargs)


@nox.session(python=PYTHON)
def bench_llamacpp(session: nox.Session) -> None:
    """Decode tokens/s of our genai folders (float32, int8, int4 at accuracy level 1 and 4; any Precision
    fields via ``--variants``) against llama.cpp running Q4_0 / Q8_0 / F32 GGUFs of the same random
    weights, interleaved, at 1 and 4 threads, with the measured copy bandwidth and each side's fraction
    of the bandwidth bound (bench/llamacpp_bench.py; ``-- --size 1.1b``, ``--profile``; results in
    bench/results/llamacpp.md). llama-cpp-python compiles from source on install (minutes). Not in CI;
    on the offline accelerator host: bench/tpu_host_decode.sh."""
    session.install(CORE + "[runtime]", *PACKS["llm"][:5], "onnxruntime-genai>=0.18", "gguf>=0.19",
                    "llama-cpp-python>=0.3.36")
    session.run("python", "bench/llamacpp_bench.py", *(session.posargs or ["--size", "125m"]))


@nox.session(python=PYTHON)
def bench_llm_attention(session: nox.Session) -> None:
    """One decode step in onnxruntime (1 thread): the LLM pack's Attention-23 and GroupQueryAttention
    against the decomposed attention, same decoder (``-- --past 1024`` for a longer cache)."""
    session.install(CORE + "[runtime]", *PACKS["llm"][:5])
    session.run("python", "bench/llm_attention_ops.py", *session.posargs)


@nox.session(python=PYTHON)
def bench_llm_stream(session: nox.Session) -> None:
    """A 1.1 B-parameter Llama-style model exported with weights streamed from a safetensors file
    (the export's peak RSS), then generating in onnxruntime-genai (``-- --size 250m``, ``--precision
    int4``; ``--size smoke`` for a tiny one). Results: bench/results/llm_stream_big-<size>-<precision>.json
    and llm_stream_big.md."""
    session.install(CORE + "[runtime]", *PACKS["llm"][:5], "onnxruntime-genai>=0.18")
    session.run("python", "bench/llm_stream_big.py", *session.posargs)


@nox.session(python=PYTHON)
def bench_7b(session: nox.Session) -> None:
    """A Llama-2-7B-shaped model (6.7 B parameters, random bfloat16 weights written first: 13.5 GB
    of disk, plus the 4 GB folder; both removed after) exported to an int4 onnxruntime-genai folder
    with its weights streamed (issue #35: the export's peak RSS <= 2.5 GiB), then 8 tokens generated
    in onnxruntime-genai: peak RSS, wall and CPU time, tokens/s into
    bench/results/llm_stream_big-7b-int4.json and llm_stream_big.md. Tens of minutes; not in CI."""
    session.install(CORE + "[runtime]", *PACKS["llm"][:5], "onnxruntime-genai>=0.18")
    session.run("python", "bench/llm_stream_big.py", "--size", "7b", "--precision", "int4", *session.posargs)


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
        session.run(*UV, "build", "--quiet", "--out-dir", dist, folder, external=True)
    session.run("twine", "check", "--strict", *sorted(glob.glob(os.path.join(dist, "*"))))
    python = session.run("python", "-c", "import sys; print(sys.executable)", silent=True).strip()
    for name in distributions:
        (wheel,) = glob.glob(os.path.join(dist, f"{name.replace('-', '_')}-*.whl"))
        with tempfile.TemporaryDirectory(prefix=f"{name}-") as venv:
            session.run(*UV, "venv", "--quiet", "--python", python, venv, external=True)
            vpython = os.path.join(venv, "bin", "python")
            session.run(*UV, "pip", "install", "--quiet", "--refresh", "--python", vpython, "--find-links", dist, wheel, external=True)
            session.run(vpython, os.path.join(ROOT, "tests", "smoke_wheel.py"), name, external=True,
                        env={"PATH": os.path.join(venv, "bin") + os.pathsep + os.environ.get("PATH", "")})
    # The template pack as its users publish it: sdist + wheel (kept out of dist/, it is not released),
    # twine check, then its wheel alone with its declared dependencies and test extra, and its tests.
    template_dist = os.path.join(session.create_tmp(), "template-dist")
    shutil.rmtree(template_dist, ignore_errors=True)
    session.run(*UV, "build", "--quiet", "--out-dir", template_dist, TEMPLATE, external=True)
    session.run("twine", "check", "--strict", *sorted(glob.glob(os.path.join(template_dist, "*"))))
    (wheel,) = glob.glob(os.path.join(template_dist, "*.whl"))
    with tempfile.TemporaryDirectory(prefix="template-") as venv:
        session.run(*UV, "venv", "--quiet", "--python", python, venv, external=True)
        vpython = os.path.join(venv, "bin", "python")
        session.run(*UV, "pip", "install", "--quiet", "--refresh", "--python", vpython, "--find-links", dist,
                    f"{wheel}[test]", external=True)
        session.run(vpython, "-m", "pytest", "-q", "-p", "no:cacheprovider", TEMPLATE_TESTS, external=True)


@nox.session(python=PYTHON)
def release(session: nox.Session) -> None:
    """Every wheel into wheelhouse/ (what the README's `pip install --find-links wheelhouse ...`
    reads), then tests/release.py: versions, inter-package pins and CHANGELOG entries agree; each
    README install command works in a fresh venv; jax2onnx 0.17.1 from the index upgrades to the
    wheelhouse's `jax2onnx` and uninstalls cleanly (docs/architecture.md "Distributions")."""
    wheelhouse = os.path.join(ROOT, "wheelhouse")
    shutil.rmtree(wheelhouse, ignore_errors=True)
    session.install("packaging>=23")
    for folder in _distributions().values():
        session.run(*UV, "build", "--quiet", "--wheel", "--out-dir", wheelhouse, folder, external=True)
    script = os.path.join(ROOT, "tests", "release.py")
    session.run("python", script, "check")
    session.run("python", script, "readme", wheelhouse)
    session.run("python", script, "upgrade", wheelhouse)
