// libzip's functions that fpguard calls (.npz files: src/tensor/npz.cpp), forwarded to
// libzip, which the executable loads on the first call (src/lazy/library.hpp). A libzip
// function that fpguard starts to call and that is missing here fails to link.
#include <zip.h>

#include "lazy/library.hpp"

namespace {

const fpguard::lazy::Library& libzip() {
  static const fpguard::lazy::Library lib(FPGUARD_ZIP_SONAME);
  return lib;
}

}  // namespace

FPG_FORWARD(libzip, int, zip_close, (zip_t * a0), (a0))
FPG_FORWARD(libzip, void, zip_discard, (zip_t * a0), (a0))
FPG_FORWARD(libzip, int, zip_error_code_zip, (const zip_error_t* a0), (a0))
FPG_FORWARD(libzip, void, zip_error_fini, (zip_error_t * a0), (a0))
FPG_FORWARD(libzip, void, zip_error_init, (zip_error_t * a0), (a0))
FPG_FORWARD(libzip, void, zip_error_init_with_code, (zip_error_t * a0, int a1), (a0, a1))
FPG_FORWARD(libzip, const char*, zip_error_strerror, (zip_error_t * a0), (a0))
FPG_FORWARD(libzip, int, zip_fclose, (zip_file_t * a0), (a0))
FPG_FORWARD(libzip, zip_int64_t, zip_file_add,
            (zip_t * a0, const char* a1, zip_source_t* a2, zip_flags_t a3), (a0, a1, a2, a3))
FPG_FORWARD(libzip, const char*, zip_file_strerror, (zip_file_t * a0), (a0))
FPG_FORWARD(libzip, zip_file_t*, zip_fopen_index, (zip_t * a0, zip_uint64_t a1, zip_flags_t a2),
            (a0, a1, a2))
FPG_FORWARD(libzip, zip_int64_t, zip_fread, (zip_file_t * a0, void* a1, zip_uint64_t a2),
            (a0, a1, a2))
FPG_FORWARD(libzip, zip_int64_t, zip_get_num_entries, (zip_t * a0, zip_flags_t a1), (a0, a1))
FPG_FORWARD(libzip, zip_t*, zip_open, (const char* a0, int a1, int* a2), (a0, a1, a2))
FPG_FORWARD(libzip, zip_t*, zip_open_from_source, (zip_source_t * a0, int a1, zip_error_t* a2),
            (a0, a1, a2))
FPG_FORWARD(libzip, int, zip_set_file_compression,
            (zip_t * a0, zip_uint64_t a1, zip_int32_t a2, zip_uint32_t a3), (a0, a1, a2, a3))
FPG_FORWARD(libzip, zip_source_t*, zip_source_buffer_create,
            (const void* a0, zip_uint64_t a1, int a2, zip_error_t* a3), (a0, a1, a2, a3))
FPG_FORWARD(libzip, zip_source_t*, zip_source_buffer_fragment,
            (zip_t * a0, const zip_buffer_fragment_t* a1, zip_uint64_t a2, int a3),
            (a0, a1, a2, a3))
FPG_FORWARD(libzip, int, zip_source_close, (zip_source_t * a0), (a0))
FPG_FORWARD(libzip, zip_error_t*, zip_source_error, (zip_source_t * a0), (a0))
FPG_FORWARD(libzip, void, zip_source_free, (zip_source_t * a0), (a0))
FPG_FORWARD(libzip, void, zip_source_keep, (zip_source_t * a0), (a0))
FPG_FORWARD(libzip, int, zip_source_open, (zip_source_t * a0), (a0))
FPG_FORWARD(libzip, zip_int64_t, zip_source_read, (zip_source_t * a0, void* a1, zip_uint64_t a2),
            (a0, a1, a2))
FPG_FORWARD(libzip, int, zip_stat_index,
            (zip_t * a0, zip_uint64_t a1, zip_flags_t a2, zip_stat_t* a3), (a0, a1, a2, a3))
FPG_FORWARD(libzip, void, zip_stat_init, (zip_stat_t * a0), (a0))
FPG_FORWARD(libzip, const char*, zip_strerror, (zip_t * a0), (a0))
