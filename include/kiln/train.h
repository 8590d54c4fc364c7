/* Kiln: optimisers, data sets and batches, training checkpoints.
   Part of the public API: include "kiln.h", which includes every part. */
#ifndef KILN_TRAIN_H
#define KILN_TRAIN_H

#include "kiln/execution.h"

KILN_DECLS_BEGIN

/* ---------------------------------------------- optimisers */

/* Optimisers follow torch.optim's update rules.  All their state (momentum
   buffers, Adam moments, Adagrad sums, accumulated gradients, the step
   counter and bias corrections) lives in the session as non-trainable f32
   variables, so saving a session's variables saves the optimiser too:
     "<var>.momentum" "<var>.adagrad_sum" "<var>.adam_m" "<var>.adam_v"
     "<var>.accum" "optim.step" "optim.micro" "optim.bias1" "optim.bias2"
   ("optim" is options.name; a different name also prefixes the per-variable
   slots: "<var>.<name>.adam_m"); the step counter is exact up to 2^24
   steps.  The run-time form (kiln_optimizer_update) and the graph form
   (kiln_optimizer_build_step) build the same update nodes, so they give
   identical trajectories when the graph form is compiled with the gemm_acc
   pass off; with it on (the default) a weight update whose gradient is a
   matmul read nowhere else (SGD) runs as one accumulating GEMM and differs
   from the run-time form by float rounding. */
typedef enum kiln_optim_kind {
    KILN_SGD,     /* momentum, Nesterov, L2 weight decay (no dampening) */
    KILN_ADAGRAD, /* lr_decay, initial_accumulator, L2 weight decay */
    KILN_ADAM,    /* L2 weight decay added to the gradient */
    KILN_ADAMW,   /* decoupled weight decay: p *= 1 - lr * weight_decay */
} kiln_optim_kind;

/* Learning-rate schedules, as functions of e = number of steps already
   applied (torch's last_epoch), with a base lr:
     constant  lr
     step      lr * gamma^floor(e / step_size)          (StepLR)
     cosine    min_lr + (lr - min_lr)(1 + cos(pi min(e, T) / T)) / 2,
               T = total_steps (CosineAnnealingLR, held at min_lr after T)
   warmup_steps W > 0 puts a linear warm-up first: lr * (e + 1) / W while
   e < W, then the schedule of e - W (torch LinearLR(1/W, total_iters=W-1)
   followed by the schedule in a SequentialLR). */
typedef enum kiln_schedule_kind {
    KILN_LR_CONSTANT,
    KILN_LR_STEP,
    KILN_LR_COSINE,
} kiln_schedule_kind;

typedef struct kiln_optim_options {
    kiln_optim_kind kind;
    float lr;                  /* base learning rate, >= 0 */
    float momentum;            /* SGD, >= 0 */
    int nesterov;              /* SGD, needs momentum > 0 */
    float weight_decay;        /* >= 0 */
    float beta1, beta2;        /* Adam/AdamW, in [0, 1) */
    float eps;                 /* Adam/AdamW/Adagrad, >= 0 */
    float lr_decay;            /* Adagrad: lr / (1 + (t - 1) lr_decay), >= 0 */
    float initial_accumulator; /* Adagrad: initial sum of squares, >= 0 */
    kiln_schedule_kind schedule;
    int step_size;    /* KILN_LR_STEP, >= 1 */
    float gamma;      /* KILN_LR_STEP, > 0 */
    int total_steps;  /* KILN_LR_COSINE, >= 1 */
    float min_lr;     /* KILN_LR_COSINE, >= 0 */
    int warmup_steps; /* 0 = none */
    float clip_norm;  /* > 0: scale the gradients so that their global L2
                         norm is at most clip_norm (clip_grad_norm_); 0 off */
    int accumulate;   /* k > 1: sum the gradients of k calls and apply
                         their mean on the k-th; 0 or 1 = every call */
    const char *name; /* prefix of the state variables; NULL = "optim" */
} kiln_optim_options;

/* torch's defaults for kind: lr 1e-3 (Adagrad 1e-2), Adam/AdamW betas
   0.9/0.999 and eps 1e-8, Adagrad eps 1e-10, AdamW weight_decay 1e-2,
   everything else 0 / off and a constant schedule. */
kiln_optim_options kiln_optim_defaults(kiln_optim_kind kind);

typedef struct kiln_optimizer kiln_optimizer;

/* New optimiser on s (options copied; the global state variables are
   declared in s, existing ones kept so a restored session resumes).  NULL
   with kiln_session_error (and kiln_last_error) on bad options, and when a
   live optimiser of another kind on s has the same name (they would share
   "<name>.step"): give one of them another options.name.  Optimisers of one
   kind and name share all their state. */
kiln_optimizer *kiln_optimizer_new(kiln_session *s,
                                   const kiln_optim_options *o);
/* Frees the optimiser; its state stays in the session.  NULL is a no-op. */
void kiln_optimizer_free(kiln_optimizer *o);
/* Run-time form (Marian's opt->update(graph)): after kiln_backward on g,
   updates every trainable variable of g that has a gradient, by adding the
   update nodes to g and computing them.  KILN_ERR_STATE when the
   optimiser's session has no backward pass of g (or stale gradients) or the
   optimiser's session was freed (kiln_last_error); other errors as
   kiln_forward (kiln_session_error). */
kiln_status kiln_optimizer_update(kiln_optimizer *o, kiln_graph *g);
/* Graph form (ngraph's assign): adds to g the gradients of the scalar loss
   for every trainable variable it depends on and the assignments of their
   update and of the optimiser state; returns a doall node to compile as an
   output next to loss, so that each run is one training step.  A poisoned
   node with the graph's error on bad arguments. */
kiln_node *kiln_optimizer_build_step(kiln_optimizer *o, kiln_graph *g,
                                     kiln_node *loss);
/* Learning rate of the next step, from the schedule and the step count
   (computed in double; the update computes the same in f32).  0 for NULL or
   when the session was freed. */
float kiln_optimizer_lr(const kiln_optimizer *o);
/* Number of steps applied so far (read from the session); -1 for NULL or
   when the session was freed. */
int64_t kiln_optimizer_step_count(const kiln_optimizer *o);

/* ---------------------------------------------- data */

/* A labelled data set, validated once on load: images f32 [count,
   rows * cols], labels i32 [count], each in [0, classes), count >= 1.  The
   struct owns its tensors and the file names (used in messages). */
typedef struct kiln_dataset {
    kiln_tensor *images, *labels;
    int64_t count, rows, cols;
    int classes;
    char *images_path, *labels_path;
} kiln_dataset;
/* Loads IDX images ([count, rows, cols] or [count, features]) multiplied by
   scale and IDX labels, plain or .gz.  KILN_ERR_IO (kiln_last_error naming
   the file and the offending index or value) on a missing or bad file,
   counts that differ, no images, or a label outside [0, classes);
   KILN_ERR_ARG on bad arguments.  On error *d is empty. */
kiln_status kiln_dataset_load(kiln_dataset *d, const char *images_path,
                              const char *labels_path, int classes,
                              float scale);
/* The MNIST-format split of dir (train = 1: train-*, 0: t10k-*), plain or
   .gz, 10 classes; errors as kiln_dataset_load. */
kiln_status kiln_mnist_dataset(kiln_dataset *d, const char *dir, int train,
                               float scale);
/* KILN_OK when test can be used with a model trained on train (same image
   size and classes), else KILN_ERR_SHAPE (kiln_last_error names both). */
kiln_status kiln_dataset_match(const kiln_dataset *train,
                               const kiln_dataset *test);
/* Frees the tensors and names and empties *d; NULL is a no-op. */
void kiln_dataset_free(kiln_dataset *d);

/* kiln_mnist_dataset handing back just the tensors: images f32
   [N, rows*cols] multiplied by scale, labels i32 [N].  Errors as
   kiln_mnist_dataset. */
kiln_status kiln_mnist_load(const char *dir, int train, float scale,
                            kiln_tensor **images, kiln_tensor **labels);

/* Mini-batches over rows of x (and y): seeded shuffling, optional drop of
   the last partial batch. */
typedef struct kiln_batcher kiln_batcher;
/* x and y (may be NULL) share their first dimension; they must outlive the
   batcher.  NULL (kiln_last_error) on bad arguments. */
kiln_batcher *kiln_batcher_new(const kiln_tensor *x, const kiln_tensor *y,
                               int batch, int shuffle, int drop_last,
                               uint64_t seed);
void kiln_batcher_free(kiln_batcher *b);
/* Copies the next batch into xb and yb (shaped [batch, ...]); returns the
   number of rows copied, 0 at the end of the epoch (then starts a new,
   reshuffled epoch), -1 on a shape mismatch (kiln_batcher_error) or a NULL
   b (kiln_last_error). */
int kiln_batcher_next(kiln_batcher *b, kiln_tensor *xb, kiln_tensor *yb);
/* Makes b one rank's shard of data-parallel training over size ranks
   (kiln/dist.h): every rank's batcher draws the same global batches, in
   the seed's order, as an unsharded one, and kiln_batcher_next copies only
   this rank's part of each (global batch n split in size contiguous parts,
   the first n % size one row longer) into xb and yb, shaped
   [ceil(batch / size), ...]; it returns that part's rows.  A last batch of
   fewer rows than ranks ends the epoch without being drawn.  KILN_ERR_ARG
   (kiln_batcher_error) unless 0 <= rank < size <= batch; kiln_last_error
   for a NULL b. */
kiln_status kiln_batcher_shard(kiln_batcher *b, int rank, int size);
/* Rows of the global batch the last kiln_batcher_next drew (0 at the end
   of an epoch or for a NULL b). */
int kiln_batcher_global_rows(const kiln_batcher *b);
/* Message of the batcher's last kiln_batcher_next or kiln_batcher_shard:
   "" when it succeeded. */
const char *kiln_batcher_error(const kiln_batcher *b);
/* Batches per epoch. */
int64_t kiln_batcher_num_batches(const kiln_batcher *b);
/* The shuffling RNG, for checkpoints. */
kiln_rng *kiln_batcher_rng(kiln_batcher *b);

/* ngraph-python's gendata.MixtureGenerator: n_classes Gaussian mixtures in
   dims dimensions; class c has an affine map A_c and offset b_c drawn
   uniform in (-1, 1); a sample is A_c N(0, 0.3^2 I) + b_c with c drawn from
   the priors pvals. */
typedef struct kiln_mixture kiln_mixture;
/* NULL (kiln_last_error) on bad arguments. */
kiln_mixture *kiln_mixture_new(const double *pvals, int n_classes, int dims,
                               uint64_t seed);
void kiln_mixture_free(kiln_mixture *m);
/* Draws n samples: x [n, dims] row-major and labels y [n]. */
kiln_status kiln_mixture_batch(kiln_mixture *m, int n, float *x, int32_t *y);
/* The mean of class c (its offset b_c), dims floats; NULL when out of
   range. */
const float *kiln_mixture_mean(const kiln_mixture *m, int c);

/* A terminal progress bar (plain lines when out is not a terminal).  The
   three calls ignore a NULL p; any done and total are drawn safely. */
typedef struct kiln_progress {
    FILE *out;
    const char *label;
    int64_t total, done;
    double start, last_draw;
    int tty;
} kiln_progress;
void kiln_progress_begin(kiln_progress *p, FILE *out, const char *label,
                         int64_t total);
/* Advances to done steps; shows the running loss, samples/s and ETA. */
void kiln_progress_update(kiln_progress *p, int64_t done, double loss,
                          double samples_per_step);
void kiln_progress_end(kiln_progress *p, const char *summary);

/* Monotonic seconds. */
double kiln_now(void);

/* ---------------------------------------------- checkpoints */

/* Saves every session variable (and the session RNG as "__rng__") to path:
   .safetensors or Kiln's .bin by extension, .npz otherwise.  Atomic.
   KILN_ERR_IO with the session's error. */
kiln_status kiln_session_save(kiln_session *s, const char *path);
/* Loads variables saved by kiln_session_save or numpy.  Every tensor is
   checked against an existing variable of the same name (dtype and shape)
   before any is written; unknown names create new variables.  On any error
   nothing changes. */
kiln_status kiln_session_load(kiln_session *s, const char *path);

KILN_DECLS_END
#endif /* KILN_TRAIN_H */
