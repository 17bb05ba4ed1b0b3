// Run ONNX models in onnxruntime-web's wasm backend (the one browsers use without WebGPU) under Node.
//   node run_ort_web.mjs JOB.json
// JOB.json: [{"model": "m.onnx", "inputs": [{"name", "dtype", "shape", "file"}], "out": "folder"}, ...]
// Each input is the raw little-endian bytes of the array; each output is written the same way as
// <out>/<i>.bin with <out>/outputs.json listing name, dtype and shape.
// onnxruntime-web is resolved from $JAX2ONNX_ORT_WEB_DIR (else the current folder), not from this
// file's folder: the script ships inside the Python package, the npm package is the user's install.
import { createRequire } from "node:module";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";

const base = resolve(process.env.JAX2ONNX_ORT_WEB_DIR || process.cwd());
const ort = createRequire(join(base, "package.json"))("onnxruntime-web");

ort.env.wasm.numThreads = 1; // deterministic, and no worker threads to tear down

const ARRAYS = {
  float32: Float32Array, float64: Float64Array, int32: Int32Array, int64: BigInt64Array,
  uint8: Uint8Array, int8: Int8Array, bool: Uint8Array,
};

function tensor({ dtype, shape, file }) {
  const bytes = readFileSync(file);
  const Array_ = ARRAYS[dtype];
  if (!Array_) throw new Error(`no onnxruntime-web tensor type for ${dtype}`);
  const data = new Array_(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
  return new ort.Tensor(dtype, data, shape);
}

const jobs = JSON.parse(readFileSync(process.argv[2], "utf8"));
for (const job of jobs) {
  const session = await ort.InferenceSession.create(readFileSync(job.model), { executionProviders: ["wasm"] });
  const feeds = {};
  for (const input of job.inputs) feeds[input.name] = tensor(input);
  const results = await session.run(feeds);
  mkdirSync(job.out, { recursive: true });
  const meta = session.outputNames.map((name, i) => {
    const t = results[name];
    writeFileSync(join(job.out, `${i}.bin`), Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    return { name, dtype: t.type, shape: t.dims };
  });
  writeFileSync(join(job.out, "outputs.json"), JSON.stringify(meta));
  await session.release();
  console.log(`${job.model}: ${meta.length} output(s) from onnxruntime-web ${ort.env.versions.web}`);
}
