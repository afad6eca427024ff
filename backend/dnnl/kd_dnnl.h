/* oneDNN's declarations for kiln's dnnl kernels: the installed header
 * when there is one (libdnnl-dev), else kiln's own stand-ins, enough for
 * the package to compile; such a build reports the dnnl target
 * unavailable and never calls oneDNN (kd_load fails). Building with
 * -DKILN_DNNL_STUB forces the stand-ins, to test that build on a machine
 * that has the header. */
#ifndef KD_DNNL_H
#define KD_DNNL_H

#if !defined(KILN_DNNL_STUB) && defined(__has_include)
#if __has_include(<oneapi/dnnl/dnnl.h>)
#define KD_HEADER 1
#endif
#endif

#ifdef KD_HEADER
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_version.h>
#else
#define KD_HEADER 0
#include <stddef.h>
#include <stdint.h>

/* Stand-ins: kiln's own types and values, not oneDNN's ABI. Nothing
 * here is ever passed to oneDNN. */
typedef enum { dnnl_success = 0, dnnl_unimplemented = 1 } dnnl_status_t;
typedef int64_t dnnl_dim_t;
typedef dnnl_dim_t dnnl_dims_t[12];
typedef enum { dnnl_f32 = 3 } dnnl_data_type_t;
typedef enum { dnnl_format_tag_any = 1, dnnl_nChw8c = 2, dnnl_nChw16c = 3 } dnnl_format_tag_t;
typedef enum { dnnl_forward_inference = 1 } dnnl_prop_kind_t;
typedef enum {
	dnnl_convolution_direct = 1,
	dnnl_eltwise_relu, dnnl_eltwise_clip, dnnl_eltwise_linear, dnnl_eltwise_logistic,
	dnnl_eltwise_swish, dnnl_eltwise_hardswish,
	dnnl_binary_add, dnnl_binary_sub, dnnl_binary_mul,
	dnnl_pooling_max, dnnl_pooling_avg_include_padding, dnnl_pooling_avg_exclude_padding
} dnnl_alg_kind_t;
typedef enum { dnnl_use_global_stats = 1, dnnl_use_scale = 2, dnnl_use_shift = 4 } dnnl_normalization_flags_t;
typedef enum { dnnl_cpu = 1 } dnnl_engine_kind_t;
typedef enum { dnnl_stream_default_flags = 1 } dnnl_stream_flags_t;
typedef enum { dnnl_cpu_isa_avx2 = 1, dnnl_cpu_isa_avx512_core = 2 } dnnl_cpu_isa_t;
typedef enum {
	dnnl_query_impl_info_str = 1, dnnl_query_src_md, dnnl_query_weights_md,
	dnnl_query_dst_md, dnnl_query_workspace_md
} dnnl_query_t;
typedef struct { int64_t kd_opaque[128]; } dnnl_memory_desc_t;
typedef struct { int64_t kd_opaque[64]; } dnnl_convolution_desc_t;
typedef struct { int64_t kd_opaque[64]; } dnnl_inner_product_desc_t;
typedef struct { int64_t kd_opaque[64]; } dnnl_matmul_desc_t;
typedef struct { int64_t kd_opaque[64]; } dnnl_eltwise_desc_t;
typedef struct { int64_t kd_opaque[64]; } dnnl_binary_desc_t;
typedef struct { int64_t kd_opaque[64]; } dnnl_batch_normalization_desc_t;
typedef struct { int64_t kd_opaque[64]; } dnnl_pooling_v2_desc_t;
typedef struct kd_engine* dnnl_engine_t;
typedef struct kd_stream* dnnl_stream_t;
typedef struct kd_memory* dnnl_memory_t;
typedef const struct kd_memory* const_dnnl_memory_t;
typedef struct kd_primitive* dnnl_primitive_t;
typedef const struct kd_primitive* const_dnnl_primitive_t;
typedef struct kd_primitive_desc* dnnl_primitive_desc_t;
typedef const struct kd_primitive_desc* const_dnnl_primitive_desc_t;
typedef struct kd_primitive_attr* dnnl_primitive_attr_t;
typedef const struct kd_primitive_attr* const_dnnl_primitive_attr_t;
typedef struct kd_post_ops* dnnl_post_ops_t;
typedef const struct kd_post_ops* const_dnnl_post_ops_t;
typedef const void* const_dnnl_op_desc_t;
typedef struct { int arg; dnnl_memory_t memory; } dnnl_exec_arg_t;
#define DNNL_MEMORY_ALLOCATE ((void*)(size_t)-1)
#define DNNL_ARG_SRC 1
#define DNNL_ARG_SRC_0 1
#define DNNL_ARG_SRC_1 2
#define DNNL_ARG_FROM 1
#define DNNL_ARG_DST 17
#define DNNL_ARG_TO 17
#define DNNL_ARG_WEIGHTS 33
#define DNNL_ARG_BIAS 41
#define DNNL_ARG_MEAN 49
#define DNNL_ARG_VARIANCE 50
#define DNNL_ARG_SCALE 51
#define DNNL_ARG_SHIFT 52
#define DNNL_ARG_WORKSPACE 64
#define DNNL_ARG_MULTIPLE_SRC 1024

dnnl_status_t dnnl_engine_create(dnnl_engine_t* engine, dnnl_engine_kind_t kind, size_t index);
dnnl_status_t dnnl_stream_create(dnnl_stream_t* stream, dnnl_engine_t engine, unsigned flags);
dnnl_status_t dnnl_stream_wait(dnnl_stream_t stream);
dnnl_status_t dnnl_stream_destroy(dnnl_stream_t stream);
dnnl_status_t dnnl_memory_destroy(dnnl_memory_t memory);
dnnl_status_t dnnl_primitive_destroy(dnnl_primitive_t primitive);
dnnl_status_t dnnl_memory_desc_init_by_strides(dnnl_memory_desc_t* md, int ndims, const dnnl_dims_t dims, dnnl_data_type_t dt, const dnnl_dims_t strides);
dnnl_status_t dnnl_memory_desc_init_by_tag(dnnl_memory_desc_t* md, int ndims, const dnnl_dims_t dims, dnnl_data_type_t dt, dnnl_format_tag_t tag);
dnnl_status_t dnnl_memory_desc_init_submemory(dnnl_memory_desc_t* md, const dnnl_memory_desc_t* parent, const dnnl_dims_t dims, const dnnl_dims_t offsets);
int dnnl_memory_desc_equal(const dnnl_memory_desc_t* lhs, const dnnl_memory_desc_t* rhs);
size_t dnnl_memory_desc_get_size(const dnnl_memory_desc_t* md);
dnnl_status_t dnnl_memory_create(dnnl_memory_t* memory, const dnnl_memory_desc_t* md, dnnl_engine_t engine, void* handle);
dnnl_status_t dnnl_memory_get_data_handle(const_dnnl_memory_t memory, void** handle);
dnnl_status_t dnnl_memory_set_data_handle(dnnl_memory_t memory, void* handle);
dnnl_status_t dnnl_primitive_create(dnnl_primitive_t* primitive, const_dnnl_primitive_desc_t pd);
dnnl_status_t dnnl_primitive_execute(const_dnnl_primitive_t primitive, dnnl_stream_t stream, int nargs, const dnnl_exec_arg_t* args);
dnnl_status_t dnnl_primitive_desc_create(dnnl_primitive_desc_t* pd, const_dnnl_op_desc_t op_desc, const_dnnl_primitive_attr_t attr, dnnl_engine_t engine, const_dnnl_primitive_desc_t hint);
dnnl_status_t dnnl_primitive_desc_destroy(dnnl_primitive_desc_t pd);
dnnl_status_t dnnl_primitive_desc_query(const_dnnl_primitive_desc_t pd, dnnl_query_t what, int index, void* result);
const dnnl_memory_desc_t* dnnl_primitive_desc_query_md(const_dnnl_primitive_desc_t pd, dnnl_query_t what, int index);
dnnl_status_t dnnl_reorder_primitive_desc_create(dnnl_primitive_desc_t* pd, const dnnl_memory_desc_t* src, dnnl_engine_t src_engine, const dnnl_memory_desc_t* dst, dnnl_engine_t dst_engine, const_dnnl_primitive_attr_t attr);
dnnl_status_t dnnl_concat_primitive_desc_create(dnnl_primitive_desc_t* pd, const dnnl_memory_desc_t* dst, int n, int axis, const dnnl_memory_desc_t* srcs, const_dnnl_primitive_attr_t attr, dnnl_engine_t engine);
dnnl_status_t dnnl_primitive_attr_create(dnnl_primitive_attr_t* attr);
dnnl_status_t dnnl_primitive_attr_destroy(dnnl_primitive_attr_t attr);
dnnl_status_t dnnl_primitive_attr_set_post_ops(dnnl_primitive_attr_t attr, const_dnnl_post_ops_t post_ops);
dnnl_status_t dnnl_post_ops_create(dnnl_post_ops_t* post_ops);
dnnl_status_t dnnl_post_ops_destroy(dnnl_post_ops_t post_ops);
dnnl_status_t dnnl_post_ops_append_eltwise(dnnl_post_ops_t post_ops, float scale, dnnl_alg_kind_t alg, float alpha, float beta);
dnnl_status_t dnnl_post_ops_append_sum(dnnl_post_ops_t post_ops, float scale);
dnnl_status_t dnnl_dilated_convolution_forward_desc_init(dnnl_convolution_desc_t* d, dnnl_prop_kind_t prop, dnnl_alg_kind_t alg, const dnnl_memory_desc_t* src, const dnnl_memory_desc_t* weights, const dnnl_memory_desc_t* bias, const dnnl_memory_desc_t* dst, const dnnl_dims_t strides, const dnnl_dims_t dilates, const dnnl_dims_t padding_l, const dnnl_dims_t padding_r);
dnnl_status_t dnnl_inner_product_forward_desc_init(dnnl_inner_product_desc_t* d, dnnl_prop_kind_t prop, const dnnl_memory_desc_t* src, const dnnl_memory_desc_t* weights, const dnnl_memory_desc_t* bias, const dnnl_memory_desc_t* dst);
dnnl_status_t dnnl_matmul_desc_init(dnnl_matmul_desc_t* d, const dnnl_memory_desc_t* src, const dnnl_memory_desc_t* weights, const dnnl_memory_desc_t* bias, const dnnl_memory_desc_t* dst);
dnnl_status_t dnnl_eltwise_forward_desc_init(dnnl_eltwise_desc_t* d, dnnl_prop_kind_t prop, dnnl_alg_kind_t alg, const dnnl_memory_desc_t* data, float alpha, float beta);
dnnl_status_t dnnl_binary_desc_init(dnnl_binary_desc_t* d, dnnl_alg_kind_t alg, const dnnl_memory_desc_t* src0, const dnnl_memory_desc_t* src1, const dnnl_memory_desc_t* dst);
dnnl_status_t dnnl_batch_normalization_forward_desc_init(dnnl_batch_normalization_desc_t* d, dnnl_prop_kind_t prop, const dnnl_memory_desc_t* data, float epsilon, unsigned flags);
dnnl_status_t dnnl_pooling_v2_forward_desc_init(dnnl_pooling_v2_desc_t* d, dnnl_prop_kind_t prop, dnnl_alg_kind_t alg, const dnnl_memory_desc_t* src, const dnnl_memory_desc_t* dst, const dnnl_dims_t strides, const dnnl_dims_t kernel, const dnnl_dims_t dilation, const dnnl_dims_t padding_l, const dnnl_dims_t padding_r);
dnnl_cpu_isa_t dnnl_get_effective_cpu_isa(void);
#endif

#endif
