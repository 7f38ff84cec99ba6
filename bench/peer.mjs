// transformers.js as a reader who picks it runs it, for the benchmarks that compare headlab with
// it (bench/transformers.mjs, bench/decoder-speed.mjs): the installed package (scripts/install-tools.sh
// test), its own onnxruntime-web (the WebAssembly backend its browser users get) or onnxruntime-node,
// and local model folders only (no hub).
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';

export const toolsDir = process.env.HEADLAB_TOOLS_DIR ?? join(homedir(), '.cache/headlab-tools');

/** The folder of package `name` as Node finds it from `dir` (its node_modules, then its parents'). */
export function packageDir(name, dir) {
  for (let d = dir; ; d = dirname(d)) {
    if (existsSync(join(d, 'node_modules', name, 'package.json'))) return join(d, 'node_modules', name);
    if (dirname(d) === d) throw new Error(`${name} is not installed (scripts/install-tools.sh test)`);
  }
}

export const version = (dir) => JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).version;
export const transformersDir = packageDir('@huggingface/transformers', toolsDir);
// The onnxruntime-web that transformers.js depends on (its browser users get this one).
export const ortWebDir = packageDir('onnxruntime-web', transformersDir);

/**
 * transformers.js on `runtime` (`web`: onnxruntime-web's WebAssembly backend with `threads`
 * threads; `node`: onnxruntime-node) reading models from `modelsDir` only. Resolves to
 * `{ transformers, ortVersion, options(dtype) }`, `options` the from_pretrained/pipeline options
 * for that runtime.
 */
export async function transformersOn(runtime, threads, modelsDir) {
  let ortVersion;
  if (runtime === 'web') {
    const ort = await import(pathToFileURL(join(ortWebDir, 'dist/ort.node.min.mjs')).href);
    ort.env.wasm.numThreads = threads;
    ort.env.wasm.simd = true;
    ort.env.wasm.proxy = false;
    ort.env.wasm.wasmPaths = pathToFileURL(join(ortWebDir, 'dist')).href + '/';
    ortVersion = `onnxruntime-web ${ort.env.versions.web}`;
    const create = (model, options) => ort.InferenceSession.create(typeof model === 'string' ? readFileSync(model) : model, options);
    globalThis[Symbol.for('onnxruntime')] = { ...ort, InferenceSession: { ...ort.InferenceSession, create } };
  } else {
    ortVersion = `onnxruntime-node ${version(packageDir('onnxruntime-node', transformersDir))}`;
  }
  const transformers = await import(pathToFileURL(join(transformersDir, 'dist/transformers.node.mjs')).href);
  const { env } = transformers;
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  env.localModelPath = modelsDir + '/';
  env.useWasmCache = false;
  env.useFSCache = false;
  const options = (dtype) => (runtime === 'web'
    ? { dtype, device: { model: '' }, session_options: { executionProviders: ['wasm'] } }
    : { dtype, device: 'cpu', session_options: { intraOpNumThreads: threads, interOpNumThreads: 1 } });
  return { transformers, ortVersion, options };
}

/** When the newest file of `folder` was written (make-checkpoints.sh remakes a folder whole). */
function newestIn(folder) {
  return Math.max(...readdirSync(folder).map((f) => statSync(join(folder, f)).mtimeMs));
}

/**
 * The page's model file of the checkpoint `folder` (`assetFile`, made by the page's loader,
 * convert-model) and its ONNX export for transformers.js (`bench/<exporter>` into `exportDir`),
 * each made when missing or older than any of the folder's files (scripts/make-checkpoints.sh
 * remade it). `root`: the repository.
 */
export function prepareModel({ root, folder, assetFile, exporter, exportDir }) {
  const newest = newestIn(folder);
  const stale = (path) => !existsSync(path) || statSync(path).mtimeMs < newest;
  if (stale(assetFile)) {
    // The test profile, as scripts/build-model-asset.sh: the native tests have built the converter there.
    execFileSync('cargo', ['run', '--quiet', '--locked', '--profile', 'test', '--bin', 'convert-model', '--', folder, assetFile], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
  }
  if (stale(join(exportDir, 'onnx/model_quantized.onnx'))) {
    execFileSync(process.execPath, [join(root, 'bench', exporter), folder, exportDir], { stdio: ['ignore', 'ignore', 'inherit'] });
  }
}

/**
 * The checkpoint `folder` converted by the peer's own tools into `peerDir` (bench/peer/convert.py,
 * in the venv bench/peer/setup.sh makes on first use): optimum's export slimmed by onnxslim,
 * its q8 made by onnxruntime's quantizer with transformers.js's settings for the model type, and
 * a third graph, onnxruntime's transformer optimizer's then quantized
 * (model_fused_quantized.onnx); beside them the hand export's (`handDir`) config and tokenizer
 * files. Done once per checkpoint (again when make-checkpoints.sh remade it); returns what made
 * each graph (`graphs.json`).
 */
export function peerToolGraphs({ root, folder, handDir, peerDir }) {
  const record = join(peerDir, 'onnx/graphs.json');
  if (!existsSync(record) || statSync(record).mtimeMs < newestIn(folder)) {
    const python = execFileSync(join(root, 'bench/peer/setup.sh'), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
    mkdirSync(join(peerDir, 'onnx'), { recursive: true });
    for (const f of readdirSync(handDir)) if (f.endsWith('.json')) copyFileSync(join(handDir, f), join(peerDir, f));
    console.error(`converting ${folder} with the peer's tools (bench/peer/convert.py)…`);
    execFileSync(python, [join(root, 'bench/peer/convert.py'), folder, join(peerDir, 'onnx')], { stdio: ['ignore', 'ignore', 'inherit'] });
  }
  return JSON.parse(readFileSync(record, 'utf8'));
}

/** Which graph each of the peer's columns ran, and what made it, in a line. */
export function graphsLine(made) {
  if (!made) {
    return 'graphs: fp32 and q8 as bench/onnx-*.mjs writes them (a hand-written export, and a hand emulation of onnxruntime\'s quantizer checked against it: BENCHMARKS.md section 22; the smoke run does not install the peer\'s tools)';
  }
  const { tools, graphs } = made;
  const q = (g) => `${g.weights} weights${g.per_channel ? ' per column, reduced range' : ' per tensor, full range'}`;
  const fused = Object.entries(graphs['model_fused.onnx'].fused_operators).map(([op, n]) => `${n} ${op}`).join(', ') || 'nothing';
  return `graphs (\`${made.command}\`: optimum ${tools.optimum}, transformers ${tools.transformers}, torch ${tools.torch}, onnxruntime ${tools.onnxruntime}, onnxslim ${tools.onnxslim}): `
    + `fp32 = ${graphs['model.onnx'].made_by}; q8 = onnxruntime's dynamic quantizer on it as transformers.js's conversion calls it (${q(graphs['model_quantized.onnx'])}); `
    + `fused q8 = ${graphs['model_fused.onnx'].made_by} (fused: ${fused}), then the same quantizer`;
}
