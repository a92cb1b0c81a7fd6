#include "comm/divergence/divergence_check.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <map>

#include "comm/communicator.hpp"
#include "common/cuda_check.hpp"
#include "common/device.hpp"
#include "common/error.hpp"
#include "kernels/hash/tensor_hash.hpp"

namespace gradcomm::comm {

namespace {

// Device memory for the check's hashes, freed on every path.
class DeviceWords {
 public:
  explicit DeviceWords(size_t words) {
    if (words > 0) GCOMM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), words * sizeof(uint64_t)));
  }
  ~DeviceWords() {
    if (p_ != nullptr) (void)cudaFree(p_);
  }
  DeviceWords(const DeviceWords&) = delete;
  DeviceWords& operator=(const DeviceWords&) = delete;
  uint64_t* get() const { return p_; }

 private:
  uint64_t* p_ = nullptr;
};

// This rank's hash of each span.
std::vector<uint64_t> hash_spans(const gcommDevice_t& device, const void* const* data, const size_t* bytes,
                                 size_t n, gcommStream_t stream) {
  std::vector<uint64_t> hashes(n);
  if (device.kind != gcommDeviceCuda) {
    for (size_t i = 0; i < n; ++i) hashes[i] = kernels::hash::host::tensor_hash(data[i], bytes[i]);
    return hashes;
  }
  std::vector<size_t> first_chunk(n + 1, 0);
  for (size_t i = 0; i < n; ++i) first_chunk[i + 1] = first_chunk[i] + kernels::hash::chunks_of(bytes[i]);
  std::vector<uint64_t> chunks(first_chunk[n]);
  DeviceWords on_device(chunks.size());
  auto s = static_cast<cudaStream_t>(stream);
  for (size_t i = 0; i < n; ++i)
    kernels::hash::cuda::chunk_hashes(data[i], bytes[i], on_device.get() + first_chunk[i], stream);
  if (!chunks.empty())
    GCOMM_CUDA_CHECK(cudaMemcpyAsync(chunks.data(), on_device.get(), chunks.size() * sizeof(uint64_t),
                                     cudaMemcpyDeviceToHost, s));
  GCOMM_CUDA_CHECK(cudaStreamSynchronize(s));
  for (size_t i = 0; i < n; ++i) hashes[i] = kernels::hash::combine(chunks.data() + first_chunk[i], bytes[i]);
  return hashes;
}

// Every rank's hashes, rank-major. The words travel as pairs of floats: an
// all-gather copies them and computes nothing.
std::vector<uint64_t> gather(Communicator& comm, const std::vector<uint64_t>& mine, gcommStream_t stream) {
  const size_t n = mine.size();
  std::vector<uint64_t> all(n * static_cast<size_t>(comm.size()));
  if (comm.device().kind != gcommDeviceCuda) {
    comm.collective(
        collective_call(Collective::kAllGather, mine.data(), all.data(), 2 * n, gcommFloat32, stream));
    return all;
  }
  DeviceWords send(n), recv(all.size());
  auto s = static_cast<cudaStream_t>(stream);
  if (n > 0)
    GCOMM_CUDA_CHECK(
        cudaMemcpyAsync(send.get(), mine.data(), n * sizeof(uint64_t), cudaMemcpyHostToDevice, s));
  comm.collective(
      collective_call(Collective::kAllGather, send.get(), recv.get(), 2 * n, gcommFloat32, stream));
  if (!all.empty())
    GCOMM_CUDA_CHECK(
        cudaMemcpyAsync(all.data(), recv.get(), all.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost, s));
  GCOMM_CUDA_CHECK(cudaStreamSynchronize(s));
  return all;
}

}  // namespace

DivergenceReport compare_hashes(std::vector<uint64_t> hashes, int ranks, size_t spans) {
  DivergenceReport report;
  report.spans = spans;
  report.first_mismatch.assign(static_cast<size_t>(ranks), -1);
  for (size_t i = 0; i < spans; ++i) {
    // Ranks per hash, and the lowest rank holding it.
    std::map<uint64_t, std::pair<int, int>> groups;
    for (int r = 0; r < ranks; ++r) {
      auto [it, fresh] = groups.try_emplace(hashes[static_cast<size_t>(r) * spans + i], 0, r);
      ++it->second.first;
    }
    if (groups.size() == 1) continue;
    ++report.mismatched_spans;
    auto majority = std::max_element(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
      return a.second.first != b.second.first ? a.second.first < b.second.first
                                              : a.second.second > b.second.second;
    });
    for (int r = 0; r < ranks; ++r) {
      int64_t& first = report.first_mismatch[static_cast<size_t>(r)];
      if (first < 0 && hashes[static_cast<size_t>(r) * spans + i] != majority->first)
        first = static_cast<int64_t>(i);
    }
  }
  report.hashes = std::move(hashes);
  return report;
}

DivergenceReport check_divergence(Communicator& comm, const void* const* data, const size_t* bytes, size_t n,
                                  gcommStream_t stream) {
  // n first: the caller's arrays are read only once it is plausible.
  require(n <= kMaxDivergenceSpans, "n is ", n, ": at most ", kMaxDivergenceSpans, " spans a check");
  require(n == 0 || (data != nullptr && bytes != nullptr), "data and bytes must not be NULL when n (", n,
          ") is not 0");
  const gcommDevice_t device = comm.device();
  for (size_t i = 0; i < n; ++i) {
    if (bytes[i] == 0) continue;
    require(data[i] != nullptr, "data[", i, "] is NULL but bytes[", i, "] is ", bytes[i]);
    // As checked_span: bytes that reach past any memory are refused before one is read.
    const auto p = reinterpret_cast<uintptr_t>(data[i]);
    require(bytes[i] <= GCOMM_ADDRESS_LIMIT && p <= GCOMM_ADDRESS_LIMIT - bytes[i], "data[", i,
            "]: ", bytes[i], " bytes from ", data[i],
            " reach past the highest address memory can have (GCOMM_ADDRESS_LIMIT)");
    const PointerRange r = pointer_range(data[i]);
    require_usable(r.info, device, "data", static_cast<long long>(i), "the communicator is on");
    // Where the driver knows the allocation (device, pinned, managed memory), the
    // span must lie inside it.
    require(!r.contains(p) || bytes[i] <= r.end - p, "data[", i, "]: ", bytes[i], " bytes from ", data[i],
            " reach past the end of its allocation (", r.end - p, " bytes)");
  }
  DeviceGuard guard(device);
  std::vector<uint64_t> all = gather(comm, hash_spans(device, data, bytes, n, stream), stream);
  DivergenceReport report = compare_hashes(std::move(all), comm.size(), n);
  // A mismatch goes into the flight record too, where tools/gradcomm_desync.py finds it
  // (an agreeing check is not noted: the notes are few, kept for what went wrong).
  if (report.mismatched_spans > 0) comm.note_in_flight_record(divergence_note(report));
  return report;
}

std::string divergence_note(const DivergenceReport& report) {
  std::string off;
  for (size_t r = 0; r < report.first_mismatch.size(); ++r)
    if (report.first_mismatch[r] >= 0)
      off += cat(off.empty() ? "" : ", ", "rank ", r, " from span ", report.first_mismatch[r]);
  return cat("divergence check: ", report.mismatched_spans, " of ", report.spans,
             " span(s) differ between ranks; off the majority: ", off);
}

}  // namespace gradcomm::comm
