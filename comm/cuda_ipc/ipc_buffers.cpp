#include "comm/cuda_ipc/ipc_buffers.hpp"

#include <cuda.h>

#include <algorithm>

#include "common/cuda_check.hpp"
#include "common/device.hpp"
#include "common/error.hpp"

namespace gradcomm::comm::cuda_ipc {

namespace {
using PointerGetAttributes = CUresult (*)(unsigned int, CUpointer_attribute*, void**, CUdeviceptr);
constexpr size_t kMaxHandles = 4096;  // exported handles kept; past it the cache starts again
}  // namespace

SharedBuffer BufferExports::share(const void* ptr, const char* what) {
  SharedBuffer b;
  if (ptr == nullptr) return b;
  static const auto get = reinterpret_cast<PointerGetAttributes>(driver_entry("cuPointerGetAttributes"));
  require(get != nullptr, "the cuda-ipc transport needs the CUDA driver's cuPointerGetAttributes");
  unsigned int type = 0, managed = 0;
  CUdeviceptr start = 0;
  size_t size = 0;
  unsigned long long id = 0;
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                 CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                 CU_POINTER_ATTRIBUTE_BUFFER_ID};
  void* data[] = {&type, &managed, &start, &size, &id};
  const CUresult r = get(5, attrs, data, reinterpret_cast<CUdeviceptr>(ptr));
  require(r == CUDA_SUCCESS && type == CU_MEMORYTYPE_DEVICE && managed == 0, what, " (", ptr,
          ") is not device memory of this process: the cuda-ipc transport reads device buffers across "
          "processes (cudaMalloc'd memory, as PyTorch's caching allocator hands out)");
  auto cached = handles_.find(id);
  if (cached == handles_.end()) {
    if (handles_.size() >= kMaxHandles) handles_.clear();
    cudaIpcMemHandle_t h{};
    const cudaError_t e = cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(start));
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      fail(gcommInvalidArgument, what, " (", ptr, ") cannot be shared with another process (",
           cudaGetErrorName(e),
           "): the cuda-ipc transport needs memory from cudaMalloc; memory from cudaMallocAsync pools, "
           "cuMemCreate or PyTorch's expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) "
           "is not shareable this way");
    }
    cached = handles_.emplace(id, h).first;
  }
  b.handle = cached->second;
  b.buffer_id = id;
  b.base = static_cast<uint64_t>(start);
  b.bytes = size;
  b.offset = reinterpret_cast<uintptr_t>(ptr) - static_cast<uintptr_t>(start);
  return b;
}

PeerBuffers::~PeerBuffers() {
  for (const Mapping& m : mappings_) GCOMM_CUDA_WARN(cudaIpcCloseMemHandle(m.local));
}

void PeerBuffers::close_where(const std::vector<size_t>& indices) {
  if (indices.empty()) return;
  // Work already enqueued by this process may still read them.
  GCOMM_CUDA_CHECK(cudaDeviceSynchronize());
  for (size_t i : indices) GCOMM_CUDA_CHECK(cudaIpcCloseMemHandle(mappings_[i].local));
  std::vector<Mapping> kept;
  for (size_t i = 0; i < mappings_.size(); ++i)
    if (std::find(indices.begin(), indices.end(), i) == indices.end()) kept.push_back(mappings_[i]);
  mappings_.swap(kept);
}

void PeerBuffers::close(int peer, uint64_t buffer_id) {
  for (size_t i = 0; i < mappings_.size(); ++i)
    if (mappings_[i].peer == peer && mappings_[i].buffer_id == buffer_id) {
      GCOMM_CUDA_CHECK(cudaIpcCloseMemHandle(mappings_[i].local));
      mappings_.erase(mappings_.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
}

void* PeerBuffers::open(int peer, const SharedBuffer& b) {
  if (b.buffer_id == 0) return nullptr;
  ++uses_;
  std::vector<size_t> replaced;
  for (size_t i = 0; i < mappings_.size(); ++i) {
    Mapping& m = mappings_[i];
    if (m.peer != peer) continue;
    if (m.buffer_id == b.buffer_id) {
      m.last_use = uses_;
      return m.local + b.offset;
    }
    if (m.base < b.base + b.bytes && b.base < m.base + m.bytes) replaced.push_back(i);
  }
  close_where(replaced);
  if (mappings_.size() >= kMaxOpen) {
    std::vector<size_t> order(mappings_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](size_t x, size_t y) { return mappings_[x].last_use < mappings_[y].last_use; });
    order.resize(order.size() / 2);
    close_where(order);
  }
  void* local = nullptr;
  const cudaError_t e = cudaIpcOpenMemHandle(&local, b.handle, cudaIpcMemLazyEnablePeerAccess);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    fail(gcommCudaError, "cannot open rank ", peer, "'s buffer (", b.bytes,
         " bytes) here: cudaIpcOpenMemHandle: ", cudaGetErrorName(e), " (", cudaGetErrorString(e),
         "); the cuda-ipc transport needs every rank's process on the same GPU");
  }
  mappings_.push_back(Mapping{peer, b.buffer_id, b.base, b.bytes, static_cast<char*>(local), uses_});
  return static_cast<char*>(local) + b.offset;
}

}  // namespace gradcomm::comm::cuda_ipc
