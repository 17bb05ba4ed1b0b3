"""Decode tokens/s of our onnxruntime-genai export against llama.cpp on the same Llama shapes and
weights, at the same thread counts, with the memory-bandwidth bound of each (issue #44).

    python bench/llamacpp_bench.py --size smoke                 # a tiny one: checks the script runs
    python bench/llamacpp_bench.py --size 125m --threads 1,4    # GPT-2-small-sized Llama (llm_bench's preset)
    python bench/llamacpp_bench.py --size 1.1b --workdir /tmp/llcpp --stage build   # then --stage time
    python bench/llamacpp_bench.py --size 7b --variants int4 --gguf Q4_0 --threads 1,4,12
    python bench/llamacpp_bench.py --variants "int4,int4:accuracy_level=4,int4:lm_head=int8" --profile

Sizes: the examples pack's NNX Llama at ``125m`` (bench/llm_bench.py's ``gpt2-small``) and at
bench/llm_stream_big.py's ``smoke``, ``1.1b`` (its ``1b``, TinyLlama's shape) and ``7b`` (Llama-2-7B's).
``--prompt`` and ``--new-tokens`` set the folders' context length at the build: give the time stage
the same (or smaller) ones.

Build stage (each artifact is reused when its file exists in ``--workdir``, written under a
temporary name and renamed, so a stage cut off by a time limit resumes where it stopped):

1. random weights written to ``weights.safetensors`` one tensor at a time (llm_stream_big.py's
   writer: float32, bfloat16 at 7 B), so nothing holds the whole model in memory;
2. one streamed ``export_causal_lm(..., cache="shared", weights=<file>)`` per ``--variants`` entry
   (a precision name, or ``kind:field=value,...`` with jax2onnx.Precision's fields, e.g.
   ``int4:accuracy_level=4``), each in a fresh process (llm_stream_big.py's);
3. one GGUF per ``--gguf`` type (``Q4_0``, ``Q8_0``, ``F32``) with the SAME weights: every 2-D
   weight transposed to GGUF's (out, in), the query and key rows of each head reordered from the
   half-split rotary convention our model uses to the adjacent-pairs one llama.cpp's Llama applies
   (so the two compute the same function), quantized by gguf-py's reference quantizers in a process
   pool; every matrix in the one type (llama.cpp's quantizer would keep the output head at Q6_K);
   a synthetic vocabulary (the bench feeds token ids, no text).

Time stage, one fresh process per thread count, pinned to that many cores (both runtimes alike):

- memory bandwidth: numpy copies of 256 MiB per thread on that many threads at once, (read +
  written bytes) / s, best of 5;
- every genai folder (intra-op threads set by a config overlay) and every GGUF
  (``llama_cpp.Llama(n_threads=N)`` with a persistent ggml thread pool attached, as llama.cpp's own
  programs do: llama-cpp-python attaches none, and a build without OpenMP then starts its threads
  anew for every token) loaded; then ``--runs`` interleaved rounds, the order
  alternating: the same ``--prompt`` random ids, prefill, then ``--new-tokens`` greedy tokens, the
  end-of-sequence token masked on both sides (genai: ``min_length``) so both always make as many.
  decode tok/s = (new tokens - 1) / (time after the prefill's first token), median of the rounds;
- the bound: bandwidth / weight bytes read per token (every initializer or GGUF tensor but the
  embedding table, of which one row is read); fraction = measured / bound;
- ``--profile``: onnxruntime's profiler in genai's session of the first int4 variant at 1 thread,
  kernel time per decode step by op type (the prefill run left out).

Writes ``<out>/llamacpp-<size>-t<threads>.json`` and rebuilds ``<out>/llamacpp.md`` from every such file
(``--out``, default bench/results). Needs ``llama-cpp-python`` and ``gguf`` beside the LLM pack and
onnxruntime-genai. Not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from llm_bench import LLAMA_SIZES, op_profile_events  # noqa: E402
from llm_stream_big import EXPORT, SOURCE_DTYPE, WRITE, child  # noqa: E402
from llm_stream_big import SIZES as STREAM_SIZES  # noqa: E402

SIZES = {"smoke": STREAM_SIZES["smoke"], "125m": LLAMA_SIZES["gpt2-small"], "1.1b": STREAM_SIZES["1b"],
         "7b": STREAM_SIZES["7b"]}
DEFAULT_VARIANTS = {"7b": "int4,int4:accuracy_level=4"}  # a float32 7 B folder would be 27 GB
ALL_VARIANTS = "float32,int4,int4:accuracy_level=4,int8"
#: an F32 GGUF where it is cheap: its tokens against our float32 export's check the GGUF's weights
DEFAULT_GGUF = {"smoke": "Q4_0,Q8_0,F32", "125m": "Q4_0,Q8_0,F32", "1.1b": "Q4_0,Q8_0", "7b": "Q4_0"}
#: which GGUF type each variant is compared with (same bits per weight, roughly)
PAIRS = {"float32": "F32", "int8": "Q8_0", "int4": "Q4_0"}
ROPE_THETA, RMS_EPS, EOS = 10000.0, 1e-6, 2  # the examples pack's LlamaConfig defaults


# --- variants ----------------------------------------------------------------------------------

def parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    """``"int4:accuracy_level=4,lm_head=int8,symmetric=true"`` -> (a file-safe tag, Precision's fields)."""
    kind, _, rest = text.partition(":")
    fields: dict[str, Any] = {"kind": kind.strip()}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq:
            raise SystemExit(f"--variants: {item!r} in {text!r} is not field=value (e.g. int4:accuracy_level=4)")
        fields[key.strip()] = (None if value == "none" else {"true": True, "false": False}.get(value.lower(), value)
                               if not value.lstrip("-").isdigit() else int(value))
    tag = "-".join([fields["kind"], *(f"{k}{v}" for k, v in fields.items() if k != "kind")]).replace("_", "")
    return tag, fields


# --- GGUF --------------------------------------------------------------------------------------

def gguf_plan(cfg: dict[str, int]) -> list[tuple[str, str, str]]:
    """(GGUF name, our weight name, how to turn ours into GGUF's layout) for every weight."""
    plan = [("token_embd.weight", "embed.embedding.value", "as is")]
    for i in range(cfg["num_layers"]):
        b = f"blocks.{i}."
        plan += [(f"blk.{i}.attn_norm.weight", b + "attn_norm.scale.value", "as is"),
                 (f"blk.{i}.attn_q.weight", b + "q.kernel.value", "transpose, rotary pairs q"),
                 (f"blk.{i}.attn_k.weight", b + "k.kernel.value", "transpose, rotary pairs kv"),
                 (f"blk.{i}.attn_v.weight", b + "v.kernel.value", "transpose"),
                 (f"blk.{i}.attn_output.weight", b + "o.kernel.value", "transpose"),
                 (f"blk.{i}.ffn_norm.weight", b + "mlp_norm.scale.value", "as is"),
                 (f"blk.{i}.ffn_gate.weight", b + "gate.kernel.value", "transpose"),
                 (f"blk.{i}.ffn_up.weight", b + "up.kernel.value", "transpose"),
                 (f"blk.{i}.ffn_down.weight", b + "down.kernel.value", "transpose")]
    return plan + [("output_norm.weight", "norm.scale.value", "as is"), ("output.weight", "lm_head.kernel.value", "transpose")]


def gguf_layout(w: Any, how: str, cfg: dict[str, int]) -> Any:
    """Our (in, out) kernel as GGUF's (out, in) rows; query/key rows of each head from the
    half-split rotary order (x_j pairs with x_{j+d/2}) to adjacent pairs (x_2j with x_2j+1), which
    is what llama.cpp's Llama rotates: the same rotation, the head's features in another order."""
    import numpy as np

    w = np.asarray(w, np.float32)
    if how.startswith("transpose"):
        w = w.T
    if "rotary pairs" in how:
        heads = cfg["num_heads"] if how.endswith(" q") else cfg["num_kv_heads"]
        half = cfg["hidden_size"] // cfg["num_heads"] // 2
        w = w.reshape(heads, 2, half, w.shape[-1]).swapaxes(1, 2).reshape(w.shape)
    return np.ascontiguousarray(w)


def _quantized(job: tuple[str, str, str, str, dict[str, int]]) -> Any:
    """One tensor read from the safetensors file, laid out and quantized (a pool worker's task)."""
    import gguf
    from jax2onnx.export.weights import SafetensorsSource

    source, ours, how, qtype, cfg = job
    w = gguf_layout(SafetensorsSource(source).load(ours), how, cfg)
    if w.ndim == 1 or qtype == "F32":  # norms stay float32, as llama.cpp's converter leaves them
        return w
    return gguf.quants.quantize(w, gguf.GGMLQuantizationType[qtype])


def write_gguf(path: str, source: str, cfg: dict[str, int], qtype: str, workers: int) -> None:
    """A llama-architecture GGUF of the weights in ``source`` (tensor by tensor, in a process pool)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    import gguf
    import numpy as np
    from jax2onnx.export.weights import SafetensorsSource

    plan = gguf_plan(cfg)
    catalog = SafetensorsSource(source).catalog()
    if sorted(catalog) != sorted(ours for _, ours, _ in plan):  # the GGUF must be the whole model, nothing else
        raise SystemExit(f"{source}: weights {sorted(set(catalog) ^ {o for _, o, _ in plan})} do not map to GGUF names")
    qt = gguf.GGMLQuantizationType[qtype]
    file_type = {"F32": gguf.LlamaFileType.ALL_F32, "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
                 "Q4_0": gguf.LlamaFileType.MOSTLY_Q4_0}[qtype]
    writer = gguf.GGUFWriter(path + ".tmp", "llama")
    writer.add_name(f"jax2onnx bench Llama {cfg['hidden_size']}x{cfg['num_layers']} {qtype}")
    writer.add_context_length(cfg["max_positions"])
    writer.add_embedding_length(cfg["hidden_size"])
    writer.add_block_count(cfg["num_layers"])
    writer.add_feed_forward_length(cfg["intermediate_size"])
    writer.add_head_count(cfg["num_heads"])
    writer.add_head_count_kv(cfg["num_kv_heads"])
    writer.add_rope_dimension_count(cfg["hidden_size"] // cfg["num_heads"])
    writer.add_rope_freq_base(ROPE_THETA)
    writer.add_layer_norm_rms_eps(RMS_EPS)
    writer.add_vocab_size(cfg["vocab_size"])
    writer.add_file_type(file_type)
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    # A synthetic SentencePiece-style vocabulary: unknown, begin, end, then one piece per id.
    vocab = cfg["vocab_size"]
    writer.add_tokenizer_model("llama")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(["<unk>", "<s>", "</s>"] + [f"\u2581t{i}" for i in range(3, vocab)])
    writer.add_token_scores([0.0] * 3 + [-float(i) for i in range(3, vocab)])
    writer.add_token_types([gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
                           + [gguf.TokenType.NORMAL] * (vocab - 3))
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(EOS)
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(False)
    for name, ours, how in plan:
        shape = catalog[ours].shape
        shape = tuple(reversed(shape)) if how.startswith("transpose") else tuple(shape)
        if len(shape) == 1 or qtype == "F32":
            writer.add_tensor_info(name, shape, np.dtype(np.float32), int(np.prod(shape)) * 4, gguf.GGMLQuantizationType.F32)
        else:
            byte_shape = gguf.quant_shape_to_byte_shape(shape, qt)
            writer.add_tensor_info(name, byte_shape, np.dtype(np.uint8), int(np.prod(byte_shape)), qt)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    jobs = [(source, ours, how, qtype, cfg) for _, ours, how in plan]
    # spawned, not forked: this process has imported JAX, whose threads a fork would not carry
    with ProcessPoolExecutor(max(1, workers), mp_context=multiprocessing.get_context("spawn")) as pool:
        for data in pool.map(_quantized, jobs):  # in order: the writer takes tensors as their infos were listed
            writer.write_tensor_data(data)
    writer.close()
    os.replace(path + ".tmp", path)


# --- weight bytes read per token ---------------------------------------------------------------

def onnx_weight_bytes(folder: str) -> dict[str, int]:
    """Initializer bytes of an exported folder's decoder: all, and those a decode step reads (all but
    the tables a Gather reads one row of)."""
    import onnx

    model = onnx.load(os.path.join(folder, "model.onnx"), load_external_data=False)
    sizes: dict[str, int] = {}
    for t in model.graph.initializer:
        external = {e.key: e.value for e in t.external_data}
        if "length" in external:
            sizes[t.name] = int(external["length"])
        elif t.raw_data:
            sizes[t.name] = len(t.raw_data)
        else:
            dims = 1
            for d in t.dims:
                dims *= d
            sizes[t.name] = dims * onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
    gathered = {name for node in model.graph.node if node.op_type in ("Gather", "GatherBlockQuantized")
                for i, name in enumerate(node.input) if i != 1}  # input 1: the indices
    return {"all": sum(sizes.values()), "per_token": sum(v for k, v in sizes.items() if k not in gathered)}


def gguf_params(path: str) -> int:
    import gguf

    return sum(int(t.n_elements) for t in gguf.GGUFReader(path).tensors)


def gguf_weight_bytes(path: str) -> dict[str, int]:
    import gguf

    tensors = gguf.GGUFReader(path).tensors
    return {"all": sum(int(t.n_bytes) for t in tensors),
            "per_token": sum(int(t.n_bytes) for t in tensors if t.name != "token_embd.weight")}


# --- the build stage ---------------------------------------------------------------------------

def build(args: argparse.Namespace, cfg: dict[str, int], variants: list[tuple[str, dict[str, Any]]],
          ggufs: list[str]) -> dict[str, Any]:
    work, info = args.workdir, {}
    source = os.path.join(work, "weights.safetensors")
    folders = {tag: os.path.join(work, f"genai-{tag}") for tag, _ in variants}
    files = {qtype: os.path.join(work, f"model-{qtype}.gguf") for qtype in ggufs}
    missing_folders = [tag for tag, folder in folders.items() if not os.path.exists(os.path.join(folder, "genai_config.json"))]
    missing_files = [qtype for qtype, path in files.items() if not os.path.exists(path)]
    if (missing_folders or missing_files) and not os.path.exists(source):
        dtype = args.source_dtype or SOURCE_DTYPE.get({"1.1b": "1b"}.get(args.size, args.size), "float32")
        info["write"] = child(WRITE, json.dumps(cfg), source + ".tmp", dtype)
        if "error" in info["write"]:
            raise SystemExit(f"writing the weights failed:\n{info['write']['error']}")
        os.replace(source + ".tmp", source)
    max_length = args.prompt + args.new_tokens  # the folders' context: give the time stage the same lengths
    fields = dict(variants)
    for tag in missing_folders:
        folder = folders[tag]
        shutil.rmtree(folder + ".tmp", ignore_errors=True)
        out = child(EXPORT, json.dumps(cfg), source, folder + ".tmp", str(max_length), json.dumps(fields[tag]), HERE, "auto")
        if "error" in out:
            raise SystemExit(f"exporting {tag} failed:\n{out['error']}")
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(folder + ".tmp", folder)
        info[f"export {tag}"] = out
    for qtype in missing_files:
        t = time.perf_counter()
        write_gguf(files[qtype], source, cfg, qtype, args.gguf_workers)
        info[f"gguf {qtype}_s"] = round(time.perf_counter() - t, 1)
    if not args.keep_source and os.path.exists(source):  # all built; 13.5 GB at 7 B (memory, where /tmp is)
        os.remove(source)
    return info


# --- the time stage (one process per thread count) ---------------------------------------------

def copy_bandwidth(threads: int, mib: int, repeats: int = 5) -> float:
    """Bytes read + written per second by ``threads`` numpy copies at once (numpy releases the GIL
    for the copy), best of ``repeats``; each copy's arrays are well beyond the caches."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    n = mib * 2**20 // 8
    src = [np.full(n, 1.0 + i) for i in range(threads)]
    dst = [np.zeros(n) for _ in range(threads)]  # zeros then a first copy: every page touched before timing
    best = float("inf")
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(repeats + 1):
            t = time.perf_counter()
            list(pool.map(lambda i: np.copyto(dst[i], src[i]), range(threads)))
            best = min(best, time.perf_counter() - t)
    return 2 * n * 8 * threads / best


def llama_thread_pool(llm: Any, threads: int) -> tuple[Any, Any]:
    """A persistent ggml thread pool attached to ``llm``'s context, as llama.cpp's own programs
    (llama-cli, llama-bench) attach one; llama-cpp-python attaches none, and a build without
    OpenMP then starts and joins its threads for every token (decode stopped scaling past 1 thread
    on the 13-core host). Returns (pause, resume): idle pools are paused while the other side runs."""
    import ctypes
    import pathlib

    import llama_cpp

    lib = pathlib.Path(llama_cpp.__file__).parent / "lib"
    base = ctypes.CDLL(str(next(iter(sorted(lib.glob("libggml-base.so*"))))))
    cpu = ctypes.CDLL(str(next(iter(sorted(lib.glob("libggml-cpu.so*"))))))

    class Params(ctypes.Structure):  # ggml.h's ggml_threadpool_params (GGML_MAX_N_THREADS = 512)
        _fields_ = [("cpumask", ctypes.c_bool * 512), ("n_threads", ctypes.c_int), ("prio", ctypes.c_int),
                    ("poll", ctypes.c_uint32), ("strict_cpu", ctypes.c_bool), ("paused", ctypes.c_bool)]

    base.ggml_threadpool_params_default.restype = Params
    base.ggml_threadpool_params_default.argtypes = [ctypes.c_int]
    cpu.ggml_threadpool_new.restype = ctypes.c_void_p
    cpu.ggml_threadpool_new.argtypes = [ctypes.POINTER(Params)]
    for name in ("ggml_threadpool_pause", "ggml_threadpool_resume"):
        getattr(cpu, name).argtypes = [ctypes.c_void_p]
    params = base.ggml_threadpool_params_default(threads)
    pool = cpu.ggml_threadpool_new(ctypes.byref(params))
    attach = llama_cpp.llama_cpp._lib.llama_attach_threadpool
    attach.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    attach(llm.ctx, pool, pool)
    llm._bench_pool = pool  # freed with the process
    return (lambda: cpu.ggml_threadpool_pause(pool)), (lambda: cpu.ggml_threadpool_resume(pool))


def worker(args: argparse.Namespace) -> dict[str, Any]:
    threads = int(args.threads)
    allowed = sorted(os.sched_getaffinity(0))
    pinned = allowed[:threads] if len(allowed) >= threads else allowed
    try:
        os.sched_setaffinity(0, pinned)
    except OSError:  # a sandbox without it: the thread counts alone then bound both runtimes
        pinned = []
    import numpy as np
    import onnxruntime_genai as og

    cfg = SIZES[args.size]
    vocab, prompt_n, new = cfg["vocab_size"], args.prompt, args.new_tokens
    max_length = prompt_n + new
    prompt = np.random.default_rng(0).integers(3, vocab, size=(1, prompt_n)).astype(np.int32)
    out: dict[str, Any] = {"threads": threads, "cpus": pinned, "load_avg_before": os.getloadavg()[0]}
    out["copy_bandwidth_gb_s"] = round(copy_bandwidth(threads, args.bandwidth_mib) / 1e9, 2)

    def genai_model(folder: str, profile: str | None = None) -> Any:
        config = og.Config(folder)
        options: dict[str, Any] = {"intra_op_num_threads": threads, "inter_op_num_threads": 1}
        if profile:
            options["enable_profiling"] = profile
        config.overlay(json.dumps({"model": {"decoder": {"session_options": options}}}))
        return og.Model(config)

    def genai_run(model: Any) -> tuple[float, float, list[int]]:
        params = og.GeneratorParams(model)
        # min_length = max_length: end-of-sequence masked, every run makes the same number of tokens
        params.set_search_options(do_sample=False, max_length=max_length, min_length=max_length, batch_size=1)
        gen = og.Generator(model, params)
        t0 = time.perf_counter()
        gen.append_tokens(prompt)
        gen.generate_next_token()  # the first new token: from the prefill's logits
        t1 = time.perf_counter()
        while not gen.is_done():
            gen.generate_next_token()
        t2 = time.perf_counter()
        return t1 - t0, t2 - t1, [int(x) for x in np.asarray(gen.get_sequence(0))[prompt_n:]]

    def llama_run(handle: Any) -> tuple[float, float, list[int]]:
        import llama_cpp

        llm, (pause, resume) = handle
        resume()

        def next_token() -> int:
            logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits(llm.ctx), shape=(vocab,)).copy()
            logits[EOS] = -np.inf  # as genai's min_length does
            return int(np.argmax(logits))

        llm.reset()
        t0 = time.perf_counter()
        llm.eval([int(x) for x in prompt[0]])
        tokens = [next_token()]
        t1 = time.perf_counter()
        while len(tokens) < new:
            llm.eval([tokens[-1]])
            tokens.append(next_token())
        t2 = time.perf_counter()
        pause()
        return t1 - t0, t2 - t1, tokens

    if args.profile:
        return genai_profile(args, genai_model, genai_run)
    sides: list[tuple[str, Any, Any]] = []
    for tag in filter(None, args.variant_tags.split(",")):
        sides.append((f"genai {tag}", genai_run, genai_model(os.path.join(args.workdir, f"genai-{tag}"))))
    for qtype in filter(None, args.gguf.split(",")):
        import llama_cpp

        llm = llama_cpp.Llama(os.path.join(args.workdir, f"model-{qtype}.gguf"), n_ctx=max_length, n_batch=prompt_n,
                              n_ubatch=prompt_n, n_threads=threads, n_threads_batch=threads, verbose=False)
        pool = llama_thread_pool(llm, threads) if not args.no_thread_pool else (lambda: None, lambda: None)
        sides.append((f"llama.cpp {qtype}", llama_run, (llm, pool)))
    times: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in sides}
    tokens: dict[str, list[int]] = {}
    for name, run, handle in sides:  # warm-up
        tokens[name] = run(handle)[2]
    for r in range(args.runs):  # interleaved, the order alternating, so load changes hit every side
        for name, run, handle in (sides if r % 2 == 0 else sides[::-1]):
            prefill, decode, toks = run(handle)
            times[name].append((prefill, decode))
            if toks != tokens[name]:
                out.setdefault("nondeterministic", []).append(name)
    out["sides"] = {}
    for name, _, _ in sides:
        decode = statistics.median(t[1] for t in times[name])
        out["sides"][name] = {"decode_tok_s": round((new - 1) / decode, 2),
                              "prefill_ms": round(statistics.median(t[0] for t in times[name]) * 1e3, 2),
                              "decode_s_runs": [round(t[1], 4) for t in times[name]], "tokens": tokens[name]}
    out["load_avg_after"] = os.getloadavg()[0]
    return out


def genai_profile(args: argparse.Namespace, genai_model: Any, genai_run: Any) -> dict[str, Any]:
    """One profiled generation of the first int4 variant: kernel time per decode step by op type."""
    import gc

    tag = next((t for t in args.variant_tags.split(",") if t.startswith("int4")), args.variant_tags.split(",")[0])
    prefix = os.path.join(args.workdir, f"profile-{tag}")
    for old in glob.glob(prefix + "*.json"):
        os.remove(old)
    model = genai_model(os.path.join(args.workdir, f"genai-{tag}"), profile=prefix)
    genai_run(model)
    del model  # onnxruntime writes the profile when the session closes
    gc.collect()
    files = sorted(glob.glob(prefix + "*.json"), key=os.path.getmtime)
    if not files:
        return {"variant": tag, "error": "no profile file was written"}
    return {"variant": tag, **op_profile_events(json.load(open(files[-1])), skip_runs=1)}


# --- results -----------------------------------------------------------------------------------

def summarize(result: dict[str, Any]) -> None:
    """Ratios against llama.cpp and each side's fraction of the bandwidth bound, per thread count."""
    for row in result["rows"]:
        bw = row["copy_bandwidth_gb_s"] * 1e9
        for name, side in row["sides"].items():
            per_token = result["weight_bytes"][name]["per_token"]
            side["bound_tok_s"] = round(bw / per_token, 2)
            side["fraction_of_bound"] = round(side["decode_tok_s"] / side["bound_tok_s"], 3)
        row["ratios"] = {}
        for name, side in row["sides"].items():
            if not name.startswith("genai "):
                continue
            kind = name.split()[1].split("-")[0]
            peer = row["sides"].get(f"llama.cpp {PAIRS.get(kind, '')}")
            if peer:
                same = 0
                while same < min(len(side["tokens"]), len(peer["tokens"])) and side["tokens"][same] == peer["tokens"][same]:
                    same += 1
                row["ratios"][f"{name} / llama.cpp {PAIRS[kind]}"] = {
                    "decode": round(side["decode_tok_s"] / peer["decode_tok_s"], 3), "same_first_tokens": same}


def write_markdown(out_dir: str) -> None:
    lines = ["# onnxruntime-genai (our export) vs llama.cpp decode (bench/llamacpp_bench.py)", "",
             "The examples pack's NNX Llama with random weights, exported streamed to genai folders; the same weights "
             "as GGUF files (rotary rows reordered to llama.cpp's convention, every matrix in the one type) run by "
             "llama-cpp-python, its context given a persistent ggml thread pool as llama.cpp's own programs attach "
             "(llama-cpp-python attaches none; `--no-thread-pool` times it so). Batch 1, greedy, end-of-sequence masked on both sides, interleaved rounds, each "
             "thread count in its own process pinned to that many cores. Bound = copy bandwidth (numpy, read + "
             "written bytes/s on that many threads) / weight bytes read per token. `same` = how many first greedy "
             "tokens agree with the paired GGUF (F32's should all agree: a check of the GGUF's weights).", ""]
    for path in sorted(glob.glob(os.path.join(out_dir, "llamacpp-*.json"))):
        r = json.load(open(path))
        lines += [f"## {r['size']} ({(r['params'] or 0) / 1e6:.0f} M parameters; prompt {r['prompt']}, {r['new_tokens']} new "
                  f"tokens, {r['runs']} rounds; {r['host']['cpus']} CPUs, load {r['host']['load_avg'][0]:.1f})", "",
                  "| threads | side | decode tok/s | prefill ms | weight MB/token | bandwidth GB/s | bound tok/s "
                  "| of bound | vs llama.cpp | same |", "|---|---|---|---|---|---|---|---|---|---|"]
        for row in r["rows"]:
            for name, side in row["sides"].items():
                ratio = next((v for k, v in row.get("ratios", {}).items() if k.startswith(name + " /")), None)
                versus = f"{ratio['decode']:.2f}x" if ratio else "-"
                same = ratio["same_first_tokens"] if ratio else "-"
                lines.append(f"| {row['threads']} | {name} | {side['decode_tok_s']:.1f} | {side['prefill_ms']:.0f} | "
                             f"{r['weight_bytes'][name]['per_token'] / 1e6:.1f} | {row['copy_bandwidth_gb_s']:.1f} | "
                             f"{side.get('bound_tok_s', 0):.1f} | {side.get('fraction_of_bound', 0):.0%} | {versus} | {same} |")
        if r.get("profile", {}).get("share"):
            p = r["profile"]
            lines += ["", f"Profile ({p['variant']}, 1 thread, onnxruntime's profiler): {p['kernel_ms_per_run']} ms of "
                      "kernels per decode step; " + ", ".join(f"{op} {p['ms_per_run'][op]:.3f} ms ({s:.0%})"
                                                                for op, s in p["share"].items()) + "."]
        lines.append("")
    with open(os.path.join(out_dir, "llamacpp.md"), "w") as fh:
        fh.write("\n".join(lines))


def versions() -> dict[str, str]:
    from importlib import metadata

    found = {}
    for name in ("onnxruntime-genai", "onnxruntime", "llama_cpp_python", "gguf", "jax", "numpy"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "-"
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="125m", choices=list(SIZES))
    ap.add_argument("--variants", default=None,
                    help="our precisions: names or kind:field=value,... (jax2onnx.Precision's fields), comma-separated "
                         f"(default {ALL_VARIANTS}; at 7b {DEFAULT_VARIANTS['7b']})")
    ap.add_argument("--gguf", default=None, help="GGUF types: Q4_0, Q8_0, F32 (default Q4_0,Q8_0, plus F32 up to 125m; "
                                                 "Q4_0 at 7b)")
    ap.add_argument("--threads", default="1,4")
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--stage", default="all", choices=["all", "build", "time"])
    ap.add_argument("--profile", action="store_true", help="also profile the first int4 variant's decode (1 thread)")
    ap.add_argument("--workdir", default=None, help="where artifacts are built and reused (default: a temporary one, removed)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--source-dtype", default=None, choices=["float32", "bfloat16"])
    ap.add_argument("--keep-source", action="store_true",
                    help="keep weights.safetensors in --workdir after the build (another variant can then be added "
                         "without writing it again)")
    ap.add_argument("--bandwidth-mib", type=int, default=256, help="MiB copied per thread to measure bandwidth")
    ap.add_argument("--gguf-workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--no-thread-pool", action="store_true",
                    help="llama.cpp as llama-cpp-python leaves it: no persistent thread pool attached")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--variant-tags", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args)))
        return
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # the bench is CPU work; on an accelerator host JAX stays off it
    cfg = SIZES[args.size]
    # a variant's fields may hold commas: "int4:accuracy_level=4,lm_head=int8" is one variant, so
    # commas before a "field=" belong to the variant before them
    merged: list[str] = []
    chosen = args.variants if args.variants is not None else DEFAULT_VARIANTS.get(args.size, ALL_VARIANTS)
    for piece in chosen.split(","):  # "" times llama.cpp alone
        if "=" in piece and ":" not in piece and merged:
            merged[-1] += "," + piece
        elif piece.strip():
            merged.append(piece)
    variants = [parse_variant(v) for v in merged]
    ggufs = [g for g in (args.gguf if args.gguf is not None else DEFAULT_GGUF[args.size]).split(",") if g]
    temporary = args.workdir is None
    args.workdir = args.workdir or os.path.join(os.environ.get("TMPDIR", "/tmp"), f"jax2onnx-llamacpp-{args.size}-{os.getpid()}")
    os.makedirs(args.workdir, exist_ok=True)
    try:
        result: dict[str, Any] = {"size": args.size, "config": cfg, "variants": dict(variants), "gguf": ggufs,
                                  "llama_thread_pool": not args.no_thread_pool,
                                  "prompt": args.prompt, "new_tokens": args.new_tokens, "runs": args.runs,
                                  "host": {"cpus": os.cpu_count(), "load_avg": os.getloadavg(), "platform": platform.platform()},
                                  "versions": versions()}
        if args.stage in ("all", "build"):
            t = time.perf_counter()
            result["build"] = build(args, cfg, variants, ggufs)
            result["build_s"] = round(time.perf_counter() - t, 1)
            print(f"built in {result['build_s']} s: {args.workdir}", file=sys.stderr)
        if args.stage == "build":
            return
        tags = [tag for tag, _ in variants]
        result["weight_bytes"] = {f"genai {t}": onnx_weight_bytes(os.path.join(args.workdir, f"genai-{t}")) for t in tags}
        result["weight_bytes"].update({f"llama.cpp {q}": gguf_weight_bytes(os.path.join(args.workdir, f"model-{q}.gguf"))
                                       for q in ggufs})
        result["params"] = gguf_params(os.path.join(args.workdir, f"model-{ggufs[0]}.gguf")) if ggufs else None
        common = [sys.executable, __file__, "--worker", "--size", args.size, "--workdir", args.workdir, "--prompt",
                  str(args.prompt), "--new-tokens", str(args.new_tokens), "--runs", str(args.runs), "--variant-tags",
                  ",".join(tags), "--gguf", ",".join(ggufs), "--bandwidth-mib", str(args.bandwidth_mib),
                  *(["--no-thread-pool"] if args.no_thread_pool else [])]
        result["rows"] = []
        for threads in [int(t) for t in args.threads.split(",")]:
            result["rows"].append(_run_worker(common + ["--threads", str(threads)]))
            print(json.dumps({k: v for k, v in result["rows"][-1].items() if k != "sides"}), file=sys.stderr)
        if args.profile:
            result["profile"] = _run_worker(common + ["--threads", "1", "--profile"])
        summarize(result)
        os.makedirs(args.out, exist_ok=True)
        # named by size and thread counts: a 7 B run split over calls (--threads 1, then 4,12) keeps both
        name = f"llamacpp-{args.size}-t{args.threads.replace(',', '_')}.json"
        with open(os.path.join(args.out, name), "w") as fh:
            json.dump(result, fh, indent=1)
        write_markdown(args.out)
        print(open(os.path.join(args.out, "llamacpp.md")).read())
    finally:
        if temporary:
            shutil.rmtree(args.workdir, ignore_errors=True)


def _run_worker(cmd: list[str]) -> dict[str, Any]:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd[2:])} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
