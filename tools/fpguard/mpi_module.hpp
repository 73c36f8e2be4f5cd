// The MPI module's interface (tools/fpguard/mpi_module.cpp, built into
// libfpguard_mpi.so where CMake finds MPI): the few MPI calls that mpi.cpp makes, as a
// table of functions. The `fpguard` executable does not link MPI: mpi.cpp loads the
// module only in a process that mpirun started, so that every other process starts
// without Open MPI's eight libraries (bench/README.md, session 20: "MPI loaded only
// under mpirun").
#pragma once

namespace fpguard::cli::mpi {

// Bumped when the table changes: a module of another version is refused.
constexpr int kModuleVersion = 1;

struct ModuleApi {
  int version;
  // MPI_Init; then this process's rank and the world's size, and the communicator of the
  // ranks on this machine (MPI_COMM_TYPE_SHARED), which node_size and node_allgather use.
  void (*init)(int* argc, char*** argv, int* rank, int* size);
  // Frees that communicator; MPI_Finalize.
  void (*finalize)();
  int (*node_size)();
  // MPI_Allgather of `bytes` bytes from each rank on this machine into `all` (node_size
  // blocks). Collective over those ranks.
  void (*node_allgather)(const void* mine, int bytes, void* all);
  // MPI_Allgather of `count` values from each rank of the world into `all`: 64-bit
  // unsigned when `wide`, int otherwise. Collective.
  void (*allgather)(const void* mine, int count, bool wide, void* all);
  // MPI_Allgatherv of bytes over the world. Collective.
  void (*allgatherv)(const void* mine, int count, void* all, const int* counts, const int* displs);
};

}  // namespace fpguard::cli::mpi

// The module's one exported symbol.
extern "C" const fpguard::cli::mpi::ModuleApi* fpguard_mpi_module();
