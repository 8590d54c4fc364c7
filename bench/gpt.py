"""PyTorch's side of the language-model benchmarks (issue 12): the same work
as bench/gpt.c with the same arguments, one measurement per run, printed as
    RESULT <value> <unit>

    gpt.py step     BATCH THREADS   samples/s (sequences of 128 characters)
                                    of training steps: forward, backward,
                                    gradient clipping and AdamW
    gpt.py generate THREADS         tokens/s of greedy generation at batch 1
                                    with a key/value cache, positions 0 to
                                    127 over and over

The model is tools/gpt.h's: vocabulary 128, context 128, 4 layers, 4 heads,
width 128, pre-norm blocks (layer norm, causal multi-head attention as
matmul + mask + softmax + matmul, tanh gelu MLP of width 512), a final layer
norm and the head tied to the token embedding.  PyTorch 1.13 has no fused
attention.  The BLAS thread count comes from OPENBLAS_NUM_THREADS (bench/run
sets it); KILN_BENCH_SECONDS sets the timed duration.
"""
import math
import sys

import torch
import torch.nn.functional as F

from torch_bench import time_runs, seconds

V, CTX, LAYERS, HEADS, D = 128, 128, 4, 4, 128


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(D)
        self.qkv = torch.nn.Linear(D, 3 * D)
        self.proj = torch.nn.Linear(D, D)
        self.ln2 = torch.nn.LayerNorm(D)
        self.fc = torch.nn.Linear(D, 4 * D)
        self.out = torch.nn.Linear(4 * D, D)

    def forward(self, x, mask, cache=None):
        """x [B, T, D]; cache: (k, v) [B, H, T0, D/H] of earlier positions,
        replaced by the new ones with x's appended."""
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
        heads = lambda z: z.view(b, -1, HEADS, D // HEADS).transpose(1, 2)
        q, k, v = heads(q), heads(k), heads(v)
        if cache is not None:
            if cache[0] is not None:
                k = torch.cat((cache[0], k), 2)
                v = torch.cat((cache[1], v), 2)
            cache[0], cache[1] = k, v
        s = q @ k.transpose(-2, -1) / math.sqrt(D // HEADS)
        if mask is not None:
            s = s + mask
        a = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(b, t, D)
        x = x + self.proj(a)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = torch.nn.Embedding(V, D)
        self.wpe = torch.nn.Embedding(CTX, D)
        self.blocks = torch.nn.ModuleList(Block() for _ in range(LAYERS))
        self.lnf = torch.nn.LayerNorm(D)

    def forward(self, ids, pos0=0, caches=None):
        t = ids.shape[1]
        x = self.wte(ids) + self.wpe(torch.arange(pos0, pos0 + t))
        mask = torch.triu(torch.full((t, t), -1e9), 1) if t > 1 else None
        for i, blk in enumerate(self.blocks):
            x = blk(x, mask, caches[i] if caches is not None else None)
        return self.lnf(x) @ self.wte.weight.t()


def cmd_train(batch):
    torch.manual_seed(1)
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, V, (batch, CTX))
    tgt = torch.randint(0, V, (batch * CTX,))

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(ids).view(-1, V), tgt).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    print(f"RESULT {batch / time_runs(step):.2f} samples/s")


def cmd_generate():
    torch.manual_seed(1)
    model = GPT().eval()
    state = {"token": torch.zeros(1, 1, dtype=torch.long), "pos": CTX, "caches": None}

    def one():
        if state["pos"] == CTX:
            state["pos"] = 0
            state["caches"] = [[None, None] for _ in range(LAYERS)]
        logits = model(state["token"], state["pos"], state["caches"])
        state["token"] = logits[:, -1].argmax(-1, keepdim=True)
        state["pos"] += 1

    with torch.no_grad():
        print(f"RESULT {1 / time_runs(one):.1f} tokens/s")


def main(argv):
    torch.set_num_threads(int(argv[-1]))
    if len(argv) == 4 and argv[1] == "step":
        cmd_train(int(argv[2]))
    elif len(argv) == 3 and argv[1] == "generate":
        cmd_generate()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
