// The libraries that the `fpguard` executable loads when it first calls into them rather
// than when it starts: oneDNN (src/lazy/dnnl.cpp), libzip (zip.cpp), and libonnx with
// libprotobuf, through the ONNX module (onnx.cpp, onnx_module.hpp). Loading them took
// about 4 ms of every start, also of the commands that read no model, .npz or .pb file
// (bench/README.md, session 25). Only the executable links src/lazy/: the tests, the
// Python module and the benchmarks link those libraries as usual (fpguard_lib).
#pragma once

#include <filesystem>
#include <string>

namespace fpguard::lazy {

// A shared library opened with dlopen(RTLD_NOW | RTLD_LOCAL) when constructed: Error
// naming `file` (a soname or a path) and dlerror()'s reason when it cannot be.
class Library {
 public:
  explicit Library(const std::string& file);
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  // The address of `name` in it; Error naming the library when it has none.
  void* symbol(const char* name) const;

 private:
  std::string file_;
  void* handle_;
};

// One of fpguard's modules (`file`, such as "libfpguard_onnx.so"; `what`, such as "ONNX",
// names it in errors): where the build puts it, next to the executable, else where `make
// install` does, LIBDIR/fpguard (the executable's directory + FPGUARD_MODULE_RELDIR).
// dlopen's flags are `flags`. Error naming every path tried, with dlerror()'s reasons,
// when neither opens.
void* open_module(const char* file, const char* what, int flags);

}  // namespace fpguard::lazy

// The definition of a C function `name` of the Library `lib()` (a function returning a
// Library&, constructed on its first call) that calls the library's own: `params` and
// `args` as in the library's header, which declares it (another signature does not
// compile). The address is looked up once.
#define FPG_FORWARD(lib, ret, name, params, args)                                    \
  extern "C" ret name params {                                                       \
    static const auto fn = reinterpret_cast<decltype(&::name)>(lib().symbol(#name)); \
    return fn args;                                                                  \
  }
