/* NASRNN: the recurrent cell found by Zoph & Le's neural architecture search
 * (ICLR 2017), unrolled as TASO's NasRNN benchmark builds it
 * (examples/nasrnn.py): hidden size 512, 5 time steps, one input per step
 * x_t (batch x 512) plus the initial state h0 (batch x 512).  Each step
 * forms eight combinations t_i = x_t W_i + h U_i (MatMul, MatMul, Add; no
 * biases, as in TASO) and reduces them through the cell's tree of
 * elementwise operators to the new state.  Unlike TASO's script, which
 * draws fresh weights at every step, the weights are shared across steps as
 * in a real unrolled RNN: an exporter writes the same initializers, and
 * merging the eight MatMuls that share an input is the optimization TASO's
 * paper reports for this model either way. */
#include <math.h>
#include "zoo/zb.h"
#include "zoo/zoo.h"

#define NASRNN_HIDDEN 512
#define NASRNN_STEPS 5

typedef struct cell_weights {
    int wx[8], wh[8];
} cell_weights;

static int combine(zb *b, int step, int i, int x, int h, const cell_weights *w)
{
    int a = zb_matmul(b, zb_name(b, "step%d.t%d.x", step, i), x, w->wx[i]);
    int c = zb_matmul(b, zb_name(b, "step%d.t%d.h", step, i), h, w->wh[i]);
    return zb_binary(b, "Add", zb_name(b, "step%d.t%d", step, i), a, c);
}

/* Unary op on v, named after the step and the tree position. */
static int un(zb *b, const char *op, int step, const char *what, int v)
{
    return zb_unary(b, op, zb_name(b, "step%d.%s", step, what), v);
}

static int bin(zb *b, const char *op, int step, const char *what, int x, int y)
{
    return zb_binary(b, op, zb_name(b, "step%d.%s", step, what), x, y);
}

/* The cell tree, node for node as TASO's nas_node. */
static int nas_cell(zb *b, int s, int x, int h, const cell_weights *w)
{
    int t[8], m[7];
    for (int i = 0; i < 8; i++) t[i] = combine(b, s, i, x, h, w);
    m[0] = bin(b, "Add", s, "m0", un(b, "Relu", s, "t0.relu", t[0]), un(b, "Sigmoid", s, "t3.sigmoid", t[3]));
    m[1] = bin(b, "Add", s, "m1", un(b, "Sigmoid", s, "t1.sigmoid", t[1]), un(b, "Tanh", s, "t2.tanh", t[2]));
    m[2] = bin(b, "Mul", s, "m2", un(b, "Sigmoid", s, "t4.sigmoid", t[4]), un(b, "Tanh", s, "t5.tanh", t[5]));
    m[3] = bin(b, "Mul", s, "m3", un(b, "Sigmoid", s, "t6.sigmoid", t[6]), un(b, "Relu", s, "t7.relu", t[7]));
    m[4] = bin(b, "Add", s, "m4", un(b, "Sigmoid", s, "m1.sigmoid", m[1]), un(b, "Tanh", s, "m2.tanh", m[2]));
    m[5] = bin(b, "Mul", s, "m5", un(b, "Tanh", s, "m0.tanh", m[0]), un(b, "Tanh", s, "m3.tanh", m[3]));
    m[6] = bin(b, "Mul", s, "m6", un(b, "Tanh", s, "m4.tanh", m[4]), un(b, "Tanh", s, "m5.tanh", m[5]));
    return un(b, "Tanh", s, "h", m[6]);
}

ZOO_BUILDER(ts_zoo_nasrnn)
{
    int steps = o && o->steps > 0 ? o->steps : NASRNN_STEPS;
    zb b;
    zb_begin(&b, "nasrnn", o, err);
    int64_t xd[2] = {zoo_batch(o), NASRNN_HIDDEN}, wd[2] = {NASRNN_HIDDEN, NASRNN_HIDDEN};
    /* Each t_i is one linear layer over [x_t, h] split in two MatMuls, so
     * the Kaiming fan-in is 2 x 512. */
    double bound = sqrt(3.0 / (2.0 * NASRNN_HIDDEN));
    cell_weights w;
    for (int i = 0; i < 8; i++) {
        w.wx[i] = zb_weight(&b, zb_name(&b, "cell.w%d.x", i), 2, wd, bound);
        w.wh[i] = zb_weight(&b, zb_name(&b, "cell.w%d.h", i), 2, wd, bound);
    }
    /* TASO's initial state is a weight; here it is an input, as a deployed
     * RNN receives its state: a constant state would make the first step's
     * eight h-MatMuls constant subexpressions that a loader folds (tsopt's
     * ONNX import does), so the program would depend on the path it took. */
    int h = zb_input(&b, "h0", 2, xd);
    for (int s = 0; s < steps; s++) {
        int x = zb_input(&b, zb_name(&b, "x%d", s), 2, xd);
        h = nas_cell(&b, s, x, h, &w);
    }
    return zb_finish(&b, &h, 1, out);
}
