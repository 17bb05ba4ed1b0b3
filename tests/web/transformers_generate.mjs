// Greedy generation with transformers.js (@huggingface/transformers, onnxruntime-node on CPU) from a
// folder export_causal_lm(target="web") wrote, for the LLM pack's tests (tests/test_web_llm.py):
//   node transformers_generate.mjs <folder> <dtype[,dtype...]> <max_new_tokens> '<ids, left-padded rows>' '<mask rows>' [text]
// prints {"tokens": {dtype: [[new tokens of each row], ...]}, "encoded": ids of text by the folder's tokenizer}
// (text: one string, or a JSON list of strings; an empty dtype list generates nothing).
import path from 'node:path';
import { AutoModelForCausalLM, AutoTokenizer, Tensor, env } from '@huggingface/transformers';

const [folder, dtypes, maxNew, idsJson, maskJson, text] = process.argv.slice(2);
env.allowRemoteModels = false;
env.allowLocalModels = true;
env.localModelPath = path.dirname(path.resolve(folder));
const name = path.basename(path.resolve(folder));

const ids = JSON.parse(idsJson);
const mask = JSON.parse(maskJson);
const dims = [ids.length, ids[0].length];
const asTensor = (rows) => new Tensor('int64', BigInt64Array.from(rows.flat().map(BigInt)), dims);

const result = { tokens: {} };
for (const dtype of dtypes.split(',').filter(Boolean)) {
  const model = await AutoModelForCausalLM.from_pretrained(name, { dtype, device: 'cpu' });
  const out = await model.generate({
    input_ids: asTensor(ids), attention_mask: asTensor(mask),
    max_new_tokens: Number(maxNew), do_sample: false,
  });
  result.tokens[dtype] = out.tolist().map((row) => row.slice(dims[1]).map(Number));
  await model.dispose();
}
if (text !== undefined) {  // one text, or a JSON list of texts
  const tokenizer = await AutoTokenizer.from_pretrained(name);
  const encode = (t) => tokenizer.encode(t, { add_special_tokens: false });
  result.encoded = text.startsWith('[') ? JSON.parse(text).map(encode) : encode(text);
}
console.log(JSON.stringify(result));
