// Greedy generation with transformers.js (@huggingface/transformers, onnxruntime-node on CPU) from a
// folder export_speech_to_text / export_multimodal_lm(target="web") wrote, for the LLM pack's tests
// (packages/plugins-llm/tests/test_web_multimodal.py):
//   node transformers_multimodal.mjs <request.json>
// request: {"kind": "whisper" | "moonshine" | "paligemma" | "gemma3" | "gemma4", "folder", "max_new_tokens", "dtype" (default
//           "fp32", or one per session: {"vision_encoder": "fp16", "decoder_model_merged": "q4"}),
//           "inputs": path of raw little-endian float32 (whisper: log-mel features, moonshine: 16 kHz audio,
//           paligemma and gemma3: pixel values),
//           "dims": their shape, "prompt": [[token ids of each row]], "image": optional PNG path (paligemma),
//           "positions": {"dims", "data"} (gemma4: the patches' (x, y), handed to generate as image_position_ids)}
// prints {"tokens": [[new tokens of each row]], and when "image" is given: "pixel_values": {dims, data} of
// the image by the folder's image processor, "image_token_ids": "<image><image>" by the folder's tokenizer};
// or {"runs": [request, ...]} -> {"runs": [result, ...]}, all in one process.
import fs from 'node:fs';
import path from 'node:path';
import {
  AutoImageProcessor, AutoTokenizer, Gemma3ForConditionalGeneration, Gemma4ForConditionalGeneration, MoonshineForConditionalGeneration, PaliGemmaForConditionalGeneration, RawImage, Tensor, WhisperForConditionalGeneration, env,
} from '@huggingface/transformers';

const request = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
env.allowRemoteModels = false;
env.allowLocalModels = true;

// "gemma3" is transformers.js' Gemma3ForConditionalGeneration, which runs PaliGemma's LLaVA pipeline
const VISION_LANGUAGE = {
  paligemma: PaliGemmaForConditionalGeneration, gemma3: Gemma3ForConditionalGeneration, gemma4: Gemma4ForConditionalGeneration,
};

async function run(request) {
  env.localModelPath = path.dirname(path.resolve(request.folder));
  const name = path.basename(path.resolve(request.folder));
  const bytes = fs.readFileSync(request.inputs);
  const values = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
  const floats = new Tensor('float32', Float32Array.from(values), request.dims);
  const prompt = request.prompt;
  const ids = new Tensor('int64', BigInt64Array.from(prompt.flat().map(BigInt)), [prompt.length, prompt[0].length]);
  const options = { max_new_tokens: request.max_new_tokens, do_sample: false };
  // a dtype per session ({vision_encoder: "fp16", decoder_model_merged: "q4"}) or one for all
  const dtype = request.dtype ?? 'fp32';

  const result = {};
  if (request.kind === 'whisper') {
    const model = await WhisperForConditionalGeneration.from_pretrained(name, { dtype, device: 'cpu' });
    // the library's features go in as the encoder's input_features; the prompt rows as decoder_input_ids
    // (a nested array: Whisper's generate takes a Tensor of one row only)
    const out = await model.generate({ inputs: floats, decoder_input_ids: prompt, ...options });
    result.tokens = out.tolist().map((row) => row.slice(prompt[0].length).map(Number));
    await model.dispose();
  } else if (request.kind === 'moonshine') {
    const model = await MoonshineForConditionalGeneration.from_pretrained(name, { dtype, device: 'cpu' });
    // raw audio, zero-padded (the graphs read the padding from it); generate starts each row from the
    // folder's decoder_start_token_id (the prompt is only its length here)
    const out = await model.generate({ input_values: floats, ...options });
    result.tokens = out.tolist().map((row) => row.slice(prompt[0].length).map(Number));
    await model.dispose();
  } else if (request.kind in VISION_LANGUAGE) {
    const model = await VISION_LANGUAGE[request.kind].from_pretrained(name, { dtype, device: 'cpu' });
    const mask = new Tensor('int64', new BigInt64Array(ids.size).fill(1n), ids.dims);
    // Gemma 4's patches come with their (x, y), which its vision encoder takes as pixel_position_ids
    const positions = request.positions
      ? { image_position_ids: new Tensor('int64', BigInt64Array.from(request.positions.data.map(BigInt)),
        request.positions.dims) }
      : {};
    const out = await model.generate({
      input_ids: ids, attention_mask: mask, pixel_values: floats, ...positions, ...options,
    });
    result.tokens = out.tolist().map((row) => row.slice(prompt[0].length).map(Number));
    await model.dispose();
    if (request.image) {
      const processor = await AutoImageProcessor.from_pretrained(name);
      const { pixel_values } = await processor(await RawImage.read(request.image));
      result.pixel_values = { dims: pixel_values.dims, data: Array.from(pixel_values.data) };
      // the folder's image token, as its PaliGemmaProcessor writes it before a prompt
      const tokenizer = await AutoTokenizer.from_pretrained(name);
      result.image_token_ids = tokenizer.encode('<image><image>', { add_special_tokens: false });
    }
  } else {
    throw new Error(`unknown kind ${request.kind}`);
  }
  return result;
}

// {"runs": [request, ...]}: several in one process (one start of the runtime), {"runs": [result, ...]} back
if (request.runs) {
  const results = [];
  for (const one of request.runs) results.push(await run(one));
  console.log(JSON.stringify({ runs: results }));
} else {
  console.log(JSON.stringify(await run(request)));
}
