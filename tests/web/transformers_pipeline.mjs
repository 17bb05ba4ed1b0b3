// A transformers.js pipeline (@huggingface/transformers, onnxruntime-node on CPU) on a folder
// jax2onnx.targets.web.write_pipeline_folder wrote, for tests/test_web_folder.py:
//   node transformers_pipeline.mjs <folder> <task> '<JSON list of texts>'
// prints {"ids": [ids of each text by the folder's tokenizer], "outputs": [the pipeline's output per text]}.
import path from 'node:path';
import { AutoTokenizer, pipeline, env } from '@huggingface/transformers';

const [folder, task, textsJson] = process.argv.slice(2);
env.allowRemoteModels = false;
env.allowLocalModels = true;
env.localModelPath = path.dirname(path.resolve(folder));
const name = path.basename(path.resolve(folder));

const texts = JSON.parse(textsJson);
const tokenizer = await AutoTokenizer.from_pretrained(name);
const run = await pipeline(task, name, { dtype: 'fp32', device: 'cpu' });
const result = { ids: texts.map((t) => tokenizer.encode(t)), outputs: [] };
for (const text of texts) {
  const out = await run(text);
  result.outputs.push(out.tolist()[0]);
}
await run.dispose();
console.log(JSON.stringify(result));
