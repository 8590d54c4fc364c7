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
// KILN_BENCH_OUTPUT=PATH writes the model's output there as raw
// little-endian f32, for bench/run to compare with Kiln's.
'use strict';
const fs = require('fs');
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

// A 31-bit linear congruential sequence in exact integer arithmetic (the
// same values as bench/onnx_infer.c's): floats in [-0.5, 0.5), or token ids
// in [0, 64) for an int64 input.
function input(dims, int64) {
  const n = dims.reduce((a, b) => a * b, 1);
  const v = int64 ? new BigInt64Array(n) : new Float32Array(n);
  let s = 1;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1103515245) + 12345) & 0x7fffffff;
    const u = s / 2147483648;
    v[i] = int64 ? BigInt(Math.floor(u * 64)) : u - 0.5;
  }
  return new ort.Tensor(int64 ? 'int64' : 'float32', v, dims);
}

// Median seconds per call of session.run over REPS timings of budget/REPS;
// the last call's outputs in out.last.
async function timeRuns(session, dims, budget, int64, out) {
  const feeds = { [session.inputNames[0]]: input(dims, int64) };
  let res = await session.run(feeds);
  const t = [];
  for (let r = 0; r < REPS; r++) {
    let runs = 0;
    const t0 = now();
    let el;
    do {
      res = await session.run(feeds);
      runs++;
    } while ((el = now() - t0) < budget / REPS);
    t.push(el / runs);
  }
  t.sort((a, b) => a - b);
  if (out) out.last = res[session.outputNames[0]];
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
  const int64 = s.inputMetadata[0].type === 'int64';
  const out = {};
  const t = await timeRuns(s, dims, budget, int64, out);
  console.log(`RESULT ${(1e6 * t).toFixed(3)} us`);
  if (process.env.KILN_BENCH_OUTPUT) {
    const y = Float32Array.from(out.last.data);
    fs.writeFileSync(process.env.KILN_BENCH_OUTPUT, Buffer.from(y.buffer));
  }
  if (identity) {
    const id = await open(identity, threads);
    const o = await timeRuns(id, [1, 1], budget / 4, false);
    console.log(`OVERHEAD ${(1e6 * o).toFixed(3)} us`);
  }
}

main().catch((e) => {
  console.error(`ort_bench: ${e.message || e}`);
  process.exit(1);
});
