/* The MLP trained and evaluated by the kiln command. */
#ifndef KILN_TOOLS_MLP_H
#define KILN_TOOLS_MLP_H

#include "kiln.h"
#include "cnn.h"
#include "dist.h"
#include "tool.h"

#define MLP_MAX_LAYERS 16

typedef struct mlp_config {
    int dataset;      /* 0 mnist, 1 fashion-mnist */
    int arch;         /* 0 mlp, 1 cnn (tools/cnn.h) */
    int hidden_given; /* --hidden was passed (the CNN's default is 512) */
    const char *data_dir, *model, *save, *log, *plot;
    int hidden[MLP_MAX_LAYERS], n_hidden;
    int activation; /* 0 relu, 1 gelu, 2 tanh */
    int optimizer;  /* 0 sgd, 1 momentum, 2 adam, 3 adamw, 4 adagrad */
    float lr;       /* 0 = the optimiser's default */
    int epochs, batch, seed, threads;
    int steps;          /* > 0: stop after this many steps in all */
    const char *resume; /* a model saved by --save to continue training */
    int zero1;          /* under mpirun: shard the optimiser state (ZeRO-1) */
} mlp_config;

mlp_config mlp_defaults(void);
/* relu (act 0), gelu (1) or tanh (2) of h. */
kiln_node *mlp_activate(kiln_graph *g, kiln_node *h, int act);
int mlp_train(const mlp_config *c);
int mlp_eval(const mlp_config *c);

/* The session variable that records the activation of a saved model. */
#define MLP_ACT_KEY "kiln.activation"
enum { MLP_CLASSES = 10 };
/* Fills c's layers, activation and arch from the model file at path and
   *in_dim with its first layer's inputs; 0, or 1 after an error
   (kiln_tool_fail). */
int mlp_read_architecture(const char *path, mlp_config *c, int64_t *in_dim);

#endif
