// Greedy generation with transformers.js (@huggingface/transformers, onnxruntime-node on CPU) from a
// folder export_causal_lm(target="web") wrote, for the LLM pack's tests:
//   node transformers_generate.mjs <folder> <dtype> <max_new_tokens> '<[[ids...], ...] left-padded>' '<[[mask...], ...]>'
// prints {"tokens": [[...], ...]} (the new tokens of each row).
import path from 'node:path';
import { AutoModelForCausalLM, Tensor, env } from '@huggingface/transformers';

const [folder, dtype, maxNew, idsJson, maskJson] = process.argv.slice(2);
env.allowRemoteModels = false;
env.allowLocalModels = true;
env.localModelPath = path.dirname(path.resolve(folder));

const ids = JSON.parse(idsJson);
const mask = JSON.parse(maskJson);
const dims = [ids.length, ids[0].length];
const asTensor = (rows) => new Tensor('int64', BigInt64Array.from(rows.flat().map(BigInt)), dims);

const model = await AutoModelForCausalLM.from_pretrained(path.basename(path.resolve(folder)), { dtype, device: 'cpu' });
const out = await model.generate({
  input_ids: asTensor(ids), attention_mask: asTensor(mask),
  max_new_tokens: Number(maxNew), min_new_tokens: Number(maxNew), do_sample: false,
});
const rows = out.tolist().map((row) => row.slice(dims[1]).map(Number));
console.log(JSON.stringify({ tokens: rows }));
await model.dispose();
