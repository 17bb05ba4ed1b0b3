// A transformers.js pipeline (@huggingface/transformers, onnxruntime-node on CPU) on a folder
// jax2onnx.targets.web.write_pipeline_folder wrote, for tests/test_web_folder.py:
//   node transformers_pipeline.mjs <folder> <task> '<JSON list of inputs>'
// feature-extraction (inputs: texts) prints {"ids": [ids of each text by the folder's tokenizer],
// "outputs": [the features of each text]}; image-classification (inputs: image files) prints
// {"outputs": [every label's {label, score} for each image]}.
import path from 'node:path';
import { AutoTokenizer, pipeline, env } from '@huggingface/transformers';

const [folder, task, inputsJson] = process.argv.slice(2);
env.allowRemoteModels = false;
env.allowLocalModels = true;
env.localModelPath = path.dirname(path.resolve(folder));
const name = path.basename(path.resolve(folder));

const inputs = JSON.parse(inputsJson);
const run = await pipeline(task, name, { dtype: 'fp32', device: 'cpu' });
const result = { outputs: [] };
if (task === 'feature-extraction') {
  const tokenizer = await AutoTokenizer.from_pretrained(name);
  result.ids = inputs.map((t) => tokenizer.encode(t));
  for (const text of inputs) result.outputs.push((await run(text)).tolist()[0]);
} else {
  for (const input of inputs) result.outputs.push(await run(input, { top_k: null }));
}
await run.dispose();
console.log(JSON.stringify(result));
