/* How deep an ONNX model's messages nest, read from the wire format before
   protobuf-c unpacks it: protobuf-c recurses once per level, so a few
   hundred kilobytes of nested If bodies (or sequence types) would
   overflow the stack.  Only the fields through which onnx.proto's messages
   can contain themselves are followed (graphs in attributes, types in
   types); every other field is skipped by its wire type. */
#include <stddef.h>
#include <stdint.h>

#include "onnx/onnx_internal.h"

/* The messages on the recursive paths. */
typedef enum {
    W_MODEL,
    W_GRAPH,
    W_NODE,
    W_ATTR,
    W_FUNC,
    W_TRAINING,
    W_VALUE_INFO,
    W_TYPE,
    W_TYPE_ELEM, /* TypeProto.Sequence and .Optional: elem_type = 1 */
    W_TYPE_MAP,  /* TypeProto.Map: value_type = 2 */
    W_NONE
} wire_msg;

/* The kind of message field f of a kind-k message holds, W_NONE when it
   holds none the walk follows. */
static wire_msg child(wire_msg k, uint64_t f)
{
    static const struct {
        wire_msg from;
        uint64_t field;
        wire_msg to;
    } edges[] = {
        {W_MODEL, 7, W_GRAPH},       {W_MODEL, 20, W_TRAINING},
        {W_MODEL, 25, W_FUNC},       {W_TRAINING, 1, W_GRAPH},
        {W_TRAINING, 2, W_GRAPH},    {W_GRAPH, 1, W_NODE},
        {W_GRAPH, 11, W_VALUE_INFO}, {W_GRAPH, 12, W_VALUE_INFO},
        {W_GRAPH, 13, W_VALUE_INFO}, {W_NODE, 5, W_ATTR},
        {W_FUNC, 7, W_NODE},         {W_ATTR, 6, W_GRAPH},
        {W_ATTR, 11, W_GRAPH},       {W_ATTR, 14, W_TYPE},
        {W_ATTR, 15, W_TYPE},        {W_VALUE_INFO, 2, W_TYPE},
        {W_TYPE, 4, W_TYPE_ELEM},    {W_TYPE, 9, W_TYPE_ELEM},
        {W_TYPE, 5, W_TYPE_MAP},     {W_TYPE_ELEM, 1, W_TYPE},
        {W_TYPE_MAP, 2, W_TYPE},
    };
    for (size_t e = 0; e < sizeof edges / sizeof *edges; e++)
        if (edges[e].from == k && edges[e].field == f)
            return edges[e].to;
    return W_NONE;
}

/* A varint at *p (before end) into *v; 0 when malformed. */
static int varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return 1;
    }
    return 0;
}

/* The depth of the kind-k message in [p, end) (1 for one without
   followed children), or -1 when malformed, or limit + 1 once past
   limit (the walk stops there, so its recursion is bounded too). */
static int depth(const uint8_t *p, const uint8_t *end, wire_msg k, int limit)
{
    if (limit < 1)
        return 1;
    int most = 1;
    while (p < end) {
        uint64_t key, len, skip;
        if (!varint(&p, end, &key))
            return -1;
        switch (key & 7) {
        case 0:
            if (!varint(&p, end, &skip))
                return -1;
            continue;
        case 1:
        case 5:
            skip = (key & 7) == 1 ? 8 : 4;
            if ((uint64_t)(end - p) < skip)
                return -1;
            p += skip;
            continue;
        case 2:
            if (!varint(&p, end, &len) || len > (uint64_t)(end - p))
                return -1;
            break;
        default: /* groups: protobuf-c refuses them too */
            return -1;
        }
        wire_msg c = child(k, key >> 3);
        if (c != W_NONE) {
            int d = depth(p, p + len, c, limit - 1);
            if (d < 0)
                return -1;
            if (d + 1 > most)
                most = d + 1;
            if (most > limit)
                return limit + 1;
        }
        p += len;
    }
    return most;
}

int ox_wire_depth(const uint8_t *buf, size_t n, int limit)
{
    return depth(buf, buf + n, W_MODEL, limit);
}
