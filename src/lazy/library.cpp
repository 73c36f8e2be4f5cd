// Shared libraries and fpguard's modules, opened on first use (src/lazy/library.hpp).
#include "lazy/library.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>

#include "fpguard/error.hpp"

namespace fpguard::lazy {

namespace {

std::string last_dl_error() {
  const char* e = dlerror();
  return e ? e : "unknown reason";
}

std::filesystem::path executable_dir() {
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) throw Error("/proc/self/exe", "cannot locate the fpguard executable");
  exe[n] = '\0';
  return std::filesystem::path(exe).parent_path();
}

}  // namespace

Library::Library(const std::string& file)
    : file_(file), handle_(dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL)) {
  if (!handle_) throw Error(file_, "cannot be loaded: " + last_dl_error());
}

void* Library::symbol(const char* name) const {
  dlerror();
  void* p = dlsym(handle_, name);
  if (!p) throw Error(file_, std::string("has no ") + name + ": " + last_dl_error());
  return p;
}

void* open_module(const char* file, const char* what, int flags) {
  const std::filesystem::path dir = executable_dir();
  std::string failures;
  for (const auto& path : {dir / file, dir / FPGUARD_MODULE_RELDIR / file}) {
    if (void* handle = dlopen(path.c_str(), flags)) return handle;
    failures += (failures.empty() ? "" : "; ") + last_dl_error();
  }
  throw Error(file, std::string("cannot load fpguard's ") + what + " module: " + failures);
}

}  // namespace fpguard::lazy
