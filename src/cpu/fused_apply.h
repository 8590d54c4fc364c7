/* One instruction of a fused program, r = op(a, b, c) over len elements,
   from the formulas of graph/elementwise.def: cpu/fused.c includes this
   once per choice of EXP, EXPN, LOG and TANH, as the function APPLY (the
   reference one and the fast one); the five are undefined after. */
FUSED_CLONES static void APPLY(kiln_op op, float *r, const float *a,
                               const float *b, const float *c, int64_t len)
{
    switch (op) {
#include "graph/elementwise.def"
        SELECT_CASE
    }
}
#undef APPLY
#undef EXP
#undef EXPN
#undef LOG
#undef TANH
