#!/usr/bin/env node
// fpguard run against ONNX Runtime (onnxruntime-node, CPU) on the same models and inputs:
// the median time of one float32 run each, and their ratio. ONNX Runtime is a baseline
// for this benchmark only; fpguard does not depend on it. Setup, once, outside the repo:
//   mkdir /tmp/ort && cd /tmp/ort && ONNXRUNTIME_NODE_INSTALL_CUDA=skip npm install onnxruntime-node
// (or scripts/setup BUILD_DIR, which installs it into BUILD_DIR/ort-node), then:
//   NODE_PATH=/tmp/ort/node_modules bench/ort_compare.js BUILD_DIR [THREADS] [--models DIR]
//       [--repeat N] [--rounds R]
// Models: each folder of DIR (default: the bench models, BUILD_DIR/bench/models, and
// examples/) with model.onnx (+ external data) and inputs/<name>.npy (float32 or int64).
// The two runtimes take turns: R rounds (default 4) of N/R ORT runs, then one `fpguard run
// --warmup 2 --repeat N/R` (N = 20 by default), so that a change in the machine's load hits
// both; each side is warm (ORT's session was created, which prepares its weights, and ran
// once before; each fpguard process ran twice: in a node's second run some weights are
// copied at a padded stride, docs/executor.md);
// each side's time is the median of its round medians. The outputs are checked against
// ORT's; the last line is the geometric mean of the ratios.
'use strict';
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const ort = require('onnxruntime-node');

function readNpy(file) {  // little-endian float32 or int64, C order (the model folders')
  const b = fs.readFileSync(file);
  const hlen = b[6] === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const off = b[6] === 1 ? 10 : 12;
  const header = b.toString('latin1', off, off + hlen);
  const type = header.includes("'<f4'") ? 'float32' : header.includes("'<i8'") ? 'int64' : null;
  if (!type || header.includes("'fortran_order': True"))
    throw new Error(`${file}: expected a C-order float32 or int64 .npy`);
  const shape = header.match(/\(([^)]*)\)/)[1].split(',').filter((s) => s.trim()).map(Number);
  const bytes = b.buffer.slice(b.byteOffset + off + hlen, b.byteOffset + b.length);
  return new ort.Tensor(type, type === 'int64' ? new BigInt64Array(bytes) : new Float32Array(bytes),
                        shape);
}

function median(xs) {  // of an even count: the mean of the middle two, as fpguard's
  const s = [...xs].sort((a, b) => a - b);
  return (s[Math.floor((s.length - 1) / 2)] + s[Math.floor(s.length / 2)]) / 2;
}

function feedsOf(dir) {
  const feeds = {};
  for (const f of fs.readdirSync(path.join(dir, 'inputs')))
    feeds[path.basename(f, '.npy')] = readNpy(path.join(dir, 'inputs', f));
  return feeds;
}

// Peak memory: each side in a fresh process; "start" is its resident memory before the
// model is loaded (the runtime and its libraries), "peak" its maximum resident set.
// ORT: this script re-run as `--memory DIR THREADS RUNS` (one session, warm-up + RUNS runs,
// as many as one fpguard round).
async function memoryChild(dir, threads, runs) {
  const start = process.memoryUsage().rss / 1048576;
  const session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'), {
    intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential'});
  const feeds = feedsOf(dir);
  for (let i = 0; i <= runs; ++i) await session.run(feeds);
  // VmHWM, not resourceUsage().maxRSS: the latter keeps the parent's peak across exec.
  const status = fs.readFileSync('/proc/self/status', 'latin1');
  const peak = Number(status.match(/VmHWM:\s*(\d+)/)[1]) / 1024;
  console.log(JSON.stringify({start, peak}));
}

function parseArgs(argv) {
  const o = {build: 'build', threads: require('os').cpus().length, models: [], repeat: 20,
             rounds: 4};
  const positional = [];
  for (let i = 0; i < argv.length; ++i) {
    const flag = {'--models': 'models', '--repeat': 'repeat', '--rounds': 'rounds'}[argv[i]];
    if (!flag) { positional.push(argv[i]); continue; }
    if (i + 1 >= argv.length) throw new Error(`${argv[i]} needs a value`);
    if (flag === 'models') o.models.push(argv[++i]); else o[flag] = Number(argv[++i]);
  }
  if (positional[0]) o.build = positional[0];
  if (positional[1]) o.threads = Number(positional[1]);
  if (!o.models.length)
    o.models = [path.join(o.build, 'bench', 'models'), path.join(__dirname, '..', 'examples')];
  if (!(o.repeat >= 1 && o.rounds >= 1 && o.threads >= 1))
    throw new Error('--repeat, --rounds and THREADS must be positive numbers');
  o.perRound = Math.ceil(o.repeat / o.rounds);
  return o;
}

function fpguardJson(o, model, dir, extra, warmup = 2) {
  return JSON.parse(execFileSync(path.join(o.build, 'fpguard'),
                                 ['run', model, '--inputs', path.join(dir, 'inputs'), '--warmup',
                                  String(warmup), '--repeat', String(o.perRound), '--threads',
                                  String(o.threads), '--json', ...extra], {maxBuffer: 1 << 26}));
}

// The outputs must agree: |fpguard - ORT| <= 1e-4 |ORT| + 1e-5 (float32 GEMMs sum in
// different orders), else the timing compares different computations. Returns the worst
// error in units of that tolerance and the largest absolute difference.
function compareOutputs(outDir, ortOut) {
  const files = JSON.parse(fs.readFileSync(path.join(outDir, 'outputs.json'))).tensors;
  let worst = 0, maxAbs = 0;
  for (const t of files) {
    const got = readNpy(path.join(outDir, t.file)).data, want = ortOut[t.name].data;
    for (let i = 0; i < want.length; ++i) {
      const d = Math.abs(Number(got[i]) - Number(want[i]));
      maxAbs = Math.max(maxAbs, d);
      worst = Math.max(worst, d / (1e-4 * Math.abs(Number(want[i])) + 1e-5));
    }
  }
  return {worst, maxAbs};
}

// Where the outputs differ beyond that tolerance (logits near zero after dozens of layers:
// resnet50), which of the two float32 runs strays: each one's relative RMS error over all
// outputs against fpguard's float64 run (`--precision fp64`, the truth). Both are float32
// summation orders where fpguard's error is at most 4x ORT's (or under 1e-6).
function againstFloat64(o, model, dir, outDir, ortOut) {
  const dir64 = fs.mkdtempSync(path.join(require('os').tmpdir(), 'ort_compare64_'));
  execFileSync(path.join(o.build, 'fpguard'),
               ['run', model, '--inputs', path.join(dir, 'inputs'), '--precision', 'fp64',
                '--threads', String(o.threads), '--outputs', dir64]);
  const files = JSON.parse(fs.readFileSync(path.join(dir64, 'outputs.json'))).tensors;
  let fpgSq = 0, ortSq = 0, refSq = 0;
  for (const t of files) {
    const truth = readNpy(path.join(dir64, t.file)).data;
    const got = readNpy(path.join(outDir, t.file)).data, ort = ortOut[t.name].data;
    for (let i = 0; i < truth.length; ++i) {
      const r = Number(truth[i]);
      fpgSq += (Number(got[i]) - r) ** 2;
      ortSq += (Number(ort[i]) - r) ** 2;
      refSq += r * r;
    }
  }
  fs.rmSync(dir64, {recursive: true});
  const fpg = Math.sqrt(fpgSq / refSq), ortErr = Math.sqrt(ortSq / refSq);
  return {fpg, ort: ortErr, sound: fpg <= Math.max(4 * ortErr, 1e-6)};
}

// One model: R rounds of (N/R ORT runs, one `fpguard run --repeat N/R`), the outputs of the
// first fpguard round compared with ORT's, the emulated float16 run, peak memory.
async function compareModel(o, dir) {
  const model = path.join(dir, 'model.onnx');
  const feeds = feedsOf(dir);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: o.threads, interOpNumThreads: 1, executionMode: 'sequential'});
  const ortOut = await session.run(feeds);  // warm-up, and the outputs to compare
  const outDir = fs.mkdtempSync(path.join(require('os').tmpdir(), 'ort_compare_'));
  const ortRounds = [], fpgRounds = [];
  let fpg = null;
  for (let r = 0; r < o.rounds; ++r) {
    const times = [];
    for (let i = 0; i < o.perRound; ++i) {
      const t0 = process.hrtime.bigint();
      await session.run(feeds);
      times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    ortRounds.push(median(times));
    const j = fpguardJson(o, model, dir, r ? [] : ['--outputs', outDir]);
    fpgRounds.push(j.timing.median_run_ms);
    fpg = fpg || j;
  }
  const diff = compareOutputs(outDir, ortOut);
  if (diff.worst > 1) diff.truth = againstFloat64(o, model, dir, outDir, ortOut);
  fs.rmSync(outDir, {recursive: true});
  const fpgMs = median(fpgRounds), ortMs = median(ortRounds);
  // The emulated run (every floating node in float16): issue 20's goal is <= 1.2x the float32 run.
  // An emulated run is warm from its third run too: the first rounds MatMul/Gemm weights
  // per call, the second makes the kept rounded copies (docs/executor.md). The whole
  // command, first run included, is bench/emul_ab.py's measure.
  const fp16Ms = fpguardJson(o, model, dir, ['--precision', 'float16']).timing.median_run_ms;
  const ortMemRaw = JSON.parse(execFileSync(process.execPath, [__filename, '--memory', dir,
                                                               String(o.threads),
                                                               String(o.perRound)]));
  return {ortMs, fpgMs, fp16Ms, diff, ortMem: ortMemRaw.peak - ortMemRaw.start,
          fpgMem: fpg.memory.peak_rss_mib - fpg.memory.start_rss_mib};
}

// What the table says of outputs that differ beyond the tolerance: DIFFER where fpguard
// strays from the float64 run more than ORT does, else both runs' errors.
function diffNote(diff) {
  if (diff.worst <= 1) return '';
  const t = diff.truth;
  const errors = `relative RMS error against fp64: fpguard ${t.fpg.toExponential(1)}, ` +
                 `ORT ${t.ort.toExponential(1)}`;
  return t.sound ? `  ${diff.worst.toFixed(1)}x the tolerance; ${errors}`
                 : `  outputs DIFFER (${diff.worst.toFixed(1)}x the tolerance; ${errors})`;
}

async function main() {
  if (process.argv[2] === '--memory')
    return memoryChild(process.argv[3], Number(process.argv[4]), Number(process.argv[5]));
  const o = parseArgs(process.argv.slice(2));
  console.log(`${'model'.padEnd(20)} ${'ORT ms'.padStart(9)} ${'fpguard ms'.padStart(11)} ` +
              `${'fpguard / ORT'.padStart(14)}${'ORT MiB'.padStart(9)} ${'fpg MiB'.padStart(9)} ` +
              `${'mem ratio'.padStart(9)} ${'fp16/fp32'.padStart(9)} ${'max abs diff'.padStart(12)}` +
              `  (threads ${o.threads}, ${o.rounds} rounds of ${o.perRound} runs each, ` +
              `alternating; memory: peak resident minus resident before loading the model)`);
  const ratios = [];
  for (const root of o.models) {
    if (!fs.existsSync(root)) continue;
    for (const name of fs.readdirSync(root).sort()) {
      const dir = path.join(root, name);
      if (!fs.existsSync(path.join(dir, 'model.onnx'))) continue;
      const m = await compareModel(o, dir);
      ratios.push(m.fpgMs / m.ortMs);
      console.log(`${name.padEnd(20)} ${m.ortMs.toFixed(2).padStart(9)} ` +
                  `${m.fpgMs.toFixed(2).padStart(11)} ${(m.fpgMs / m.ortMs).toFixed(2).padStart(14)}` +
                  `${m.ortMem.toFixed(0).padStart(9)} ${m.fpgMem.toFixed(0).padStart(9)} ` +
                  `${(m.fpgMem / m.ortMem).toFixed(2).padStart(9)} ` +
                  `${(m.fp16Ms / m.fpgMs).toFixed(2).padStart(9)} ${m.diff.maxAbs.toExponential(2).padStart(12)}` +
                  diffNote(m.diff));
    }
  }
  if (ratios.length) {
    const geo = Math.exp(ratios.reduce((a, r) => a + Math.log(r), 0) / ratios.length);
    console.log(`geometric mean of fpguard / ORT over ${ratios.length} models: ${geo.toFixed(2)}` +
                ` (worst ${Math.max(...ratios).toFixed(2)})`);
  }
}

main().catch((e) => {
  console.error(`ort_compare: ${e.message}`);
  process.exit(2);
});
