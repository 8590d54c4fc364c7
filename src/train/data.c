/* Datasets: MNIST loading, mini-batching and the Gaussian-mixture
   generator. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "base/shape.h"
#include "base/tensor.h"

void kiln_dataset_free(kiln_dataset *d)
{
    if (!d)
        return;
    kiln_tensor_free(d->images);
    kiln_tensor_free(d->labels);
    free(d->images_path);
    free(d->labels_path);
    memset(d, 0, sizeof *d);
}

static char *copy_str(const char *s)
{
    char *c = malloc(strlen(s) + 1);
    return c ? strcpy(c, s) : NULL;
}

/* Every check a consumer would otherwise repeat: matching counts, at
   least one example, images of one positive size, labels in range. */
static kiln_status check_dataset(const kiln_dataset *d)
{
    kiln_shape xs = d->images->shape, ys = d->labels->shape;
    if (xs.ndim != 2 && xs.ndim != 3) {
        kiln_set_last_error("%s: %d dimensions, but images are [count, rows, "
                            "cols] (or [count, features])",
                            d->images_path, xs.ndim);
        return KILN_ERR_IO;
    }
    if (ys.ndim != 1) {
        kiln_set_last_error("%s: %d dimensions, but labels are [count]",
                            d->labels_path, ys.ndim);
        return KILN_ERR_IO;
    }
    if (xs.d[0] != ys.d[0]) {
        kiln_set_last_error("%s and %s: %lld images but %lld labels",
                            d->images_path, d->labels_path, (long long)xs.d[0],
                            (long long)ys.d[0]);
        return KILN_ERR_IO;
    }
    if (xs.d[0] == 0) {
        kiln_set_last_error("%s: no images: a data set needs at least one",
                            d->images_path);
        return KILN_ERR_IO;
    }
    if (xs.d[1] == 0 || (xs.ndim == 3 && xs.d[2] == 0)) {
        kiln_set_last_error("%s: images of size zero", d->images_path);
        return KILN_ERR_IO;
    }
    const int32_t *y = d->labels->data;
    for (int64_t i = 0; i < ys.d[0]; i++)
        if (y[i] < 0 || y[i] >= d->classes) {
            kiln_set_last_error("%s: label %d at index %lld is outside [0, %d)",
                                d->labels_path, (int)y[i], (long long)i,
                                d->classes);
            return KILN_ERR_IO;
        }
    return KILN_OK;
}

kiln_status kiln_dataset_load(kiln_dataset *d, const char *images_path,
                              const char *labels_path, int classes, float scale)
{
    if (!d)
        return kiln_null_arg("kiln_dataset_load", "dataset");
    memset(d, 0, sizeof *d);
    if (!images_path || !labels_path || classes < 1) {
        kiln_set_last_error("kiln_dataset_load: %s",
                            classes < 1 ? "classes must be at least 1"
                                        : "NULL path");
        return KILN_ERR_ARG;
    }
    d->classes = classes;
    d->images_path = copy_str(images_path);
    d->labels_path = copy_str(labels_path);
    if (!d->images_path || !d->labels_path) {
        kiln_dataset_free(d);
        kiln_set_last_error("kiln_dataset_load: out of memory");
        return KILN_ERR_MEMORY;
    }
    d->images = kiln_idx_read(images_path, KILN_F32);
    d->labels = d->images ? kiln_idx_read(labels_path, KILN_I32) : NULL;
    kiln_status st = d->labels ? check_dataset(d) : KILN_ERR_IO;
    if (st != KILN_OK) {
        kiln_dataset_free(d);
        return st;
    }
    kiln_shape xs = d->images->shape;
    d->count = xs.d[0];
    d->rows = xs.ndim == 3 ? xs.d[1] : 1;
    d->cols = xs.ndim == 3 ? xs.d[2] : xs.d[1];
    d->images->shape = KILN_SHAPE(d->count, d->rows * d->cols);
    float *p = d->images->data;
    for (int64_t i = 0; i < d->count * d->rows * d->cols; i++)
        p[i] *= scale;
    return KILN_OK;
}

kiln_status kiln_dataset_match(const kiln_dataset *train,
                               const kiln_dataset *test)
{
    if (!train || !test || !train->images || !test->images) {
        kiln_set_last_error("kiln_dataset_match: NULL or unloaded data set");
        return KILN_ERR_ARG;
    }
    if (train->rows != test->rows || train->cols != test->cols) {
        kiln_set_last_error(
            "%s has %lldx%lld images but the training set %s has %lldx%lld",
            test->images_path, (long long)test->rows, (long long)test->cols,
            train->images_path, (long long)train->rows, (long long)train->cols);
        return KILN_ERR_SHAPE;
    }
    if (train->classes != test->classes) {
        kiln_set_last_error("%s has %d classes but the training set %s has %d",
                            test->labels_path, test->classes,
                            train->labels_path, train->classes);
        return KILN_ERR_SHAPE;
    }
    return KILN_OK;
}

/* dir/stem, or dir/stem.gz when only that exists. */
static char *idx_path(const char *dir, const char *stem)
{
    size_t n = strlen(dir) + strlen(stem) + 5;
    char *p = malloc(n);
    if (!p)
        return NULL;
    snprintf(p, n, "%s/%s", dir, stem);
    if (access(p, R_OK) != 0) {
        snprintf(p, n, "%s/%s.gz", dir, stem);
        if (access(p, R_OK) != 0)
            snprintf(p, n, "%s/%s", dir, stem);
    }
    return p;
}

kiln_status kiln_mnist_dataset(kiln_dataset *d, const char *dir, int train,
                               float scale)
{
    if (!d)
        return kiln_null_arg("kiln_mnist_dataset", "dataset");
    memset(d, 0, sizeof *d);
    if (!dir) {
        kiln_set_last_error("kiln_mnist_dataset: NULL directory");
        return KILN_ERR_ARG;
    }
    const char *pre = train ? "train" : "t10k";
    char stem[64];
    snprintf(stem, sizeof stem, "%s-images-idx3-ubyte", pre);
    char *images = idx_path(dir, stem);
    snprintf(stem, sizeof stem, "%s-labels-idx1-ubyte", pre);
    char *labels = idx_path(dir, stem);
    kiln_status st;
    if (!images || !labels) {
        kiln_set_last_error("kiln_mnist_dataset: out of memory");
        st = KILN_ERR_MEMORY;
    } else if (access(images, R_OK) != 0 || access(labels, R_OK) != 0) {
        kiln_set_last_error("MNIST: %s not found (plain or .gz); run "
                            "scripts/setup",
                            access(images, R_OK) != 0 ? images : labels);
        st = KILN_ERR_IO;
    } else {
        st = kiln_dataset_load(d, images, labels, 10, scale);
    }
    free(images);
    free(labels);
    return st;
}

kiln_status kiln_mnist_load(const char *dir, int train, float scale,
                            kiln_tensor **images, kiln_tensor **labels)
{
    if (!dir || !images || !labels) {
        kiln_set_last_error("kiln_mnist_load: NULL argument");
        return KILN_ERR_ARG;
    }
    *images = *labels = NULL;
    kiln_dataset d;
    kiln_status st = kiln_mnist_dataset(&d, dir, train, scale);
    if (st != KILN_OK)
        return st;
    *images = d.images;
    *labels = d.labels;
    d.images = d.labels = NULL;
    kiln_dataset_free(&d);
    return KILN_OK;
}

/* ------------------------------------------------------------ batching */

struct kiln_batcher {
    const kiln_tensor *x, *y;
    int64_t rows, *order, pos;
    int batch, shuffle, drop_last;
    int rank, size; /* the shard taken of each batch (kiln_batcher_shard) */
    int global_rows;
    kiln_rng rng;
    char err[KILN_ERRMSG_MAX]; /* the last kiln_batcher_next's failure */
};

static void shuffle_order(kiln_batcher *b)
{
    for (int64_t i = 0; i < b->rows; i++)
        b->order[i] = i;
    if (!b->shuffle)
        return;
    for (int64_t i = b->rows - 1; i > 0; i--) {
        int64_t j = (int64_t)(kiln_rng_uniform(&b->rng) * (double)(i + 1));
        int64_t t = b->order[i];
        b->order[i] = b->order[j];
        b->order[j] = t;
    }
}

kiln_batcher *kiln_batcher_new(const kiln_tensor *x, const kiln_tensor *y,
                               int batch, int shuffle, int drop_last,
                               uint64_t seed)
{
    if (!x || x->shape.ndim < 1 || batch < 1) {
        kiln_set_last_error("kiln_batcher_new: need a tensor with rows and a "
                            "positive batch size");
        return NULL;
    }
    if (y && (y->shape.ndim < 1 || y->shape.d[0] != x->shape.d[0])) {
        kiln_set_last_error("kiln_batcher_new: x has %lld rows, y %lld",
                            (long long)x->shape.d[0],
                            (long long)(y->shape.ndim ? y->shape.d[0] : 0));
        return NULL;
    }
    kiln_batcher *b = calloc(1, sizeof *b);
    if (!b ||
        !(b->order = malloc((size_t)(x->shape.d[0] + 1) * sizeof *b->order))) {
        free(b);
        kiln_set_last_error("kiln_batcher_new: out of memory");
        return NULL;
    }
    b->x = x;
    b->y = y;
    b->rows = x->shape.d[0];
    b->batch = batch;
    b->shuffle = shuffle;
    b->drop_last = drop_last;
    b->size = 1;
    kiln_rng_seed(&b->rng, seed);
    shuffle_order(b);
    return b;
}

void kiln_batcher_free(kiln_batcher *b)
{
    if (!b)
        return;
    free(b->order);
    free(b);
}

int64_t kiln_batcher_num_batches(const kiln_batcher *b)
{
    if (!b)
        return 0;
    int64_t rest = b->rows % b->batch; /* the last, short batch */
    return b->rows / b->batch + (!b->drop_last && rest >= b->size);
}

kiln_rng *kiln_batcher_rng(kiln_batcher *b)
{
    return b ? &b->rng : NULL;
}

const char *kiln_batcher_error(const kiln_batcher *b)
{
    return b ? b->err : "batcher is NULL";
}

static int rows_match(const kiln_tensor *src, const kiln_tensor *dst, int batch)
{
    if (!src)
        return dst == NULL;
    if (!dst || dst->dtype != src->dtype ||
        dst->shape.ndim != src->shape.ndim || dst->shape.d[0] != batch)
        return 0;
    for (int d = 1; d < src->shape.ndim; d++)
        if (dst->shape.d[d] != src->shape.d[d])
            return 0;
    return 1;
}

static void copy_row(const kiln_tensor *src, kiln_tensor *dst, int64_t from,
                     int64_t to)
{
    size_t row = kiln_tensor_bytes(src) /
                 (size_t)(src->shape.d[0] ? src->shape.d[0] : 1);
    memcpy((char *)dst->data + (size_t)to * row,
           (const char *)src->data + (size_t)from * row, row);
}

kiln_status kiln_batcher_shard(kiln_batcher *b, int rank, int size)
{
    if (!b)
        return kiln_null_arg("kiln_batcher_shard", "batcher");
    b->err[0] = 0;
    if (size < 1 || rank < 0 || rank >= size || size > b->batch) {
        snprintf(b->err, sizeof b->err,
                 "kiln_batcher_shard: rank %d of %d ranks, batch %d: need 0 "
                 "<= rank < size <= batch",
                 rank, size, b->batch);
        return KILN_ERR_ARG;
    }
    b->rank = rank;
    b->size = size;
    return KILN_OK;
}

int kiln_batcher_global_rows(const kiln_batcher *b)
{
    return b ? b->global_rows : 0;
}

int kiln_batcher_next(kiln_batcher *b, kiln_tensor *xb, kiln_tensor *yb)
{
    if (!b) {
        kiln_null_arg("kiln_batcher_next", "batcher");
        return -1;
    }
    b->err[0] = 0;
    int cap = (b->batch + b->size - 1) / b->size;
    if (!rows_match(b->x, xb, cap) || !rows_match(b->y, yb, cap)) {
        snprintf(b->err, sizeof b->err,
                 "kiln_batcher_next: batch tensors must be shaped "
                 "[%d, ...] like the data",
                 cap);
        return -1;
    }
    int64_t left = b->rows - b->pos;
    /* a shard of every rank needs as many rows as ranks */
    if (left <= 0 || (b->drop_last && left < b->batch) || left < b->size) {
        b->pos = 0;
        b->global_rows = 0;
        shuffle_order(b);
        return 0;
    }
    int n = left < b->batch ? (int)left : b->batch;
    /* rank r takes the r-th of size contiguous parts, the first n % size
       of them one row longer */
    int base = n / b->size, extra = n % b->size;
    int lo = b->rank * base + (b->rank < extra ? b->rank : extra);
    int mine = base + (b->rank < extra);
    for (int i = 0; i < mine; i++) {
        copy_row(b->x, xb, b->order[b->pos + lo + i], i);
        if (b->y)
            copy_row(b->y, yb, b->order[b->pos + lo + i], i);
    }
    b->pos += n;
    b->global_rows = n;
    return mine;
}

/* ------------------------------------------------------------ mixtures */

struct kiln_mixture {
    int n_classes, dims;
    double *cdf;
    float *a, *b; /* per class: A [dims, dims], b [dims] */
    kiln_rng rng;
};

kiln_mixture *kiln_mixture_new(const double *pvals, int n_classes, int dims,
                               uint64_t seed)
{
    if (!pvals || n_classes < 1 || dims < 1) {
        kiln_set_last_error(
            "kiln_mixture_new: need priors, classes >= 1, dims >= 1");
        return NULL;
    }
    double total = 0;
    for (int c = 0; c < n_classes; c++) {
        if (!(pvals[c] >= 0) || !isfinite(pvals[c])) {
            kiln_set_last_error("kiln_mixture_new: prior %d is %g: priors "
                                "must be finite and >= 0",
                                c, pvals[c]);
            return NULL;
        }
        total += pvals[c];
    }
    /* An infinite sum (huge priors) would turn every p / total into 0 and
       draw one class only. */
    if (!(total > 0) || !isfinite(total)) {
        kiln_set_last_error("kiln_mixture_new: priors sum to %g, not a "
                            "finite positive number",
                            total);
        return NULL;
    }
    int64_t n_a, n_b;
    size_t a_bytes, b_bytes;
    const char *why = kiln_shape_size(KILN_SHAPE(n_classes, dims, dims),
                                      sizeof(float), &n_a, &a_bytes);
    if (why || kiln_shape_size(KILN_SHAPE(n_classes, dims), sizeof(float), &n_b,
                               &b_bytes)) {
        kiln_set_last_error("kiln_mixture_new: [%d,%d,%d] %s", n_classes, dims,
                            dims, why ? why : "is too large");
        return NULL;
    }
    kiln_mixture *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->n_classes = n_classes;
    m->dims = dims;
    m->cdf = malloc((size_t)n_classes * sizeof *m->cdf);
    m->a = malloc(a_bytes);
    m->b = malloc(b_bytes);
    if (!m->cdf || !m->a || !m->b) {
        kiln_mixture_free(m);
        kiln_set_last_error("kiln_mixture_new: out of memory");
        return NULL;
    }
    kiln_rng_seed(&m->rng, seed);
    double acc = 0;
    for (int c = 0; c < n_classes; c++) {
        acc += pvals[c] / total;
        m->cdf[c] = acc;
    }
    for (int64_t i = 0; i < n_a; i++)
        m->a[i] = (float)(2 * kiln_rng_uniform(&m->rng) - 1);
    for (int64_t i = 0; i < n_b; i++)
        m->b[i] = (float)(2 * kiln_rng_uniform(&m->rng) - 1);
    return m;
}

void kiln_mixture_free(kiln_mixture *m)
{
    if (!m)
        return;
    free(m->cdf);
    free(m->a);
    free(m->b);
    free(m);
}

const float *kiln_mixture_mean(const kiln_mixture *m, int c)
{
    return m && c >= 0 && c < m->n_classes ? m->b + (size_t)c * m->dims : NULL;
}

kiln_status kiln_mixture_batch(kiln_mixture *m, int n, float *x, int32_t *y)
{
    if (!m || n < 0 || (n && (!x || !y))) {
        kiln_set_last_error("kiln_mixture_batch: bad arguments");
        return KILN_ERR_ARG;
    }
    int d = m->dims;
    double z[64];
    double *zs = d <= 64 ? z : malloc((size_t)d * sizeof *zs);
    if (!zs)
        return KILN_ERR_MEMORY;
    for (int i = 0; i < n; i++) {
        double u = kiln_rng_uniform(&m->rng);
        int c = 0;
        while (c < m->n_classes - 1 && u >= m->cdf[c])
            c++;
        y[i] = c;
        for (int j = 0; j < d; j++)
            zs[j] = 0.3 * kiln_rng_normal(&m->rng);
        const float *a = m->a + (size_t)c * d * d, *b = m->b + (size_t)c * d;
        for (int r = 0; r < d; r++) {
            double acc = b[r];
            for (int j = 0; j < d; j++)
                acc += a[(size_t)r * d + j] * zs[j];
            x[(size_t)i * d + r] = (float)acc;
        }
    }
    if (zs != z)
        free(zs);
    return KILN_OK;
}
