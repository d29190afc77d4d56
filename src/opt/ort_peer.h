/* ONNX Runtime as a long-lived timing server for `tsopt optimize --target
 * ort`: one `node serve.js` process (tools/ort/serve.js, its protocol at
 * the top of that file) per optimize run, spoken to over a socket pair. */
#ifndef TS_OPT_ORT_PEER_H
#define TS_OPT_ORT_PEER_H

#include <stddef.h>
#include "tsopt.h"

typedef struct ts_ort_peer ts_ort_peer;

/* Where the server is: $TSOPT_ORT_SERVE, else an installed one
 * (PREFIX/share/tsopt/ort/serve.js beside the bin/ or lib/ this code was
 * loaded from), else the source tree's tools/ort/serve.js this tsopt was
 * built from. */
const char *ts_ort_peer_path(void);

/* Starts the server and waits for its "ready" line; fails with one line
 * saying how to install the peer when node or onnxruntime-node is missing. */
ts_status ts_ort_peer_open(ts_ort_peer **out, ts_error *err);
/* onnxruntime-node's version, as the server reported it. */
const char *ts_ort_peer_version(const ts_ort_peer *p);
/* Sends one request line (fields tab-separated, no newline) and reads the
 * reply: TS_OK with what followed "ok<TAB>" in reply[0..n), TS_ERR_UNSUPPORTED
 * with ORT's one-line error, TS_ERR_IO when the server died or did not
 * answer within timeout_ms (it is then stopped; the next request starts a
 * new one). */
ts_status ts_ort_peer_ask(ts_ort_peer *p, const char *request, char *reply, size_t n, int timeout_ms,
                          ts_error *err);
void ts_ort_peer_close(ts_ort_peer *p);

#endif
