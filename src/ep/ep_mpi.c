/* ep_mpi.c - MPI start-up and tear-down for expert parallelism: the only
 * place besides the round code that names MPI. Serialized threading: the
 * main thread initializes and finalizes, the round thread (ep_runtime.c) is
 * the only caller in between. */
#include <mpi.h>

#include "ep/ep.h"

int ep_mpi_init(int *argc, char ***argv, int *rank, int *n_ranks, cf_err *err) {
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        return cf_fail(err, "expert parallelism: MPI_Init_thread failed");
    if (provided < MPI_THREAD_SERIALIZED) {
        MPI_Finalize();
        return cf_fail(err, "expert parallelism: this MPI gives thread level %d, serialized (%d) is needed", provided,
                       MPI_THREAD_SERIALIZED);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, n_ranks);
    return 0;
}

void ep_mpi_finalize(void) {
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
}

void ep_mpi_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }
