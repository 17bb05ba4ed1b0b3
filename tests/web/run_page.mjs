// Runs the module script of a page (docs/guide/web.md's) in Node, as a browser runs it from the server
// that serves the page and the model folder, for packages/plugins-llm/tests/test_web_page.py:
//   node run_page.mjs <page url> [dtype]
// The page is fetched and its <script type="module"> run with three substitutions a browser does not need:
// the CDN import is this folder's @huggingface/transformers, env.localModelPath is resolved against the
// page's URL (a browser resolves "/models/" against its origin), and WebGPU is onnxruntime-node's CPU
// (no GPU here); [dtype] replaces the page's dtype. What the page writes into an element is printed as
// {"id": element id, "out": text}.
const [pageUrl, dtype] = process.argv.slice(2);
const html = await (await fetch(pageUrl)).text();
const match = html.match(/<script type="module">([\s\S]*?)<\/script>/);
if (!match) throw new Error(`no <script type="module"> in ${pageUrl}`);

function substitute(text, pattern, replacement, what) {
  if (!pattern.test(text)) throw new Error(`the page's script has no ${what} to substitute`);
  return text.replace(pattern, replacement);
}
const library = JSON.stringify(import.meta.resolve('@huggingface/transformers'));
let script = substitute(match[1], /from\s+"https:\/\/cdn\.jsdelivr\.net\/npm\/@huggingface\/transformers@[^"]*"/,
  `from ${library}`, 'CDN import of @huggingface/transformers');
script = substitute(script, /env\.localModelPath\s*=\s*("[^"]*")/,
  (_, p) => `env.localModelPath = new URL(${p}, ${JSON.stringify(pageUrl)}).href`, 'env.localModelPath');
script = substitute(script, /device:\s*"webgpu"/, 'device: "cpu"', 'device: "webgpu"');
if (dtype) script = substitute(script, /dtype:\s*"[^"]*"/, `dtype: ${JSON.stringify(dtype)}`, 'dtype');

globalThis.document = {
  getElementById: (id) => ({ set textContent(text) { console.log(JSON.stringify({ id, out: text })); } }),
};
await import(`data:text/javascript,${encodeURIComponent(script)}`);
