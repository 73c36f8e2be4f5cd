#!/usr/bin/env node
// fpguard run against ONNX Runtime (onnxruntime-node, CPU) on the same models and inputs:
// the median time of one float32 run each, and their ratio. ONNX Runtime is a baseline
// for this benchmark only; fpguard does not depend on it. Setup, once, outside the repo:
//   mkdir /tmp/ort && cd /tmp/ort && ONNXRUNTIME_NODE_INSTALL_CUDA=skip npm install onnxruntime-node
// then: NODE_PATH=/tmp/ort/node_modules bench/ort_compare.js BUILD_DIR [THREADS]
// Models: the bench models (BUILD_DIR/bench/models) and examples/, each a folder with
// model.onnx and inputs/<name>.npy (float32).
'use strict';
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const ort = require('onnxruntime-node');

function readNpy(file) {  // little-endian float32, C order (what the model folders hold)
  const b = fs.readFileSync(file);
  const hlen = b[6] === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const off = b[6] === 1 ? 10 : 12;
  const header = b.toString('latin1', off, off + hlen);
  if (!header.includes("'<f4'") || header.includes("'fortran_order': True"))
    throw new Error(`${file}: expected a C-order float32 .npy`);
  const shape = header.match(/\(([^)]*)\)/)[1].split(',').filter((s) => s.trim()).map(Number);
  const data = new Float32Array(b.buffer.slice(b.byteOffset + off + hlen,
                                               b.byteOffset + b.length));
  return new ort.Tensor('float32', data, shape);
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

function feedsOf(dir) {
  const feeds = {};
  for (const f of fs.readdirSync(path.join(dir, 'inputs')))
    feeds[path.basename(f, '.npy')] = readNpy(path.join(dir, 'inputs', f));
  return feeds;
}

// Peak memory: each side in a fresh process; "start" is its resident memory before the
// model is loaded (the runtime and its libraries), "peak" its maximum resident set.
// ORT: this script re-run as `--memory DIR THREADS` (one session, warm-up + 20 runs).
async function memoryChild(dir, threads) {
  const start = process.memoryUsage().rss / 1048576;
  const session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'), {
    intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential'});
  const feeds = feedsOf(dir);
  for (let i = 0; i < 21; ++i) await session.run(feeds);
  // VmHWM, not resourceUsage().maxRSS: the latter keeps the parent's peak across exec.
  const status = fs.readFileSync('/proc/self/status', 'latin1');
  const peak = Number(status.match(/VmHWM:\s*(\d+)/)[1]) / 1024;
  console.log(JSON.stringify({start, peak}));
}

async function main() {
  if (process.argv[2] === '--memory') return memoryChild(process.argv[3], Number(process.argv[4]));
  const build = process.argv[2] || 'build';
  const threads = Number(process.argv[3] || require('os').cpus().length);
  const repeat = 20;
  const roots = [path.join(build, 'bench', 'models'), path.join(__dirname, '..', 'examples')];
  console.log(`${'model'.padEnd(20)} ${'ORT ms'.padStart(9)} ${'fpguard ms'.padStart(11)} ` +
              `${'fpguard / ORT'.padStart(14)}${'ORT MiB'.padStart(9)} ${'fpg MiB'.padStart(9)} ` +
              `${'mem ratio'.padStart(9)} ${'fp16/fp32'.padStart(9)}  (threads ${threads}, median of ${repeat}; memory: ` +
              `peak resident minus resident before loading the model)`);
  for (const root of roots) {
    if (!fs.existsSync(root)) continue;
    for (const name of fs.readdirSync(root).sort()) {
      const dir = path.join(root, name);
      const model = path.join(dir, 'model.onnx');
      if (!fs.existsSync(model)) continue;
      const feeds = feedsOf(dir);
      const session = await ort.InferenceSession.create(model, {
        intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential'});
      await session.run(feeds);  // warm-up
      const times = [];
      for (let i = 0; i < repeat; ++i) {
        const t0 = process.hrtime.bigint();
        await session.run(feeds);
        times.push(Number(process.hrtime.bigint() - t0) / 1e6);
      }
      const ortMs = median(times);
      const outDir = fs.mkdtempSync(path.join(require('os').tmpdir(), 'ort_compare_'));
      const out = execFileSync(path.join(build, 'fpguard'),
                               ['run', model, '--inputs', path.join(dir, 'inputs'), '--repeat',
                                String(repeat), '--threads', String(threads), '--json',
                                '--outputs', outDir]);
      // The emulated run (every floating node in float16): target <= 1.3x the float32 run.
      const fp16Ms = JSON.parse(execFileSync(path.join(build, 'fpguard'),
                                             ['run', model, '--inputs', path.join(dir, 'inputs'),
                                              '--repeat', String(repeat), '--threads',
                                              String(threads), '--json', '--precision',
                                              'float16'])).timing.median_run_ms;
      const fpg = JSON.parse(out);
      const fpgMs = fpg.timing.median_run_ms;
      const fpgMem = fpg.memory.peak_rss_mib - fpg.memory.start_rss_mib;
      const ortMemRaw = JSON.parse(execFileSync(process.execPath, [__filename, '--memory', dir,
                                                                   String(threads)]));
      const ortMem = ortMemRaw.peak - ortMemRaw.start;
      // The outputs must agree: |fpguard - ORT| <= 1e-4 |ORT| + 1e-5 (float32 GEMMs sum in
      // different orders), else the timing compares different computations.
      const ortOut = await session.run(feeds);
      const files = JSON.parse(fs.readFileSync(path.join(outDir, 'outputs.json'))).tensors;
      let worst = 0;
      for (const t of files) {
        const got = readNpy(path.join(outDir, t.file)).data, want = ortOut[t.name].data;
        for (let i = 0; i < want.length; ++i)
          worst = Math.max(worst, Math.abs(got[i] - want[i]) / (1e-4 * Math.abs(want[i]) + 1e-5));
      }
      fs.rmSync(outDir, {recursive: true});
      console.log(`${name.padEnd(20)} ${ortMs.toFixed(2).padStart(9)} ` +
                  `${fpgMs.toFixed(2).padStart(11)} ${(fpgMs / ortMs).toFixed(2).padStart(14)}` +
                  `${ortMem.toFixed(0).padStart(9)} ${fpgMem.toFixed(0).padStart(9)} ` +
                  `${(fpgMem / ortMem).toFixed(2).padStart(9)} ${(fp16Ms / fpgMs).toFixed(2).padStart(9)}` +
                  (worst <= 1 ? '' : `  outputs DIFFER (${worst.toFixed(1)}x the tolerance)`));
    }
  }
}

main().catch((e) => {
  console.error(`ort_compare: ${e.message}`);
  process.exit(2);
});
