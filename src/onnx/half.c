/* float16 and bfloat16 tensors, held in f32: their values are read exactly
   (every half and bfloat16 value is an f32 one), and a Cast to either
   type rounds the f32 values to that precision and keeps them in f32, so
   the next op sees the rounded value.  Arithmetic on them then runs in
   f32, not rounded after each op as a half-precision runtime would. */
#include <math.h>
#include <string.h>

#include "onnx/onnx_internal.h"

float ox_half_value(uint16_t h)
{
    int exp = (h >> 10) & 0x1F;
    float mant = (float)(h & 0x3FF);
    float v;
    if (exp == 0x1F)
        v = mant != 0 ? NAN : INFINITY;
    else if (exp == 0) /* subnormal: mant 2^-24 */
        v = mant * 5.9604644775390625e-08f;
    else
        v = ldexpf(1.0f + mant / 1024.0f, exp - 15);
    return h & 0x8000 ? -v : v;
}

float ox_bfloat16_value(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}

int ox_type_is_float(int type)
{
    return type == OX_FLOAT || type == OX_DOUBLE || type == OX_FLOAT16 ||
           type == OX_BFLOAT16;
}

/* The gradient passes a rounding to a narrower float straight through, as
   PyTorch's x.half() does, so that a model holding half-precision casts
   still trains: y = x where rounding keeps x (infinities among them), else
   round(x) + (x - stop_gradient(x)), whose value is round(x) and whose
   slope is 1. */
kiln_node *ox_round_to(ox_ctx *c, kiln_node *x, int to)
{
    if (!x || (to != OX_FLOAT16 && to != OX_BFLOAT16))
        return x;
    if (kiln_node_dtype(x) != KILN_F32)
        x = kiln_cast(c->g, x, KILN_F32);
    kiln_node *r =
        to == OX_FLOAT16 ? kiln_round_f16(c->g, x) : kiln_round_bf16(c->g, x);
    kiln_node *through =
        kiln_add(c->g, r, kiln_sub(c->g, x, kiln_stop_gradient(c->g, x)));
    return kiln_select(c->g, kiln_eq(c->g, r, x), x, through);
}
