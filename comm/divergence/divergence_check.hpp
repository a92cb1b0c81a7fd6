// The divergence check: do the ranks hold the same bytes? Replicas that should be
// bit-identical (parameters after a synchronized step, buffers, averaged gradients)
// drift apart silently — another seed, a buffer never broadcast, a flipped bit —
// and train on. Each rank hashes each of its spans (kernels/hash/tensor_hash.hpp:
// XXH64 of 64 KiB chunks, combined; a kernel on a GPU), the hashes are all-gathered
// (8 bytes a span a rank), and every rank compares them the same way, so every
// rank returns the same report naming the ranks that disagree with the majority.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gradcomm/types.h"

namespace gradcomm::comm {

class Communicator;

// Spans one check takes at most (a model's tensors are thousands; a count past
// this is a caller's mistake, refused before its arrays are read).
constexpr size_t kMaxDivergenceSpans = size_t{1} << 24;

struct DivergenceReport {
  size_t spans = 0;
  size_t mismatched_spans = 0;          // spans whose hash differs on some rank
  std::vector<int64_t> first_mismatch;  // per rank: its first span off the majority's hash, -1: none
  std::vector<uint64_t> hashes;         // rank-major: hashes[r * spans + i]
};

// Compares gathered hashes (rank-major, ranks * spans). A span's majority is the
// hash most ranks hold; among groups equally large, the one holding the lowest
// rank (so with two ranks, rank 1 is named against rank 0).
DivergenceReport compare_hashes(std::vector<uint64_t> hashes, int ranks, size_t spans);

// Collective over `comm`: every rank passes n spans (data[i], bytes[i]) in the same
// order and sizes, memory of the communicator's device, written by work on
// `stream` (a GPU's spans are hashed on it; the call waits for it). Throws
// gcommInvalidArgument before anything runs on a bad n (over kMaxDivergenceSpans)
// or a bad span: NULL with bytes, past GCOMM_ADDRESS_LIMIT, memory the device
// cannot use, or past the end of its allocation where the driver knows it.
DivergenceReport check_divergence(Communicator& comm, const void* const* data, const size_t* bytes, size_t n,
                                  gcommStream_t stream);

// The flight-record note of a check that found a mismatch: "divergence check: 1 of 3
// span(s) differ between ranks; off the majority: rank 2 from span 1".
std::string divergence_note(const DivergenceReport& report);

}  // namespace gradcomm::comm
