// oneDNN's C functions that fpguard calls (through dnnl.hpp's inline C++ API), forwarded to
// libdnnl, which the executable loads on the first call (src/lazy/library.hpp). A oneDNN
// function that fpguard starts to call and that is missing here fails to link.
#include <oneapi/dnnl/dnnl.h>

#include "lazy/library.hpp"

namespace {

const fpguard::lazy::Library& libdnnl() {
  static const fpguard::lazy::Library lib(FPGUARD_DNNL_SONAME);
  return lib;
}

}  // namespace

FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_dilated_convolution_forward_desc_init,
            (dnnl_convolution_desc_t * conv_desc, dnnl_prop_kind_t prop_kind,
             dnnl_alg_kind_t alg_kind, const dnnl_memory_desc_t* src_desc,
             const dnnl_memory_desc_t* weights_desc, const dnnl_memory_desc_t* bias_desc,
             const dnnl_memory_desc_t* dst_desc, const dnnl_dims_t strides,
             const dnnl_dims_t dilates, const dnnl_dims_t padding_l, const dnnl_dims_t padding_r),
            (conv_desc, prop_kind, alg_kind, src_desc, weights_desc, bias_desc, dst_desc, strides,
             dilates, padding_l, padding_r))
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_engine_create,
            (dnnl_engine_t * engine, dnnl_engine_kind_t kind, size_t index), (engine, kind, index))
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_engine_destroy, (dnnl_engine_t engine), (engine))
FPG_FORWARD(libdnnl, dnnl_cpu_isa_t, dnnl_get_effective_cpu_isa, (), ())
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_matmul_desc_init,
            (dnnl_matmul_desc_t * matmul_desc, const dnnl_memory_desc_t* src_desc,
             const dnnl_memory_desc_t* weights_desc, const dnnl_memory_desc_t* bias_desc,
             const dnnl_memory_desc_t* dst_desc),
            (matmul_desc, src_desc, weights_desc, bias_desc, dst_desc))
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_memory_create,
            (dnnl_memory_t * memory, const dnnl_memory_desc_t* memory_desc, dnnl_engine_t engine,
             void* handle),
            (memory, memory_desc, engine, handle))
FPG_FORWARD(libdnnl, int, dnnl_memory_desc_equal,
            (const dnnl_memory_desc_t* lhs, const dnnl_memory_desc_t* rhs), (lhs, rhs))
FPG_FORWARD(libdnnl, size_t, dnnl_memory_desc_get_size, (const dnnl_memory_desc_t* memory_desc),
            (memory_desc))
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_memory_desc_init_by_strides,
            (dnnl_memory_desc_t * memory_desc, int ndims, const dnnl_dims_t dims,
             dnnl_data_type_t data_type, const dnnl_dims_t strides),
            (memory_desc, ndims, dims, data_type, strides))
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_memory_desc_init_by_tag,
            (dnnl_memory_desc_t * memory_desc, int ndims, const dnnl_dims_t dims,
             dnnl_data_type_t data_type, dnnl_format_tag_t tag),
            (memory_desc, ndims, dims, data_type, tag))
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_memory_destroy, (dnnl_memory_t memory), (memory))
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_memory_get_data_handle,
            (const_dnnl_memory_t memory, void** handle), (memory, handle))
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_memory_get_engine,
            (const_dnnl_memory_t memory, dnnl_engine_t* engine), (memory, engine))
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_memory_get_memory_desc,
            (const_dnnl_memory_t memory, const dnnl_memory_desc_t** memory_desc),
            (memory, memory_desc))
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_post_ops_append_sum,
            (dnnl_post_ops_t post_ops, float scale), (post_ops, scale))
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_post_ops_create, (dnnl_post_ops_t * post_ops), (post_ops))
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_post_ops_destroy, (dnnl_post_ops_t post_ops), (post_ops))
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_primitive_attr_create, (dnnl_primitive_attr_t * attr),
            (attr))
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_primitive_attr_destroy, (dnnl_primitive_attr_t attr),
            (attr))
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_primitive_attr_set_output_scales,
            (dnnl_primitive_attr_t attr, dnnl_dim_t count, int mask, const float* scales),
            (attr, count, mask, scales))
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_primitive_attr_set_post_ops,
            (dnnl_primitive_attr_t attr, const_dnnl_post_ops_t post_ops), (attr, post_ops))
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_primitive_create,
            (dnnl_primitive_t * primitive, const_dnnl_primitive_desc_t primitive_desc),
            (primitive, primitive_desc))
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_primitive_desc_destroy,
            (dnnl_primitive_desc_t primitive_desc), (primitive_desc))
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_primitive_desc_iterator_create,
            (dnnl_primitive_desc_iterator_t * iterator, const_dnnl_op_desc_t op_desc,
             const_dnnl_primitive_attr_t attr, dnnl_engine_t engine,
             const_dnnl_primitive_desc_t hint_forward_primitive_desc),
            (iterator, op_desc, attr, engine, hint_forward_primitive_desc))
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_primitive_desc_iterator_destroy,
            (dnnl_primitive_desc_iterator_t iterator), (iterator))
FPG_FORWARD(libdnnl, dnnl_primitive_desc_t, dnnl_primitive_desc_iterator_fetch,
            (const_dnnl_primitive_desc_iterator_t iterator), (iterator))
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_primitive_desc_query,
            (const_dnnl_primitive_desc_t primitive_desc, dnnl_query_t what, int index,
             void* result),
            (primitive_desc, what, index, result))
FPG_FORWARD(libdnnl, const dnnl_memory_desc_t*, dnnl_primitive_desc_query_md,
            (const_dnnl_primitive_desc_t primitive_desc, dnnl_query_t what, int index),
            (primitive_desc, what, index))
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_primitive_destroy, (dnnl_primitive_t primitive),
            (primitive))
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_primitive_execute,
            (const_dnnl_primitive_t primitive, dnnl_stream_t stream, int nargs,
             const dnnl_exec_arg_t* args),
            (primitive, stream, nargs, args))
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_reorder_primitive_desc_create,
            (dnnl_primitive_desc_t * reorder_primitive_desc, const dnnl_memory_desc_t* src_desc,
             dnnl_engine_t src_engine, const dnnl_memory_desc_t* dst_desc, dnnl_engine_t dst_engine,
             const_dnnl_primitive_attr_t attr),
            (reorder_primitive_desc, src_desc, src_engine, dst_desc, dst_engine, attr))
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_sgemm,
            (char transa, char transb, dnnl_dim_t M, dnnl_dim_t N, dnnl_dim_t K, float alpha,
             const float* A, dnnl_dim_t lda, const float* B, dnnl_dim_t ldb, float beta, float* C,
             dnnl_dim_t ldc),
            (transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_stream_create,
            (dnnl_stream_t * stream, dnnl_engine_t engine, unsigned flags), (stream, engine, flags))
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_stream_destroy, (dnnl_stream_t stream), (stream))
FPG_FORWARD(libdnnl, dnnl_status_t, dnnl_stream_wait, (dnnl_stream_t stream), (stream))
