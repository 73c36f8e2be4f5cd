// Runs an ONNX model in ONNX Runtime (onnxruntime-node, CPU) for tests/cli/ort_test.py.
//
//   node ort_run.js ORT_NODE_DIR MODEL IN_DIR OUT_DIR
//
// IN_DIR/tensors.json lists the inputs, [{"name", "dtype", "shape", "file"}], each file
// the raw little-endian elements; the outputs are written to OUT_DIR the same way.
// Graph optimisations are off: the model runs as written, node by node.
"use strict";
const fs = require("fs");
const path = require("path");

const [ortDir, model, inDir, outDir] = process.argv.slice(2);
const ort = require(path.resolve(ortDir, "node_modules", "onnxruntime-node"));

const arrays = {
  float32: Float32Array,
  float64: Float64Array,
  float16: Uint16Array, // the bit patterns
  int64: BigInt64Array,
  int32: Int32Array,
  int8: Int8Array,
  uint8: Uint8Array,
  bool: Uint8Array,
};

function typed(dtype, bytes) {
  const T = arrays[dtype];
  if (!T) throw new Error(`unsupported dtype ${dtype}`);
  const copy = new Uint8Array(bytes); // aligned
  return new T(copy.buffer, 0, copy.byteLength / T.BYTES_PER_ELEMENT);
}

(async () => {
  const options = { graphOptimizationLevel: "disabled", intraOpNumThreads: 1 };
  const session = await ort.InferenceSession.create(model, options);
  const listed = JSON.parse(fs.readFileSync(path.join(inDir, "tensors.json"), "utf8"));
  const feeds = {};
  for (const t of listed) {
    const data = typed(t.dtype, fs.readFileSync(path.join(inDir, t.file)));
    feeds[t.name] = new ort.Tensor(t.dtype, data, t.shape);
  }
  const results = await session.run(feeds);
  fs.mkdirSync(outDir, { recursive: true });
  const written = [];
  session.outputNames.forEach((name, i) => {
    const r = results[name];
    const file = `output_${i}.bin`;
    const d = r.data;
    fs.writeFileSync(path.join(outDir, file), Buffer.from(d.buffer, d.byteOffset, d.byteLength));
    written.push({ name, dtype: r.type, shape: r.dims, file });
  });
  fs.writeFileSync(path.join(outDir, "tensors.json"), JSON.stringify(written));
})().catch((e) => {
  console.error(`ort_run: ${model}: ${e.message}`);
  process.exit(1);
});
