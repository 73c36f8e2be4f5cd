// The MPI module (mpi_module.hpp): MPI's C API behind a table of functions, loaded by
// mpi.cpp in processes that mpirun started. Built only where CMake found MPI.
#include "mpi_module.hpp"

#include <mpi.h>

namespace {

MPI_Comm node = MPI_COMM_NULL;

void init(int* argc, char*** argv, int* rank, int* size) {
  MPI_Init(argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
}

void finalize() {
  if (node != MPI_COMM_NULL) MPI_Comm_free(&node);
  MPI_Finalize();
}

int node_size() {
  int ranks = 1;
  MPI_Comm_size(node, &ranks);
  return ranks;
}

void node_allgather(const void* mine, int bytes, void* all) {
  MPI_Allgather(mine, bytes, MPI_BYTE, all, bytes, MPI_BYTE, node);
}

void allgather(const void* mine, int count, bool wide, void* all) {
  const MPI_Datatype type = wide ? MPI_UINT64_T : MPI_INT;
  MPI_Allgather(mine, count, type, all, count, type, MPI_COMM_WORLD);
}

void allgatherv(const void* mine, int count, void* all, const int* counts, const int* displs) {
  MPI_Allgatherv(mine, count, MPI_BYTE, all, counts, displs, MPI_BYTE, MPI_COMM_WORLD);
}

const fpguard::cli::mpi::ModuleApi api = {
    .version = fpguard::cli::mpi::kModuleVersion,
    .init = init,
    .finalize = finalize,
    .node_size = node_size,
    .node_allgather = node_allgather,
    .allgather = allgather,
    .allgatherv = allgatherv,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const fpguard::cli::mpi::ModuleApi*
fpguard_mpi_module() {
  return &api;
}
