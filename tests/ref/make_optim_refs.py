#!/usr/bin/python3
"""Writes the optimiser trajectories tests/test_optim.c checks, with torch.optim.

Run from anywhere: /usr/bin/python3 tests/ref/make_optim_refs.py

The problem (float32 throughout, written to optim/problem.txt):
  W [3, 4], b [4]      parameters, initial values below
  X [3][5, 3], T [3][5, 4]  three batches; call c (0-based) uses batch c % 3
  loss = mean((X W + b - T)^2)
Each case trains for 10 optimiser steps.  With accumulation k, one step is k
calls (backward on each batch), the mean of the k gradients being applied.
Clipping (torch.nn.utils.clip_grad_norm_) acts on the gradient applied.
Schedules are stepped once per optimiser step:
  step          StepLR(step_size, gamma)
  cosine        CosineAnnealingLR(T_max=total_steps, eta_min=min_lr)
  warmup W > 0  SequentialLR([LinearLR(1/W, 1, total_iters=W-1), main], [W])
                (LinearLR alone when the main schedule is constant)

Every case file lists its options as "opt <key> <value>" lines, named as the
fields of kiln_optim_options, then for each step "step <k> lr <lr used>"
followed by "W" and "b" lines holding the parameters after the step.
"""
import os
import warnings

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "optim")
STEPS = 10


def problem():
    i = np.arange(12, dtype=np.float64)
    W = (0.5 * np.sin(1.0 + 0.7 * i)).reshape(3, 4)
    b = 0.1 * np.cos(np.arange(4, dtype=np.float64))
    X = []
    T = []
    for k in range(3):
        j = np.arange(15, dtype=np.float64)
        X.append((np.sin(0.3 * j + k) * (1.0 + 0.5 * k)).reshape(5, 3))
        j = np.arange(20, dtype=np.float64)
        T.append((np.cos(0.2 * j - k) + 0.25 * k).reshape(5, 4))
    f = lambda a: np.asarray(a, dtype=np.float32)
    return f(W), f(b), [f(x) for x in X], [f(t) for t in T]


# name -> options (defaults as kiln_optim_defaults gives them, torch's)
CASES = {
    "sgd": dict(kind="sgd", lr=0.1),
    "sgd_momentum": dict(kind="sgd", lr=0.05, momentum=0.9),
    "sgd_nesterov": dict(kind="sgd", lr=0.05, momentum=0.9, nesterov=1),
    "sgd_weight_decay": dict(kind="sgd", lr=0.1, weight_decay=0.05),
    "sgd_momentum_wd": dict(kind="sgd", lr=0.05, momentum=0.8, weight_decay=0.02),
    "adagrad": dict(kind="adagrad", lr=0.1),
    "adagrad_decay": dict(kind="adagrad", lr=0.2, lr_decay=0.05,
                          weight_decay=0.01, initial_accumulator=0.1),
    "adam": dict(kind="adam", lr=0.01),
    "adam_l2": dict(kind="adam", lr=0.02, beta1=0.8, beta2=0.99, eps=1e-6,
                    weight_decay=0.05),
    "adamw": dict(kind="adamw", lr=0.01),
    "adamw_wd": dict(kind="adamw", lr=0.02, weight_decay=0.1),
    "sgd_step": dict(kind="sgd", lr=0.1, momentum=0.9, schedule="step",
                     step_size=3, gamma=0.5),
    "adam_cosine": dict(kind="adam", lr=0.02, schedule="cosine",
                        total_steps=10, min_lr=0.001),
    "sgd_warmup": dict(kind="sgd", lr=0.1, warmup_steps=4),
    "adamw_warmup_cosine": dict(kind="adamw", lr=0.03, schedule="cosine",
                                total_steps=7, warmup_steps=3),
    "sgd_clip": dict(kind="sgd", lr=0.1, momentum=0.9, clip_norm=0.5),
    "adam_clip": dict(kind="adam", lr=0.05, clip_norm=0.2),
    "sgd_accumulate": dict(kind="sgd", lr=0.1, momentum=0.5, accumulate=2),
    "adam_accumulate_clip": dict(kind="adam", lr=0.02, accumulate=3,
                                 clip_norm=0.3, schedule="step",
                                 step_size=4, gamma=0.3),
}

DEFAULTS = {
    "sgd": dict(lr=1e-3),
    "adagrad": dict(lr=1e-2, eps=1e-10),
    "adam": dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8),
    "adamw": dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=1e-2),
}


def make_optimizer(o, params):
    kind = o["kind"]
    wd = o.get("weight_decay", DEFAULTS[kind].get("weight_decay", 0.0))
    if kind == "sgd":
        return torch.optim.SGD(params, lr=o["lr"], momentum=o.get("momentum", 0.0),
                               nesterov=bool(o.get("nesterov", 0)), weight_decay=wd)
    if kind == "adagrad":
        return torch.optim.Adagrad(params, lr=o["lr"], lr_decay=o.get("lr_decay", 0.0),
                                   weight_decay=wd,
                                   initial_accumulator_value=o.get("initial_accumulator", 0.0),
                                   eps=o.get("eps", 1e-10))
    betas = (o.get("beta1", 0.9), o.get("beta2", 0.999))
    cls = torch.optim.Adam if kind == "adam" else torch.optim.AdamW
    return cls(params, lr=o["lr"], betas=betas, eps=o.get("eps", 1e-8), weight_decay=wd)


def make_schedule(o, opt):
    sched = o.get("schedule", "constant")
    main = None
    if sched == "step":
        main = torch.optim.lr_scheduler.StepLR(opt, o["step_size"], o["gamma"])
    elif sched == "cosine":
        main = torch.optim.lr_scheduler.CosineAnnealingLR(
            opt, T_max=o["total_steps"], eta_min=o.get("min_lr", 0.0))
    w = o.get("warmup_steps", 0)
    if w <= 0:
        return main
    # Schedulers built on one optimiser each reset its lr: build the warm-up
    # last so that it sets the lr of step 1.
    warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=1.0 / w, end_factor=1.0,
                                             total_iters=w - 1)
    if main is None:
        return warm
    return torch.optim.lr_scheduler.SequentialLR(opt, [warm, main], milestones=[w])


def fmt(a):
    return " ".join("%.9g" % v for v in np.asarray(a, dtype=np.float32).ravel())


def run_case(name, o, W0, b0, X, T):
    W = torch.tensor(W0, requires_grad=True)
    b = torch.tensor(b0, requires_grad=True)
    opt = make_optimizer(o, [W, b])
    sched = make_schedule(o, opt)
    k = max(1, o.get("accumulate", 1))
    lines = ["# torch %s: %s" % (torch.__version__, name)]
    for key, val in o.items():
        lines.append("opt %s %s" % (key, val))
    lines.append("steps %d" % STEPS)
    call = 0
    for step in range(1, STEPS + 1):
        acc = [torch.zeros_like(W), torch.zeros_like(b)]
        for _ in range(k):
            x = torch.tensor(X[call % 3])
            t = torch.tensor(T[call % 3])
            call += 1
            loss = ((x @ W + b - t) ** 2).mean()
            gW, gb = torch.autograd.grad(loss, [W, b])
            acc[0] += gW
            acc[1] += gb
        W.grad = acc[0] / k
        b.grad = acc[1] / k
        if o.get("clip_norm", 0) > 0:
            torch.nn.utils.clip_grad_norm_([W, b], o["clip_norm"])
        lr = opt.param_groups[0]["lr"]
        opt.step()
        opt.zero_grad()
        if sched is not None:
            sched.step()
        lines.append("step %d lr %.12g" % (step, lr))
        lines.append("W " + fmt(W.detach().numpy()))
        lines.append("b " + fmt(b.detach().numpy()))
    with open(os.path.join(OUT, name + ".txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    # SequentialLR steps its schedulers with an explicit epoch, which warns.
    warnings.filterwarnings("ignore", category=UserWarning)
    os.makedirs(OUT, exist_ok=True)
    torch.set_num_threads(1)
    W0, b0, X, T = problem()
    with open(os.path.join(OUT, "problem.txt"), "w") as f:
        f.write("# initial parameters and the three batches (float32)\n")
        f.write("W " + fmt(W0) + "\n")
        f.write("b " + fmt(b0) + "\n")
        for k in range(3):
            f.write("X " + fmt(X[k]) + "\n")
            f.write("T " + fmt(T[k]) + "\n")
    for name, o in CASES.items():
        run_case(name, o, W0, b0, X, T)


if __name__ == "__main__":
    main()
