/* libz3, loaded when the first prover is made (z3_load.c).
 *
 * Only TASO's rule verifier (verify_z3.c) calls Z3, and only `tsopt
 * verify`, `generate` and `optimize` with verification run it; linked, the
 * library was mapped and relocated in every process that runs a model:
 * ~1 MiB of libz3 resident (its relocation tables read, its constructors
 * run) at ViT float16's peak, which counts against the half-precision
 * memory ratio (issue 29).  verify_z3.c includes this header after
 * <z3.h>: each Z3 function it calls is then a pointer that xz3_load fills
 * with dlsym.  The list is every Z3 function verify_z3.c calls; one it
 * calls that is not listed is an unresolved symbol at link time (libz3 is
 * not linked), so the list cannot fall behind silently. */
#ifndef TSOPT_TASO_Z3_LOAD_H
#define TSOPT_TASO_Z3_LOAD_H
#include <stdbool.h>
#include <z3.h>
#include "tsopt.h"

#define XZ3_FUNCS(X)                                                                                                   \
    X(Z3_app_to_ast)                                                                                                   \
    X(Z3_del_config)                                                                                                   \
    X(Z3_del_context)                                                                                                  \
    X(Z3_get_app_arg)                                                                                                  \
    X(Z3_get_app_num_args)                                                                                             \
    X(Z3_get_ast_kind)                                                                                                 \
    X(Z3_get_error_code)                                                                                               \
    X(Z3_get_error_msg)                                                                                                \
    X(Z3_is_eq_ast)                                                                                                    \
    X(Z3_mk_and)                                                                                                       \
    X(Z3_mk_app)                                                                                                       \
    X(Z3_mk_config)                                                                                                    \
    X(Z3_mk_const)                                                                                                     \
    X(Z3_mk_context)                                                                                                   \
    X(Z3_mk_eq)                                                                                                        \
    X(Z3_mk_forall_const)                                                                                              \
    X(Z3_mk_func_decl)                                                                                                 \
    X(Z3_mk_not)                                                                                                       \
    X(Z3_mk_params)                                                                                                    \
    X(Z3_mk_pattern)                                                                                                   \
    X(Z3_mk_simple_solver)                                                                                             \
    X(Z3_mk_string_symbol)                                                                                             \
    X(Z3_mk_uninterpreted_sort)                                                                                        \
    X(Z3_params_dec_ref)                                                                                               \
    X(Z3_params_inc_ref)                                                                                               \
    X(Z3_params_set_bool)                                                                                              \
    X(Z3_params_set_uint)                                                                                              \
    X(Z3_set_error_handler)                                                                                            \
    X(Z3_solver_assert)                                                                                                \
    X(Z3_solver_check)                                                                                                 \
    X(Z3_solver_dec_ref)                                                                                               \
    X(Z3_solver_get_reason_unknown)                                                                                    \
    X(Z3_solver_inc_ref)                                                                                               \
    X(Z3_solver_set_params)                                                                                            \
    X(Z3_to_app)

#define XZ3_DECLARE(f) extern __typeof__(&f) xz3_##f;
XZ3_FUNCS(XZ3_DECLARE)
#undef XZ3_DECLARE

/* Loads libz3 and resolves the functions, once per process (thread-safe);
 * false with err set when the library or one of them is missing. */
bool xz3_load(ts_error *err);
/* Whether libz3 is mapped in this process (a test's check that running a
 * model does not load it). */
bool xz3_mapped(void);

#ifndef XZ3_LOADER
#define Z3_app_to_ast (*xz3_Z3_app_to_ast)
#define Z3_del_config (*xz3_Z3_del_config)
#define Z3_del_context (*xz3_Z3_del_context)
#define Z3_get_app_arg (*xz3_Z3_get_app_arg)
#define Z3_get_app_num_args (*xz3_Z3_get_app_num_args)
#define Z3_get_ast_kind (*xz3_Z3_get_ast_kind)
#define Z3_get_error_code (*xz3_Z3_get_error_code)
#define Z3_get_error_msg (*xz3_Z3_get_error_msg)
#define Z3_is_eq_ast (*xz3_Z3_is_eq_ast)
#define Z3_mk_and (*xz3_Z3_mk_and)
#define Z3_mk_app (*xz3_Z3_mk_app)
#define Z3_mk_config (*xz3_Z3_mk_config)
#define Z3_mk_const (*xz3_Z3_mk_const)
#define Z3_mk_context (*xz3_Z3_mk_context)
#define Z3_mk_eq (*xz3_Z3_mk_eq)
#define Z3_mk_forall_const (*xz3_Z3_mk_forall_const)
#define Z3_mk_func_decl (*xz3_Z3_mk_func_decl)
#define Z3_mk_not (*xz3_Z3_mk_not)
#define Z3_mk_params (*xz3_Z3_mk_params)
#define Z3_mk_pattern (*xz3_Z3_mk_pattern)
#define Z3_mk_simple_solver (*xz3_Z3_mk_simple_solver)
#define Z3_mk_string_symbol (*xz3_Z3_mk_string_symbol)
#define Z3_mk_uninterpreted_sort (*xz3_Z3_mk_uninterpreted_sort)
#define Z3_params_dec_ref (*xz3_Z3_params_dec_ref)
#define Z3_params_inc_ref (*xz3_Z3_params_inc_ref)
#define Z3_params_set_bool (*xz3_Z3_params_set_bool)
#define Z3_params_set_uint (*xz3_Z3_params_set_uint)
#define Z3_set_error_handler (*xz3_Z3_set_error_handler)
#define Z3_solver_assert (*xz3_Z3_solver_assert)
#define Z3_solver_check (*xz3_Z3_solver_check)
#define Z3_solver_dec_ref (*xz3_Z3_solver_dec_ref)
#define Z3_solver_get_reason_unknown (*xz3_Z3_solver_get_reason_unknown)
#define Z3_solver_inc_ref (*xz3_Z3_solver_inc_ref)
#define Z3_solver_set_params (*xz3_Z3_solver_set_params)
#define Z3_to_app (*xz3_Z3_to_app)
#endif
#endif
