/* The operator axioms: Table 2 of the TASO paper (taso-sosp19.txt), one row
 * per axiom in the paper's order (A1..A43), then the ones we added (X..),
 * each saying why.  Sides are written in the rule syntax of docs/rules.md;
 * ?name in a parameter slot is a parameter variable.
 *
 * Differences from the paper's notation, forced by the rule format:
 * - enlarge takes a reference tensor instead of a kernel parameter
 *   ((enlarge ?w ?r) pads w to r's kernel size), so A21 quantifies over r;
 * - stride "1" of A25 is the atom s1; axes 0/1 are the atoms 0/1.
 *
 * `shapes` drives the concrete check (axiom_check.c): a space-separated
 * list of VAR:SHAPE, SHAPE being comma-separated dimension names (each
 * ranging over 1..max_dim), integers, or ?k (a kernel parameter's size);
 * "@" is a shape of every rank in 1..4 ("rank=2-4" narrows it), "@a" the
 * same with the axis held by parameter ?a resized ("@A": resized to a
 * second size), "@0"/"@1"/"@01" with
 * axis 0 / axis 1 / both resized.  A constant tensor (Imatmul...) gets its
 * shape the same way, or "Iconv:kernel" / "Cpool:kernel": built for each
 * conv that reads it, at that conv input's channel count.  "wide=h,wd"
 * lets the named dims range up to max_dim+3; "guard=shape" marks an axiom
 * that holds where both sides are defined with the same shape. */
#include <ctype.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "taso/verify.h"

#define MAX_RESTATE 32
#define MAX_AXIOMS 256

#define CONV_X "x:n,c,h,wd"
/* gconv: square images and kernels (the window is conv's, checked there);
 * channels wide so that groups of 2-3 channels occur */
#define GCONV_X "wide=c,o x:n,c,h,h"
/* W17/W18: y and z of any sizes, r square (the check's time); the
 * guard keeps the points where the sizes fit (see W17). */
#define ENLARGE_EW "y:o,c,kh,kw z:o,c,kh,kw r:1,1,rh,rw"
#define ENLARGE_SHAPES "x:1,c,h,wd y:c,c,kh,kw z:c,c,zh,zw r:1,1,rh,rh wide=h,wd guard=shape"
static const ts_axiom AXIOMS[] = {
    /* ewadd and ewmul */
    {"A1", "(ewadd ?x (ewadd ?y ?z))", "(ewadd (ewadd ?x ?y) ?z)", "x:@ y:@ z:@", "ewadd is associative"},
    {"A2", "(ewadd ?x ?y)", "(ewadd ?y ?x)", "x:@ y:@", "ewadd is commutative"},
    {"A3", "(ewmul ?x (ewmul ?y ?z))", "(ewmul (ewmul ?x ?y) ?z)", "x:@ y:@ z:@", "ewmul is associative"},
    {"A4", "(ewmul ?x ?y)", "(ewmul ?y ?x)", "x:@ y:@", "ewmul is commutative"},
    {"A5", "(ewmul (ewadd ?x ?y) ?z)", "(ewadd (ewmul ?x ?z) (ewmul ?y ?z))", "x:@ y:@ z:@", "distributivity"},
    /* smul */
    {"A6", "(smul (smul ?x ?y) ?w)", "(smul ?x (smul ?y ?w))", "x:@ y: w:", "smul is associative"},
    {"A7", "(smul (ewadd ?x ?y) ?w)", "(ewadd (smul ?x ?w) (smul ?y ?w))", "x:@ y:@ w:", "distributivity"},
    {"A8", "(smul (ewmul ?x ?y) ?w)", "(ewmul ?x (smul ?y ?w))", "x:@ y:@ w:", "operator commutativity"},
    /* transpose */
    {"A9", "(transpose (transpose ?x))", "?x", "x:m,n", "transpose is its own inverse"},
    {"A10", "(transpose (ewadd ?x ?y))", "(ewadd (transpose ?x) (transpose ?y))", "x:m,n y:m,n",
     "operator commutativity"},
    {"A11", "(transpose (ewmul ?x ?y))", "(ewmul (transpose ?x) (transpose ?y))", "x:m,n y:m,n",
     "operator commutativity"},
    {"A12", "(smul (transpose ?x) ?w)", "(transpose (smul ?x ?w))", "x:m,n w:", "operator commutativity"},
    /* matmul */
    {"A13", "(matmul ?x (matmul ?y ?z))", "(matmul (matmul ?x ?y) ?z)", "x:m,n y:n,p z:p,q", "matmul is associative"},
    {"A14", "(smul (matmul ?x ?y) ?w)", "(matmul ?x (smul ?y ?w))", "x:m,n y:n,p w:", "matmul is linear"},
    {"A15", "(matmul ?x (ewadd ?y ?z))", "(ewadd (matmul ?x ?y) (matmul ?x ?z))", "x:m,n y:n,p z:n,p",
     "matmul is linear"},
    {"A16", "(transpose (matmul ?x ?y))", "(matmul (transpose ?y) (transpose ?x))", "x:m,n y:n,p",
     "matmul and transpose"},
    /* conv */
    {"A17", "(conv ?s ?p ?c (smul ?x ?w) ?y)", "(conv ?s ?p ?c ?x (smul ?y ?w))", CONV_X " y:o,c,kh,kw w:",
     "conv is bilinear"},
    {"A18", "(smul (conv ?s ?p none ?x ?y) ?w)", "(conv ?s ?p none (smul ?x ?w) ?y)", CONV_X " y:o,c,kh,kw w:",
     "conv is bilinear"},
    {"A19", "(conv ?s ?p none ?x (ewadd ?y ?z))", "(ewadd (conv ?s ?p none ?x ?y) (conv ?s ?p none ?x ?z))",
     CONV_X " y:o,c,kh,kw z:o,c,kh,kw", "conv is bilinear"},
    {"A20", "(conv ?s ?p none (ewadd ?x ?y) ?z)", "(ewadd (conv ?s ?p none ?x ?z) (conv ?s ?p none ?y ?z))",
     CONV_X " y:n,c,h,wd z:o,c,kh,kw", "conv is bilinear"},
    {"A21", "(conv ?s same ?c ?x ?y)", "(conv ?s same ?c ?x (enlarge ?y ?r))", CONV_X " y:o,c,kh,kw r:1,1,rh,rw",
     "enlarge convolution kernel"},
    {"A22", "(conv ?s ?p relu ?x ?y)", "(relu (conv ?s ?p none ?x ?y))", CONV_X " y:o,c,kh,kw",
     "conv with A_relu applies relu"},
    {"A23", "(relu (transpose ?x))", "(transpose (relu ?x))", "x:m,n", "operator commutativity"},
    {"A24", "(conv ?s ?p none ?x (Cpool ?k))", "(poolavg ?k ?s ?p ?x)", CONV_X " Cpool:c,c,?k,?k",
     "pooling by conv. with C_pool"},
    {"A25", "(conv s1 same none ?x (Iconv ?k))", "?x", CONV_X " Iconv:c,c,?k,?k", "identity kernel"},
    {"A26", "(matmul ?x Imatmul)", "?x", "x:m,n Imatmul:n,n", "identity matrix"},
    {"A27", "(ewmul ?x Iewmul)", "?x", "x:@ Iewmul:@", "ewmul identity"},
    /* concat and split */
    {"A28", "(split0 ?a (concat ?a ?x ?y))", "?x", "x:@ y:@a", "split definition"},
    {"A29", "(split1 ?a (concat ?a ?x ?y))", "?y", "x:@ y:@a", "split definition"},
    {"A30", "(concat 0 (concat 1 ?x ?y) (concat 1 ?z ?w))", "(concat 1 (concat 0 ?x ?z) (concat 0 ?y ?w))",
     "rank=2-4 x:@ y:@1 z:@0 w:@01", "geometry of concatenation"},
    {"A31", "(concat ?a (smul ?x ?w) (smul ?y ?w))", "(smul (concat ?a ?x ?y) ?w)", "x:@ y:@a w:",
     "operator commutativity"},
    {"A32", "(concat ?a (ewadd ?x ?y) (ewadd ?z ?w))", "(ewadd (concat ?a ?x ?z) (concat ?a ?y ?w))",
     "x:@ y:@ z:@a w:@a", "operator commutativity"},
    {"A33", "(concat ?a (ewmul ?x ?y) (ewmul ?z ?w))", "(ewmul (concat ?a ?x ?z) (concat ?a ?y ?w))",
     "x:@ y:@ z:@a w:@a", "operator commutativity"},
    {"A34", "(concat ?a (relu ?x) (relu ?y))", "(relu (concat ?a ?x ?y))", "x:@ y:@a", "operator commutativity"},
    {"A35", "(concat 1 (transpose ?x) (transpose ?y))", "(transpose (concat 0 ?x ?y))", "x:m,n y:p,n",
     "concatenation and transpose"},
    {"A36", "(concat 1 (matmul ?x ?y) (matmul ?x ?z))", "(matmul ?x (concat 1 ?y ?z))", "x:m,n y:n,p z:n,q",
     "concatenation and matrix mul."},
    {"A37", "(matmul (concat 1 ?x ?z) (concat 0 ?y ?w))", "(ewadd (matmul ?x ?y) (matmul ?z ?w))",
     "x:m,n z:m,q y:n,p w:q,p", "concatenation and matrix mul."},
    {"A38", "(concat 0 (conv ?s ?p ?c ?x ?z) (conv ?s ?p ?c ?y ?z))", "(conv ?s ?p ?c (concat 0 ?x ?y) ?z)",
     CONV_X " y:m,c,h,wd z:o,c,kh,kw", "concatenation and conv."},
    {"A39", "(concat 1 (conv ?s ?p ?c ?x ?y) (conv ?s ?p ?c ?x ?z))", "(conv ?s ?p ?c ?x (concat 0 ?y ?z))",
     CONV_X " y:o,c,kh,kw z:q,c,kh,kw", "concatenation and conv."},
    {"A40", "(conv ?s ?p none (concat 1 ?x ?z) (concat 1 ?y ?w))",
     "(ewadd (conv ?s ?p none ?x ?y) (conv ?s ?p none ?z ?w))", CONV_X " z:n,d,h,wd y:o,c,kh,kw w:o,d,kh,kw",
     "concatenation and conv."},
    {"A41", "(concat 1 (poolavg ?k ?s ?p ?x) (poolavg ?k ?s ?p ?y))", "(poolavg ?k ?s ?p (concat 1 ?x ?y))",
     CONV_X " y:n,d,h,wd", "concatenation and pooling"},
    {"A42", "(concat 0 (poolmax ?k ?s ?p ?x) (poolmax ?k ?s ?p ?y))", "(poolmax ?k ?s ?p (concat 0 ?x ?y))",
     CONV_X " y:m,c,h,wd", "concatenation and pooling"},
    {"A43", "(concat 1 (poolmax ?k ?s ?p ?x) (poolmax ?k ?s ?p ?y))", "(poolmax ?k ?s ?p (concat 1 ?x ?y))",
     CONV_X " y:n,d,h,wd", "concatenation and pooling"},
    /* Ours.  TASO's own verify.py adds these as "lemmas" (it checks them
     * from the axioms, then assumes them to shorten proofs).  Both follow
     * from A9, A16 and A26 (transpose both sides of A26: matmul(I', y) = y
     * for every y = x', so I' = matmul(I', I) = I), but E-matching would
     * have to invent the terms transpose(x) to find that.  TASO's third
     * lemma (concat 0 of poolavg) is left out: E-matching derives it from
     * A24 and A38 at once. */
    {"X1", "(transpose Imatmul)", "Imatmul", "Imatmul:n,n", "identity matrix is symmetric (lemma)"},
    {"X2", "(matmul Imatmul ?x)", "?x", "x:m,n Imatmul:m,m", "identity matrix on the left (lemma)"},
    /* Scalars commute.  Not in Table 2 and not derivable (smul's operands
     * are not interchangeable in general: the first is a tensor), but the
     * generator finds smul(smul(x,a),b) = smul(smul(x,b),a) at 2 ops. */
    {"X3", "(smul ?x (smul ?y ?w))", "(smul ?x (smul ?w ?y))", "x:@ y: w:", "scalar factors commute"},
    /* TASO's verify.py notes that this twin of A14 "is obtained using
     * transpose" (A9, A12, A14, A16); E-matching cannot invent the
     * transposes, so it is stated (and checked) as a lemma. */
    {"X4", "(matmul (smul ?x ?w) ?y)", "(smul (matmul ?x ?y) ?w)", "x:m,n y:n,p w:", "matmul is linear on the left (lemma)"},
    /* The left/transposed twins of A15, A35 and A36, which TASO's verify.py
     * lists as "implied properties": each follows by transposing both sides
     * (A9, A16, A10, A35), which E-matching cannot do by itself; the 3-op
     * rules need them. */
    {"X5", "(matmul (ewadd ?x ?y) ?z)", "(ewadd (matmul ?x ?z) (matmul ?y ?z))", "x:m,n y:m,n z:n,p",
     "matmul is linear on the left (lemma)"},
    {"X6", "(concat 0 (transpose ?x) (transpose ?y))", "(transpose (concat 1 ?x ?y))", "x:m,n y:m,p",
     "concatenation and transpose, other axis (lemma)"},
    {"X7", "(concat 0 (matmul ?x ?z) (matmul ?y ?z))", "(matmul (concat 0 ?x ?y) ?z)", "x:m,n y:p,n z:n,q",
     "concatenation and matrix mul., rows (lemma)"},
    /* Window geometry (not in Table 2, whose axioms treat a window as
     * opaque).  conv with Iconv k selects: with "same" it reads x[s*u]
     * (subsampling), with "valid" x[s*u + (k-1)/2] (a crop, then
     * subsampling).  Selections commute with pointwise ops, compose with
     * window ops by moving the stride, and valid windows commute.  The
     * generator finds these at 2-3 operators (docs/taso.md).  Images are
     * "wide" (up to max_dim+3) so borders and stride parity are exercised.
     * "guard=shape": true wherever both sides are defined with the same
     * shape, i.e. when the two windows have the same size (a fact the
     * shape-free theory cannot state; the matcher checks output shapes). */
    {"W1", "(conv ?s ?p none (relu ?x) (Iconv ?k))", "(conv ?s ?p relu ?x (Iconv ?k))",
     "x:n,c,h,wd Iconv:c,c,?k,?k wide=h,wd", "selection commutes with relu (relu 0 = 0)"},
    {"W2", "(conv ?s same none (conv s1 ?p ?c ?x ?y) (Iconv ?k))", "(conv ?s ?p ?c ?x ?y)",
     "x:1,c,h,wd y:o,c,kh,kw Iconv:o,o,?k,?k wide=h,wd", "subsampling a stride-1 conv gives the strided conv"},
    {"W3", "(conv ?s same none (poolmax ?j s1 ?p ?x) (Iconv ?k))", "(poolmax ?j ?s ?p ?x)",
     "x:n,c,h,wd Iconv:c,c,?k,?k wide=h,wd", "subsampling a stride-1 max pool gives the strided pool"},
    {"W4", "(conv ?s valid none (conv s1 same ?c ?x ?y) (Iconv ?k))", "(conv ?s valid ?c ?x ?y)",
     "x:1,c,h,wd y:o,c,kh,kw Iconv:o,o,?k,?k wide=h,wd guard=shape",
     "cropping a same conv by its half kernel gives the valid conv"},
    {"W5", "(conv ?s valid none (poolmax ?k s1 same ?x) (Iconv ?k))", "(poolmax ?k ?s valid ?x)",
     "x:n,c,h,wd Iconv:c,c,?k,?k wide=h,wd", "cropping a same max pool gives the valid pool"},
    {"W6", "(conv ?s valid ?c (conv s1 valid none ?x (Iconv ?k)) ?y)",
     "(conv ?s valid none (conv s1 valid ?c ?x ?y) (Iconv ?k))", "x:1,c,h,wd y:c,c,kh,kw Iconv:c,c,?k,?k wide=h,wd",
     "a crop commutes with a valid conv (the stride moves out)"},
    {"W7", "(conv s1 valid none (conv s2 same none ?x (Iconv ?k)) (Iconv ?k))",
     "(conv s2 valid none (conv s1 valid none ?x (Iconv ?k)) (Iconv ?k))", "x:n,c,h,wd Iconv:c,c,?k,?k wide=h,wd",
     "crop after subsampling by 2 = crop, then subsample the crop"},
    {"W8", "(conv ?s valid none (poolmax ?j s1 valid ?x) (Iconv ?k))",
     "(poolmax ?j ?s valid (conv s1 valid none ?x (Iconv ?k)))", "x:n,c,h,wd Iconv:c,c,?k,?k wide=h,wd",
     "a crop commutes with a valid max pool"},
    {"W9", "(conv ?s valid none (poolavg ?k s1 valid ?x) ?y)", "(poolavg ?k ?s valid (conv s1 valid none ?x ?y))",
     "x:1,c,h,wd y:o,c,kh,kw wide=h,wd", "valid conv and valid average pool commute"},
    {"W10", "(conv ?s valid none (poolavg ?k s1 same ?x) ?y)", "(poolavg ?k ?s valid (conv s1 same none ?x ?y))",
     "x:1,c,h,wd y:o,c,kh,kw wide=h,wd guard=shape", "conv and average pool of one size read one padded window"},
    {"W11", "(poolmax ?k ?s same (poolmax ?j s1 valid ?x))", "(poolmax ?j ?s valid (poolmax ?k s1 same ?x))",
     "x:n,c,h,wd wide=h,wd", "max ignores padding: same and valid max pools swap"},
    {"W12", "(poolmax ?k s1 same (poolmax k3 s2 same ?x))",
     "(poolmax k3 s2 same (poolmax ?k s1 same (poolmax ?k s1 same ?x)))", "x:n,c,h,wd wide=h,wd",
     "a max pool after a stride-2 3x3 max pool covers the same window as two before it"},
    /* Selection works channel by channel (Iconv is diagonal in channels),
     * so it commutes with a channel concat, as A41/A43 say for pooling;
     * "Iconv:kernel" builds Iconv for each conv at its input's channels. */
    {"W14", "(concat 1 (conv ?s ?p ?c ?x (Iconv ?k)) (conv ?s ?p ?c ?y (Iconv ?k)))",
     "(conv ?s ?p ?c (concat 1 ?x ?y) (Iconv ?k))", "x:n,c,h,wd y:n,d,h,wd Iconv:kernel wide=h,wd",
     "selection commutes with a channel concat"},
    /* Found by the 4-operator rules: selection reads one element (or a
     * padded 0) per output, so it distributes over ewmul as A20 has it
     * distribute over ewadd; and Iconv's entries are 0 or 1. */
    {"W15", "(ewmul (Iconv ?k) (Iconv ?k))", "(Iconv ?k)", "Iconv:c,c,?k,?k", "Iconv's entries are 0 or 1"},
    {"W16", "(conv ?s ?p none (ewmul ?x ?y) (Iconv ?k))",
     "(ewmul (conv ?s ?p none ?x (Iconv ?k)) (conv ?s ?p none ?y (Iconv ?k)))",
     "x:n,c,h,wd y:n,c,h,wd Iconv:c,c,?k,?k wide=h,wd", "selection distributes over ewmul"},
    /* Found by the 4-operator rules: a valid conv by enlarge(z, r) reads
     * its input cropped by (r - z)/2 on each side, which is exactly what
     * turns a same average pool of size r, seen through a valid conv by y
     * of z's size, into the valid pool of the same conv (W10 is the case
     * where y has the pool's size and nothing is enlarged).  Per spatial
     * dimension both sides read x[u + a + b + e - (|y|-1)/2] (a, b, e over
     * y, z and the pool), zero outside x, so they agree wherever they have
     * one shape (|y| + |r| = k + |z|; the generator's y, z and r are q, q
     * and k1 with 3x3 pools).  The crop size is a fact about r's shape,
     * which the shape-free theory cannot state, hence guard=shape and the
     * pool on the left (it names the window the crop removes).  W18 is the
     * same with relu between the convs (relu of a crop is the crop of the
     * relu, W1). */
    {"W17", "(conv ?s valid ?c (conv s1 valid none (poolavg ?k s1 same ?x) ?y) (enlarge ?z ?r))",
     "(conv ?s valid ?c (poolavg ?k s1 valid (conv s1 same none ?x ?y)) ?z)", ENLARGE_SHAPES,
     "a valid conv by an enlarged kernel crops a same average pool to the valid one"},
    {"W18", "(conv ?s valid ?c (relu (conv s1 valid none (poolavg ?k s1 same ?x) ?y)) (enlarge ?z ?r))",
     "(conv ?s valid ?c (relu (poolavg ?k s1 valid (conv s1 same none ?x ?y))) ?z)", ENLARGE_SHAPES,
     "W17 with relu between the convs"},
    /* enlarge zero-pads a kernel: it commutes with the element-wise ops
     * that keep 0 at 0 (the 4-operator rules multiply, add and scale
     * enlarged kernels before a conv; A21 then removes the enlarge). */
    {"E1", "(ewmul (enlarge ?y ?r) (enlarge ?z ?r))", "(enlarge (ewmul ?y ?z) ?r)", ENLARGE_EW,
     "enlarge commutes with ewmul (0 * 0 = 0)"},
    {"E2", "(ewadd (enlarge ?y ?r) (enlarge ?z ?r))", "(enlarge (ewadd ?y ?z) ?r)", ENLARGE_EW,
     "enlarge commutes with ewadd (0 + 0 = 0)"},
    {"E3", "(smul (enlarge ?y ?r) ?w)", "(enlarge (smul ?y ?w) ?r)", "y:o,c,kh,kw r:1,1,rh,rw w:",
     "enlarge commutes with smul (0 w = 0)"},
    {"E4", "(relu (enlarge ?y ?r))", "(enlarge (relu ?y) ?r)", "y:o,c,kh,kw r:1,1,rh,rw",
     "enlarge commutes with relu (relu 0 = 0)"},
    /* W19 (an enlarge moves between the kernels of two valid convs of one
     * size, guarded) is removed: K1, K2 and K4 below derive it (both sides
     * become convs of crops of conv(s1, valid, x, y) to one reference), and
     * with K1 its right-to-left use made E-matching loop on planted wrong
     * enlarge rules (they ran into the timeout instead of failing). */
    /* W11 for a sum of two pools (the 4-operator rules taso-18712/18717 of
     * December 6 pool an ewadd of max pools).  Per spatial dimension both
     * sides are the max, over the windows of size k starting at t in
     * [s*u - (k-1)/2, s*u + (k-1)/2], of max x(window) + max y(window): the
     * left keeps the whole windows (0 <= t <= n - k), the right also the
     * ones clipped at a border, each of which lies inside the border's
     * whole window, also in the range, so neither summand can grow the
     * max.  Not true with a sum of pools of another size or non-max pools
     * (max of a sum is not the sum of maxima); k odd (same needs it). */
    {"W20", "(poolmax ?k ?s same (ewadd (poolmax ?k s1 valid ?x) (poolmax ?k s1 valid ?y)))",
     "(poolmax ?k ?s valid (ewadd (poolmax ?k s1 same ?x) (poolmax ?k s1 same ?y)))",
     "x:n,c,h,wd y:n,c,h,wd wide=h,wd", "same and valid max pools swap across a sum of max pools of one size"},
    /* crop x y r (ours): x without (|r| - |y|)/2 rows and columns a side,
     * the crop a valid conv by enlarge(y, r) reads (the 3-operator rules
     * taso-0392... move it between two convs of stride 1, the 4-operator
     * rules taso-15310... through a stride-2 conv).  K1 is
     * enlarge's meaning in a valid conv; K2 a crop commutes with a stride-1
     * valid conv (both read x[u + c + b]); K3 a crop of 2c before a
     * stride-2 valid conv is one of c after it (x[2u + 2c + b]; c counted
     * in its own y, r, so the crop is written twice).  K1-K3 hold wherever
     * both sides are defined.  K4 (guarded): two crops to one reference
     * agree where they have one shape (|y| = |z|), a fact about sizes the
     * shape-free theory cannot state, as W4/W10/W17/W18; with neither side
     * a pattern of all variables it fires only where both crops exist. */
    {"K1", "(conv ?s valid ?c ?x (enlarge ?y ?r))", "(conv ?s valid ?c (crop ?x ?y ?r) ?y)",
     "x:1,c,h,wd y:o,c,kh,kw r:1,1,rh,rw wide=h,wd", "a valid conv by an enlarged kernel reads a crop"},
    {"K2", "(conv s1 valid ?c (crop ?x ?y ?r) ?z)", "(crop (conv s1 valid ?c ?x ?z) ?y ?r)",
     "x:1,c,h,wd y:1,1,kh,kw r:1,1,rh,rh z:o,c,zh,zw wide=h,wd", "a crop commutes with a stride-1 valid conv"},
    {"K3", "(conv s2 valid ?c (crop (crop ?x ?y ?r) ?y ?r) ?z)", "(crop (conv s2 valid ?c ?x ?z) ?y ?r)",
     "x:1,c,h,wd y:1,1,kh,kw r:1,1,rh,rh z:o,c,zh,zw wide=h,wd",
     "a crop of 2c before a stride-2 valid conv is a crop of c after it"},
    {"K4", "(crop ?x ?y ?r)", "(crop ?x ?z ?r)", "x:1,c,h,wd y:1,1,kh,kw z:1,1,zh,zw r:1,1,rh,rh wide=h,wd guard=shape",
     "crops to one reference agree where their kernels have one size"},
    /* Grouped convolution (ours; TASO's conv is grouped by shapes, and its
     * verify.py records the grouped A39/A40 as wrong).  gconv's parameter
     * ?m is the output channels per group, not the group count: the group
     * count follows from the kernel (output channels / m, each group reading
     * the kernel's axis-1 count of input channels).  With that reading the
     * channel concat of two gconvs is one gconv of the concatenated inputs
     * and kernels (G8) wherever both sides are defined, for any sizes; with
     * a group count as the parameter it would be false when the two kernels
     * have different output counts (same shape, other values).  A39/A40 stay
     * group-1 facts: gconv has no axiom relating it to conv.  Channels are
     * "wide" (up to max_dim+3) so that groups of several channels occur. */
    {"G1", "(gconv ?s ?p ?c ?m (smul ?x ?w) ?y)", "(gconv ?s ?p ?c ?m ?x (smul ?y ?w))", GCONV_X " y:o,d,k,k w:",
     "gconv is bilinear"},
    {"G2", "(smul (gconv ?s ?p none ?m ?x ?y) ?w)", "(gconv ?s ?p none ?m (smul ?x ?w) ?y)", GCONV_X " y:o,d,k,k w:",
     "gconv is bilinear"},
    {"G3", "(gconv ?s ?p none ?m ?x (ewadd ?y ?z))", "(ewadd (gconv ?s ?p none ?m ?x ?y) (gconv ?s ?p none ?m ?x ?z))",
     GCONV_X " y:o,d,k,k z:o,d,k,k", "gconv is bilinear"},
    {"G4", "(gconv ?s ?p none ?m (ewadd ?x ?y) ?z)", "(ewadd (gconv ?s ?p none ?m ?x ?z) (gconv ?s ?p none ?m ?y ?z))",
     GCONV_X " y:n,c,h,h z:o,d,k,k", "gconv is bilinear"},
    {"G5", "(gconv ?s same ?c ?m ?x ?y)", "(gconv ?s same ?c ?m ?x (enlarge ?y ?r))", GCONV_X " y:o,d,k,k r:1,1,j,j",
     "enlarge grouped convolution kernel"},
    {"G6", "(gconv ?s ?p relu ?m ?x ?y)", "(relu (gconv ?s ?p none ?m ?x ?y))", GCONV_X " y:o,d,k,k",
     "gconv with A_relu applies relu"},
    {"G7", "(concat 0 (gconv ?s ?p ?c ?m ?x ?z) (gconv ?s ?p ?c ?m ?y ?z))", "(gconv ?s ?p ?c ?m (concat 0 ?x ?y) ?z)",
     GCONV_X " y:b,c,h,h z:o,d,k,k", "concatenation (batch) and gconv"},
    {"G8", "(concat 1 (gconv ?s ?p ?c ?m ?x ?y) (gconv ?s ?p ?c ?m ?z ?w))",
     "(gconv ?s ?p ?c ?m (concat 1 ?x ?z) (concat 0 ?y ?w))",
     "x:1,c,h,h y:o,d,k,k z:1,e,h,h w:q,d,k,k wide=c,e,o,q", "concatenated groups: two gconvs are one"},
};
#undef CONV_X
#undef GCONV_X
#undef ENLARGE_SHAPES
#undef ENLARGE_EW

/* The split-free theory's own axioms (ts_axiom_theories): true of real
 * tensors, but they contradict A28/A29, whose split is defined at the last
 * concat point of a term (a device of the shape-free theory, not a
 * function of the tensor): with C1, split0(concat(concat(x, y), z)) would
 * be both concat(x, y) and x.  So they are used only for rules without
 * split0/split1, in a theory without A28/A29 (docs/taso.md, "Theories").
 * Triggered on the left side only: one direction normalizes every
 * bracketing to the right-nested one without a matching loop. */
typedef struct theory_axiom {
    ts_axiom ax;
    unsigned flags; /* TS_AXIOM_* */
} theory_axiom;

#define LHS TS_AXIOM_LHS_TRIGGER
#define DEF TS_AXIOM_DEFINITION
static const theory_axiom ARITH_AXIOMS[] = {
    /* ONNX arithmetic, reductions and the fusions the runtime forms (ours;
     * docs/taso.md, "Arithmetic, reductions and fusions").  add/sub/mul/div/
     * pow broadcast as ONNX does: the shapes "x:a,b y:c,d" meet every
     * broadcast of two matrices (a dimension 1 against another) and skip
     * the pairs that do not broadcast.  Numbers are float32 constants;
     * a subterm of numbers only is folded in float32 by the prover
     * (verify_z3.c), as a runtime's constant folding does. */
    {{"O1", "(add ?x ?y)", "(add ?y ?x)", "x:a,b y:c,d", "add is commutative (with broadcasting)"}, 0},
    {{"O2", "(add ?x (add ?y ?z))", "(add (add ?x ?y) ?z)", "x:a,b y:c,d z:e,f", "add is associative"}, LHS},
    {{"O3", "(mul ?x ?y)", "(mul ?y ?x)", "x:a,b y:c,d", "mul is commutative"}, 0},
    {{"O4", "(mul ?x (mul ?y ?z))", "(mul (mul ?x ?y) ?z)", "x:a,b y:c,d z:e,f", "mul is associative"}, LHS},
    {{"O5", "(mul (add ?x ?y) ?z)", "(add (mul ?x ?z) (mul ?y ?z))", "x:a,b y:c,d z:e,f", "distributivity"}, LHS},
    {{"O6", "(mul ?x 1)", "?x", "x:a,b", "1 is mul's identity"}, LHS},
    {{"O7", "(div ?x ?y)", "(mul ?x (recip ?y))", "x:a,b y:c,d", "Div is Mul by the Reciprocal"}, LHS},
    {{"O8", "(pow ?x 2)", "(mul ?x ?x)", "x:a,b", "Pow at exponent 2"}, LHS},
    {{"O9", "(pow ?x 3)", "(mul ?x (mul ?x ?x))", "x:a,b", "Pow at exponent 3"}, LHS},
    {{"O10", "(sigmoid ?x)", "(mul 0.5 (add 1 (tanh (mul 0.5 ?x))))", "x:a,b",
     "Sigmoid(x) = (1 + tanh(x/2)) / 2 (the logistic function's identity)"}, LHS},
    {{"O11", "(reducemean ?r (add ?x ?y))", "(add (reducemean ?r ?x) (reducemean ?r ?y))", "x:a,b,c y:d,e,f",
     "ReduceMean is linear"}, LHS},
    {{"O12", "(gelu ?x)", "(mul (mul 0.5 ?x) (add 1 (erf (div ?x (sqrt 2)))))", "x:a,b",
     "Gelu's definition (ONNX opset 20, approximate none)"}, LHS | DEF},
    {{"O13", "(gelutanh ?x)",
     "(mul (mul 0.5 ?x) (add 1 (tanh (mul 0.797884583 (add ?x (mul 0.044715 (pow ?x 3)))))))", "x:a,b",
     "Gelu's definition (ONNX opset 20, approximate tanh; sqrt(2/pi) in float32)"}, LHS | DEF},
    {{"O14", "(layernorm ?r ?x ?e)",
     "(mul (sub ?x (reducemean ?r ?x)) (recip (sqrt (add (reducemean ?r (mul (sub ?x (reducemean ?r ?x)) "
     "(sub ?x (reducemean ?r ?x)))) ?e))))",
     "x:a,b,c e: const=e", "LayerNormalization's definition (ONNX opset 17, Scale 1, no B)"}, LHS | DEF},
    {{"O15", "(add (broadcast ?x ?y) ?y)", "(add ?x ?y)", "x:a,b y:c,d", "Add broadcasts its operands itself"}, LHS},
    {{"O16", "(mul (broadcast ?x ?y) ?y)", "(mul ?x ?y)", "x:a,b y:c,d", "Mul broadcasts its operands itself"}, LHS},
    {{"O17", "(gather ?a (relu ?x) ?i)", "(relu (gather ?a ?x ?i))", "x:a,b i:c index=i",
     "Gather selects elements: it commutes with an element-wise op"}, LHS},
    {{"O18", "(gather ?a (add ?x ?y) ?i)", "(add (gather ?a ?x ?i) (gather ?a ?y ?i))", "x:a,b y:a,b i:c,d index=i",
     "Gather distributes over Add"}, LHS},
};
#undef LHS
#undef DEF

static const theory_axiom SPLIT_FREE_AXIOMS[] = {
    {{"C1", "(concat ?a (concat ?a ?x ?y) ?z)", "(concat ?a ?x (concat ?a ?y ?z))", "x:@ y:@a z:@A",
      "concat is associative"},
     TS_AXIOM_SPLIT_FREE_ONLY | TS_AXIOM_LHS_TRIGGER},
};

#define NMAIN ((int)(sizeof AXIOMS / sizeof AXIOMS[0]))
#define NARITH ((int)(sizeof ARITH_AXIOMS / sizeof ARITH_AXIOMS[0]))
#define NFREE ((int)(sizeof SPLIT_FREE_AXIOMS / sizeof SPLIT_FREE_AXIOMS[0]))

int ts_axioms_count(void) { return NMAIN + NARITH + NFREE; }

/* The table row of axiom i past the main table, NULL for a main one. */
static const theory_axiom *theory_row(int i)
{
    return i < NMAIN ? NULL : i < NMAIN + NARITH ? &ARITH_AXIOMS[i - NMAIN] : &SPLIT_FREE_AXIOMS[i - NMAIN - NARITH];
}

const ts_axiom *ts_axiom_at(int i)
{
    if (i < 0 || i >= ts_axioms_count()) return NULL;
    return i < NMAIN ? &AXIOMS[i] : &theory_row(i)->ax;
}

int ts_axiom_find(const char *name)
{
    for (int i = 0; i < ts_axioms_count(); i++)
        if (!strcmp(ts_axiom_at(i)->name, name)) return i;
    return -1;
}

/* A side mentions split when it applies split0/split1: operator atoms are
 * always followed by their arguments, so "(split" finds exactly those. */
static bool mentions_split(const ts_axiom *ax)
{
    return strstr(ax->lhs, "(split") || strstr(ax->rhs, "(split");
}

unsigned ts_axiom_flags(int i)
{
    if (i < 0 || i >= ts_axioms_count()) return 0;
    if (i >= NMAIN) return theory_row(i)->flags;
    /* Table 2 of the paper (A1..A43) and the lemmas of TASO's verify.py
     * (X1, X2, X4..X7) */
    const char *n = AXIOMS[i].name;
    unsigned paper = n[0] == 'A' || (n[0] == 'X' && strcmp(n, "X3")) ? TS_AXIOM_PAPER : 0;
    /* the crop axioms push crops outward and enlarges into crops, never
     * back: both ways, K1 and K2 make crops of every kernel and conv
     * (planted wrong enlarge rules ran into the timeout) */
    unsigned lhs = n[0] == 'K' ? TS_AXIOM_LHS_TRIGGER : 0;
    return paper | lhs | (mentions_split(&AXIOMS[i]) ? TS_AXIOM_SPLIT_ONLY : 0);
}

unsigned ts_axiom_theories(int i)
{
    unsigned f = ts_axiom_flags(i);
    if (f & TS_AXIOM_SPLIT_ONLY) return TS_THEORY_SPLIT;
    if (f & TS_AXIOM_SPLIT_FREE_ONLY) return TS_THEORY_SPLIT_FREE;
    return TS_THEORY_SPLIT | TS_THEORY_SPLIT_FREE;
}

/* ------------------------------------------------------------ parsing */

const char *ts_param_canon(unsigned slot, const ts_rparams *p, char *buf, size_t n)
{
    switch (slot) {
    case TS_RPARAM_KERNEL: snprintf(buf, n, "k%dx%d", p->kh, p->kw); break;
    case TS_RPARAM_STRIDE: snprintf(buf, n, "s%d", p->stride); break;
    case TS_RPARAM_PAD: snprintf(buf, n, "%s", p->pad == TS_RPAD_SAME ? "same" : "valid"); break;
    case TS_RPARAM_ACT: snprintf(buf, n, "%s", p->act == TS_RACT_NONE ? "none" : "relu"); break;
    case TS_RPARAM_MULT: snprintf(buf, n, "m%d", p->mult); break;
    case TS_RPARAM_AXES: ts_raxes_format(p->axes, buf, n); break;
    case TS_RPARAM_VALUE: /* '#' keeps numbers apart from the other literals */
        buf[0] = '#';
        ts_rnum_format(p->value, buf + 1, n - 1);
        break;
    default: snprintf(buf, n, "a%d", p->axis); break;
    }
    return buf;
}

typedef struct parser {
    const char *s;
    size_t i;
    ts_error *err;
} parser;

static void skip_ws(parser *ps)
{
    while (isspace((unsigned char)ps->s[ps->i])) ps->i++;
}

/* One atom into buf; false when there is none. */
static bool atom(parser *ps, char *buf, size_t n)
{
    skip_ws(ps);
    size_t k = 0;
    while (ps->s[ps->i] && !isspace((unsigned char)ps->s[ps->i]) && ps->s[ps->i] != '(' && ps->s[ps->i] != ')') {
        if (k + 1 < n) buf[k++] = ps->s[ps->i];
        ps->i++;
    }
    buf[k] = 0;
    return k > 0;
}

/* A literal parameter in canonical form, checked for its slot. */
static bool param_literal(const char *a, unsigned slot, char *out, size_t n)
{
    int v = 0, w = 0;
    char extra;
    switch (slot) {
    case TS_RPARAM_KERNEL:
        if (sscanf(a, "k%dx%d%c", &v, &w, &extra) == 2) return snprintf(out, n, "k%dx%d", v, w) > 0;
        if (sscanf(a, "k%d%c", &v, &extra) == 1) return snprintf(out, n, "k%dx%d", v, v) > 0;
        return false;
    case TS_RPARAM_STRIDE: return sscanf(a, "s%d%c", &v, &extra) == 1 && snprintf(out, n, "s%d", v) > 0;
    case TS_RPARAM_PAD:
        return (!strcmp(a, "same") || !strcmp(a, "valid")) && snprintf(out, n, "%s", a) > 0;
    case TS_RPARAM_ACT:
        return (!strcmp(a, "none") || !strcmp(a, "relu")) && snprintf(out, n, "%s", a) > 0;
    case TS_RPARAM_MULT: return sscanf(a, "m%d%c", &v, &extra) == 1 && v > 0 && snprintf(out, n, "m%d", v) > 0;
    case TS_RPARAM_AXES: {
        ts_rparams p = {0};
        return ts_raxes_parse(a, &p.axes) && ts_param_canon(slot, &p, out, n);
    }
    case TS_RPARAM_VALUE: {
        ts_rparams p = {0};
        return ts_rnum_parse(a, &p.value) && ts_param_canon(slot, &p, out, n);
    }
    default: return sscanf(a, "%d%c", &v, &extra) == 1 && snprintf(out, n, "a%d", v) > 0;
    }
}

static ts_aterm *parse_term(parser *ps, bool param, unsigned slot);

static ts_aterm *new_term(parser *ps, ts_aterm_kind kind)
{
    ts_aterm *t = calloc(1, sizeof *t);
    if (!t) ts_error_set(ps->err, TS_ERR_NOMEM, "out of memory");
    else t->kind = kind;
    return t;
}

static ts_aterm *parse_op(parser *ps, const char *name, bool paren)
{
    ts_rop op = ts_rop_from_atom(name);
    if (op == TS_ROP_COUNT || op == TS_ROP_VAR) {
        ts_error_set(ps->err, TS_ERR_PARSE, "axiom '%s': unknown operator '%s'", ps->s, name);
        return NULL;
    }
    const ts_ropinfo *info = ts_rop_info(op);
    if (!paren && (info->params || info->nargs)) {
        ts_error_set(ps->err, TS_ERR_PARSE, "axiom '%s': operator '%s' needs arguments", ps->s, name);
        return NULL;
    }
    ts_aterm *t = new_term(ps, TS_AT_OP);
    if (!t) return NULL;
    t->op = op;
    snprintf(t->name, sizeof t->name, "%s", name);
    for (unsigned bit = 1; bit <= TS_RPARAM_LAST; bit <<= 1)
        if (info->params & bit) {
            ts_aterm *c = parse_term(ps, true, bit);
            if (!c) goto fail;
            t->p[t->np++] = c;
        }
    for (int k = 0; k < info->nargs; k++) {
        ts_aterm *c = parse_term(ps, false, 0);
        if (!c) goto fail;
        t->t[t->nt++] = c;
    }
    if (paren) {
        skip_ws(ps);
        if (ps->s[ps->i] != ')') {
            ts_error_set(ps->err, TS_ERR_PARSE, "axiom '%s': '%s' has too many arguments", ps->s, name);
            goto fail;
        }
        ps->i++;
    }
    return t;
fail:
    ts_aterm_free(t);
    return NULL;
}

static ts_aterm *parse_term(parser *ps, bool param, unsigned slot)
{
    skip_ws(ps);
    char a[64];
    if (ps->s[ps->i] == '(') {
        ps->i++;
        if (param || !atom(ps, a, sizeof a)) {
            ts_error_set(ps->err, TS_ERR_PARSE, "axiom '%s': expected %s at offset %zu", ps->s,
                         param ? "a parameter" : "an operator", ps->i);
            return NULL;
        }
        return parse_op(ps, a, true);
    }
    if (!atom(ps, a, sizeof a)) {
        ts_error_set(ps->err, TS_ERR_PARSE, "axiom '%s': unexpected end at offset %zu", ps->s, ps->i);
        return NULL;
    }
    if (a[0] == '?') {
        ts_aterm *t = new_term(ps, param ? TS_AT_PVAR : TS_AT_TVAR);
        if (!t) return NULL;
        t->slot = slot;
        snprintf(t->name, sizeof t->name, "%.23s", a + 1);
        return t;
    }
    if (!param && ts_rnum_parse(a, &(float){0})) { /* a number: (num V) written bare */
        ts_aterm *t = new_term(ps, TS_AT_OP), *v = t ? new_term(ps, TS_AT_PLIT) : NULL;
        if (!v) {
            free(t);
            return NULL;
        }
        t->op = TS_ROP_NUM;
        snprintf(t->name, sizeof t->name, "num");
        v->slot = TS_RPARAM_VALUE;
        param_literal(a, TS_RPARAM_VALUE, v->name, sizeof v->name);
        t->p[t->np++] = v;
        return t;
    }
    if (!param) return parse_op(ps, a, false);
    ts_aterm *t = new_term(ps, TS_AT_PLIT);
    if (!t) return NULL;
    t->slot = slot;
    if (!param_literal(a, slot, t->name, sizeof t->name)) {
        ts_error_set(ps->err, TS_ERR_PARSE, "axiom '%s': '%s' is not a valid parameter here", ps->s, a);
        free(t);
        return NULL;
    }
    return t;
}

ts_status ts_aterm_parse(const char *text, ts_aterm **out, ts_error *err)
{
    parser ps = {text, 0, err};
    *out = parse_term(&ps, false, 0);
    if (!*out) return err->code;
    skip_ws(&ps);
    if (text[ps.i]) {
        ts_aterm_free(*out);
        *out = NULL;
        return ts_error_set(err, TS_ERR_PARSE, "axiom '%s': trailing text at offset %zu", text, ps.i);
    }
    return TS_OK;
}

void ts_aterm_free(ts_aterm *t)
{
    if (!t) return;
    for (int i = 0; i < t->np; i++) ts_aterm_free(t->p[i]);
    for (int i = 0; i < t->nt; i++) ts_aterm_free(t->t[i]);
    free(t);
}

/* ------------------------------------------------ axioms are not rules */

/* Axiom tensor variable -> rule variable, one-to-one. */
typedef struct restate {
    int n;
    char from[MAX_RESTATE][24], to[MAX_RESTATE][24];
} restate;

static bool bind(restate *m, const char *a, const char *b)
{
    for (int i = 0; i < m->n; i++) {
        if (!strcmp(m->from[i], a)) return !strcmp(m->to[i], b);
        if (!strcmp(m->to[i], b)) return false;
    }
    if (m->n == MAX_RESTATE) return false;
    snprintf(m->from[m->n], 24, "%s", a);
    snprintf(m->to[m->n], 24, "%s", b);
    m->n++;
    return true;
}

/* Whether rule expression e is axiom side t with its tensor variables
 * renamed.  A parameter variable equals no literal: an axiom over all
 * strides is more general than a rule at one (its instances are what
 * rules are). */
static bool restates(restate *m, const ts_aterm *t, const ts_rexpr *e)
{
    if (t->kind == TS_AT_TVAR) return e->op == TS_ROP_VAR && bind(m, t->name, e->var);
    if (t->kind != TS_AT_OP || e->op != t->op || e->nargs != t->nt) return false;
    int k = 0;
    for (unsigned bit = 1; bit <= TS_RPARAM_LAST; bit <<= 1) {
        if (!(ts_rop_info(t->op)->params & bit)) continue;
        const ts_aterm *p = t->p[k++];
        char lit[24];
        if (p->kind != TS_AT_PLIT || strcmp(p->name, ts_param_canon(bit, &e->p, lit, sizeof lit))) return false;
    }
    for (int i = 0; i < t->nt; i++)
        if (!restates(m, t->t[i], e->arg[i])) return false;
    return true;
}

static bool restates_parsed(const ts_aterm *l, const ts_aterm *rt, const ts_rule *r)
{
    if (r->nout != 1 || !l || !rt) return false;
    for (int dir = 0; dir < 2; dir++) {
        restate m = {0};
        if (restates(&m, dir ? rt : l, r->lhs[0]) && restates(&m, dir ? l : rt, r->rhs[0])) return true;
    }
    return false;
}

bool ts_axiom_restates_rule(const ts_axiom *ax, const ts_rule *r)
{
    ts_aterm *l = NULL, *rt = NULL;
    ts_error err = {0};
    bool same = !ts_aterm_parse(ax->lhs, &l, &err) && !ts_aterm_parse(ax->rhs, &rt, &err) &&
                restates_parsed(l, rt, r);
    ts_aterm_free(l);
    ts_aterm_free(rt);
    return same;
}

/* The axioms parsed once (they are static text), for ts_axiom_restated. */
static ts_aterm *PARSED[2][MAX_AXIOMS];
static pthread_once_t PARSED_ONCE = PTHREAD_ONCE_INIT;

static void parse_all(void)
{
    for (int i = 0; i < ts_axioms_count() && i < MAX_AXIOMS; i++) {
        ts_error err = {0};
        if (ts_aterm_parse(ts_axiom_at(i)->lhs, &PARSED[0][i], &err) ||
            ts_aterm_parse(ts_axiom_at(i)->rhs, &PARSED[1][i], &err))
            PARSED[0][i] = NULL; /* never: the axioms' own tests parse them (leaks nothing that matters) */
    }
}

int ts_axiom_restated(const ts_rule *r)
{
    pthread_once(&PARSED_ONCE, parse_all);
    for (int i = 0; i < ts_axioms_count() && i < MAX_AXIOMS; i++)
        if (!(ts_axiom_flags(i) & TS_AXIOM_SOURCED) && restates_parsed(PARSED[0][i], PARSED[1][i], r)) return i;
    return -1;
}
