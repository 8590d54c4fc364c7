// Runs the models tests/test_onnx_save.c exported in ONNX Runtime and
// compares with Kiln's outputs: an independent reading of the files.
// DIR/NAME.onnx is the model, NAME.x.bin its input X (raw f32),
// NAME.meta X's dims on the first line, then one line per output (1 when
// it holds i32), NAME.outK.bin Kiln's outputs.  Prints the largest
// relative difference |ort - kiln| / (1 + |kiln|) per model; exit status 1
// when one exceeds 1e-5 or a model fails.
// usage: node onnx_save_ort.js ONNXRUNTIME_NODE_DIR DIR NAME...
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require(process.argv[2]);
const dir = process.argv[3];

function floats(file, int32) {
  const b = fs.readFileSync(path.join(dir, file));
  const T = int32 ? Int32Array : Float32Array;
  return new T(b.buffer, b.byteOffset, b.length / 4);
}

async function check(name) {
  const meta = fs.readFileSync(path.join(dir, `${name}.meta`), 'utf8')
    .trim().split('\n');
  const dims = meta[0].trim().split(/\s+/).map(Number);
  const s = await ort.InferenceSession.create(path.join(dir, `${name}.onnx`));
  const r = await s.run({X: new ort.Tensor('float32', floats(`${name}.x.bin`), dims)});
  let worst = 0;
  s.outputNames.forEach((o, k) => {
    const want = floats(`${name}.out${k}.bin`, meta[1 + k] === '1');
    const got = r[o].data;
    if (got.length !== want.length)
      throw new Error(`output ${o}: ${got.length} values, Kiln has ${want.length}`);
    for (let i = 0; i < got.length; i++) {
      const d = Math.abs(Number(got[i]) - want[i]) / (1 + Math.abs(want[i]));
      if (!(d <= worst)) worst = d;
    }
  });
  console.log(`${name}: largest relative difference from ONNX Runtime ` +
              `${ort.env.versions ? ort.env.versions.common : ''} ${worst.toExponential(2)}`);
  return worst <= 1e-5;
}

(async () => {
  let ok = true;
  for (const name of process.argv.slice(4)) {
    try {
      ok = (await check(name)) && ok;
    } catch (e) {
      console.log(`${name}: ${e.message}`);
      ok = false;
    }
  }
  process.exit(ok ? 0 : 1);
})();
