/* The oneDNN functions kiln's dnnl kernels call, as one X-macro list: the
 * loader (kd_load.c) resolves each with dlsym when the library is opened,
 * and a trampoline of the same name jumps to it. kiln therefore links no
 * -ldnnl: a build needs oneDNN's header only, and a kiln built without
 * it (or run where libdnnl is missing) has no dnnl target. */
#ifndef KD_FUNCS_H
#define KD_FUNCS_H

#define KD_FUNCS(X) \
	X(dnnl_engine_create) \
	X(dnnl_stream_create) \
	X(dnnl_stream_wait) \
	X(dnnl_stream_destroy) \
	X(dnnl_memory_desc_init_by_strides) \
	X(dnnl_memory_desc_init_by_tag) \
	X(dnnl_memory_desc_init_submemory) \
	X(dnnl_memory_desc_equal) \
	X(dnnl_memory_desc_get_size) \
	X(dnnl_memory_create) \
	X(dnnl_memory_get_data_handle) \
	X(dnnl_memory_set_data_handle) \
	X(dnnl_memory_destroy) \
	X(dnnl_primitive_create) \
	X(dnnl_primitive_execute) \
	X(dnnl_primitive_destroy) \
	X(dnnl_primitive_desc_create) \
	X(dnnl_primitive_desc_destroy) \
	X(dnnl_primitive_desc_query) \
	X(dnnl_primitive_desc_query_md) \
	X(dnnl_reorder_primitive_desc_create) \
	X(dnnl_concat_primitive_desc_create) \
	X(dnnl_primitive_attr_create) \
	X(dnnl_primitive_attr_destroy) \
	X(dnnl_primitive_attr_set_post_ops) \
	X(dnnl_post_ops_create) \
	X(dnnl_post_ops_destroy) \
	X(dnnl_post_ops_append_eltwise) \
	X(dnnl_post_ops_append_sum) \
	X(dnnl_dilated_convolution_forward_desc_init) \
	X(dnnl_inner_product_forward_desc_init) \
	X(dnnl_matmul_desc_init) \
	X(dnnl_eltwise_forward_desc_init) \
	X(dnnl_binary_desc_init) \
	X(dnnl_batch_normalization_forward_desc_init) \
	X(dnnl_pooling_v2_forward_desc_init) \
	X(dnnl_get_effective_cpu_isa)

/* kd_load opens libdnnl and resolves every function; it returns 0, or -1
 * with the reason in err (n bytes). Call it once, before any dnnl_ call. */
int kd_load(char* err, int n);

#endif
