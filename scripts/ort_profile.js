// usage: node ort_profile.js MODEL_DIR [threads] [runs] [nodes]
// Runs ONNX Runtime's profiler on a model and prints the time per node
// kind (op type) and the `nodes` slowest nodes (default 15), per run, for
// comparing with `kiln bench --profile`. Each node's time is its median
// over the profiled runs (the three warm-up runs left out). Run from out/peer (where onnxruntime-node is
// installed by scripts/bench.sh).
const fs = require('fs'), path = require('path');
const ort = require('onnxruntime-node');
const { onnx } = require('onnx-proto');
(async () => {
  const dir = process.argv[2], threads = parseInt(process.argv[3] || '1'), runs = parseInt(process.argv[4] || '20');
  const prefix = path.join(require('os').tmpdir(), 'kiln-ort-profile');
  const sess = await ort.InferenceSession.create(path.join(dir, 'model.onnx'), {
    intraOpNumThreads: threads, interOpNumThreads: 1, graphOptimizationLevel: 'all',
    enableProfiling: true, profileFilePrefix: prefix });
  const t = onnx.TensorProto.decode(fs.readFileSync(path.join(dir, 'test_data_set_0/input_0.pb')));
  const buf = Buffer.from(t.rawData);
  const ab = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength);
  const data = t.dataType === 7 ? new BigInt64Array(ab) : new Float32Array(ab);
  const feeds = { [sess.inputNames[0]]: new ort.Tensor(t.dataType === 7 ? 'int64' : 'float32', data, t.dims.map(Number)) };
  for (let i = 0; i < 3 + runs; i++) await sess.run(feeds);
  let file = sess.endProfiling();
  if (!file) {
    // Some bindings do not return the name: the newest file with the prefix.
    const tmp = path.dirname(prefix);
    const cands = fs.readdirSync(tmp).filter(f => f.startsWith(path.basename(prefix)) && f.endsWith('.json'))
      .map(f => path.join(tmp, f)).sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs);
    file = cands[0];
  }
  await sess.release();
  const ev = JSON.parse(fs.readFileSync(file, 'utf8'));
  fs.unlinkSync(file);
  const samples = {}, opOf = {};
  for (const e of ev) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
    const node = e.name.replace(/_kernel_time$/, '');
    opOf[node] = e.args.op_name;
    (samples[node] = samples[node] || []).push(e.dur);
  }
  // Medians over the profiled runs; the sums below are of medians, so n = 1.
  const byOp = {}, byNode = {};
  let total = 0;
  for (const [node, ds] of Object.entries(samples)) {
    const s = ds.slice(Math.min(3, ds.length - 1)).sort((a, b) => a - b);
    const med = s[s.length >> 1];
    byNode[node] = med;
    byOp[opOf[node]] = (byOp[opOf[node]] || 0) + med;
    total += med;
  }
  const n = 1;
  const shown = parseInt(process.argv[5] || '15');
  console.log(`${path.basename(dir)}: ${(total / n / 1000).toFixed(3)} ms of kernels per run`);
  for (const [op, d] of Object.entries(byOp).sort((a, b) => b[1] - a[1]))
    console.log(`  ${(100 * d / total).toFixed(1).padStart(5)}%  ${(d / n / 1000).toFixed(4)} ms  ${op}`);
  console.log('slowest nodes:');
  for (const [nd, d] of Object.entries(byNode).sort((a, b) => b[1] - a[1]).slice(0, shown))
    console.log(`  ${(d / n / 1000).toFixed(4)} ms  ${nd}`);
})();
