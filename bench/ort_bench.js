// ONNX Runtime's side of the ONNX inference rows of bench/run: runs an ONNX
// file in onnxruntime-node (bench/ort/node_modules) and prints
//     RESULT <median us per call> us
//     OVERHEAD <median us per call of an Identity model on [1, 1]> us
//
//     node bench/ort_bench.js MODEL.onnx DIMS THREADS [IDENTITY.onnx]
//
// DIMS is the one input's shape, comma-separated (128,784).  THREADS sets
// intra-op threads (inter-op 1, sequential execution, all graph
// optimisations).  The timing follows bench/timing.h: one warm-up call,
// then 5 timings of KILN_BENCH_SECONDS / 5 each, the median of their
// per-call means; KILN_BENCH_CLOCK=cpu uses the process's CPU time.
'use strict';
const path = require('path');
const ort = require(path.join(__dirname, 'ort', 'node_modules', 'onnxruntime-node'));

const REPS = 5;

function now() {
  if (process.env.KILN_BENCH_CLOCK === 'cpu') {
    const u = process.cpuUsage();
    return (u.user + u.system) * 1e-6;
  }
  return Number(process.hrtime.bigint()) * 1e-9;
}

async function open(file, threads) {
  return ort.InferenceSession.create(file, {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
}

function input(dims) {
  const n = dims.reduce((a, b) => a * b, 1);
  const v = new Float32Array(n);
  let s = 1;
  for (let i = 0; i < n; i++) {
    s = (s * 1103515245 + 12345) % 2147483648;
    v[i] = s / 2147483648 - 0.5;
  }
  return new ort.Tensor('float32', v, dims);
}

// Median seconds per call of session.run over REPS timings of budget/REPS.
async function timeRuns(session, dims, budget) {
  const feeds = { [session.inputNames[0]]: input(dims) };
  await session.run(feeds);
  const t = [];
  for (let r = 0; r < REPS; r++) {
    let runs = 0;
    const t0 = now();
    let el;
    do {
      await session.run(feeds);
      runs++;
    } while ((el = now() - t0) < budget / REPS);
    t.push(el / runs);
  }
  t.sort((a, b) => a - b);
  return t[REPS >> 1];
}

async function main() {
  const [model, dimsArg, threadsArg, identity] = process.argv.slice(2);
  const threads = parseInt(threadsArg, 10);
  const dims = (dimsArg || '').split(',').map((d) => parseInt(d, 10));
  if (!model || dims.some((d) => !(d > 0)) || !(threads > 0)) {
    console.error('usage: node ort_bench.js MODEL.onnx DIMS THREADS [IDENTITY.onnx]');
    process.exit(2);
  }
  const budget = parseFloat(process.env.KILN_BENCH_SECONDS || '1') || 1;
  const s = await open(model, threads);
  console.log(`RESULT ${(1e6 * (await timeRuns(s, dims, budget))).toFixed(3)} us`);
  if (identity) {
    const id = await open(identity, threads);
    const t = await timeRuns(id, [1, 1], budget / 4);
    console.log(`OVERHEAD ${(1e6 * t).toFixed(3)} us`);
  }
}

main().catch((e) => {
  console.error(`ort_bench: ${e.message || e}`);
  process.exit(1);
});
