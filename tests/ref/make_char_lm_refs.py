#!/usr/bin/python3
"""Writes tests/ref/char_lm/: the PyTorch side of test_char_lm.c.

    /usr/bin/python3 tests/ref/make_char_lm_refs.py

The GPT of examples/gpt.h (same variable names and layouts: a linear layer
is x @ W + b with W [in, out]), tiny, with the head tied to the token
embedding: its initial weights (weights.npz), 20 batches of token ids and
the training losses PyTorch gets on them with AdamW, a linear warm-up, a
cosine decay and gradient clipping (data.npz).  The C test loads the
weights into a Kiln session, trains on the same batches with the same
optimiser and compares the 20 losses.
"""
import math
import os
import warnings

import numpy as np
import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "char_lm")
V, CTX, LAYERS, HEADS, D, TIE = 20, 12, 2, 2, 16, 1
B, STEPS, WARMUP = 4, 20, 5
LR, WD, MIN_LR, CLIP = 1e-2, 0.1, 1e-3, 1.0


def init(rng):
    w = {"wte": rng.normal(0, 0.02, (V, D)), "wpe": rng.normal(0, 0.02, (CTX, D))}
    for l in range(LAYERS):
        p = f"h{l}."
        for name, shape in (("qkv", (D, 3 * D)), ("proj", (D, D)), ("fc", (D, 4 * D)),
                            ("out", (4 * D, D))):
            w[p + name + ".W"] = rng.normal(0, 0.02, shape)
            w[p + name + ".b"] = np.zeros(shape[1])
        for ln in ("ln1", "ln2"):
            w[p + ln + ".w"] = np.ones(D)
            w[p + ln + ".b"] = np.zeros(D)
    w["lnf.w"], w["lnf.b"] = np.ones(D), np.zeros(D)
    return {k: v.astype(np.float32) for k, v in w.items()}


def forward(p, ids):
    b, t = ids.shape
    hd = D // HEADS
    x = (p["wte"][ids] + p["wpe"][:t]).reshape(b * t, D)
    mask = torch.triu(torch.full((t, t), -1e9), 1)
    for l in range(LAYERS):
        q = lambda n: p[f"h{l}.{n}"]
        h = F.layer_norm(x, (D,), q("ln1.w"), q("ln1.b"), 1e-5)
        qkv = h @ q("qkv.W") + q("qkv.b")
        heads = [qkv[:, i * D:(i + 1) * D].reshape(b, t, HEADS, hd).permute(0, 2, 1, 3)
                 for i in range(3)]
        s = heads[0] @ heads[1].transpose(-1, -2) / math.sqrt(hd) + mask
        a = (torch.softmax(s, -1) @ heads[2]).permute(0, 2, 1, 3).reshape(b * t, D)
        x = x + a @ q("proj.W") + q("proj.b")
        h = F.layer_norm(x, (D,), q("ln2.w"), q("ln2.b"), 1e-5)
        h = F.gelu(h @ q("fc.W") + q("fc.b"), approximate="tanh")
        x = x + h @ q("out.W") + q("out.b")
    x = F.layer_norm(x, (D,), p["lnf.w"], p["lnf.b"], 1e-5)
    return x @ p["wte"].T


def main():
    rng = np.random.RandomState(0)
    w = init(rng)
    # a learnable rule (each id follows from the previous one), so that the
    # losses fall and their agreement tests the updates, not just the forward
    batches = np.zeros((STEPS, B, CTX + 1), np.int32)
    batches[:, :, 0] = rng.randint(0, V, (STEPS, B))
    for t in range(CTX):
        batches[:, :, t + 1] = (batches[:, :, t] * 3 + 1) % V
    p = {k: torch.tensor(v, requires_grad=True) for k, v in w.items()}
    opt = torch.optim.AdamW(p.values(), lr=LR, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=WD)
    sched = torch.optim.lr_scheduler.SequentialLR(
        opt, [torch.optim.lr_scheduler.LinearLR(opt, 1 / WARMUP, total_iters=WARMUP - 1),
              torch.optim.lr_scheduler.CosineAnnealingLR(opt, STEPS - WARMUP, MIN_LR)],
        milestones=[WARMUP])
    losses = []
    for s in range(STEPS):
        ids = torch.tensor(batches[s, :, :-1], dtype=torch.long)
        tgt = torch.tensor(batches[s, :, 1:], dtype=torch.long).reshape(-1)
        loss = F.cross_entropy(forward(p, ids), tgt)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(p.values(), CLIP)
        opt.step()
        with warnings.catch_warnings():  # SequentialLR's own deprecation
            warnings.simplefilter("ignore")
            sched.step()
        losses.append(loss.item())
    os.makedirs(OUT, exist_ok=True)
    np.savez(os.path.join(OUT, "weights.npz"), **w)
    np.savez(os.path.join(OUT, "data.npz"),
             config=np.array([V, CTX, LAYERS, HEADS, D, TIE, STEPS, WARMUP], np.int32),
             hyper=np.array([LR, WD, MIN_LR, CLIP], np.float32),
             batches=batches, losses=np.array(losses, np.float32))
    print("losses", " ".join(f"{v:.6f}" for v in losses))


if __name__ == "__main__":
    main()
