/* .npy load/save: round trips per dtype, files written by numpy (embedded
 * bytes, since C unit tests cannot run numpy), and every error path. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tsopt.h"

/* np.save(f, np.array([[1.5, -2, 3], [4, 5, 6.25]], dtype=np.float32)) */
static const char NUMPY_F32[] =
"\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00\x7b\x27\x64\x65\x73\x63\x72\x27\x3a\x20\x27\x3c\x66\x34"
    "\x27\x2c\x20\x27\x66\x6f\x72\x74\x72\x61\x6e\x5f\x6f\x72\x64\x65\x72\x27\x3a\x20\x46\x61\x6c\x73"
    "\x65\x2c\x20\x27\x73\x68\x61\x70\x65\x27\x3a\x20\x28\x32\x2c\x20\x33\x29\x2c\x20\x7d\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x0a\x00\x00\xc0\x3f\x00\x00\x00\xc0\x00\x00\x40\x40\x00\x00\x80\x40"
    "\x00\x00\xa0\x40\x00\x00\xc8\x40";
/* np.lib.format.write_array(f, np.arange(4, dtype='<i8'), version=(2, 0)) */
static const char NUMPY_I64_V2[] =
    "\x93\x4e\x55\x4d\x50\x59\x02\x00\x74\x00\x00\x00\x7b\x27\x64\x65\x73\x63\x72\x27\x3a\x20\x27\x3c"
    "\x69\x38\x27\x2c\x20\x27\x66\x6f\x72\x74\x72\x61\x6e\x5f\x6f\x72\x64\x65\x72\x27\x3a\x20\x46\x61"
    "\x6c\x73\x65\x2c\x20\x27\x73\x68\x61\x70\x65\x27\x3a\x20\x28\x34\x2c\x29\x2c\x20\x7d\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x0a\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00"
    "\x02\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00";

/* np.save(f, np.array([[1.5, -2, 65504], [2**-14, -0.0, 6.25]], dtype=np.float16)) */
static const char NUMPY_F16[] =
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00\x7b\x27\x64\x65\x73\x63\x72\x27\x3a\x20\x27\x3c\x66\x32"
    "\x27\x2c\x20\x27\x66\x6f\x72\x74\x72\x61\x6e\x5f\x6f\x72\x64\x65\x72\x27\x3a\x20\x46\x61\x6c\x73"
    "\x65\x2c\x20\x27\x73\x68\x61\x70\x65\x27\x3a\x20\x28\x32\x2c\x20\x33\x29\x2c\x20\x7d\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x0a\x00\x3e\x00\xc0\xff\x7b\x00\x04\x00\x80\x40\x46";

static char dir[64];

static void setup(void)
{
    strcpy(dir, "/tmp/test_npy.XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(npy, .init = setup, .fini = teardown);

static const char *file(const char *name)
{
    static char buf[128];
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    return buf;
}

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

/* A hand-made file: v1.0 header text (padded to 64) followed by nbytes of data. */
static void write_npy(const char *path, const char *dict, size_t nbytes)
{
    char buf[4096];
    size_t n = strlen(dict), total = 10 + n + 1, pad = (64 - total % 64) % 64, hlen = n + pad + 1;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (char)(hlen & 0xff);
    buf[9] = (char)(hlen >> 8);
    memcpy(buf + 10, dict, n);
    memset(buf + 10 + n, ' ', pad);
    buf[10 + hlen - 1] = '\n';
    cr_assert_leq(10 + hlen + nbytes, sizeof buf);
    memset(buf + 10 + hlen, 0, nbytes);
    write_bytes(path, buf, 10 + hlen + nbytes);
}

static void expect_error(const char *path, ts_status code, const char *phrase)
{
    ts_tensor *t = (ts_tensor *)1;
    ts_error e = {0};
    cr_assert_eq(ts_npy_load(path, &t, &e), code, "status %d for %s: %s", e.code, path, e.msg);
    cr_assert_null(t);
    cr_assert(strstr(e.msg, phrase), "message '%s' lacks '%s'", e.msg, phrase);
    cr_assert(strstr(e.msg, path), "message '%s' does not name the file", e.msg);
}

Test(npy, round_trip_every_dtype)
{
    const ts_dtype types[] = {TS_F32, TS_F64, TS_F16, TS_BF16, TS_I64, TS_I32, TS_I16,
                              TS_I8,  TS_U64, TS_U32, TS_U16,  TS_U8,  TS_BOOL};
    const char *shapes[] = {"2x3x4", "7", "1x0x3"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        for (size_t k = 0; k < 4; k++) {
            ts_shape s = {0};
            ts_error e = {0};
            if (k < 3) cr_assert_eq(ts_shape_parse(shapes[k], &s, &e), TS_OK);
            ts_tensor *t = ts_tensor_new(types[i], &s, &e);
            cr_assert_not_null(t);
            uint64_t rng = i * 10 + k;
            ts_tensor_fill_random(t, &rng, types[i] == TS_BOOL ? 0 : -100, types[i] == TS_BOOL ? 1 : 100);
            if (types[i] == TS_U8) ts_tensor_fill_random(t, &rng, 0, 255);
            const char *p = file("t.npy");
            cr_assert_eq(ts_npy_save(p, t, &e), TS_OK, "%s", e.msg);
            ts_tensor *r = NULL;
            cr_assert_eq(ts_npy_load(p, &r, &e), TS_OK, "%s", e.msg);
            cr_assert_eq(r->dtype, t->dtype);
            cr_assert(ts_shape_eq(&r->shape, &t->shape), "%s k=%zu", ts_dtype_name(types[i]), k);
            cr_assert_eq(r->nbytes, t->nbytes);
            cr_assert(t->nbytes == 0 || !memcmp(r->data, t->data, t->nbytes), "%s data differs",
                      ts_dtype_name(types[i]));
            cr_assert(access(file("t.npy.tmp"), F_OK) != 0, "temporary file left behind");
            ts_tensor_unref(t);
            ts_tensor_unref(r);
        }
    }
}

Test(npy, reads_numpy_file_and_writes_identical_bytes)
{
    const char *p = file("np.npy");
    write_bytes(p, NUMPY_F32, sizeof NUMPY_F32 - 1);
    ts_tensor *t = NULL;
    ts_error e = {0};
    cr_assert_eq(ts_npy_load(p, &t, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(t->dtype, TS_F32);
    cr_assert_eq(t->shape.rank, 2);
    cr_assert_eq(t->shape.dims[0], 2);
    cr_assert_eq(t->shape.dims[1], 3);
    const float want[] = {1.5f, -2, 3, 4, 5, 6.25f};
    for (int i = 0; i < 6; i++) cr_assert_eq(((float *)t->data)[i], want[i]);
    /* Our writer pads exactly like numpy: the bytes must be identical. */
    const char *q = file("ours.npy");
    cr_assert_eq(ts_npy_save(q, t, &e), TS_OK, "%s", e.msg);
    FILE *f = fopen(q, "rb");
    char buf[512];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    cr_assert_eq(n, sizeof NUMPY_F32 - 1);
    cr_assert(!memcmp(buf, NUMPY_F32, n));
    ts_tensor_unref(t);
}

Test(npy, float16_as_numpy_writes_it)
{
    const char *p = file("f16.npy");
    write_bytes(p, NUMPY_F16, sizeof NUMPY_F16 - 1);
    ts_tensor *t = NULL;
    ts_error e = {0};
    cr_assert_eq(ts_npy_load(p, &t, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(t->dtype, TS_F16);
    const double want[] = {1.5, -2, 65504, 0x1p-14, -0.0, 6.25};
    for (int i = 0; i < 6; i++) cr_assert_eq(ts_tensor_get_f64(t, i), want[i], "element %d", i);
    cr_assert(signbit(ts_tensor_get_f64(t, 4)));
    const char *q = file("ours.npy");
    cr_assert_eq(ts_npy_save(q, t, &e), TS_OK, "%s", e.msg);
    FILE *f = fopen(q, "rb");
    char buf[512];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    cr_assert_eq(n, sizeof NUMPY_F16 - 1);
    cr_assert(!memcmp(buf, NUMPY_F16, n), "not numpy's bytes");
    ts_tensor_unref(t);
}

/* bfloat16: any 2-byte void ('|V2' from numpy, '<V2' from ml_dtypes'
 * np.save) reads as bfloat16; tsopt writes '<V2'. */
static void write_with_data(const char *path, const char *dict, const void *data, size_t nbytes)
{
    write_npy(path, dict, nbytes);
    FILE *f = fopen(path, "r+b");
    cr_assert_not_null(f);
    cr_assert_eq(fseek(f, -(long)nbytes, SEEK_END), 0);
    cr_assert_eq(fwrite(data, 1, nbytes, f), nbytes);
    fclose(f);
}

Test(npy, bfloat16_as_two_byte_void)
{
    const uint16_t bits[] = {0x3f80, 0xc040, 0x7f80}; /* 1, -3, inf */
    const char *dicts[] = {"{'descr': '|V2', 'fortran_order': False, 'shape': (3,), }",
                           "{'descr': '<V2', 'fortran_order': False, 'shape': (3,), }"};
    for (int d = 0; d < 2; d++) {
        write_with_data(file("bf.npy"), dicts[d], bits, sizeof bits);
        ts_tensor *t = NULL;
        ts_error e = {0};
        cr_assert_eq(ts_npy_load(file("bf.npy"), &t, &e), TS_OK, "%s", e.msg);
        cr_assert_eq(t->dtype, TS_BF16);
        cr_assert_eq(ts_tensor_get_f64(t, 0), 1.0);
        cr_assert_eq(ts_tensor_get_f64(t, 1), -3.0);
        cr_assert(isinf(ts_tensor_get_f64(t, 2)));
        cr_assert_eq(ts_npy_save(file("out.npy"), t, &e), TS_OK, "%s", e.msg);
        FILE *f = fopen(file("out.npy"), "rb");
        char buf[256];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        cr_assert_gt(n, sizeof bits);
        cr_assert(!memcmp(buf + n - sizeof bits, bits, sizeof bits), "the bits changed");
        buf[n - sizeof bits] = 0;
        cr_assert(strstr(buf + 10, "'descr': '<V2'"), "%.50s", buf + 10);
        ts_tensor_unref(t);
    }
    write_npy(file("v4.npy"), "{'descr': '|V4', 'fortran_order': False, 'shape': (3,), }", 12);
    expect_error(file("v4.npy"), TS_ERR_UNSUPPORTED, "unsupported .npy dtype '|V4'");
}

Test(npy, reads_version_2)
{
    const char *p = file("v2.npy");
    write_bytes(p, NUMPY_I64_V2, sizeof NUMPY_I64_V2 - 1);
    ts_tensor *t = NULL;
    ts_error e = {0};
    cr_assert_eq(ts_npy_load(p, &t, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(t->dtype, TS_I64);
    cr_assert_eq(t->shape.rank, 1);
    cr_assert_eq(t->shape.dims[0], 4);
    for (int i = 0; i < 4; i++) cr_assert_eq(((int64_t *)t->data)[i], i);
    ts_tensor_unref(t);
}

Test(npy, scalar_and_header_variants)
{
    /* rank 0, double quotes, keys in another order, no trailing comma */
    write_npy(file("s.npy"), "{\"shape\": (), \"fortran_order\": False, \"descr\": \"<f8\"}", 8);
    ts_tensor *t = NULL;
    ts_error e = {0};
    cr_assert_eq(ts_npy_load(file("s.npy"), &t, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(t->dtype, TS_F64);
    cr_assert_eq(t->shape.rank, 0);
    ts_tensor_unref(t);
}

Test(npy, error_missing_file) { expect_error(file("nope.npy"), TS_ERR_IO, "cannot open"); }

Test(npy, error_empty_and_garbage)
{
    write_bytes(file("empty.npy"), "", 0);
    expect_error(file("empty.npy"), TS_ERR_PARSE, "bad magic");
    static const char zip[] = "PK\x03\x04 this is a zip file, not npy";
    write_bytes(file("g.npy"), zip, sizeof zip - 1);
    expect_error(file("g.npy"), TS_ERR_PARSE, "bad magic");
}

Test(npy, error_fortran_order)
{
    write_npy(file("f.npy"), "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24);
    expect_error(file("f.npy"), TS_ERR_UNSUPPORTED, "Fortran");
}

Test(npy, error_big_endian)
{
    write_npy(file("be.npy"), "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", 24);
    expect_error(file("be.npy"), TS_ERR_UNSUPPORTED, "big-endian");
}

Test(npy, error_unknown_dtype)
{
    write_npy(file("c.npy"), "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 16);
    expect_error(file("c.npy"), TS_ERR_UNSUPPORTED, "unsupported .npy dtype '<c8'");
    write_npy(file("o.npy"), "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", 16);
    expect_error(file("o.npy"), TS_ERR_UNSUPPORTED, "unsupported .npy dtype");
}

Test(npy, error_header_garbage)
{
    const char *bad[] = {
        "{'descr': '<f4', 'fortran_order': False, }",               /* no shape */
        "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", /* bad bool */
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)",  /* unclosed */
        "[1, 2, 3]",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", /* rank 9 */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_npy(file("h.npy"), bad[i], 64);
        expect_error(file("h.npy"), TS_ERR_PARSE, "bad .npy header");
    }
    /* header length pointing past the end of the file */
    write_bytes(file("hl.npy"), "\x93NUMPY\x01\x00\xff\x7f{'descr'", 18);
    expect_error(file("hl.npy"), TS_ERR_PARSE, "truncated");
    /* unknown version */
    write_bytes(file("v9.npy"), "\x93NUMPY\x09\x00\x10\x00{}              ", 26);
    expect_error(file("v9.npy"), TS_ERR_UNSUPPORTED, "version 9.0");
}

Test(npy, error_short_and_long_data)
{
    write_npy(file("short.npy"), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 20);
    expect_error(file("short.npy"), TS_ERR_PARSE, "truncated .npy data: header says 24 bytes, file holds 20");
    write_npy(file("long.npy"), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 28);
    expect_error(file("long.npy"), TS_ERR_PARSE, "trailing bytes");
    /* the numpy file cut short */
    write_bytes(file("cut.npy"), NUMPY_F32, sizeof NUMPY_F32 - 5);
    expect_error(file("cut.npy"), TS_ERR_PARSE, "truncated");
}

Test(npy, error_absurd_shape)
{
    write_npy(file("big.npy"), "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000, 1000000000000), }",
              16);
    expect_error(file("big.npy"), TS_ERR_PARSE, "too large");
    write_npy(file("ovf.npy"),
              "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999, 1), }", 16);
    expect_error(file("ovf.npy"), TS_ERR_PARSE, "bad .npy header");
}

Test(npy, error_save_into_missing_directory)
{
    ts_shape s = {0};
    ts_error e = {0};
    ts_tensor *t = ts_tensor_new(TS_F32, &s, &e);
    char p[128];
    snprintf(p, sizeof p, "%s/no/such/dir/x.npy", dir);
    cr_assert_eq(ts_npy_save(p, t, &e), TS_ERR_IO);
    cr_assert(strstr(e.msg, p), "%s", e.msg);
    ts_tensor_unref(t);
}

Test(npy, error_save_modp)
{
    ts_shape s = {0};
    ts_error e = {0};
    ts_tensor *t = ts_tensor_new(TS_MODP, &s, &e);
    cr_assert_eq(ts_npy_save(file("m.npy"), t, &e), TS_ERR_UNSUPPORTED);
    cr_assert(access(file("m.npy"), F_OK) != 0);
    ts_tensor_unref(t);
}
