// The Communicator over NCCL for CUDA tensors (built only with CUDA: nccl_communicator.cpp).
// It wraps an MPI communicator of the same ranks, which bootstraps it and still carries CPU
// tensors, so host scalars (a loss, a flag) go through the same object as GPU gradients.
//
// Streams. Every NCCL operation runs on a communication stream of this communicator, after the
// work the compute stream holds when it is called (an event recorded there and awaited by the
// communication stream), so it overlaps with compute issued later that does not depend on it.
// The blocking forms (all_reduce, reduce_scatter, all_gather, broadcast, send, recv) do not
// block the host: they make the compute stream wait for the operation, so compute issued after
// them sees its result. Requests do the same: wait() orders the compute stream; host reads go
// through Backend::read, which synchronises. test() is true once the operation has completed
// on the GPU (cudaEventQuery). As with MPI, compute issued before an operation completes (before
// wait() returns, for a request) must not write its tensors, nor read what it writes. A request
// keeps its tensors' buffers alive until it completes; one destroyed before wait() orders the
// compute stream as wait() would.
//
// Point-to-point. NCCL has no tags: `tag` is ignored, and messages between two ranks match in
// the order they were posted (the n-th send from a to b is the n-th receive of b from a). The
// pipeline executor (train/pipeline_step.cpp) posts them in the same order on both sides for
// every schedule. An NCCL send holds its stream (and NCCL serialises all operations of one NCCL
// communicator) until the receiver posts the matching receive, so messages going up (from a
// lower to a higher group rank) and messages going down travel on two further NCCL
// communicators, each with its own stream, apart from the collectives': a send forward never
// waits behind a send backward, nor a collective behind either. On one stream the 1F1B,
// interleaved and all-forward-all-backward schedules deadlock (stage 0 sends two activations
// while stage 1 sends its first gradient: each waits for the other's receive). Every operation
// is a single NCCL call, so none needs ncclGroupStart/End. A rank cannot send to itself.
//
// barrier() waits on the host for this rank's NCCL operations (watched by the watchdog, see
// watchdog.hpp; an asynchronous NCCL error ends the wait with an exception), then runs the MPI
// barrier. Setting up and destroying the NCCL communicators are watched too. split() splits
// the MPI communicator, then bootstraps an NCCL communicator for each new group over it. A group
// of 2 or more ranks holds 3 NCCL communicators (collectives, up, down); NCCL connects peers on
// first use, so the point-to-point ones of a group that never sends cost little beyond set-up.
//
// 16-bit floats (bf16, f16) reduce in NCCL's own 16-bit arithmetic, each step rounded to 16
// bits, not in f32 as the MPI communicator does (communicator.hpp): sums of many ranks differ in
// the last bits, and with NCCL's algorithm.
//
// Errors: NCCL and CUDA failures throw RuntimeFailure "nccl: OP on group NAME: REASON". After an
// asynchronous NCCL error (a peer failed) the communicator is aborted and every later operation
// on GPU tensors throws; CPU tensors still go through MPI.
#pragma once

#include <array>
#include <cstddef>
#include <memory>

#include "dist/communicator.hpp"

namespace megatron::dist {

// NCCL_UNIQUE_ID_BYTES: the bytes of an ncclUniqueId.
inline constexpr size_t kNcclUniqueIdBytes = 128;
using NcclUniqueIdBytes = std::array<std::byte, kNcclUniqueIdBytes>;

// Collective over `mpi` (CPU tensors): rank 0 creates a new NCCL unique id (ncclGetUniqueId,
// which needs no GPU) and broadcasts its 128 bytes; every rank returns rank 0's bytes. If rank 0
// cannot create one, every rank throws RuntimeFailure.
NcclUniqueIdBytes nccl_unique_id_over(Communicator& mpi);

// An NCCL communicator over the ranks of `mpi` (collective over them), on CUDA device `device`
// (made current first), ordered after `compute_stream` (a cudaStream_t). CPU tensors go to
// `mpi`. Throws RuntimeFailure if NCCL cannot start (no GPU, two ranks on one device, ...).
std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator> mpi,
                                                     void* compute_stream, int device);

}  // namespace megatron::dist
